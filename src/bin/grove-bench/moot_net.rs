//! `grove-bench moot-net [TURNS]`: a hosted moot across three real nodes on
//! 127.0.0.1 with an instant model (an OpenAI-compatible server in this
//! process that answers at once with a reply quoting passage [s1]), so the
//! figures are the moot's own overhead per turn: the request, the
//! speaker's retrieval, signing and proofs, and the host's checks. Also
//! times `grove moot verify` of a 100-turn export (offline).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use super::net::{grove, grove_bin, join, json, percentile, start_with, wait_until};

/// Answers every chat completion at once: a quote of [s1]'s first words.
pub(crate) fn instant_model() -> anyhow::Result<String> {
    serve_instant_model(TcpListener::bind("127.0.0.1:0")?)
}

/// The instant model on `listener` (bound wherever its caller chose: in a
/// network namespace, say); returns its URL on 127.0.0.1.
pub(crate) fn serve_instant_model(listener: TcpListener) -> anyhow::Result<String> {
    let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_nodelay(true);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let text = reply(&request);
                    let answer = serde_json::json!({
                        "id": "bench", "object": "chat.completion", "created": 0, "model": "instant",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}]
                    })
                    .to_string();
                    // One write: `write!` would send the head and the body
                    // apart, and Nagle's algorithm against the client's
                    // delayed ACK would hold the body some 40 ms.
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    let mut out = &stream;
                    let _ = out.write_all(response.as_bytes());
                }
            });
        }
    });
    Ok(url)
}

fn reply(request: &Value) -> String {
    let first = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|m| grove::moot::prompt::passage_first_line(m["content"].as_str()?, "s1"));
    match first {
        Some(line) => {
            let words: Vec<&str> = line.split_whitespace().collect();
            format!(
                "\"{}\" [s1], as I hold [s1].",
                words[..5.min(words.len())].join(" ")
            )
        }
        None => "A short summary of the moot so far.".into(),
    }
}

pub(crate) fn book(root: &Path, seed: usize) -> anyhow::Result<std::path::PathBuf> {
    let words = [
        "sea", "whale", "ship", "wind", "marriage", "fortune", "house", "letter", "river", "angler",
    ];
    let mut text = format!(
        "Title: Bench Book {seed}\nAuthor: Anon\n\n*** START OF THE PROJECT GUTENBERG EBOOK BENCH {seed} ***\n\n"
    );
    let mut x = seed as u64 * 7919 + 1;
    for _ in 0..400 {
        for _ in 0..60 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            text.push_str(words[(x >> 33) as usize % words.len()]);
            text.push(' ');
        }
        text.push_str(".\n\n");
    }
    text.push_str("*** END OF THE PROJECT GUTENBERG EBOOK BENCH ***\n");
    let path = root.join(format!("book{seed}.txt"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The two trees of most runs: one book on node1, one on node2.
const TWO_TREES: [&str; 2] = ["node1:bench/one", "node2:bench/two"];

pub(crate) fn run_moot(
    bin: &Path,
    host: &Path,
    trees: &[&str],
    turns: u32,
) -> anyhow::Result<(String, Value)> {
    let turns = turns.to_string();
    let mut args = vec!["moot", "start", "--topic", "the sea", "--turns", &turns];
    for tree in trees {
        args.extend(["--tree", tree]);
    }
    let started = json(bin, host, &args)?;
    let id = started["id"].as_str().context("moot id")?.to_string();
    let mut view = Value::Null;
    wait_until("the moot to finish", Duration::from_secs(600), || {
        view = json(bin, host, &["moot", "show", &id]).unwrap_or(Value::Null);
        view["state"] != "running"
    })?;
    if view["state"] != "finished" {
        bail!("the moot did not finish: {}", view["reason"]);
    }
    Ok((id, view))
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let turns: u32 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(40);
    let bin = grove_bin()?;
    let root = tempfile::tempdir()?;
    let url = instant_model()?;
    let env = [
        ("GROVE_MODEL__BACKEND", "openai".to_string()),
        ("GROVE_MODEL__URL", url),
    ];
    println!("grove-bench moot-net: host node3, books on node1, node2 and node3, instant model");
    let n3 = start_with(&bin, root.path(), 3, &env)?;
    json(&bin, &n3.state, &["mesh", "init", "--name", "bench"])?;
    let n1 = start_with(&bin, root.path(), 1, &env)?;
    join(&bin, std::slice::from_ref(&n3), &n1)?;
    let n2 = start_with(&bin, root.path(), 2, &env)?;
    // The nodes run until these bindings drop, after the bench.
    let members = [n3, n1];
    join(&bin, &members, &n2)?;
    let result = bench(&bin, root.path(), turns);
    drop(n2);
    drop(members);
    result
}

fn bench(bin: &Path, root: &Path, turns: u32) -> anyhow::Result<()> {
    let state = |k: usize| root.join(format!("node{k}"));
    for (k, key) in [(1, "bench/one"), (2, "bench/two"), (3, "bench/three")] {
        let path = book(root, k)?;
        let out = grove(
            bin,
            &state(k),
            &["book", "add", path.to_str().context("path")?, "--key", key],
        )
        .output()?;
        if !out.status.success() {
            bail!("book add: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    wait_until("node3 to see every book", Duration::from_secs(60), || {
        json(bin, &state(3), &["roots"]).is_ok_and(|v| {
            let t = v.to_string();
            ["bench/one", "bench/two", "bench/three"]
                .iter()
                .all(|k| t.contains(k))
        })
    })?;
    let three = [TWO_TREES[0], TWO_TREES[1], "self:bench/three"];
    for (trees, what) in [
        (&TWO_TREES[..], "2 trees on node1 and node2"),
        (&three[..], "3 trees, the third on the host"),
    ] {
        let (_, view) = run_moot(bin, &state(3), trees, turns)?;
        let mut ms: Vec<f64> = view["turn_ms"]
            .as_array()
            .context("turn_ms")?
            .iter()
            .filter_map(|v| v.as_f64())
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "per-turn overhead (request, retrieval, signing, proofs, host checks; instant model), {what}, {} turns: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (goal p50 < 20 ms)",
            ms.len(),
            percentile(&ms, 0.5),
            percentile(&ms, 0.99),
            ms.last().copied().unwrap_or(0.0)
        );
    }
    let (id, _) = run_moot(bin, &state(3), &TWO_TREES, 100)?;
    let export = grove(bin, &state(3), &["moot", "export", &id]).output()?;
    if !export.status.success() {
        bail!("export: {}", String::from_utf8_lossy(&export.stderr));
    }
    let file = root.join("export.json");
    std::fs::write(&file, &export.stdout)?;
    let empty = root.join("empty");
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        let out = grove(
            bin,
            &empty,
            &["moot", "verify", file.to_str().context("path")?],
        )
        .output()?;
        let took = t0.elapsed().as_secs_f64() * 1000.0;
        if !out.status.success() {
            bail!("verify failed: {}", String::from_utf8_lossy(&out.stdout));
        }
        best = best.min(took);
    }
    println!(
        "offline verification of a 100-turn export ({} KB): {:.0} ms (whole `grove moot verify` process, best of 3)",
        export.stdout.len() / 1024,
        best
    );
    Ok(())
}
