//! `grove-bench moot-turns --model-state DIR [--before BIN] [--turns N]
//! [--topic T] [--book FILE --book FILE]`: the wall-clock time per turn of
//! a local guided moot on the embedded model (`grove moot run`), for this
//! build's `grove` and, with `--before`, for another build's (the grove of
//! main before a change), on the same books and settings: the median turn
//! and the ratio after/before. The books default to the README's main job
//! (Moby Dick and Pride and Prejudice from `../shared/corpus`); the model
//! comes from `DIR/models` (e.g. `/work/model-state`). A turn's time is the
//! gap between two turns printed (turn 1: from the moot's first line, after
//! the model is loaded), so it holds every draft, retry and summary. On a
//! shared machine wall time follows the other jobs, so the CPU time the
//! moot's process spent per turn (user + system, read from
//! `/proc/PID/stat` as each turn is printed) is given too; the moot runs
//! its model on one thread (`GROVE_MODEL__THREADS=1`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, bail};

use super::net::{grove, grove_bin};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut model_state: Option<PathBuf> = None;
    let mut before: Option<PathBuf> = None;
    let mut turns = 4u32;
    let mut topic = String::from("what people live for");
    let mut books: Vec<PathBuf> = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = || iter.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--model-state" => model_state = Some(PathBuf::from(value()?)),
            "--before" => before = Some(PathBuf::from(value()?)),
            "--turns" => turns = value()?.parse().context("--turns")?,
            "--topic" => topic = value()?.clone(),
            "--book" => books.push(PathBuf::from(value()?)),
            other => bail!("unknown argument {other}"),
        }
    }
    let model_state = model_state.context("--model-state DIR (holding models/) is needed")?;
    if books.is_empty() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
        books = vec![
            corpus.join("moby-dick-2701.txt"),
            corpus.join("pride-and-prejudice-1342.txt"),
        ];
    }
    if books.len() != 2 || books.iter().any(|b| !b.is_file()) {
        bail!("two books are needed (--book FILE twice, or ../shared/corpus): {books:?}");
    }
    println!(
        "moot-turns: {} turns on {:?} between {} and {}, max-tokens 160",
        turns,
        topic,
        books[0].display(),
        books[1].display()
    );
    let after = grove_bin()?;
    let mut medians: Vec<(f64, f64)> = Vec::new();
    for (name, bin) in before
        .iter()
        .map(|b| ("before", b.clone()))
        .chain([("after", after)])
    {
        let (wall, cpu) = turn_times(&bin, &model_state, &books, &topic, turns)
            .with_context(|| format!("the moot of {}", bin.display()))?;
        let list = |v: &[f64]| {
            v.iter()
                .map(|t| format!("{t:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (wall_median, cpu_median) = (median(&wall), median(&cpu));
        println!(
            "{name}: {}\n  wall s per turn: {}; median {wall_median:.1}\n  CPU s per turn: {}; median {cpu_median:.1}",
            bin.display(),
            list(&wall),
            list(&cpu)
        );
        medians.push((wall_median, cpu_median));
    }
    if let [(bw, bc), (aw, ac)] = medians[..] {
        println!(
            "after/before, median per turn: wall {:.2}x, CPU {:.2}x",
            aw / bw,
            ac / bc
        );
    }
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// User + system CPU seconds of process `pid` so far (Linux counts them in
/// 1/100 s ticks in `/proc/PID/stat`, fields 14 and 15).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after it are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Runs one moot with `bin` in a fresh state (its `models` linked to
/// `model_state`'s) and returns the wall and CPU seconds each turn took.
fn turn_times(
    bin: &Path,
    model_state: &Path,
    books: &[PathBuf],
    topic: &str,
    turns: u32,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state)?;
    std::os::unix::fs::symlink(
        std::fs::canonicalize(grove::state_dir::StateDir::new(model_state).models())?,
        grove::state_dir::StateDir::new(&state).models(),
    )?;
    let keys = ["bench/book-a", "bench/book-b"];
    for (book, key) in books.iter().zip(keys) {
        let status = grove(bin, &state, &["book", "add"])
            .arg(book)
            .args(["--key", key])
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            bail!("grove book add {} failed", book.display());
        }
    }
    let turns_arg = turns.to_string();
    let mut child = grove(
        bin,
        &state,
        &[
            "moot",
            "run",
            "--a",
            keys[0],
            "--b",
            keys[1],
            "--topic",
            topic,
            "--turns",
            &turns_arg,
            "--max-tokens",
            "160",
        ],
    )
    .env("GROVE_MODEL__THREADS", "1")
    .stdout(Stdio::piped())
    .spawn()?;
    let pid = child.id();
    let stdout = child.stdout.take().context("the moot's output")?;
    let mut last: Option<(Instant, f64)> = None;
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let now = (Instant::now(), cpu_seconds(pid).unwrap_or(f64::NAN));
        if line.starts_with("moot:") {
            last = Some(now);
        } else if line.starts_with("── turn ")
            && let Some((at, spent)) = last
        {
            wall.push((now.0 - at).as_secs_f64());
            cpu.push(now.1 - spent);
            last = Some(now);
        }
    }
    if !child.wait()?.success() || wall.is_empty() {
        bail!("grove moot run failed");
    }
    Ok((wall, cpu))
}
