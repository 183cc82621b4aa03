//! `grove-bench admission`: the foreign adversary of tests/admission.rs
//! (py-libp2p 0.8.1, tests/adversary/adversary.py, in the venv that
//! tests/adversary/setup.sh keeps under target/adversary-venv) against real
//! `grove node run` processes on 127.0.0.1. Prints, against the goals of
//! issue 15: the time for a new member to join while 300 stranger
//! connections are held and re-dialled (goal 5 s); the RSS growth of a node
//! under stalled length prefixes (goal 32 MB) from strangers on search
//! (2,000, refused at negotiation), strangers on join (2,000) and a member on
//! search (100); and the rotate-commit latency while a join flood of
//! self-signed invites runs (goal 2 s). Uses the release binary next to
//! this one.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::net::{Node, grove, grove_bin, json, start_with, wait_until};

const JOIN_GOAL: Duration = Duration::from_secs(5);
const RSS_GOAL_MB: u64 = 32;
const COMMIT_GOAL: Duration = Duration::from_secs(2);

/// The adversary's Python (installing its venv on first use).
fn python() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("target/adversary-venv");
    let status = Command::new("bash")
        .arg(root.join("tests/adversary/setup.sh"))
        .arg(&venv)
        .status()?;
    if !status.success() {
        bail!("tests/adversary/setup.sh failed (python3 -m venv and pip are needed)");
    }
    Ok(venv.join("bin/python"))
}

/// One adversary subcommand, running; its log (stderr) is dropped.
fn spawn(python: &Path, args: &[&str]) -> anyhow::Result<Child> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adversary/adversary.py");
    Ok(Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?)
}

/// One adversary subcommand, running, and its log lines as they come (a
/// thread drains stderr to its end, so the adversary never blocks on it).
fn spawn_logged(python: &Path, args: &[&str]) -> anyhow::Result<(Child, Receiver<String>)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adversary/adversary.py");
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().context("adversary stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // The receiver may be gone; the draining goes on regardless.
            let _ = tx.send(line);
        }
    });
    Ok((child, rx))
}

/// Waits (at most `limit`) for a log line containing `text`.
fn wait_line(log: &Receiver<String>, text: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match log.recv_timeout(left) {
            Ok(line) if line.contains(text) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// The node's admission counters (`grove node stats`), as one line.
fn admission_counts(bin: &Path, node: &Node) -> String {
    let Ok(v) = json(bin, &node.state, &["node", "stats"]) else {
        return "(node stats failed)".into();
    };
    let get = |k: &str| v["counters"][k].as_u64().unwrap_or(0);
    format!(
        "{} evicted, {} closed at the join window, {} refused (slots full), {} handshakes refused",
        get("admission.closed.evicted"),
        get("admission.closed.join-window"),
        get("admission.refused.full"),
        get("admission.refused.handshakes")
    )
}

/// Its JSON result, once it exits by itself.
fn result(child: Child) -> anyhow::Result<Value> {
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .with_context(|| format!("the adversary printed no result: {text}"))
}

fn status(bin: &Path, node: &Node) -> anyhow::Result<Value> {
    json(bin, &node.state, &["node", "status"])
}

fn target(bin: &Path, node: &Node) -> anyhow::Result<String> {
    let s = status(bin, node)?;
    Ok(format!(
        "{}/p2p/{}",
        s["listen"][0].as_str().context("listen")?,
        s["peer_id"].as_str().context("peer id")?
    ))
}

/// Established TCP connections whose local port is the node's (from
/// /proc/net/tcp: the node's own count of what the flood holds open).
fn established_to(bin: &Path, node: &Node) -> anyhow::Result<usize> {
    let listen = status(bin, node)?["listen"][0]
        .as_str()
        .context("listen")?
        .to_string();
    let port: u16 = listen
        .rsplit('/')
        .next()
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("no port in {listen}"))?;
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    let suffix = format!(":{port:04X}");
    Ok(table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1).is_some_and(|local| local.ends_with(&suffix)) && f.get(3) == Some(&"01")
        })
        .count())
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn epoch(bin: &Path, node: &Node) -> Option<u64> {
    json(bin, &node.state, &["mesh", "status"]).ok()?["epoch"].as_u64()
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets the goal"
    } else {
        "MISSES the goal"
    }
}

