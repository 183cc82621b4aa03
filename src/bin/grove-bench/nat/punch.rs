//! `grove-bench nat punch [TRIALS]`: hole punching in the NAT laboratory.
//! For each pair of homes (a direct path possible or not, over TCP or
//! QUIC), TRIALS times (default 20): two fresh members, one founding a
//! mesh behind its NAT and the other joining by its relayed invite through
//! non-member relays on both public hosts; then how the link between them
//! ends within 30 s: punched to direct (and how long after the join), or
//! relayed with the reason the doctor gives. Prints the counts per pair.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::super::net::{Node, grove, grove_bin, json, percentile, started, wait_until};
use super::netlab::{Host, Lab};
use super::{invite, peer_id};

/// How long a trial waits for the link to settle.
const SETTLE: Duration = Duration::from_secs(30);
const SLOW: Duration = Duration::from_secs(120);

struct Pair {
    name: &'static str,
    one: Host,
    two: Host,
    quic: bool,
    /// Whether a direct path can exist between the two NATs.
    possible: bool,
}

const PAIRS: [Pair; 5] = [
    Pair {
        name: "port-restricted cone to port-restricted cone, TCP",
        one: Host::HomeA,
        two: Host::HomeC,
        quic: false,
        possible: true,
    },
    Pair {
        name: "port-restricted cone to port-restricted cone, QUIC",
        one: Host::HomeA,
        two: Host::HomeC,
        quic: true,
        possible: true,
    },
    Pair {
        name: "address-restricted cone to symmetric (symmetric joins), TCP",
        one: Host::HomeE,
        two: Host::HomeB,
        quic: false,
        possible: true,
    },
    Pair {
        name: "port-restricted cone to symmetric, TCP",
        one: Host::HomeA,
        two: Host::HomeB,
        quic: false,
        possible: false,
    },
    Pair {
        name: "symmetric to symmetric, TCP",
        one: Host::HomeB,
        two: Host::HomeD,
        quic: false,
        possible: false,
    },
];

fn start(lab: &Lab, host: Host, bin: &Path, dir: &Path, config: &str) -> anyhow::Result<Node> {
    let state = dir.join("state");
    std::fs::create_dir_all(&state)?;
    let file = dir.join("grove.toml");
    std::fs::write(&file, config)?;
    let file = file.to_str().context("utf-8 path")?;
    let mut cmd = grove(
        bin,
        &state,
        &[
            "node",
            "run",
            "--config",
            file,
            "--listen",
            "/ip4/0.0.0.0/tcp/4100",
        ],
    );
    cmd.env("GROVE_LOG__LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    lab.enter(host, &mut cmd);
    let child = cmd.spawn()?;
    started(bin, Node { state, child })
}

/// `of`'s doctor entry for member `peer`.
fn entry(bin: &Path, of: &Node, peer: &str) -> serde_json::Value {
    json(bin, &of.state, &["node", "doctor"])
        .ok()
        .and_then(|d| d["members"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .find(|m| m["peer_id"] == peer)
        .unwrap_or_default()
}

/// One trial: the outcome ("direct (punched)" or "relayed (why)") and
/// the time from the join to direct.
fn trial(
    lab: &Lab,
    bin: &Path,
    dir: &Path,
    pair: &Pair,
    relays: &str,
) -> anyhow::Result<(String, Option<Duration>)> {
    let config = format!("[net]\nreachability = \"auto\"\nrelays = [{relays}]\n");
    let one = start(lab, pair.one, bin, &dir.join("one"), &config)?;
    json(bin, &one.state, &["mesh", "init", "--name", "punch"])?;
    let text = invite(bin, &one, true)?;
    let two = start(lab, pair.two, bin, &dir.join("two"), &config)?;
    json(bin, &two.state, &["mesh", "join", &text, "--as", "two"])?;
    let joined = Instant::now();
    let peer = peer_id(bin, &one)?;
    wait_until("the joiner's link to the founder", SLOW, || {
        entry(bin, &two, &peer)["connected"] == true
    })?;
    let mut direct = None;
    let mut last = String::new();
    while joined.elapsed() < SETTLE {
        last = entry(bin, &two, &peer)["path"]
            .as_str()
            .unwrap_or("not connected")
            .to_string();
        if last.starts_with("direct") {
            direct = Some(joined.elapsed());
            break;
        }
        if !pair.possible && last.starts_with("relayed (") && !last.contains("under way") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((last, direct))
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let trials: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(20);
    let bin = grove_bin()?;
    let lab = Lab::build().map_err(|why| anyhow::anyhow!("no NAT laboratory: {why}"))?;
    let root = tempfile::tempdir()?;
    let relay_config = "[net]\nreachability = \"auto\"\n[net.relay]\nserve = \"anyone\"\n";
    let mut relays = Vec::new();
    let mut ids = Vec::new();
    for (i, host) in [Host::Public1, Host::Public2].into_iter().enumerate() {
        let node = start(
            &lab,
            host,
            &bin,
            &root.path().join(format!("relay{i}")),
            relay_config,
        )?;
        ids.push((host, peer_id(&bin, &node)?));
        relays.push(node);
    }
    println!(
        "grove-bench nat punch: {trials} trials per pair, relays on both public hosts, {}s to settle",
        SETTLE.as_secs()
    );
    for (p, pair) in PAIRS.iter().enumerate() {
        let list: Vec<String> = ids
            .iter()
            .map(|(h, id)| match pair.quic {
                false => format!("\"/ip4/{}/tcp/4100/p2p/{id}\"", h.addr()),
                true => format!("\"/ip4/{}/udp/4100/quic-v1/p2p/{id}\"", h.addr()),
            })
            .collect();
        let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
        let mut times = Vec::new();
        for t in 0..trials {
            let dir = root.path().join(format!("pair{p}-{t}"));
            let (outcome, direct) = trial(&lab, &bin, &dir, pair, &list.join(", "))?;
            // "punch failed 2 times" and "punch failed 3 times" are one outcome.
            let key = if outcome.contains("punch failed") {
                "relayed (punch failed)".to_string()
            } else {
                outcome
            };
            *outcomes.entry(key).or_default() += 1;
            if let Some(d) = direct {
                times.push(d.as_secs_f64());
            }
        }
        times.sort_by(f64::total_cmp);
        let within = times.iter().filter(|t| **t <= 10.0).count();
        println!(
            "{} (direct path {}): {}; direct within 10 s: {within}/{trials}; time to direct median {:.1} s, max {:.1} s",
            pair.name,
            if pair.possible {
                "possible"
            } else {
                "impossible"
            },
            outcomes
                .iter()
                .map(|(k, v)| format!("{v}x {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            if times.is_empty() {
                0.0
            } else {
                percentile(&times, 0.5)
            },
            times.last().copied().unwrap_or(0.0),
        );
    }
    Ok(())
}
