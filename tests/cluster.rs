//! Several real `grove node run` daemons on 127.0.0.1 forming a mesh by
//! invite and vote: convergence of epochs and roots, a kick, a rotate, a
//! catch-up by sync after a restart, refusals of non-members and of bad
//! invites, and clean shutdowns. Every daemon stops when its test ends.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Grove, generated_book};

/// Generous: the 5 s convergence goal belongs to the benchmark.
const DEADLINE: Duration = Duration::from_secs(60);

/// One daemon with its own state directory and name.
pub struct Daemon {
    pub g: Grove,
    pub name: String,
    child: Option<Child>,
    env: Vec<(String, String)>,
    /// The flags after `node run`.
    run_args: Vec<String>,
    /// A last touch to the `node run` command before each spawn (the NAT
    /// laboratory starts daemons inside network namespaces).
    prepare: Option<Prepare>,
}

pub type Prepare = Box<dyn Fn(&mut Command) + Send + Sync>;

impl Daemon {
    pub fn start(name: &str) -> Daemon {
        Daemon::start_with(name, &[])
    }

    /// A daemon with extra environment (config keys such as
    /// `GROVE_MODEL__URL`).
    pub fn start_with(name: &str, env: &[(&str, &str)]) -> Daemon {
        let listen = ["--listen", "/ip4/127.0.0.1/tcp/0"];
        Daemon::start_in(Grove::new(), name, env, &listen, None)
    }

    /// A daemon on state `g` with `run_args` after `node run`, and
    /// `prepare` applied to its command before each spawn.
    pub fn start_in(
        g: Grove,
        name: &str,
        env: &[(&str, &str)],
        run_args: &[&str],
        prepare: Option<Prepare>,
    ) -> Daemon {
        let mut d = Daemon {
            g,
            name: name.to_string(),
            child: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            run_args: run_args.iter().map(|a| a.to_string()).collect(),
            prepare,
        };
        d.launch();
        d
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(self.g.dir.path().join("node.log")).unwrap();
        let mut cmd = self.g.cmd(&["node", "run"]);
        cmd.args(&self.run_args);
        if let Some(prepare) = &self.prepare {
            prepare(&mut cmd);
        }
        // An empty name starts a node with no node.name.
        if !self.name.is_empty() {
            cmd.env("GROVE_NODE__NAME", &self.name);
        }
        let child = cmd
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RUST_LOG", "grove=debug,info,libp2p_gossipsub=error")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let start = Instant::now();
        while !self.g.run(&["node", "status"]).status.success() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("node {} exited with {status}:\n{}", self.name, self.log());
            }
            assert!(
                start.elapsed() < DEADLINE,
                "node {} did not come up:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.g.dir.path().join("node.log")).unwrap_or_default()
    }

