//! `grove-bench metrics [TURNS]`: what observing a node costs. Ten real
//! nodes on 127.0.0.1 in one mesh, node1 with 100 books and its `[http]`
//! listener: the wall time of a `/metrics` scrape over HTTP (p50/p99 of
//! 200, a fresh connection each, as Prometheus scrapes), its size and
//! series; then a hosted moot of TURNS turns (default 20, instant model)
//! on node1 and the cost of everything a landed turn counts
//! (`Stats::turn_landed`, and the speaker's `Stats::model_completion`,
//! timed in this process) against the median turn.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::moot_net::{book, run_moot, serve_instant_model};
use super::net::{Node, grove, grove_bin, join, json, percentile, start_with, wait_until};
use grove::daemon::stats::{Stats, Verdict};

/// Members of the mesh and books on the scraped node.
const MEMBERS: usize = 10;
const BOOKS: usize = 100;
const SCRAPES: usize = 200;

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One `GET /metrics` on a fresh connection; the answer's length.
fn scrape(port: u16) -> anyhow::Result<usize> {
    get(port, "/metrics")
}

/// One GET of `path` on a fresh connection; the answer's length.
fn get(port: u16, path: &str) -> anyhow::Result<usize> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    if !raw.starts_with(b"HTTP/1.1 200") {
        bail!(
            "/metrics: {}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        );
    }
    Ok(raw.len())
}

fn body(port: u16) -> anyhow::Result<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    Ok(raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let turns: u32 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(20);
    let bin = grove_bin()?;
    let root = tempfile::tempdir()?;
    let url = serve_instant_model(TcpListener::bind("127.0.0.1:0")?)?;
    let port = free_port()?;
    let model = [
        ("GROVE_MODEL__BACKEND", "openai".to_string()),
        ("GROVE_MODEL__URL", url),
    ];
    let mut first = model.to_vec();
    first.push(("GROVE_HTTP__LISTEN", format!("127.0.0.1:{port}")));
    println!(
        "grove-bench metrics: {MEMBERS} nodes in one mesh, {BOOKS} books on node1 ({})",
        bin.display()
    );
    let nodes = mesh_with_books(&bin, root.path(), &first, &model)?;
    wait_until(
        "node1 to see every member online and node2's book",
        Duration::from_secs(120),
        || {
            let text = body(port).unwrap_or_default();
            sample(&text, "grove_mesh_members_online") == Some(MEMBERS as f64)
                && sample(&text, "grove_books") == Some(BOOKS as f64)
                && json(&bin, &nodes[0].state, &["roots"])
                    .is_ok_and(|v| v.to_string().contains("bench/two"))
        },
    )?;
    time_scrapes(port)?;
    let (_, view) = run_moot(
        &bin,
        &nodes[0].state,
        &["self:bench/b0", "node2:bench/two"],
        turns,
    )?;
    let mut turn_ms: Vec<f64> = view["turn_ms"]
        .as_array()
        .context("turn_ms")?
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    turn_ms.sort_by(f64::total_cmp);
    let median_turn_ms = percentile(&turn_ms, 0.5);
    let per_turn_us = turn_counting_us(&bin, &nodes[0])?;
    println!(
        "moot: {turns} turns hosted on node1 (instant model), median turn {median_turn_ms:.1} ms; the counters of one turn {per_turn_us:.2} us = {:.4} % of it (target < 1 %)",
        per_turn_us / (median_turn_ms * 1000.0) * 100.0
    );
    drop(nodes);
    Ok(())
}

/// The mesh of `MEMBERS` nodes, node1 started with `first`'s environment
/// and the others with `model`'s; `BOOKS` books on node1, one on node2.
fn mesh_with_books(
    bin: &Path,
    root: &Path,
    first: &[(&str, String)],
    model: &[(&str, String)],
) -> anyhow::Result<Vec<Node>> {
    let mut nodes: Vec<Node> = vec![start_with(bin, root, 1, first)?];
    json(bin, &nodes[0].state, &["mesh", "init", "--name", "bench"])?;
    for k in 2..=MEMBERS {
        let joiner = start_with(bin, root, k, model)?;
        join(bin, &nodes, &joiner)?;
        nodes.push(joiner);
    }
    let add = |k: usize, seed: usize, key: &str| -> anyhow::Result<()> {
        let path = book(root, seed)?;
        let out = grove(
            bin,
            &nodes[k - 1].state,
            &["book", "add", path.to_str().context("path")?, "--key", key],
        )
        .output()?;
        if !out.status.success() {
            bail!("book add: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    };
    for i in 0..BOOKS {
        add(1, i + 1, &format!("bench/b{i}"))?;
    }
    add(2, 1000, "bench/two")?;
    Ok(nodes)
}

/// Times `SCRAPES` scrapes of `/metrics` (after a warm-up) and as many
/// `/health` GETs, the listener's floor; prints both with the answer's
/// size and series.
fn time_scrapes(port: u16) -> anyhow::Result<()> {
    for _ in 0..20 {
        scrape(port)?;
    }
    let mut ms = Vec::with_capacity(SCRAPES);
    let mut size = 0;
    for _ in 0..SCRAPES {
        let t = Instant::now();
        size = scrape(port)?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    // The listener's floor: the same connection, rules and routing for
    // the smallest answer.
    let mut floor = Vec::with_capacity(SCRAPES);
    for _ in 0..SCRAPES {
        let t = Instant::now();
        get(port, "/health")?;
        floor.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    floor.sort_by(f64::total_cmp);
    println!(
        "floor: /health on the same listener: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&floor, 0.5),
        percentile(&floor, 0.99)
    );
    let text = body(port)?;
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    let libp2p = text.lines().filter(|l| l.starts_with("libp2p_")).count();
    println!(
        "scrape: /metrics over HTTP, {MEMBERS} members online, {BOOKS} books: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target < 5 ms); {size} bytes, {series} series ({libp2p} of them libp2p's)",
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms[ms.len() - 1]
    );
    Ok(())
}

/// Everything a landed turn counts, in microseconds per turn, on a store
/// holding the counters a running node has (`node`'s, by name).
fn turn_counting_us(bin: &Path, node: &Node) -> anyhow::Result<f64> {
    let stats = Stats::default();
    let counters = json(bin, &node.state, &["node", "stats"])?;
    for name in counters["counters"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        stats.bump(name);
    }
    let rounds = 100_000u32;
    let t = Instant::now();
    for i in 0..rounds {
        let verdict = if i % 3 == 0 {
            Verdict::Ungrounded
        } else {
            Verdict::Grounded
        };
        stats.turn_landed(
            "remote",
            Duration::from_millis(u64::from(i % 5000)),
            verdict,
            (2, 1),
        );
        // The speaker's model call, as its node counts it.
        stats.model_completion(
            Duration::from_millis(u64::from(i % 5000)),
            true,
            Some(&grove::model::Usage {
                prompt_tokens: 900,
                generated_tokens: 60,
                phases: Some((Duration::from_millis(700), Duration::from_millis(2000))),
            }),
        );
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds))
}
