//! Nodes behind NATs meet through relays (issue 16), in the NAT laboratory
//! of tests/support/netlab.rs: real `grove node run` daemons inside network
//! namespaces (two public hosts on 203.0.113.0/24; home A behind a cone
//! NAT, home B behind a symmetric one), driven by the CLI from the host
//! namespace through each daemon's Unix control socket.
//!
//! Needs root, iproute2 (`ip netns`), nftables (`nft`) and python3 (the
//! laboratory's self-test); without them the tests print SKIP, and fail
//! under GROVE_TEST_STRICT=1. The laboratory removes its namespaces, and
//! the processes inside them, even when a test fails.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Daemon, Prepare, converged, invite, vote_yes};
use crate::moot_net::{quoting_reply, verify_offline, wait_state};
use crate::scripted_openai::ScriptedServer;
use crate::support::netlab::{Host, Lab, enter_at};
use crate::support::{Grove, generated_book};

/// Every daemon listens here, each in its own namespace.
const LISTEN: &str = "/ip4/0.0.0.0/tcp/4100";
/// Reservations and relayed connections over two shared cores: generous.
pub(crate) const SLOW: Duration = Duration::from_secs(90);

/// A daemon started inside `host`'s namespace with `config` as its config
/// file; its CLI runs here, in the host namespace.
pub(crate) fn node(
    lab: &Lab,
    host: Host,
    name: &str,
    config: &str,
    env: &[(&str, &str)],
) -> Daemon {
    let g = Grove::new();
    let file = g.write("grove.toml", config.as_bytes());
    let ns: PathBuf = lab.ns_path(host);
    let prepare: Prepare = Box::new(move |cmd| enter_at(ns.clone(), cmd));
    let file = file.to_str().expect("utf-8 path").to_string();
    Daemon::start_in(
        g,
        name,
        env,
        &["--config", &file, "--listen", LISTEN],
        Some(prepare),
    )
}

