//! Cross-node moots between real daemons on 127.0.0.1, each node with its
//! own scripted OpenAI-compatible model server: host C, tree A on node A,
//! tree B on node B; the export verifies offline, and tampering with it is
//! caught.

use prost::Message;
use serde_json::Value;

use crate::cluster::{Daemon, converged, eventually, eventually_explained, invite, vote_yes};
use crate::scripted_openai::{RecordedRequest, Reply, ScriptedServer};
use crate::support::{Grove, generated_book};

/// A reply quoting the first five words of passage `[s1]` and citing it.
pub(crate) fn quoting_reply(req: &RecordedRequest) -> Reply {
    match req.first_passage() {
        Some(words) => {
            let quote = words[..5.min(words.len())].join(" ");
            Reply::text(&format!("\"{quote}\" [s1], and so I hold [s1]."))
        }
        // The narrator's summary request.
        None => Reply::text("The two books spoke of the sea and of work."),
    }
}

fn model_env(server: &ScriptedServer) -> Vec<(&'static str, String)> {
    vec![
        ("GROVE_MODEL__BACKEND", "openai".to_string()),
        ("GROVE_MODEL__URL", server.url()),
    ]
}

fn start(name: &str, server: &ScriptedServer) -> Daemon {
    start_with(name, server, &[])
}

/// A daemon on `server` with `extra` settings in its environment.
fn start_with(name: &str, server: &ScriptedServer, extra: Env<'_>) -> Daemon {
    let env = model_env(server);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend_from_slice(extra);
    Daemon::start_with(name, &env)
}

fn add(d: &Daemon, key: &str, title: &str, seed: u64) {
    let text = generated_book(title, "Anon", seed, 60, seed);
    let path = d.g.write(&format!("{seed}.txt"), text.as_bytes());
    d.ok(&["book", "add", path.to_str().unwrap(), "--key", key]);
}

/// Runs `moot verify` offline (no daemon, an empty state directory) on
/// `export`, pinning nothing; returns (valid: exit 0, or 3 for valid but
/// unanchored; stdout + stderr).
pub(crate) fn verify_offline(export: &Value) -> (bool, String) {
    let (status, out) = verify_status(export, &[]);
    (status == 0 || status == UNANCHORED, out)
}

/// `moot verify`'s exit status for a valid export nothing pins (docs/moot.md).
pub(crate) const UNANCHORED: i32 = 3;