/// A two-member mesh under `root`.
fn two_members(bin: &Path, root: &Path) -> anyhow::Result<(Node, Node)> {
    let a = start_with(bin, root, 1, &[])?;
    let b = start_with(bin, root, 2, &[])?;
    json(bin, &a.state, &["mesh", "init", "--name", "admission"])?;
    crate::net::join(bin, std::slice::from_ref(&a), &b)?;
    Ok((a, b))
}

fn invite(bin: &Path, node: &Node) -> anyhow::Result<String> {
    Ok(json(bin, &node.state, &["mesh", "invite"])?["invite"]
        .as_str()
        .context("invite")?
        .to_string())
}

/// Join time under a held flood of 300 stranger connections (re-dialled
/// from fresh identities whenever the node closes one, so the flood
/// persists while the joiner tries).
fn join_under_flood(bin: &Path, python: &Path, root: &Path) -> anyhow::Result<()> {
    let a = start_with(bin, root, 1, &[])?;
    json(bin, &a.state, &["mesh", "init", "--name", "admission"])?;
    let c = start_with(bin, root, 3, &[])?;
    let (flood, _log) = start_flood(bin, python, &a)?;
    let joined = join_while_flooded(bin, &a, &c)?;
    let during = admission_counts(bin, &a);
    let flood = result(flood)?;
    joined.print();
    println!(
        "  flood: {} dials, {} established, peak {} open at once, {} closed by the node, {} dials failed (first: {}); node: {during}",
        flood["dials"],
        flood["connected"],
        flood["open_peak"],
        flood["closed_by_node"],
        flood["failed"],
        flood["first_error"]
    );
    Ok(())
}

/// Starts the held, re-dialled flood of 300 stranger connections on
/// `node` and waits for it to be in place (or 60 s); prints how it stands.
fn start_flood(
    bin: &Path,
    python: &Path,
    node: &Node,
) -> anyhow::Result<(Child, Receiver<String>)> {
    let (flood, log) = spawn_logged(
        python,
        &[
            "flood",
            "--target",
            &target(bin, node)?,
            "--conns",
            "300",
            "--hold",
            "60",
            "--turn",
            "--redial",
        ],
    )?;
    // py-libp2p takes 10-20 s to dial 300 hosts on these machines.
    let in_place = wait_line(&log, "flood: in place", Duration::from_secs(60));
    println!(
        "  flood {} when the join starts: {} TCP connections established to the node; node so far: {}",
        if in_place {
            "in place"
        } else {
            "NOT in place after 60 s"
        },
        established_to(bin, node)?,
        admission_counts(bin, node)
    );
    Ok((flood, log))
}

/// How `mesh join` went under the flood.
struct FloodedJoin {
    /// When `mesh join` first succeeded, from the first attempt.
    answered: Option<Duration>,
    /// When the joiner was a member, from the first attempt.
    member: Option<Duration>,
    attempts: u32,
    first_failure: Option<String>,
    last: String,
}

