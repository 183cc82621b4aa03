//! `grove-bench nat punch [TRIALS] [PAIR]`: hole punching in the NAT
//! laboratory. For each pair of homes (a direct path possible or not, over
//! TCP or QUIC), or those whose name contains PAIR, TRIALS times (default
//! 20): two fresh members, one founding a mesh behind its NAT and the
//! other joining by its relayed invite through non-member relays on both
//! public hosts; then how the link between them ends within 30 s: punched
//! to direct (and how long after the join), or relayed with the reason the
//! doctor gives. Prints each trial, then per pair the counts, the times to
//! direct and the transports the direct links took. With
//! `GROVE_BENCH_NAT_LOGS=DIR`, every node logs its punches, DCUtR
//! exchanges and dials (debug) to a file in DIR.

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

const PAIRS: [Pair; 8] = [
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
        name: "address-restricted cone to symmetric (symmetric joins), QUIC",
        one: Host::HomeE,
        two: Host::HomeB,
        quic: true,
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
    Pair {
        name: "port-restricted cone to symmetric, QUIC",
        one: Host::HomeA,
        two: Host::HomeB,
        quic: true,
        possible: false,
    },
    Pair {
        name: "symmetric to symmetric, QUIC",
        one: Host::HomeB,
        two: Host::HomeD,
        quic: true,
        possible: false,
    },
];

/// What a node logs when `GROVE_BENCH_NAT_LOGS` is set: the punch's
/// bookkeeping, DCUtR's exchange, and every dial and its error.
const DEBUG_LOG: &str = "warn,grove::net=debug,libp2p_dcutr=debug,libp2p_tcp=debug,libp2p_quic=debug,libp2p_swarm=debug";

/// Where the node started in `dir` logs, when `GROVE_BENCH_NAT_LOGS` names
/// a directory (one file per node and trial, kept after the run).
fn logs_to(dir: &Path) -> Option<std::path::PathBuf> {
    let root = std::env::var_os("GROVE_BENCH_NAT_LOGS")?;
    let root = Path::new(&root);
    std::fs::create_dir_all(root).ok()?;
    let mut name: Vec<String> = dir
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    name.reverse();
    Some(root.join(format!("{}.log", name.join("-"))))
}

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
    match logs_to(dir) {
        Some(file) => {
            let log = std::fs::File::create(&file)
                .with_context(|| format!("create {}", file.display()))?;
            cmd.env("GROVE_LOG__LEVEL", DEBUG_LOG)
                .stdout(Stdio::null())
                .stderr(log);
        }
        None => {
            cmd.env("GROVE_LOG__LEVEL", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        }
    }
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

/// How one trial ended.
struct Ended {
    /// "direct (punched)", or "relayed (why)" as the doctor says.
    outcome: String,
    /// The time from the join to direct.
    direct: Option<Duration>,
    /// The transport of the direct link ("tcp" or "quic").
    transport: Option<&'static str>,
}

/// One trial: two fresh members, the second joining the first through
/// the relays; how the joiner's link to the founder ends.
fn trial(lab: &Lab, bin: &Path, dir: &Path, pair: &Pair, relays: &str) -> anyhow::Result<Ended> {
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
    let mut ended = Ended {
        outcome: String::new(),
        direct: None,
        transport: None,
    };
    while joined.elapsed() < SETTLE {
        let link = entry(bin, &two, &peer);
        ended.outcome = link["path"].as_str().unwrap_or("not connected").to_string();
        if ended.outcome.starts_with("direct") {
            ended.direct = Some(joined.elapsed());
            let address = link["address"].as_str().unwrap_or_default();
            ended.transport = Some(if address.contains("/quic-v1") {
                "quic"
            } else {
                "tcp"
            });
            break;
        }
        let settled =
            ended.outcome.starts_with("relayed (") && !ended.outcome.contains("under way");
        if !pair.possible && settled {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(ended)
}

/// `grove-bench nat punch [TRIALS] [PAIR]`: PAIR, when given, runs only the
/// pairs whose name contains it ("QUIC", "symmetric to symmetric").
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let trials: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(20);
    let only = args.get(1).map(String::as_str).unwrap_or("");
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
    for (p, pair) in PAIRS
        .iter()
        .enumerate()
        .filter(|(_, p)| p.name.contains(only))
    {
        let list: Vec<String> = ids
            .iter()
            .map(|(h, id)| match pair.quic {
                false => format!("\"/ip4/{}/tcp/4100/p2p/{id}\"", h.addr()),
                true => format!("\"/ip4/{}/udp/4100/quic-v1/p2p/{id}\"", h.addr()),
            })
            .collect();
        let mut tally = Tally::default();
        for t in 0..trials {
            let dir = root.path().join(format!("pair{p}-{t}"));
            let ended = trial(&lab, &bin, &dir, pair, &list.join(", "))?;
            println!(
                "  trial {t}: {}{}",
                ended.outcome,
                match (ended.direct, ended.transport) {
                    (Some(d), Some(via)) => format!(" after {:.1} s over {via}", d.as_secs_f64()),
                    _ => String::new(),
                }
            );
            tally.add(ended);
        }
        tally.print(pair, trials);
    }
    Ok(())
}

/// `3x a, 1x b`.
fn counted<K: std::fmt::Display>(m: &BTreeMap<K, usize>) -> String {
    m.iter()
        .map(|(k, v)| format!("{v}x {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One pair's trials, counted.
#[derive(Default)]
struct Tally {
    outcomes: BTreeMap<String, usize>,
    transports: BTreeMap<&'static str, usize>,
    /// Seconds from the join to direct, of the trials that ended direct.
    times: Vec<f64>,
}

impl Tally {
    fn add(&mut self, ended: Ended) {
        // "punch failed 2 times" and "punch failed 3 times" are one outcome.
        let key = if ended.outcome.contains("punch failed") {
            "relayed (punch failed)".to_string()
        } else {
            ended.outcome
        };
        *self.outcomes.entry(key).or_default() += 1;
        if let Some(via) = ended.transport {
            *self.transports.entry(via).or_default() += 1;
        }
        if let Some(d) = ended.direct {
            self.times.push(d.as_secs_f64());
        }
    }

    fn print(mut self, pair: &Pair, trials: usize) {
        self.times.sort_by(f64::total_cmp);
        let within = self.times.iter().filter(|t| **t <= 10.0).count();
        let median = if self.times.is_empty() {
            0.0
        } else {
            percentile(&self.times, 0.5)
        };
        println!(
            "{} (direct path {}): {}; direct within 10 s: {within}/{trials}; time to direct median {median:.1} s, max {:.1} s; direct over: {}",
            pair.name,
            if pair.possible {
                "possible"
            } else {
                "impossible"
            },
            counted(&self.outcomes),
            self.times.last().copied().unwrap_or(0.0),
            if self.transports.is_empty() {
                "-".to_string()
            } else {
                counted(&self.transports)
            },
        );
    }
}
