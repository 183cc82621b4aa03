//! `grove-bench net [NODES]`: real `grove node run` processes on 127.0.0.1.
//! Prints gossip propagation of root announcements across NODES nodes
//! (default 10; p50/p99 of receive time minus announce time, same clock),
//! the time from `mesh join` to membership in a 5-node mesh, each node's
//! idle RSS, the CPU an idle mesh uses, and search through the CLI: mesh
//! search across all NODES next to book-scoped and all-books search on one.
//! Uses the release binary next to this one (`cargo build --release --bin
//! grove` first).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

pub(crate) struct Node {
    pub(crate) state: PathBuf,
    pub(crate) child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

pub(crate) fn grove_bin() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let bin = me.with_file_name("grove");
    if !bin.is_file() {
        bail!(
            "{} not found: cargo build --release --bin grove",
            bin.display()
        );
    }
    Ok(bin)
}

pub(crate) fn grove(bin: &Path, state: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GROVE_") {
            cmd.env_remove(k);
        }
    }
    cmd.arg("--state").arg(state).args(args);
    cmd
}

pub(crate) fn json(bin: &Path, state: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let mut all = args.to_vec();
    all.push("--json");
    let out = grove(bin, state, &all).output()?;
    if !out.status.success() {
        bail!(
            "grove {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub(crate) fn wait_until(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn start(bin: &Path, root: &Path, k: usize) -> anyhow::Result<Node> {
    start_with(bin, root, k, &[])
}

/// Starts node `k` under `root` with extra environment (config keys).
pub(crate) fn start_with(
    bin: &Path,
    root: &Path,
    k: usize,
    env: &[(&str, String)],
) -> anyhow::Result<Node> {
    let state = root.join(format!("node{k}"));
    std::fs::create_dir_all(&state)?;
    let child = grove(
        bin,
        &state,
        &["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"],
    )
    .env("GROVE_NODE__NAME", format!("node{k}"))
    .env("GROVE_LOG__LEVEL", "warn")
    .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()?;
    started(bin, Node { state, child })
}

/// `node` once its control socket answers.
pub(crate) fn started(bin: &Path, node: Node) -> anyhow::Result<Node> {
    wait_until("a node to start", Duration::from_secs(30), || {
        grove(bin, &node.state, &["node", "status"])
            .output()
            .is_ok_and(|o| o.status.success())
    })?;
    Ok(node)
}

/// Votes yes on `joiner`'s add from every member in `voters` that still
/// sees it open.
pub(crate) fn vote_add(bin: &Path, voters: &[&Node], joiner: &str) -> anyhow::Result<()> {
    for v in voters {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = json(bin, &v.state, &["mesh", "status"])?;
            let member = status["members"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["peer_id"] == joiner));
            if member {
                return Ok(());
            }
            let open = status["proposals"].as_array().and_then(|ps| {
                ps.iter()
                    .find(|p| p["kind"] == "add" && p["target"] == joiner)
                    .and_then(|p| p["id"].as_str().map(str::to_string))
            });
            if let Some(id) = open {
                let _ = grove(bin, &v.state, &["mesh", "vote", &id, "yes"]).output();
                break;
            }
            if Instant::now() > deadline {
                bail!("a voter never saw the add");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

/// Adds node `joiner` to the mesh founded by `nodes[0]`; returns the time
/// from `mesh join` to the joiner being a member.
pub(crate) fn join(bin: &Path, nodes: &[Node], joiner: &Node) -> anyhow::Result<Duration> {
    let invite = json(bin, &nodes[0].state, &["mesh", "invite"])?["invite"]
        .as_str()
        .context("invite")?
        .to_string();
    let peer = json(bin, &joiner.state, &["identity", "show"])?["peer_id"]
        .as_str()
        .context("peer id")?
        .to_string();
    let start = Instant::now();
    json(bin, &joiner.state, &["mesh", "join", &invite])?;
    let voters: Vec<&Node> = nodes.iter().skip(1).collect();
    vote_add(bin, &voters, &peer)?;
    wait_until("the joiner to be a member", Duration::from_secs(60), || {
        json(bin, &joiner.state, &["mesh", "status"]).is_ok_and(|s| s["member"] == true)
    })?;
    Ok(start.elapsed())
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn proc_field(pid: u32, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    text.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let n: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(10);
    if n < 5 {
        bail!("use at least 5 nodes");
    }
    let bin = grove_bin()?;
    let root = tempfile::tempdir()?;
    println!(
        "grove-bench net: {n} real nodes on 127.0.0.1 ({})",
        bin.display()
    );
    let nodes = grow_mesh(&bin, root.path(), n)?;
    // Let the mesh settle: every node has every member's announcement.
    wait_until(
        "every node to see every member's roots",
        Duration::from_secs(60),
        || {
            nodes.iter().all(|node| {
                json(&bin, &node.state, &["roots"])
                    .is_ok_and(|v| v["roots"].as_array().is_some_and(|r| r.len() == n))
            })
        },
    )?;
    propagation(&bin, root.path(), &nodes)?;
    cli_searches(&bin, &nodes)?;
    idle_use(&nodes);
    Ok(())
}

/// Founds a mesh on node 1 and joins nodes 2 to `n` to it one by one;
/// prints the join times.
fn grow_mesh(bin: &Path, root: &Path, n: usize) -> anyhow::Result<Vec<Node>> {
    let mut nodes = vec![start(bin, root, 1)?];
    json(bin, &nodes[0].state, &["mesh", "init", "--name", "bench"])?;
    let mut join_times = Vec::new();
    for k in 2..=n {
        let joiner = start(bin, root, k)?;
        let took = join(bin, &nodes, &joiner)?;
        if nodes.len() == 4 {
            println!(
                "join: `mesh join` to member in a 5-node mesh (3 yes votes needed): {:.0} ms",
                took.as_secs_f64() * 1000.0
            );
        }
        join_times.push(took);
        nodes.push(joiner);
    }
    let mut sorted: Vec<f64> = join_times
        .iter()
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    sorted.sort_by(f64::total_cmp);
    println!(
        "join: all {} joins ({} ms in order), median {:.0} ms, max {:.0} ms",
        join_times.len(),
        join_times
            .iter()
            .map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(", "),
        percentile(&sorted, 0.5),
        join_times
            .iter()
            .map(|d| d.as_secs_f64() * 1000.0)
            .fold(0.0, f64::max)
    );
    Ok(nodes)
}

/// Propagation: one node at a time announces a new book; every other
/// node records when the announcement arrived.
fn propagation(bin: &Path, root: &Path, nodes: &[Node]) -> anyhow::Result<()> {
    let n = nodes.len();
    let rounds = 3 * n;
    let mut samples = Vec::new();
    for round in 0..rounds {
        let from = &nodes[round % n];
        let book = root.join(format!("b{round}.txt"));
        std::fs::write(
            &book,
            format!(
                "Title: Bench {round}\n\n*** START OF THE PROJECT GUTENBERG EBOOK BENCH ***\n\nParagraph {round} of the propagation benchmark, with words enough.\n\n*** END OF THE PROJECT GUTENBERG EBOOK BENCH ***\n"
            ),
        )?;
        let key = format!("bench/b{round}");
        let book_arg = book.to_str().context("path")?;
        let out = grove(bin, &from.state, &["book", "add", book_arg, "--key", &key]).output()?;
        if !out.status.success() {
            bail!("book add: {}", String::from_utf8_lossy(&out.stderr));
        }
        let from_id = json(bin, &from.state, &["identity", "show"])?["peer_id"]
            .as_str()
            .context("peer id")?
            .to_string();
        for other in nodes.iter().filter(|o| o.state != from.state) {
            samples.push(arrival_delay(bin, other, &from_id, &key)? as f64);
        }
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "gossip: root announcement propagation across {n} nodes, {} deliveries: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (goal p99 < 200 ms)",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or(0.0)
    );
    Ok(())
}

/// Waits until `other` holds `from_id`'s announcement of book `key`;
/// returns its receive time minus its announce time, in ms.
fn arrival_delay(bin: &Path, other: &Node, from_id: &str, key: &str) -> anyhow::Result<i64> {
    let mut got = None;
    wait_until("an announcement to arrive", Duration::from_secs(30), || {
        let Ok(v) = json(bin, &other.state, &["roots"]) else {
            return false;
        };
        let Some(entry) = v["roots"]
            .as_array()
            .and_then(|r| r.iter().find(|m| m["peer_id"] == from_id))
        else {
            return false;
        };
        let has = entry["shards"].as_array().is_some_and(|s| {
            s.iter().any(|s| {
                s["books"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|b| b["key"] == key))
            })
        });
        if has {
            got =
                Some(entry["received"].as_i64().unwrap_or(0) - entry["time"].as_i64().unwrap_or(0));
        }
        has
    })?;
    Ok(got.unwrap_or(0))
}

/// Search through the CLI, as a user runs it: mesh search (two rounds to
/// every member, every remote hit proven) next to a book-scoped and an
/// all-books search of node 1's own store, so that the CLI process's own
/// cost can be read off.
fn cli_searches(bin: &Path, nodes: &[Node]) -> anyhow::Result<()> {
    let n = nodes.len();
    let query = "paragraph benchmark words";
    let searches: [(&str, &[&str]); 3] = [
        (
            "book-scoped `book search --key bench/b0 -k 6` on one node",
            &["--key", "bench/b0"],
        ),
        ("all-books `book search -k 6` on one node (3 books)", &[]),
        (
            "`book search --mesh -k 6` across the mesh (two rounds, every remote hit proven)",
            &["--mesh"],
        ),
    ];
    for (label, extra) in searches {
        let mut search_ms = Vec::new();
        for _ in 0..30 {
            let mut args = vec!["book", "search", query, "-k", "6"];
            args.extend_from_slice(extra);
            let started = std::time::Instant::now();
            let v = json(bin, &nodes[0].state, &args)?;
            search_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            if v["errors"].as_array().is_some_and(|e| !e.is_empty()) {
                bail!("{label} reported errors: {}", v["errors"]);
            }
            if v["hits"].as_array().is_none_or(|h| h.is_empty()) {
                bail!("{label} found nothing: {v}");
            }
            // Under the members' default rate limit (300 a minute).
            std::thread::sleep(Duration::from_millis(250));
        }
        search_ms.sort_by(f64::total_cmp);
        println!(
            "search: {label}, {n} nodes, 30 runs, including the CLI process: p50 {:.1} ms, p99 {:.1} ms",
            percentile(&search_ms, 0.5),
            percentile(&search_ms, 0.99)
        );
    }
    Ok(())
}

/// Idle: lets pending announcements finish, then measures the nodes' CPU
/// over a window and their RSS.
fn idle_use(nodes: &[Node]) {
    let n = nodes.len();
    std::thread::sleep(Duration::from_secs(3));
    let pids: Vec<u32> = nodes.iter().map(|n| n.child.id()).collect();
    let before: Vec<u64> = pids.iter().filter_map(|p| cpu_ticks(*p)).collect();
    let window = Duration::from_secs(20);
    std::thread::sleep(window);
    let after: Vec<u64> = pids.iter().filter_map(|p| cpu_ticks(*p)).collect();
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let used: f64 = after
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b) as f64 / ticks_per_sec)
        .sum();
    println!(
        "idle CPU: {n} nodes together use {:.2}% of one core ({:.3} s of CPU over {} s)",
        100.0 * used / window.as_secs_f64(),
        used,
        window.as_secs()
    );
    let mut rss: Vec<u64> = pids
        .iter()
        .filter_map(|p| proc_field(*p, "status", "VmRSS:"))
        .collect();
    rss.sort();
    println!(
        "idle RSS per node (no model loaded): median {:.1} MB, max {:.1} MB (goal < 40 MB)",
        rss[rss.len() / 2] as f64 / 1024.0,
        *rss.last().unwrap_or(&0) as f64 / 1024.0
    );
}