/// `joiner` runs `mesh join` with an invite of `founder`'s, again every
/// 200 ms for 30 s until it answers, then waits (30 s) to be a member.
fn join_while_flooded(bin: &Path, founder: &Node, joiner: &Node) -> anyhow::Result<FloodedJoin> {
    let inv = invite(bin, founder)?;
    let start = Instant::now();
    let mut attempts = 0;
    let mut first_failure = None;
    let mut last = String::new();
    let answered = loop {
        attempts += 1;
        let out = grove(bin, &joiner.state, &["mesh", "join", &inv, "--json"]).output()?;
        if out.status.success() {
            break Some(start.elapsed());
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
        first_failure.get_or_insert_with(|| last.clone());
        if start.elapsed() > Duration::from_secs(30) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // The founder alone votes: the joiner is a member once the add commits
    // and the welcome reaches it.
    let member = answered.and_then(|_| {
        wait_until("the joiner to be a member", Duration::from_secs(30), || {
            json(bin, &joiner.state, &["mesh", "status"]).is_ok_and(|s| s["member"] == true)
        })
        .ok()
        .map(|()| start.elapsed())
    });
    Ok(FloodedJoin {
        answered,
        member,
        attempts,
        first_failure,
        last,
    })
}

impl FloodedJoin {
    fn print(&self) {
        let attempts = self.attempts;
        match (self.answered, self.member) {
            (Some(t), Some(m)) => println!(
                "join under a 300-connection flood: `mesh join` answered in {:.2} s ({attempts} attempt(s)), member in {:.2} s; goal {} s: {}",
                t.as_secs_f64(),
                m.as_secs_f64(),
                JOIN_GOAL.as_secs(),
                verdict(m <= JOIN_GOAL)
            ),
            (Some(t), None) => println!(
                "join under a 300-connection flood: `mesh join` answered in {:.2} s but not a member within 30 s more; goal {} s: MISSES the goal",
                t.as_secs_f64(),
                JOIN_GOAL.as_secs()
            ),
            (None, _) => println!(
                "join under a 300-connection flood: not within 30 s ({attempts} attempts; last: {}); goal {} s: MISSES the goal",
                self.last,
                JOIN_GOAL.as_secs()
            ),
        }
        if let Some(f) = &self.first_failure {
            println!("  the first failed attempt said: {f}");
        }
    }
}

/// One stall: who stalls, on which protocol, with what length prefix.
struct Stall<'a> {
    what: &'a str,
    proto: &'a str,
    prefix: u32,
    conns: u32,
    streams: u32,
    warm: u32,
    /// A member's key: the first connection is that member's.
    key_file: Option<&'a Path>,
}

/// Runs one stall against `node` and prints the RSS growth (peak, sampled
/// every 100 ms, over the RSS before) and how the node closed the streams.
fn stall_once(bin: &Path, python: &Path, node: &Node, stall: &Stall) -> anyhow::Result<()> {
    let pid = status(bin, node)?["pid"].as_u64().context("pid")? as u32;
    let before = rss_kb(pid);
    let target = target(bin, node)?;
    let (conns, streams, prefix, warm) = (
        stall.conns.to_string(),
        stall.streams.to_string(),
        stall.prefix.to_string(),
        stall.warm.to_string(),
    );
    let mut args = vec![
        "stall",
        "--target",
        target.as_str(),
        "--conns",
        &conns,
        "--streams",
        &streams,
        "--proto",
        stall.proto,
        "--prefix",
        &prefix,
        "--hold",
        "30",
        "--warm",
        &warm,
    ];
    let key = stall.key_file.map(|k| k.to_string_lossy().into_owned());
    if let Some(k) = &key {
        args.extend(["--key-file", k.as_str()]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(rss_kb(pid));
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        })
    };
    let v = result(spawn(python, &args)?);
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().map_err(|_| anyhow::anyhow!("sampler"))?;
    let v = v?;
    let growth_mb = peak.saturating_sub(before) as f64 / 1024.0;
    let requested = stall.conns * stall.streams;
    println!(
        "RSS under {requested} stalled {} KiB prefixes on {} from {}: {:.1} MB -> {:.1} MB (+{growth_mb:.1} MB); goal +{RSS_GOAL_MB} MB: {}",
        stall.prefix / 1024,
        stall.proto,
        stall.what,
        before as f64 / 1024.0,
        peak as f64 / 1024.0,
        verdict(growth_mb <= RSS_GOAL_MB as f64)
    );
    let opened = v["opened_by_s"].as_f64().unwrap_or(0.0);
    let after = |k: &str| {
        v[k].as_f64()
            .map_or("-".into(), |t| format!("{:.1}", t - opened))
    };
    println!(
        "  streams: {} sent their prefix, {} refused (first: {}), {} closed by the node ({}–{} s after all were open), {} never closed within {} s; {} warm-up frames answered",
        v["streams_opened"],
        v["open_failed"],
        v["first_error"],
        v["closed"],
        after("first_closed_at"),
        after("last_closed_at"),
        v["never_closed"],
        v["hold"],
        v["warm_frames_answered"]
    );
    println!("  node: {}", admission_counts(bin, node));
    Ok(())
}

