//! `grove-bench ask --model FILE [--corpus DIR] [--books 100] [--questions 8]
//! [-k 4] [--threads N]`: local asks end to end on the embedded model over
//! 100 books (the corpus's Gutenberg books cut into parts, each ingested as
//! its own book), p50 and p95; the verifier's cost per answer; a cache
//! hit's p50 and p95 (lookup, the cited books' current roots, the answer
//! key); then mesh asks over 3 real daemons (`grove node run`, the binary
//! beside this one): the same books split between two of them, the third,
//! holding none, asking `grove ask --mesh` through its daemon, p50 and p95
//! of the whole command.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use grove::ask::cache::Found;
use grove::ask::cache::{CacheMode, answer_key, cited_roots, lookup_key};
use grove::ask::{AskSettings, Policy, Scope, verify};
use grove::store::Store;
use grove::store::ask_cache::AskCache;

const QUESTIONS: &[&str] = &[
    "Why does Ishmael go to sea?",
    "Who is Mr. Bennet's wife and what does she want?",
    "How should a man fish for trout?",
    "What is a cynic?",
    "What did Elizabeth think of Mr. Darcy?",
    "Where does Ishmael sleep in New Bedford?",
    "What bait takes a carp?",
    "What is marriage?",
    "Who is Queequeg?",
    "When is the best time to fish?",
];

struct Options {
    model: PathBuf,
    corpus: PathBuf,
    books: usize,
    questions: usize,
    k: u32,
    threads: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut o = Options {
        model: PathBuf::new(),
        corpus: PathBuf::from("../shared/corpus"),
        books: 100,
        questions: 8,
        k: 4,
        threads: 2,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => o.model = PathBuf::from(value()?),
            "--corpus" => o.corpus = PathBuf::from(value()?),
            "--books" => o.books = value()?.parse()?,
            "--questions" => o.questions = value()?.parse()?,
            "-k" => o.k = value()?.parse()?,
            "--threads" => o.threads = value()?.parse()?,
            _ => bail!("unknown argument {flag}"),
        }
    }
    if o.model.as_os_str().is_empty() {
        bail!(
            "usage: grove-bench ask --model FILE [--corpus DIR] [--books N] [--questions N] [-k N] [--threads N]"
        );
    }
    Ok(o)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let o = parse(args)?;
    let tmp = tempfile::tempdir()?;
    let state = tmp.path().join("state");
    let ingested = ingest_parts(&state, &o.corpus, o.books)?;
    println!(
        "# grove ask benchmark: {ingested} books from {}\n",
        o.corpus.display()
    );
    let mut store = Store::new(&state);
    let mut model = grove::model::embedded::EmbeddedModel::load(
        &o.model,
        grove::model::embedded::EmbeddedOptions {
            threads: o.threads,
            ..Default::default()
        },
    )?;
    let settings = AskSettings {
        k: o.k,
        ..AskSettings::default()
    };
    let cache = AskCache::open(&state)?;
    let mut asks = Vec::new();
    let mut records = Vec::new();
    for q in QUESTIONS.iter().cycle().take(o.questions) {
        let t = Instant::now();
        let evidence = store.evidence(q, &[], o.k as usize)?;
        let retrieval = grove::ask::Retrieval {
            evidence,
            ..Default::default()
        };
        let record = grove::ask::answer(&mut model, q, retrieval, &settings)?;
        asks.push(t.elapsed());
        let lookup = lookup_key(q, CacheMode::Strict, "bench", &settings, &[], false);
        cache.put(
            &lookup,
            &answer_key(&lookup, &cited_roots(&record)),
            &record,
            0,
        )?;
        println!(
            "  {:>5.1} s  {} ({} of {} lines held up) {q}",
            t.elapsed().as_secs_f64(),
            record.verification.label.as_str(),
            record.verification.supported,
            record.verification.lines
        );
        records.push(record);
    }
    asks.sort();
    println!(
        "\nlocal ask, embedded model, k={}, {} threads: p50 {:.2} s, p95 {:.2} s ({} asks)",
        o.k,
        o.threads,
        percentile(&asks, 0.5).as_secs_f64(),
        percentile(&asks, 0.95).as_secs_f64(),
        asks.len()
    );

    verifier_cost(&records);
    cache_hits(&cache, &mut store, &settings, o.questions)?;
    mesh_asks(&o)
}