/// Runs `moot verify` offline on `export` with `pins` (`--expect-mesh ID`
/// ...); returns (exit status, stdout + stderr).
pub(crate) fn verify_status(export: &Value, pins: &[&str]) -> (i32, String) {
    let g = Grove::new();
    let file = g.write(
        "export.json",
        serde_json::to_string_pretty(export).unwrap().as_bytes(),
    );
    let mut args = vec!["moot", "verify", file.to_str().unwrap()];
    args.extend_from_slice(pins);
    let out = g.run(&args);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// An export opened with its host's key, to re-sign changed bodies so that
/// only the inner checks can catch a change.
pub(crate) struct Resigner {
    pub(crate) export: Value,
    pub(crate) body: grove::wire::moot::ExportBody,
    pub(crate) host_id: grove::identity::Identity,
}

impl Resigner {
    pub(crate) fn open(export: &Value, host: &Daemon) -> Resigner {
        use grove::wire::mesh::Signed;
        let host_id = grove::identity::load_or_create(
            &grove::state_dir::StateDir::new(&host.g.state()).identity(),
        )
        .unwrap();
        let outer = Signed::decode(
            hex::decode(export["signed"].as_str().unwrap())
                .unwrap()
                .as_slice(),
        )
        .unwrap();
        Resigner {
            export: export.clone(),
            body: grove::wire::moot::ExportBody::decode(outer.body.as_slice()).unwrap(),
            host_id,
        }
    }

    /// The export with `body` signed by the host in place of its own.
    pub(crate) fn sign(&self, body: &grove::wire::moot::ExportBody) -> Value {
        let mut t = self.export.clone();
        let signed = grove::mesh::codec::sign(&self.host_id, grove::moot::export::EXPORT_TAG, body);
        t["signed"] = Value::String(hex::encode(signed.encode_to_vec()));
        t
    }
}

/// Nodes alpha, bravo and charlie, each with its own model server answering
/// with `reply`, in one mesh founded by charlie (the host); alpha holds
/// `fiction/sea-tales`, bravo `essays/field-notes`, and charlie
/// `poems/river-songs` when `host_book`. Returns once charlie sees every
/// book announced.
pub(crate) fn three_nodes(
    reply: fn(&RecordedRequest) -> Reply,
    host_book: bool,
) -> (Vec<ScriptedServer>, Daemon, Daemon, Daemon) {
    three_nodes_with(reply, host_book, [&[], &[], &[]])
}

/// Settings for one node's environment.
pub(crate) type Env<'a> = &'a [(&'static str, &'a str)];

/// [`three_nodes`], with extra settings in alpha's, bravo's and charlie's
/// environments.
pub(crate) fn three_nodes_with(
    reply: fn(&RecordedRequest) -> Reply,
    host_book: bool,
    envs: [Env<'_>; 3],
) -> (Vec<ScriptedServer>, Daemon, Daemon, Daemon) {
    let servers: Vec<ScriptedServer> = (0..3).map(|_| ScriptedServer::start_with(reply)).collect();
    let a = start_with("alpha", &servers[0], envs[0]);
    let b = start_with("bravo", &servers[1], envs[1]);
    let c = start_with("charlie", &servers[2], envs[2]);
    let mut keys = vec!["fiction/sea-tales", "essays/field-notes"];
    add(&a, keys[0], "Sea Tales", 3);
    add(&b, keys[1], "Field Notes", 4);
    if host_book {
        add(&c, "poems/river-songs", "River Songs", 5);
        keys.push("poems/river-songs");
    }
    c.ok(&["mesh", "init", "--name", "moots"]);
    a.ok(&["mesh", "join", &invite(&c)]);
    b.ok(&["mesh", "join", &invite(&c)]);
    vote_yes(&a, "add");
    converged(&[&a, &b, &c], 2);
    eventually("charlie to see every book announced", || {
        let roots = c.json(&["roots"]).to_string();
        keys.iter().all(|k| roots.contains(k))
    });
    (servers, a, b, c)
}

/// Starts a moot on `host` between alpha's and bravo's books on "the sea";
/// returns its id.
pub(crate) fn start_sea_moot(host: &Daemon, turns: u32) -> String {
    start_sea_moot_json(host, turns)["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// [`start_sea_moot`], returning what `moot start --json` printed.
fn start_sea_moot_json(host: &Daemon, turns: u32) -> Value {
    let turns = turns.to_string();
    host.json(&[
        "moot",
        "start",
        "--a",
        "alpha:fiction/sea-tales",
        "--b",
        "bravo:essays/field-notes",
        "--topic",
        "the sea",
        "--turns",
        &turns,
    ])
}

/// Starts a moot of three books on the sea, one on each node (alpha's,
/// bravo's and the host's own), with `turns` turns; returns its id.
pub(crate) fn start_three_book_moot(host: &Daemon, turns: u32) -> String {
    let turns = turns.to_string();
    host.json(&[
        "moot",
        "start",
        "--tree",
        "alpha:fiction/sea-tales",
        "--tree",
        "bravo:essays/field-notes",
        "--tree",
        "self:poems/river-songs",
        "--topic",
        "the sea",
        "--turns",
        &turns,
    ])["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Polls a hosted moot until at least `n` of its turns are done.
pub(crate) fn wait_turns(host: &Daemon, id: &str, n: u64) {
    eventually(&format!("turn {n} of moot {id}"), || {
        host.json(&["moot", "show", id])["turns_done"]
            .as_u64()
            .unwrap()
            >= n
    });
}

/// Polls a hosted moot until it is in `state`.
pub(crate) fn wait_state(host: &Daemon, id: &str, state: &str) -> Value {
    let shown = std::cell::RefCell::new(Value::Null);
    eventually_explained(
        &format!("moot {id} to be {state}"),
        || {
            *shown.borrow_mut() = host.json(&["moot", "show", id]);
            shown.borrow()["state"] == state
        },
        || {
            let last = shown.borrow();
            format!(
                "it is {} ({}) after {} of {} turns; {}",
                last["state"],
                last["reason"],
                last["turns_done"],
                last["turns"],
                host.log_tail(30, "moot")
            )
        },
    );
    shown.into_inner()
}

#[test]
fn a_moot_between_books_on_two_nodes_hosted_by_a_third_verifies_offline() {
    // alpha and bravo run until the end of the test.
    let (servers, a, b, c) = three_nodes(quoting_reply, false);

    // A book nobody announced is refused at start.
    assert!(
        c.fails(&[
            "moot",
            "start",
            "--a",
            "alpha:fiction/nothing",
            "--b",
            "bravo:essays/field-notes"
        ])
        .contains("does not announce")
    );

    let started = start_sea_moot_json(&c, 4);
    let id = started["id"].as_str().unwrap().to_string();
    let shown = wait_state(&c, &id, "finished");
    assert_eq!(shown["turns_done"], 4);
    let watched = c.ok(&["moot", "watch", &id]);
    assert_eq!(watched.matches("── turn ").count(), 4, "{watched}");
    assert!(watched.contains("is finished"), "{watched}");
    let listed = c.json(&["moot", "list"]);
    assert_eq!(listed["moots"][0]["id"], id.as_str());
    let docs = crate::docs::documented_shapes();
    for (name, out) in [
        ("moot start", &started),
        ("moot show", &shown),
        ("moot list", &listed),
    ] {
        let got = crate::docs::shape_of(out);
        assert!(
            docs.contains(&got),
            "`grove {name} --json` has fields {got:?}, which no example in docs/cli-json.md has"
        );
    }
    // Each speaker's own model wrote its turns: A and B answered two turns
    // each, and the host's model wrote none of them.
    assert_eq!(servers[0].requests().len(), 2);
    assert_eq!(servers[1].requests().len(), 2);
    let transcript = &shown["transcript"];
    assert_eq!(
        transcript["stats"]["grounded_turns"], 4,
        "{}",
        transcript["stats"]
    );

    let export: Value = serde_json::from_str(&c.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");
    let got = crate::docs::shape_of(&export);
    assert!(
        docs.contains(&got),
        "`grove moot export` has fields {got:?}, which no example in docs/cli-json.md has"
    );
    assert!(out.contains("4 signed turns"), "{out}");
    let mesh_id = export["mesh_id"].as_str().unwrap();
    assert!(out.contains(mesh_id), "{out}");

    anchors_hold(&export);
    tampering_is_caught(&export, &c);
    forged_members_are_caught(&export, &[&a, &b, &c]);
}

/// A mesh at its 20th epoch: the export carries the chain from the
/// genesis, and a reader who pinned the mesh id checks it offline.
#[test]
fn a_moot_at_the_20th_epoch_exports_its_chain_and_verifies_offline() {
    let (_servers, a, b, c) = three_nodes(quoting_reply, false);
    for epoch in 2..20 {
        c.ok(&["mesh", "propose", "rotate"]);
        vote_yes(&a, "rotate");
        converged(&[&a, &b, &c], epoch + 1);
    }
    let id = start_sea_moot(&c, 2);
    wait_state(&c, &id, "finished");
    let export: Value = serde_json::from_str(&c.ok(&["moot", "export", &id])).unwrap();
    let mesh_id = export["mesh_id"].as_str().unwrap();
    let (status, out) = verify_status(&export, &["--expect-mesh", mesh_id]);
    assert_eq!(status, 0, "{out}");
    assert!(
        out.contains("self-certified membership chain of 21 epochs"),
        "{out}"
    );
    let body = Resigner::open(&export, &c).body;
    let chain: usize =
        body.genesis.len() + body.chain.iter().map(|s| s.encoded_len()).sum::<usize>();
    eprintln!(
        "an export at epoch 20 with 3 members: {} bytes of signed export, {chain} of them the chain",
        export["signed"].as_str().unwrap().len() / 2
    );
}

/// The exit statuses of docs/moot.md: unpinned, a valid export exits 3 and
/// says what to pin; pinned to its own mesh id, 0; to another's, 1. A
/// version 1 export from before chains still verifies, as unanchored even
/// with its mesh id pinned.
fn anchors_hold(export: &Value) {
    let mesh_id = export["mesh_id"].as_str().unwrap();
    assert_eq!(export["version"], 2);
    let (status, out) = verify_status(export, &[]);
    assert_eq!(status, UNANCHORED, "{out}");
    assert!(
        out.contains("UNANCHORED") && out.contains(&format!("--expect-mesh {mesh_id}")),
        "{out}"
    );
    assert!(
        out.contains("self-certified membership chain of 3 epochs"),
        "{out}"
    );
    let (status, out) = verify_status(export, &["--expect-mesh", mesh_id]);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("anchored"), "{out}");
    let (status, out) = verify_status(
        export,
        &["--expect-mesh", "00112233445566778899aabbccddeeff"],
    );
    assert_eq!(status, 1, "{out}");

    let v1_file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/moot-export-v1.json");
    let v1_text = std::fs::read_to_string(&v1_file).expect("tests/data/moot-export-v1.json");
    let v1: Value = serde_json::from_str(&v1_text).unwrap();
    let v1_mesh = v1["mesh_id"].as_str().unwrap();
    let (status, out) = verify_status(&v1, &["--expect-mesh", v1_mesh]);
    assert_eq!(status, UNANCHORED, "{out}");
    assert!(out.contains("no membership chain"), "{out}");
    let v1_roster = v1["roster_hash"].as_str().unwrap();
    let (status, out) = verify_status(&v1, &["--expect-roster", v1_roster]);
    assert_eq!(status, 0, "{out}");
}

/// A host that forges its members is caught by a reader who pinned the
/// mesh id: a genesis of its own making under the same claimed id, with a
/// member and book of its own; a roster with a member no commit added.
fn forged_members_are_caught(export: &Value, nodes: &[&Daemon]) {
    let host = nodes.last().unwrap();
    use grove::mesh::roster::{Member, Roster};
    use grove::wire::moot::ExportBody;
    let mesh_id = export["mesh_id"].as_str().unwrap();
    let opened = Resigner::open(export, host);
    let body = opened.body.clone();
    let resigned = |body: &ExportBody| opened.sign(body);
    let roster = Roster::decode(&body.roster).unwrap();
    let stranger = grove::identity::Identity::generate(&mut rand::rng());
    let invented = Member::new(stranger.public(), "invented", roster.epoch);
    let with_invented = |mut r: Roster| {
        r.members.push(invented.clone());
        r.members.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
        r
    };

    // A roster listing a member that no commit added.
    let mut changed = body.clone();
    changed.roster = with_invented(roster.clone()).encode();
    let (status, out) = verify_status(&resigned(&changed), &["--expect-mesh", mesh_id]);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("no commit made it"), "{out}");

    // A commit with one of its votes taken out, re-signed by its own
    // committer: below the quorum of the roster before it.
    let mut changed = body.clone();
    let k = changed.chain.len() - 1;
    let commit = grove::wire::mesh::Commit::decode(changed.chain[k].body.as_slice()).unwrap();
    let mut core = grove::wire::mesh::CommitCore::decode(commit.core.as_slice()).unwrap();
    assert_eq!(
        core.votes.len(),
        2,
        "the commit that added the third member"
    );
    core.votes.pop();
    let committer = nodes
        .iter()
        .map(|d| {
            grove::identity::load_or_create(
                &grove::state_dir::StateDir::new(&d.g.state()).identity(),
            )
            .unwrap()
        })
        .find(|id| id.peer_id() == core.committer)
        .expect("the committer is one of the nodes");
    changed.chain[k] = grove::mesh::codec::sign(
        &committer,
        grove::mesh::codec::tag::COMMIT,
        &grove::wire::mesh::Commit {
            core: core.encode_to_vec(),
            ..commit
        },
    );
    let (status, out) = verify_status(&resigned(&changed), &["--expect-mesh", mesh_id]);
    assert_eq!(status, 1, "{out}");
    assert!(
        out.contains("epoch 2 does not chain") && out.contains("quorum is 2"),
        "{out}"
    );

    // A new genesis under the claimed id: the host and an invented member
    // holding a book the invented member announces.
    let host_member = roster.member(&opened.host_id.peer_id()).unwrap().clone();
    let mut forged = Roster::genesis([9; 16], &roster.mesh_name, host_member, roster.quorum);
    forged = with_invented(forged);
    forged.mesh_id = roster.mesh_id;
    let mut changed = body.clone();
    changed.genesis = forged.encode();
    changed.chain.clear();
    changed.roster = forged.encode();
    changed.announcements.push(grove::announce::sign(
        &stranger,
        &grove::wire::node::Announcement {
            mesh_id: roster.mesh_id.to_vec(),
            peer_id: stranger.peer_id(),
            ..Default::default()
        },
    ));
    let (status, out) = verify_status(&resigned(&changed), &["--expect-mesh", mesh_id]);
    assert_eq!(status, 1, "{out}");
    assert!(
        out.contains("membership chain") && out.contains("does not hash to its mesh id"),
        "{out}"
    );
    // The same forgery posing as a legacy mesh (no nonce) verifies only
    // as unanchored: the pinned id does not vouch for it.
    forged.genesis_nonce = None;
    changed.genesis = forged.encode();
    changed.roster = forged.encode();
    let (status, out) = verify_status(&resigned(&changed), &["--expect-mesh", mesh_id]);
    assert_ne!(status, 0, "{out}");
}

/// Each change to an export is caught, and the message names what failed.
fn tampering_is_caught(export: &Value, host: &Daemon) {
    use grove::wire::mesh::Signed;
    use grove::wire::moot::{ExportBody, TurnPayload};

    // The readable transcript.
    let mut t = export.clone();
    let text = t["transcript"]["utterances"][1]["text"]
        .as_str()
        .unwrap()
        .replacen('e', "a", 1);
    t["transcript"]["utterances"][1]["text"] = Value::String(text);
    let (ok, out) = verify_offline(&t);
    assert!(!ok && out.contains("readable transcript differs"), "{out}");

    // Any changed byte of the signed export breaks the host's signature.
    let mut t = export.clone();
    let signed = t["signed"].as_str().unwrap().to_string();
    let at = signed.len() / 3;
    let flipped = if &signed[at..at + 1] == "0" { "1" } else { "0" };
    t["signed"] = Value::String(format!("{}{flipped}{}", &signed[..at], &signed[at + 1..]));
    let (ok, out) = verify_offline(&t);
    assert!(!ok && out.contains("signature"), "{out}");

    // Deeper changes, re-signed with the host's own key so that only the
    // inner checks can catch them.
    let opened = Resigner::open(export, host);
    let body = opened.body.clone();
    let resign = |body: &ExportBody| verify_offline(&opened.sign(body));
    let turn_payload = |s: &Signed| TurnPayload::decode(s.body.as_slice()).unwrap();

    // A passage's text inside a signed turn: the speaker's signature fails.
    let mut changed = body.clone();
    let mut payload = turn_payload(&changed.turns[0]);
    payload.passages[0].text.push('!');
    changed.turns[0].body = payload.encode_to_vec();
    let (ok, out) = resign(&changed);
    assert!(
        !ok && out.contains("turn 1") && out.contains("signature"),
        "{out}"
    );

    // A proof step inside a signed turn.
    let mut changed = body.clone();
    let mut payload = turn_payload(&changed.turns[1]);
    if let Some(step) = payload.passages[0].proof.first_mut() {
        step.sibling[0] ^= 1;
    }
    changed.turns[1].body = payload.encode_to_vec();
    let (ok, out) = resign(&changed);
    assert!(!ok && out.contains("turn 2"), "{out}");

    // A signed turn's signature bytes.
    let mut changed = body.clone();
    changed.turns[2].signature[0] ^= 1;
    let (ok, out) = resign(&changed);
    assert!(!ok && out.contains("turn 3"), "{out}");

    // The order of two turns.
    let mut changed = body.clone();
    changed.turns.swap(1, 2);
    let (ok, out) = resign(&changed);
    assert!(!ok && out.contains("turn 2"), "{out}");

    // The transcript inside the signed body: no longer what the speaker signed.
    let mut changed = body.clone();
    changed.transcript = changed
        .transcript
        .replacen("\"attempts\": 1", "\"attempts\": 2", 1);
    let (ok, out) = resign(&changed);
    assert!(!ok, "{out}");
}

#[test]
fn the_host_can_speak_for_its_own_book_and_a_non_member_peer_is_refused() {
    let servers: Vec<ScriptedServer> = (0..2)
        .map(|_| ScriptedServer::start_with(quoting_reply))
        .collect();
    let a = start("alpha", &servers[0]);
    let b = start("bravo", &servers[1]);
    add(&a, "fiction/sea-tales", "Sea Tales", 5);
    add(&b, "essays/field-notes", "Field Notes", 6);
    a.ok(&["mesh", "init", "--name", "pair"]);
    b.ok(&["mesh", "join", &invite(&a)]);
    eventually("A to see B's roots and its own", || {
        let roots = a.json(&["roots"]).to_string();
        roots.contains("essays/field-notes") && roots.contains("fiction/sea-tales")
    });
    // A peer that is not a member is refused by name.
    let outsider = Daemon::start("outsider");
    let peer = outsider.peer_id();
    let err = a.fails(&[
        "moot",
        "start",
        "--a",
        "self:fiction/sea-tales",
        "--b",
        &format!("{peer}:x/y"),
    ]);
    assert!(err.contains("not a member"), "{err}");

    let started = a.json(&[
        "moot",
        "start",
        "--a",
        "self:fiction/sea-tales",
        "--b",
        "bravo:essays/field-notes",
        "--turns",
        "2",
        // No topic: each book opens on its own title, whose words the
        // generated text never uses; the books speak from their first
        // chunks instead of stopping the moot.
    ]);
    let id = started["id"].as_str().unwrap().to_string();
    let mut shown = Value::Null;
    eventually("the moot to finish", || {
        shown = a.json(&["moot", "show", &id]);
        shown["state"] != "running"
    });
    assert_eq!(shown["state"], "finished", "{shown}");
    let export: Value = serde_json::from_str(&a.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");
    // The reader's trust anchor: the wrong mesh is refused.
    let mut anchored = Grove::new();
    let file = anchored.write("e.json", serde_json::to_string(&export).unwrap().as_bytes());
    let out = anchored.run(&[
        "moot",
        "verify",
        file.to_str().unwrap(),
        "--expect-mesh",
        "00",
    ]);
    assert!(!out.status.success());
    anchored = Grove::new();
    let file = anchored.write("e.json", serde_json::to_string(&export).unwrap().as_bytes());
    let roster = export["roster_hash"].as_str().unwrap();
    let mesh = export["mesh_id"].as_str().unwrap();
    anchored.ok(&[
        "moot",
        "verify",
        file.to_str().unwrap(),
        "--expect-mesh",
        mesh,
        "--expect-roster",
        roster,
    ]);
}

/// A reply that takes a while, so a test can act in the middle of a moot.
fn slow_quoting_reply(req: &RecordedRequest) -> Reply {
    Reply::Delay(
        std::time::Duration::from_millis(300),
        Box::new(quoting_reply(req)),
    )
}

fn assert_whole(shown: &Value, turns: u64) {
    assert_eq!(shown["turns_done"], turns, "{shown}");
    let numbers: Vec<u64> = shown["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(
        numbers,
        (1..=turns).collect::<Vec<_>>(),
        "no turn lost or duplicated"
    );
}

#[test]
fn a_moot_pauses_when_a_speaker_dies_and_resumes_when_it_or_the_host_comes_back() {
    // The host retries a silent speaker 5 times, 0.5 s, 1 s, 2 s, 4 s and
    // 8 s apart, before it pauses the moot.
    let (_servers, mut a, _b, mut c) = three_nodes_with(
        slow_quoting_reply,
        false,
        [
            &[],
            &[],
            &[
                ("GROVE_NET__TURN_RETRIES", "5"),
                ("GROVE_NET__TURN_RETRY_BACKOFF_MS", "500"),
            ],
        ],
    );
    // Speaker A dies mid-moot: the moot pauses with the reason; A comes
    // back and the moot goes on by itself, nothing lost, nothing twice.
    let id = start_sea_moot(&c, 6);
    wait_turns(&c, &id, 1);
    a.stop();
    let paused = wait_state(&c, &id, "paused");
    let reason = paused["reason"].as_str().unwrap();
    assert!(
        reason.contains("fiction/sea-tales") && reason.contains("6 tries"),
        "{paused}"
    );
    a.restart();
    let finished = wait_state(&c, &id, "finished");
    assert_whole(&finished, 6);
    let export: Value = serde_json::from_str(&c.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");

    // The host restarts mid-moot: it resumes the moot once it is back.
    let id = start_sea_moot(&c, 6);
    wait_turns(&c, &id, 1);
    c.restart();
    let finished = wait_state(&c, &id, "finished");
    assert_whole(&finished, 6);
    let export: Value = serde_json::from_str(&c.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");

    // Speaker A is down for a moment only: the host's retries reach it
    // once it is back, and the moot never pauses. A comes back only after
    // the host has found it silent (A may have answered turn 3 before it
    // stopped; then its silence shows at turn 5): restarting it at once
    // could let every request find it up, and nothing would be retried.
    let id = start_sea_moot(&c, 6);
    wait_turns(&c, &id, 2);
    let retries = |c: &Daemon| c.log().matches("trying again").count();
    let before = retries(&c);
    a.stop();
    eventually("the host to find speaker A silent and try again", || {
        retries(&c) > before
    });
    a.restart();
    let finished = wait_state(&c, &id, "finished");
    assert_whole(&finished, 6);
    let log = c.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("moot paused") && l.contains(&id)),
        "{log}"
    );
}

/// A host's backup carries its hosted moots: restored in place of its
/// state, the host resumes the moot it was holding and finishes it.
#[test]
fn a_host_restored_from_its_backup_resumes_its_moot() {
    let (_servers, _a, _b, mut c) = three_nodes_with(slow_quoting_reply, false, [&[], &[], &[]]);
    let id = start_sea_moot(&c, 4);
    wait_turns(&c, &id, 1);
    c.stop();
    let backup = c.g.dir.path().join("backup");
    let done = c.json(&["backup", backup.to_str().unwrap()]);
    let moot_file = format!("moots/{id}.json");
    assert!(
        done["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == moot_file.as_str()),
        "the backup lacks the moot: {done}"
    );
    // The state directory is lost; the backup takes its place.
    let state = c.g.state();
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::rename(&backup, &state).unwrap();
    c.restart();
    let finished = wait_state(&c, &id, "finished");
    assert_whole(&finished, 4);
    let export: Value = serde_json::from_str(&c.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");
}

#[test]
fn three_books_on_three_nodes_speak_round_robin_and_verify() {
    // bravo's policy passes unless a passage scores above a bar none can
    // reach: each of its turns is a recorded pass.
    let (_servers, _a, _b, c) = three_nodes_with(
        quoting_reply,
        true,
        [
            &[],
            &[
                ("GROVE_SPEAKER__POLICY", "grounded-only"),
                ("GROVE_SPEAKER__MIN_SCORE", "1000000"),
            ],
            &[],
        ],
    );
    let id = start_three_book_moot(&c, 6);
    let shown = wait_state(&c, &id, "finished");
    let utterances = shown["transcript"]["utterances"].as_array().unwrap();
    let speakers: Vec<&str> = utterances
        .iter()
        .map(|u| u["speaker"].as_str().unwrap())
        .collect();
    assert_eq!(
        speakers,
        [
            "fiction/sea-tales",
            "essays/field-notes",
            "poems/river-songs"
        ]
        .repeat(2),
        "round-robin"
    );
    let intents: Vec<&str> = utterances
        .iter()
        .map(|u| u["intent"].as_str().unwrap())
        .collect();
    assert_eq!(
        &intents[3..],
        ["close", "close", "close"],
        "each tree's last turn closes"
    );
    // Every turn records its node's decision; bravo's are passes with no
    // text, and the next speaker answers the last real line.
    for u in utterances {
        let decision = &u["decision"];
        if u["speaker"] == "essays/field-notes" {
            assert_eq!(decision["action"], "pass", "{u}");
            assert_eq!(decision["policy"], "grounded-only");
            assert!(
                decision["reason"].as_str().unwrap().contains("not above")
                    || decision["reason"].as_str().unwrap().contains("no passage"),
                "{decision}"
            );
            assert_eq!(u["text"], "");
            assert_eq!(u["attempts"], 0);
        } else {
            assert_eq!(decision["action"], "speak", "{u}");
            assert_eq!(decision["policy"], "always");
            assert!(u["text"].as_str().unwrap().contains("[s1]"), "{u}");
        }
    }
    let query_of_turn_3 = utterances[2]["query"].as_str().unwrap();
    let line_of_turn_1 = utterances[0]["text"].as_str().unwrap();
    assert_eq!(query_of_turn_3, format!("the sea {line_of_turn_1}"));
    let stats = &shown["transcript"]["stats"];
    assert_eq!(stats["passed_turns"], 2, "{stats}");
    assert_eq!(stats["grounded_turns"], 4, "{stats}");
    let watched = c.ok(&["moot", "watch", &id]);
    assert!(watched.contains("Field Notes passes"), "{watched}");
    let export: Value = serde_json::from_str(&c.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");
}

/// A reply that takes long enough for a membership vote to land between
/// two turns.
fn very_slow_quoting_reply(req: &RecordedRequest) -> Reply {
    Reply::Delay(
        std::time::Duration::from_millis(1500),
        Box::new(quoting_reply(req)),
    )
}

#[test]
fn a_speaker_kicked_mid_moot_is_not_asked_again_and_the_moot_pauses_with_that_reason() {
    let (_servers, a, b, c) = three_nodes(very_slow_quoting_reply, false);
    let id = start_sea_moot(&c, 8);
    wait_turns(&c, &id, 1);
    let bravo = b.peer_id();
    c.ok(&["mesh", "propose", "kick", "bravo"]);
    vote_yes(&a, "kick");
    let paused = wait_state(&c, &id, "paused");
    let reason = paused["reason"].as_str().unwrap();
    assert!(
        reason.contains("essays/field-notes") && reason.contains("removed from the mesh"),
        "{paused}"
    );
    assert!(reason.contains(&bravo), "{reason}");
    // Turns already accepted are kept; a resume is refused while a tree's
    // node is not a member, and the moot stays as it was.
    let done = paused["turns_done"].as_u64().unwrap();
    assert!((1..8).contains(&done), "{paused}");
    let err = c.fails(&["moot", "resume", &id]);
    assert!(err.contains("member"), "{err}");
    let again = c.json(&["moot", "show", &id]);
    assert_eq!(again["state"], "paused", "{again}");
    assert_eq!(again["turns_done"].as_u64().unwrap(), done);
}