/// RSS growth under stalled length prefixes, from where a stall can reach:
/// strangers on a members-only protocol (refused at negotiation), strangers
/// on the join protocol (the one a stranger reaches; its frames are at most
/// 64 KiB), and a member on search, past the gate to the frame reader.
fn rss_under_stall(bin: &Path, python: &Path, root: &Path) -> anyhow::Result<()> {
    let a = start_with(bin, root, 4, &[])?;
    json(bin, &a.state, &["mesh", "init", "--name", "admission"])?;
    stall_once(
        bin,
        python,
        &a,
        &Stall {
            what: "strangers (20 connections x 100)",
            proto: "/grove/search/1",
            prefix: 256 << 10,
            conns: 20,
            streams: 100,
            warm: 0,
            key_file: None,
        },
    )?;
    stall_once(
        bin,
        python,
        &a,
        &Stall {
            what: "strangers (20 connections x 100)",
            proto: "/grove/join/1",
            prefix: 64 << 10,
            conns: 20,
            streams: 100,
            warm: 64,
            key_file: None,
        },
    )?;
    drop(a);
    // A member's stall: bravo's key, with bravo itself stopped so that the
    // adversary's connection is the member's only one.
    let root = root.join("stall-member");
    std::fs::create_dir_all(&root)?;
    let (a, b) = two_members(bin, &root)?;
    let key = b.state.join("identity/ed25519.key");
    drop(b);
    stall_once(
        bin,
        python,
        &a,
        &Stall {
            what: "a member (1 connection x 100)",
            proto: "/grove/search/1",
            prefix: 256 << 10,
            conns: 1,
            streams: 100,
            warm: 0,
            key_file: Some(&key),
        },
    )?;
    Ok(())
}

/// Rotate-commit latency (last vote to both members at the new epoch)
/// while a join flood of self-signed invites runs.
fn commit_under_join_flood(bin: &Path, python: &Path, root: &Path) -> anyhow::Result<()> {
    let root = root.join("flood");
    std::fs::create_dir_all(&root)?;
    let (a, b) = two_members(bin, &root)?;
    let mesh_id = json(bin, &a.state, &["mesh", "status"])?["mesh_id"]
        .as_str()
        .context("mesh id")?
        .to_string();
    let flood = spawn(
        python,
        &[
            "joinflood",
            "--target",
            &target(bin, &a)?,
            "--count",
            "5000",
            "--mesh-id",
            &mesh_id,
            "--senders",
            "4",
            "--parallel",
            "64",
            "--max-secs",
            "90",
        ],
    )?;
    let flood_started = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let mut latencies = Vec::new();
    for _ in 0..3 {
        let before = epoch(bin, &a).context("epoch")?;
        let id = json(bin, &a.state, &["mesh", "propose", "rotate"])?["id"]
            .as_str()
            .context("proposal id")?
            .to_string();
        let start = Instant::now();
        wait_until("bravo to vote", Duration::from_secs(60), || {
            grove(bin, &b.state, &["mesh", "vote", &id, "yes"])
                .output()
                .is_ok_and(|o| o.status.success())
        })?;
        let voted = start.elapsed();
        wait_until("the rotate commit", Duration::from_secs(60), || {
            epoch(bin, &a).is_some_and(|e| e > before) && epoch(bin, &b).is_some_and(|e| e > before)
        })?;
        latencies.push(start.elapsed() - voted);
    }
    let commits_done = flood_started.elapsed();
    let v = result(flood)?;
    let worst = latencies.iter().max().copied().unwrap_or_default();
    println!(
        "rotate commit under a join flood: {} (last vote to both members committed); goal {} s: {}",
        latencies
            .iter()
            .map(|d| format!("{:.0} ms", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(", "),
        COMMIT_GOAL.as_secs(),
        verdict(worst <= COMMIT_GOAL)
    );
    println!(
        "  the three rotations ran from 5 s to {:.1} s after the flood started; flood: {} join calls answered in {} s ({}/s, p50 {} s, p99 {} s), {} errors (first: {}), answers {}",
        commits_done.as_secs_f64(),
        v["answered"],
        v["elapsed_s"],
        v["rate_per_s"],
        v["latency_p50_s"],
        v["latency_p99_s"],
        v["errors"],
        v["first_error"],
        v["answers"]
    );
    Ok(())
}

pub fn run(_args: &[String]) -> anyhow::Result<()> {
    let bin = grove_bin()?;
    let python = python()?;
    let root = tempfile::tempdir()?;
    println!(
        "grove-bench admission: py-libp2p 0.8.1 against {} on 127.0.0.1",
        bin.display()
    );
    join_under_flood(&bin, &python, root.path())?;
    rss_under_stall(&bin, &python, root.path())?;
    commit_under_join_flood(&bin, &python, root.path())?;
    Ok(())
}