/// A scripted model server listening on 127.0.0.1 inside one host's
/// namespace (its daemon's own loopback); stops when dropped.
pub(crate) struct NsModel {
    url: String,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl NsModel {
    pub(crate) fn start(lab: &Lab, host: Host) -> NsModel {
        let (url_tx, url_rx) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        // The server is made, and dropped, on a thread inside the
        // namespace: its own wake-up call on drop must reach it there.
        let thread = lab.spawn_in(host, move || {
            let server = ScriptedServer::start_with(quoting_reply);
            let _ = url_tx.send(server.url());
            let _ = stopped.recv();
            drop(server);
        });
        let url = url_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the model server started");
        NsModel {
            url,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub(crate) fn env(&self) -> [(&'static str, &str); 2] {
        [
            ("GROVE_MODEL__BACKEND", "openai"),
            ("GROVE_MODEL__URL", self.url.as_str()),
        ]
    }
}

impl Drop for NsModel {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn doctor(d: &Daemon) -> Value {
    d.json(&["node", "doctor"])
}

/// `node doctor --json` if the daemon answers (it may be busy or gone).
pub(crate) fn try_doctor(d: &Daemon) -> Option<Value> {
    let out = d.g.run(&["node", "doctor", "--json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Polls `check` until it holds or `limit` passed; on timeout shows every
/// node's doctor report and log.
pub(crate) fn wait_for(
    what: &str,
    limit: Duration,
    nodes: &[&Daemon],
    mut check: impl FnMut() -> bool,
) {
    let start = Instant::now();
    while !check() {
        if start.elapsed() > limit {
            let reports: Vec<String> = nodes
                .iter()
                .map(|d| {
                    format!(
                        "== {} doctor: {}\n{}",
                        d.name,
                        try_doctor(d).unwrap_or(Value::Null),
                        tail(&d.log(), 60)
                    )
                })
                .collect();
            panic!(
                "timed out after {limit:?} waiting for {what}\n{}",
                reports.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub(crate) fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The relays on which `d` holds a reservation in state "reserved".
pub(crate) fn reserved_on(d: &Daemon) -> Vec<String> {
    try_doctor(d)
        .and_then(|v| v["reservations"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|r| r["state"] == "reserved")
        .filter_map(|r| r["relay"].as_str().map(str::to_string))
        .collect()
}

pub(crate) fn reachability(d: &Daemon) -> String {
    try_doctor(d)
        .and_then(|v| v["reachability"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// What `of` says about member `peer` in its doctor report.
pub(crate) fn member_entry(of: &Daemon, peer: &str) -> Value {
    try_doctor(of)
        .and_then(|v| v["members"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .find(|m| m["peer_id"] == peer)
        .unwrap_or(Value::Null)
}

/// The bootstrap addresses inside an invite's own text.
fn invite_bootstrap(text: &str) -> Vec<String> {
    let signed = grove::mesh::invite::from_text(text).expect("invite text");
    grove::mesh::invite::verify(&signed)
        .expect("invite signature")
        .bootstrap
}

/// An invite by `by` whose own text carries a relayed address of `by`
/// (through one of `relays`); returns the invite.
pub(crate) fn relayed_invite(by: &Daemon, relays: &[&str]) -> String {
    let me = by.peer_id();
    let made = by.json(&["mesh", "invite", "--note", "behind a NAT"]);
    let text = made["invite"].as_str().expect("invite").to_string();
    let bootstrap = invite_bootstrap(&text);
    let relayed: Vec<&String> = bootstrap
        .iter()
        .filter(|a| a.contains("/p2p-circuit"))
        .collect();
    assert!(
        relayed.iter().any(|a| a.ends_with(&format!("/p2p/{me}"))
            && relays
                .iter()
                .any(|r| a.contains(&format!("/p2p/{r}/p2p-circuit")))),
        "{}'s invite carries no relayed address of its own through {relays:?}: {bootstrap:?} ({made})",
        by.name
    );
    text
}

pub(crate) fn add(d: &Daemon, key: &str, title: &str, seed: u64) {
    let text = generated_book(title, "Anon", seed, 60, seed);
    let path = d.g.write(&format!("{seed}.txt"), text.as_bytes());
    d.ok(&["book", "add", path.to_str().unwrap(), "--key", key]);
}

/// Whether a mesh-wide search from `from` brings hits from `peer`.
pub(crate) fn search_reaches(from: &Daemon, peer: &str) -> bool {
    let out = from.g.run(&[
        "book",
        "search",
        "whale sea",
        "-k",
        "20",
        "--mesh",
        "--json",
    ]);
    out.status.success()
        && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| {
            v["hits"]
                .as_array()
                .is_some_and(|h| h.iter().any(|hit| hit["peer_id"] == peer))
        })
}

/// A home node's config: reachability judged by itself, and `relays`
/// (non-member relays) when given.
/// A moot hosted by `alpha` between its sea book and bravo's field notes
/// (once alpha sees bravo's announced book), run to its end with `turns`
/// turns; returns its id.
pub(crate) fn sea_moot_with_bravo(alpha: &Daemon, watched: &[&Daemon], turns: u32) -> String {
    wait_for("alpha to see bravo's book", SLOW, watched, || {
        alpha
            .json(&["roots"])
            .to_string()
            .contains("essays/field-notes")
    });
    let turns_arg = turns.to_string();
    let started = alpha.json(&[
        "moot",
        "start",
        "--a",
        "self:fiction/sea-tales",
        "--b",
        "bravo:essays/field-notes",
        "--topic",
        "the sea",
        "--turns",
        &turns_arg,
    ]);
    let id = started["id"].as_str().expect("moot id").to_string();
    let shown = wait_state(alpha, &id, "finished");
    assert_eq!(shown["turns_done"], turns, "{shown}");
    id
}

pub(crate) fn home_config(relays: &[String]) -> String {
    let list: Vec<String> = relays.iter().map(|r| format!("\"{r}\"")).collect();
    format!(
        "[net]\nreachability = \"auto\"\nrelays = [{}]\n",
        list.join(", ")
    )
}

#[test]
fn natlab_a_public_member_relays_for_two_homes_that_join_by_invites_and_hold_a_moot() {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    let model_a = NsModel::start(&lab, Host::HomeA);
    let model_b = NsModel::start(&lab, Host::HomeB);

    // 1. The public node founds the mesh; the node behind home A's cone
    // NAT joins with its invite.
    let public = node(
        &lab,
        Host::Public1,
        "public",
        "[net]\nreachability = \"auto\"\n[net.relay]\nserve = \"members\"\n",
        &[],
    );
    public.ok(&["mesh", "init", "--name", "natlab"]);
    let public_id = public.peer_id();
    let alpha = node(
        &lab,
        Host::HomeA,
        "alpha",
        &home_config(&[]),
        &model_a.env(),
    );
    add(&alpha, "fiction/sea-tales", "Sea Tales", 3);
    // Listening on 0.0.0.0 inside its namespace, the public node invites
    // at its WAN address, never at loopback only (a joiner on another host
    // would dial itself).
    let public_invite = invite(&public);
    let bootstrap = invite_bootstrap(&public_invite);
    assert!(
        bootstrap
            .iter()
            .any(|a| a.contains("/ip4/203.0.113.10/tcp/4100"))
            && !bootstrap.iter().any(|a| a.contains("/ip4/127.0.0.1/")),
        "{bootstrap:?}"
    );
    let joined = alpha.json(&["mesh", "join", &public_invite]);
    assert_eq!(joined["state"], "joined", "{joined}");
    converged(&[&public, &alpha], 1);
    wait_for(
        "alpha to know it is private and public that it is public",
        SLOW,
        &[&public, &alpha],
        || reachability(&alpha) == "private" && reachability(&public) == "public",
    );
    wait_for(
        "alpha to reserve on the public member",
        SLOW,
        &[&public, &alpha],
        || reserved_on(&alpha).contains(&public_id),
    );
    let report = doctor(&alpha);
    let alpha_id = alpha.peer_id();
    assert!(
        report["relayed"]
            .as_array()
            .is_some_and(|r| r.iter().any(|a| {
                let a = a.as_str().unwrap_or_default();
                a.contains(&format!("/p2p/{public_id}/p2p-circuit/p2p/{alpha_id}"))
            })),
        "{report}"
    );

    // 2. The node behind home B's symmetric NAT joins with an invite that
    // alpha wrote: its text carries alpha's relayed address.
    let from_alpha = relayed_invite(&alpha, &[&public_id]);
    let bravo = node(
        &lab,
        Host::HomeB,
        "bravo",
        &home_config(&[]),
        &model_b.env(),
    );
    add(&bravo, "essays/field-notes", "Field Notes", 4);
    let joined = bravo.json(&["mesh", "join", &from_alpha]);
    match joined["state"].as_str() {
        Some("joined") => {}
        // Three members need the roster's quorum: the public member's yes.
        Some("pending") => vote_yes(&public, "add"),
        _ => panic!("bravo's join: {joined}"),
    }
    let all = [&public, &alpha, &bravo];
    converged(&all, 2);
    let bravo_id = bravo.peer_id();
    wait_for(
        "bravo to know it is private and reserve on the public member",
        SLOW,
        &all,
        || reachability(&bravo) == "private" && reserved_on(&bravo).contains(&public_id),
    );
    assert_eq!(member_entry(&public, &alpha_id)["link"], "direct");

    // 3. A moot hosted by alpha between its book and bravo's: every turn
    // of bravo's crosses the relay; the export verifies offline.
    let id = sea_moot_with_bravo(&alpha, &all, 4);
    let to_bravo = member_entry(&alpha, &bravo_id);
    assert_eq!(to_bravo["connected"], true, "{to_bravo}");
    assert_eq!(to_bravo["link"], "relayed", "{to_bravo}");
    let export: Value = serde_json::from_str(&alpha.ok(&["moot", "export", &id])).unwrap();
    let (ok, out) = verify_offline(&export);
    assert!(ok, "{out}");
    assert!(out.contains("4 signed turns"), "{out}");
}

#[test]
fn natlab_a_mesh_founded_behind_a_nat_meets_through_configured_relays_and_survives_losing_one() {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    // Two relays that are not members, on the two public hosts.
    let relay_config = "[net]\nreachability = \"auto\"\n[net.relay]\nserve = \"anyone\"\n";
    let mut relays = [
        node(&lab, Host::Public1, "relay-1", relay_config, &[]),
        node(&lab, Host::Public2, "relay-2", relay_config, &[]),
    ];
    let relay_ids: Vec<String> = relays.iter().map(Daemon::peer_id).collect();
    let relay_addrs: Vec<String> = [Host::Public1, Host::Public2]
        .iter()
        .zip(&relay_ids)
        .map(|(h, id)| format!("/ip4/{}/tcp/4100/p2p/{id}", h.addr()))
        .collect();
    let config = home_config(&relay_addrs);

    // 4. A mesh founded behind home A's NAT, joined from behind home B's
    // through a configured relay.
    let alpha = node(&lab, Host::HomeA, "alpha", &config, &[]);
    add(&alpha, "fiction/sea-tales", "Sea Tales", 5);
    alpha.ok(&["mesh", "init", "--name", "behind"]);
    wait_for(
        "alpha to know it is private and reserve on a relay",
        SLOW,
        &[&alpha, &relays[0], &relays[1]],
        || reachability(&alpha) == "private" && !reserved_on(&alpha).is_empty(),
    );
    let ids: Vec<&str> = relay_ids.iter().map(String::as_str).collect();
    let from_alpha = relayed_invite(&alpha, &ids);
    let bravo = node(&lab, Host::HomeB, "bravo", &config, &[]);
    add(&bravo, "essays/field-notes", "Field Notes", 6);
    let joined = bravo.json(&["mesh", "join", &from_alpha]);
    assert_eq!(joined["state"], "joined", "{joined}");
    converged(&[&alpha, &bravo], 1);
    let (alpha_id, bravo_id) = (alpha.peer_id(), bravo.peer_id());
    let homes = [&alpha, &bravo];
    let watched = [&alpha, &bravo, &relays[0], &relays[1]];
    wait_for(
        "bravo to know it is private and reserve on a relay",
        SLOW,
        &watched,
        || reachability(&bravo) == "private" && !reserved_on(&bravo).is_empty(),
    );
    wait_for("the relays to know they are public", SLOW, &watched, || {
        relays.iter().all(|r| reachability(r) == "public")
    });
    wait_for(
        "each home to reach the other's books through a relay",
        SLOW,
        &watched,
        || search_reaches(&alpha, &bravo_id) && search_reaches(&bravo, &alpha_id),
    );
    let to_bravo = member_entry(&alpha, &bravo_id);
    assert_eq!(to_bravo["link"], "relayed", "{to_bravo}");

    // 5. The relay alpha holds a reservation on (the first, if both)
    // stops: both homes hold a reservation on the other one, none on the
    // stopped one, and still reach each other.
    let first = reserved_on(&alpha);
    let gone = if first.contains(&relay_ids[0]) { 0 } else { 1 };
    assert!(first.contains(&relay_ids[gone]), "{first:?}");
    let (gone_id, left_id) = (relay_ids[gone].clone(), relay_ids[1 - gone].clone());
    relays[gone].stop();
    let left = &relays[1 - gone];
    wait_for(
        "both homes to hold a reservation on the relay left, none on the stopped one",
        SLOW,
        &[&alpha, &bravo, left],
        || {
            homes.iter().all(|h| {
                let on = reserved_on(h);
                on.contains(&left_id) && !on.contains(&gone_id)
            })
        },
    );
    wait_for(
        "the homes to reach each other again through the relay left",
        SLOW,
        &[&alpha, &bravo, left],
        || {
            member_entry(&alpha, &bravo_id)["connected"] == true
                && search_reaches(&alpha, &bravo_id)
                && search_reaches(&bravo, &alpha_id)
        },
    );
    let to_bravo = member_entry(&alpha, &bravo_id);
    assert_eq!(to_bravo["link"], "relayed", "{to_bravo}");
    assert!(
        to_bravo["address"]
            .as_str()
            .is_some_and(|a| a.contains(&format!("/p2p/{left_id}/p2p-circuit"))),
        "{to_bravo}"
    );
}