/// Mesh asks over 3 daemons: node1 and node2 hold half the books each,
/// node3 none; node3 asks every member's books.
fn mesh_asks(o: &Options) -> anyhow::Result<()> {
    use crate::net::{grove_bin, join, json, start_with, wait_until};
    let bin = grove_bin()?;
    let root = tempfile::tempdir()?;
    let half = o.books / 2;
    let held = ingest_parts_from(&root.path().join("node1"), &o.corpus, o.books, 0..half)?
        + ingest_parts_from(
            &root.path().join("node2"),
            &o.corpus,
            o.books,
            half..o.books,
        )?;
    let model_env = [
        ("GROVE_MODEL__PATH", o.model.display().to_string()),
        ("GROVE_MODEL__THREADS", o.threads.to_string()),
    ];
    let nodes = vec![
        start_with(&bin, root.path(), 1, &[])?,
        start_with(&bin, root.path(), 2, &[])?,
    ];
    let asker = start_with(&bin, root.path(), 3, &model_env)?;
    json(&bin, &nodes[0].state, &["mesh", "init", "--name", "bench"])?;
    join(&bin, &nodes[..1], &nodes[1])?;
    join(&bin, &nodes, &asker)?;
    wait_until(
        "node3 to hold every member's roots",
        Duration::from_secs(120),
        || {
            json(&bin, &asker.state, &["roots"]).is_ok_and(|r| {
                r["roots"].as_array().map_or(0, |m| {
                    m.iter()
                        .flat_map(|m| m["shards"].as_array().into_iter().flatten())
                        .map(|s| s["books"].as_array().map_or(0, Vec::len))
                        .sum::<usize>()
                }) >= held
            })
        },
    )?;
    let mut asks = Vec::new();
    for q in QUESTIONS.iter().cycle().take(o.questions) {
        let t = Instant::now();
        let k = o.k.to_string();
        let record = json(
            &bin,
            &asker.state,
            &["ask", "--mesh", "--cache", "off", "-k", &k, q],
        )?;
        asks.push(t.elapsed());
        let holders: std::collections::BTreeSet<&str> = record["evidence"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["holder"].as_str())
            .collect();
        println!(
            "  {:>5.1} s  {} (passages from {} member(s)) {q}",
            t.elapsed().as_secs_f64(),
            record["verification"]["label"].as_str().unwrap_or("?"),
            holders.len()
        );
    }
    asks.sort();
    println!(
        "\nmesh ask over 3 nodes (node3 holds no books; {held} books on node1 and node2), embedded model, k={}, {} threads: p50 {:.2} s, p95 {:.2} s ({} asks, the whole `grove ask --mesh` command)",
        o.k,
        o.threads,
        percentile(&asks, 0.5).as_secs_f64(),
        percentile(&asks, 0.95).as_secs_f64(),
        asks.len()
    );
    Ok(())
}

/// The verifier's time per answer, over the answers the asks gave.
fn verifier_cost(records: &[grove::ask::AskRecord]) {
    let mut verifies = Vec::new();
    for r in records {
        let scope = Scope { books: None };
        let t = Instant::now();
        const REPS: u32 = 50;
        for _ in 0..REPS {
            std::hint::black_box(verify(
                &r.question,
                &r.answer,
                &r.evidence,
                &scope,
                &Policy::CURRENT,
            ));
        }
        verifies.push(t.elapsed() / REPS);
    }
    verifies.sort();
    println!(
        "verifier per answer: p50 {:.3} ms, max {:.3} ms (goal under 5 ms)",
        ms(percentile(&verifies, 0.5)),
        ms(*verifies.last().unwrap_or(&Duration::ZERO))
    );
}

/// A cache hit's time: the lookup, the cited books' current roots, the
/// answer key.
fn cache_hits(
    cache: &AskCache,
    store: &mut Store,
    settings: &AskSettings,
    questions: usize,
) -> anyhow::Result<()> {
    let mut hits = Vec::new();
    for _ in 0..20 {
        for q in QUESTIONS.iter().take(questions.min(QUESTIONS.len())) {
            let t = Instant::now();
            let lookup = lookup_key(q, CacheMode::Strict, "bench", settings, &[], false);
            let found = cache.find(&lookup, store)?;
            anyhow::ensure!(matches!(found, Found::Fresh(_)), "a fresh hit");
            hits.push(t.elapsed());
        }
    }
    hits.sort();
    println!(
        "cache hit (lookup, current roots, answer key): p50 {:.3} ms, p95 {:.3} ms (goal p50 under 2 ms; {} hits)",
        ms(percentile(&hits, 0.5)),
        ms(percentile(&hits, 0.95)),
        hits.len()
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Cuts every Gutenberg book of `corpus` into parts (whole paragraphs), so
/// `books` books in all, each made a small Gutenberg text and ingested
/// under its own key.
fn ingest_parts(state: &Path, corpus: &Path, books: usize) -> anyhow::Result<usize> {
    ingest_parts_from(state, corpus, books, 0..books)
}

/// The parts numbered in `held` of the `books` parts [`ingest_parts`]
/// makes (so two nodes hold different parts of the same 100).
fn ingest_parts_from(
    state: &Path,
    corpus: &Path,
    books: usize,
    held: std::ops::Range<usize>,
) -> anyhow::Result<usize> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus)
        .with_context(|| format!("corpus {}", corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no .txt books in {}", corpus.display());
    }
    let per_book = books.div_ceil(files.len());
    let mut store = Store::new(state);
    let shard = store.open_or_create("main")?;
    let mut n = 0;
    for file in &files {
        let bytes = std::fs::read(file)?;
        let text = grove::text::decode(&bytes);
        let (meta, body) = grove::text::split(&text);
        let paragraphs: Vec<String> = grove::text::paragraphs(&text[body]).collect();
        let title = if meta.title.is_empty() {
            "Untitled".to_string()
        } else {
            meta.title.clone()
        };
        let size = (paragraphs.len() / per_book).max(1);
        for (part, chunk) in paragraphs.chunks(size).take(per_book).enumerate() {
            if n == books {
                break;
            }
            if !held.contains(&n) {
                n += 1;
                continue;
            }
            let body = chunk.join("\n\n");
            let doc = format!(
                "Title: {title}, part {}\nAuthor: {}\n\n*** START OF THE PROJECT GUTENBERG EBOOK PART ***\n\n{body}\n\n*** END OF THE PROJECT GUTENBERG EBOOK PART ***\n",
                part + 1,
                meta.author
            );
            let decoded = grove::book::BookText::decode(doc.as_bytes(), 64 << 20)?;
            shard.ingest(
                &format!("bench/part-{n}"),
                &decoded,
                64 << 10,
                &format!("{}, part {}", file.display(), part + 1),
                0,
                &mut |_| {},
            )?;
            n += 1;
        }
    }
    Ok(held.end.min(n) - held.start.min(n))
}