    /// The log's last `n` lines that contain `containing` (every line for
    /// ""), headed by the node's name (for a timeout's explanation).
    pub fn log_tail(&self, n: usize, containing: &str) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(containing)).collect();
        format!(
            "{}'s last {n} log lines:\n{}",
            self.name,
            lines[lines.len().saturating_sub(n)..].join("\n")
        )
    }

    /// SIGTERM, then waits (at most 10 s) for a clean exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "node {} exited with {status}", self.name);
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "node {} did not stop within 10 s",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: the daemon dies at once, as in a crash (`restart` starts
    /// it again).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }

    pub fn json(&self, args: &[&str]) -> Value {
        self.g.json(args)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        self.g.ok(args)
    }

    pub fn fails(&self, args: &[&str]) -> String {
        self.g.fails(args)
    }

    pub fn status(&self) -> Value {
        self.json(&["mesh", "status"])
    }

    pub fn peer_id(&self) -> String {
        self.json(&["identity", "show"])["peer_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// This node's keys, read from its state directory's key files, as a
    /// thief with a copy of them (or a committer gone bad) holds them.
    pub fn identity(&self) -> grove::identity::Identity {
        identity_in(&self.g.state())
    }

    pub fn add_book(&self, seed: u64) -> String {
        let text = generated_book(&format!("Book of {}", self.name), "Anon", seed, 30, seed);
        let path = self.g.write("book.txt", text.as_bytes());
        let key = format!("{}/book", self.name);
        self.ok(&["book", "add", path.to_str().unwrap(), "--key", &key]);
        key
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` until it holds, or panics with `what` after the deadline.
pub fn eventually(what: &str, check: impl FnMut() -> bool) {
    eventually_explained(what, check, String::new);
}

/// [`eventually`], adding to the panic what `explain` says of the last
/// look (a state, a reason, a log), so a timeout under load names its
/// cause.
pub fn eventually_explained(
    what: &str,
    mut check: impl FnMut() -> bool,
    explain: impl FnOnce() -> String,
) {
    let start = Instant::now();
    while !check() {
        if start.elapsed() >= DEADLINE {
            panic!("timed out waiting for {what}\n{}", explain());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The node's (epoch, roster hash); None while it has no mesh (a joiner
/// whose add is still being voted on).
fn epoch_and_hash(d: &Daemon) -> Option<(u64, String)> {
    let out = d.g.run(&["mesh", "status", "--json"]);
    if !out.status.success() {
        return None;
    }
    let s: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((s["epoch"].as_u64()?, s["roster_hash"].as_str()?.to_string()))
}

/// Waits until every node reports the same epoch (at least `epoch`) and
/// roster hash; on timeout shows what each reported and their logs.
pub fn converged(nodes: &[&Daemon], epoch: u64) -> String {
    let start = Instant::now();
    loop {
        let seen: Vec<Option<(u64, String)>> = nodes.iter().map(|d| epoch_and_hash(d)).collect();
        if let Some(Some((e, h))) = seen.first()
            && *e >= epoch
            && seen.iter().all(|s| s.as_ref() == Some(&(*e, h.clone())))
        {
            return h.clone();
        }
        if start.elapsed() > DEADLINE {
            let logs: Vec<String> = nodes
                .iter()
                .map(|d| format!("== {}\n{}", d.name, d.log()))
                .collect();
            panic!(
                "no convergence at epoch {epoch}: nodes report {seen:?}\n{}",
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The one open proposal `d` sees (waits for it).
pub fn open_proposal(d: &Daemon, kind: &str) -> String {
    let mut id = String::new();
    eventually(&format!("{} to see a {kind} proposal", d.name), || {
        let list = d.json(&["mesh", "proposals"]);
        match list["proposals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["kind"] == kind)
        {
            Some(p) => {
                id = p["id"].as_str().unwrap().to_string();
                true
            }
            None => false,
        }
    });
    id
}

/// Votes yes on the one open proposal as `voter` once it has arrived there.
pub fn vote_yes(voter: &Daemon, kind: &str) {
    let id = open_proposal(voter, kind);
    voter.ok(&["mesh", "vote", &id, "yes"]);
}

pub fn invite(by: &Daemon) -> String {
    by.json(&["mesh", "invite", "--note", "test"])["invite"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The member's roots as another node sees them: book key -> root.
fn roots_seen(observer: &Daemon) -> BTreeSet<(String, String)> {
    let v = observer.json(&["roots"]);
    v["roots"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["shards"].as_array().unwrap().clone())
        .flat_map(|s| s["books"].as_array().unwrap().clone())
        .map(|b| {
            (
                b["key"].as_str().unwrap().to_string(),
                b["root"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn own_books(d: &Daemon) -> BTreeSet<(String, String)> {
    d.json(&["book", "list"])["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key"].as_str().unwrap().to_string(),
                b["root"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_mesh_forms_converges_kicks_rotates_and_catches_up() {
    let a = Daemon::start("alpha");
    let b = Daemon::start("bravo");
    let mut c = Daemon::start("charlie");
    let mut d = Daemon::start("delta");
    for (i, n) in [&a, &b, &c, &d].iter().enumerate() {
        n.add_book(100 + i as u64);
    }

    // Commands that need a mesh say so; `mesh init` works through the daemon.
    assert!(a.fails(&["mesh", "status"]).contains("no mesh"));
    let init = a.json(&["mesh", "init", "--name", "test-mesh"]);
    assert_eq!(init["epoch"], 0);
    assert_eq!(init["members"][0]["name"], "alpha");

    // 1. Forming: A's yes suffices for B; C and D need the roster's quorum.
    let b_invite = invite(&a);
    let joined = b.json(&["mesh", "join", &b_invite]);
    assert_eq!(joined["state"], "joined", "{joined}");
    let pending = c.json(&["mesh", "join", &invite(&a)]);
    assert_eq!(pending["state"], "pending", "{pending}");
    vote_yes(&b, "add");
    converged(&[&a, &b, &c], 2);
    let pending = d.json(&["mesh", "join", &invite(&a)]);
    assert_eq!(pending["state"], "pending", "{pending}");
    vote_yes(&b, "add");

    // 2. Convergence: one epoch and roster everywhere; every node's roots
    // reach every other.
    let all = [&a, &b, &c, &d];
    converged(&all, 3);
    let expected: BTreeSet<(String, String)> = all.iter().flat_map(|n| own_books(n)).collect();
    assert_eq!(expected.len(), 4);
    for n in all {
        eventually(&format!("{} to see every member's roots", n.name), || {
            roots_seen(n) == expected
        });
        let status = n.status();
        assert_eq!(status["members"].as_array().unwrap().len(), 4);
    }
    // Mesh-wide search: hits from several members, each naming its peer.
    let hits = a.json(&["book", "search", "whale sea", "-k", "40", "--mesh"]);
    let peers: BTreeSet<&str> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["peer_id"].as_str().unwrap())
        .collect();
    assert!(peers.len() >= 2, "{hits}");

    // 6. Non-members: an in-process node with no invite may connect but
    // gets refusals; an expired invite and a reused one are refused.
    non_member_is_refused(&a);
    let e = Daemon::start("echo");
    let expired = a.json(&["mesh", "invite", "--ttl", "1s"])["invite"]
        .as_str()
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(e.fails(&["mesh", "join", &expired]).contains("expired"));
    let reused = e.fails(&["mesh", "join", &b_invite]);
    assert!(reused.contains("used"), "{reused}");
    drop(e);

    // 3. Kick D: A, B and C vote (3 of 4 needed).
    let d_peer = d.peer_id();
    let kicked = a.json(&["mesh", "propose", "kick", "delta"]);
    assert_eq!(kicked["committed"], false);
    vote_yes(&b, "kick");
    vote_yes(&c, "kick");
    let trio = [&a, &b, &c];
    converged(&trio, 4);
    for n in trio {
        let members = n.status()["members"].as_array().unwrap().len();
        assert_eq!(members, 3);
    }
    // D's connections are refused: no member stays connected to it.
    eventually("members to drop delta", || {
        trio.iter().all(|n| {
            n.json(&["peers"])["peers"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["peer_id"] != d_peer.as_str() || p["connected"] == false)
        })
    });
    // A mesh-wide search from D is refused: it is told it was removed
    // (issue 18) rather than answered from its own books alone.
    let from_d = d.fails(&["book", "search", "whale", "--mesh"]);
    assert!(
        from_d.contains("no longer a member of mesh test-mesh"),
        "{from_d}"
    );
    // Sealed gossip a member received after the kick does not open with
    // D's keys and state.
    a.ok(&[
        "book",
        "add",
        a.g.write(
            "more.txt",
            generated_book("More", "Anon", 9, 10, 9).as_bytes(),
        )
        .to_str()
        .unwrap(),
        "--key",
        "alpha/more",
    ]);
    let mut after_kick = Vec::new();
    eventually("post-kick gossip at B", || {
        after_kick = recent_gossip_at_epoch(&b, 4);
        !after_kick.is_empty()
    });
    d.stop();
    let d_state = open_mesh_state(&d);
    assert!(d_state.epoch() < 4 || !d_state.is_member());
    for g in &after_kick {
        assert!(
            d_state.open_gossip(g).is_err(),
            "the kicked node opened epoch-4 gossip"
        );
    }

    // 4. Rotate.
    a.ok(&["mesh", "propose", "rotate"]);
    vote_yes(&b, "rotate");
    converged(&trio, 5);

    // 5. Catch-up: C is stopped, a change is voted, C restarts and syncs.
    c.stop();
    a.ok(&["mesh", "propose", "quorum", "2/3"]);
    vote_yes(&b, "quorum");
    converged(&[&a, &b], 6);
    c.restart();
    let hash = converged(&[&a, &b, &c], 6);
    assert_eq!(c.status()["synced"], true);
    assert_eq!(hash.len(), 64);

    // 7. Shutdown leaves consistent state: audit chains verify.
    let mut a = a;
    let mut b = b;
    for n in [&mut a, &mut b, &mut c] {
        n.stop();
        let report = n.json(&["audit", "verify"]);
        assert_eq!(report["ok"], true, "{report}");
    }
}

/// Sealed gossip B received at `epoch` (after the kick).
fn recent_gossip_at_epoch(n: &Daemon, epoch: u64) -> Vec<grove::wire::mesh::Gossip> {
    use prost::Message;
    let socket = n.g.state().join("grove.sock");
    let client = grove::api::client::Client::connect(&socket).expect("daemon");
    let v: grove::api::dto::RecentGossip = client
        .request(hyper::Method::GET, "/v1/node/gossip", Vec::new())
        .unwrap();
    v.messages
        .iter()
        .filter_map(|m| {
            grove::wire::mesh::Gossip::decode(hex::decode(&m.sealed).ok()?.as_slice()).ok()
        })
        .filter(|g| g.epoch == epoch)
        .collect()
}

/// A stopped node's mesh state, loaded from its own files.
fn open_mesh_state(n: &Daemon) -> grove::mesh::state::MeshState {
    let state = n.g.state();
    let id = grove::identity::load_or_create(&grove::state_dir::StateDir::new(&state).identity())
        .unwrap();
    let store = grove::mesh::store::MeshStore::open_in(&state).unwrap();
    store
        .load(id.public(), grove::mesh::state::Timing::default())
        .unwrap()
}

/// An in-process libp2p node with a fresh key: it may connect and ask to
/// join, but search and sync are refused, and its gossip is rejected. It
/// comes over QUIC (admission and the members-only gate carry over to it;
/// the py-libp2p adversary of tests/admission.rs comes over TCP).
fn non_member_is_refused(member: &Daemon) {
    use prost::Message;
    let info = member.json(&["node", "status"]);
    let listen: Vec<&str> = info["listen"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let quic = listen.iter().find(|a| a.ends_with("/quic-v1"));
    let addr: libp2p::Multiaddr = quic.expect("a QUIC listen address").parse().unwrap();
    let peer: libp2p::PeerId = info["peer_id"].as_str().unwrap().parse().unwrap();
    let mesh_id = member.status()["mesh_id"].as_str().unwrap().to_string();
    let before = member.json(&["node", "stats"]);
    let epoch_before = member.status()["epoch"].clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = grove::config::Settings::default().net.checked().unwrap();
        let config = grove::net::NetConfig {
            listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
            ..config
        };
        let (net, _events) =
            grove::net::Network::start(libp2p::identity::Keypair::generate_ed25519(), config)
                .await
                .unwrap();
        net.connect(peer, &[addr], Duration::from_secs(10))
            .await
            .unwrap();
        // Search, sync and turn are members-only: a non-member's stream is
        // refused at negotiation, before the node reads a byte of it.
        let call = grove::wire::node::SearchCall {
            query: "whale".into(),
            k: 5,
            ..Default::default()
        };
        for (protocol, body) in [
            (grove::net::Protocol::Search, call.encode_to_vec()),
            (grove::net::Protocol::Sync, vec![1, 2, 3]),
            (grove::net::Protocol::Turn, vec![]),
        ] {
            let err = net.request(peer, protocol, body).await.unwrap_err();
            assert!(
                err.to_string().contains("as one from a non-member"),
                "{protocol}: {err}"
            );
        }
        // A malformed join call is refused with a reason, not a panic.
        let answer = net
            .request(peer, grove::net::Protocol::Join, vec![0xff; 7])
            .await
            .unwrap();
        let answer = grove::wire::node::JoinAnswer::decode(answer.as_slice()).unwrap();
        assert!(matches!(
            answer.kind,
            Some(grove::wire::node::join_answer::Kind::Refused(_))
        ));
        // A non-member's gossip has nowhere to go: the member's gossipsub
        // never sees its connection, so it never takes its subscription
        // and publishing finds no peer, however long it tries.
        let topic = format!("grove/{mesh_id}/mesh/1");
        net.subscribe(&topic).await.unwrap();
        let forged = grove::wire::mesh::Gossip {
            mesh_id: hex::decode(&mesh_id).unwrap(),
            epoch: 0,
            topic: topic.clone(),
            nonce: vec![0; 12],
            ciphertext: vec![0; 40],
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            assert!(
                net.publish(&topic, forged.encode_to_vec()).await.is_err(),
                "a member took a non-member's gossip subscription"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    // Refused at negotiation, the requests were never served.
    let served = |v: &Value, name: &str| v["counters"][name].as_u64().unwrap_or(0);
    let after = member.json(&["node", "stats"]);
    assert_eq!(
        served(&after, "requests.served.search"),
        served(&before, "requests.served.search")
    );
    assert_eq!(member.status()["epoch"], epoch_before);
}

#[test]
fn network_commands_without_a_daemon_say_so_and_name_the_socket() {
    let g = Grove::new();
    for args in [
        &["mesh", "status"][..],
        &["mesh", "invite"],
        &["mesh", "join", "grove-invite1-x"],
        &["mesh", "propose", "rotate"],
        &["mesh", "vote", "ab", "yes"],
        &["peers"],
        &["roots"],
        &["node", "stats"],
    ] {
        let err = g.fails(args);
        assert!(err.contains("not running"), "{args:?}: {err}");
        assert!(err.contains("grove.sock"), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    // These work on the state directly.
    g.ok(&["identity", "show"]);
    let init = g.json(&["mesh", "init", "--name", "offline"]);
    assert_eq!(init["epoch"], 0);
}

#[test]
fn sigterm_in_the_middle_of_votes_and_ingests_leaves_consistent_state() {
    let a = Daemon::start("alpha");
    let mut b = Daemon::start("bravo");
    a.ok(&["mesh", "init", "--name", "busy"]);
    b.ok(&["mesh", "join", &invite(&a)]);
    converged(&[&a, &b], 1);
    // Keep both nodes busy: rotations proposed and voted while B ingests.
    for round in 0..4u64 {
        let proposed = a.json(&["mesh", "propose", "rotate"]);
        let id = proposed["id"].as_str().unwrap().to_string();
        let text = generated_book("Busy", "Anon", round, 200, round);
        let path = b.g.write("busy.txt", text.as_bytes());
        let mut ingest =
            b.g.cmd(&[
                "book",
                "add",
                path.to_str().unwrap(),
                "--key",
                &format!("busy/{round}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let _ = b.g.run(&["mesh", "vote", &id, "yes"]);
        // SIGTERM while the ingest and the vote's commit may be in flight.
        b.stop();
        let _ = ingest.wait();
        let report = b.json(&["audit", "verify"]);
        assert_eq!(report["ok"], true, "{report}");
        for book in b.json(&["book", "list"])["books"].as_array().unwrap() {
            let key = book["key"].as_str().unwrap();
            assert_eq!(b.json(&["book", "verify", key])["ok"], true);
        }
        b.restart();
        // Whatever was cut off, both nodes agree again after B syncs, and
        // B votes again only once synced.
        eventually("B to sync after its restart", || {
            epoch_and_hash(&b).is_some() && b.status()["synced"] == true
        });
        converged(&[&a, &b], round + 1);
        // A rotation still open (B's vote was cut off) reaches B again
        // (proposers re-send open proposals) and B votes once more.
        let open = a.json(&["mesh", "proposals"]);
        if !open["proposals"].as_array().unwrap().is_empty() {
            vote_yes(&b, "rotate");
        }
        converged(&[&a, &b], round + 2);
    }
}

/// The identity whose key files are in the state directory `state`.
pub fn identity_in(state: &std::path::Path) -> grove::identity::Identity {
    let read = |name: &str| -> [u8; 32] {
        std::fs::read(state.join("identity").join(name))
            .unwrap()
            .try_into()
            .unwrap()
    };
    grove::identity::Identity::from_secrets(read("ed25519.key"), read("x25519.key"))
}
