//! Store benchmarks: ingest throughput against `sha256sum` and a bare FTS5
//! insert of the same chunks, peak RSS for a 100 MB corpus, book-scoped
//! search latency on 100 books, and proof serving latency.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use grove::book::{self, PrepareLimits};
use grove::store::{SearchScope, Store};

const LIMITS: PrepareLimits = PrepareLimits {
    max_book_bytes: 64 << 20,
    max_chunk_bytes: 64 << 10,
};

/// `grove-bench store [--corpus-mb N] [--book-kb N]` (defaults: 100 MB of 1 MiB books)
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut corpus_mb = 100usize;
    let mut book_kb = 1024usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--corpus-mb" => corpus_mb = it.next().context("--corpus-mb N")?.parse()?,
            "--book-kb" => book_kb = it.next().context("--book-kb N")?.parse()?,
            "--ingest-child" => {
                // Internal: ingest the given files in this process and print peak RSS.
                let state = PathBuf::from(it.next().context("state dir")?);
                let files: Vec<PathBuf> = it.map(PathBuf::from).collect();
                let (bytes, secs) = ingest_files(&state, &files)?;
                println!("{bytes} {secs} {}", peak_rss_kib()?);
                return Ok(());
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let tmp = tempfile::tempdir()?;
    println!("# grove store benchmark (release build recommended)\n");

    let moby = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/moby-dick-2701.txt");
    if moby.is_file() {
        throughput("moby-dick-2701.txt", &[moby], &tmp.path().join("moby"), 5)?;
    } else {
        println!("moby-dick-2701.txt: skipped (../shared/corpus not present)");
    }
    let books = (corpus_mb * 1024).div_ceil(book_kb);
    println!("\ngenerating a {corpus_mb} MB corpus of {books} books…");
    let files = generate_corpus(&tmp.path().join("gen"), corpus_mb, book_kb << 10)?;
    throughput(
        &format!("generated {corpus_mb} MB"),
        &files,
        &tmp.path().join("gen-state"),
        3,
    )?;

    // Peak RSS of ingesting the whole corpus, in a fresh process.
    let exe = std::env::current_exe()?;
    let child_state = tmp.path().join("rss-state");
    let out = std::process::Command::new(exe)
        .arg("store")
        .arg("--ingest-child")
        .arg(&child_state)
        .args(&files)
        .output()?;
    if !out.status.success() {
        bail!(
            "ingest child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = String::from_utf8(out.stdout)?;
    let parts: Vec<&str> = line.split_whitespace().collect();
    if let [bytes, secs, rss] = parts[..] {
        let mb = bytes.parse::<f64>()? / 1e6;
        println!(
            "\npeak RSS ingesting {mb:.0} MB in a fresh process: {:.1} MB ({:.1} MB/s there)",
            rss.parse::<f64>()? / 1024.0,
            mb / secs.parse::<f64>()?
        );
    }

    // Search and proofs on a shard of 100 books (reuses the generated shard).
    search_and_proofs(&tmp.path().join("gen-state").with_extension("grove0"))?;
    Ok(())
}

/// Ingest throughput of `files`, with `sha256sum` and a bare FTS5 insert of
/// the same chunks measured in the same run. Each figure is the best of
/// `reps` runs into fresh databases, alternating, so a busy machine skews
/// them alike.
fn throughput(name: &str, files: &[PathBuf], state: &Path, reps: usize) -> anyhow::Result<()> {
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let mb = total as f64 / 1e6;
    // Page cache warm for everyone: read once first.
    for f in files {
        std::fs::read(f)?;
    }
    // The bare insert gets its chunks ready beforehand, untimed.
    let mut chunk_sets = Vec::new();
    for f in files {
        chunk_sets.push(book::prepare(&std::fs::read(f)?, LIMITS)?.chunks);
    }
    let (mut sha, mut bare, mut grove) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut bare_cpu, mut grove_cpu) = (Duration::MAX, Duration::MAX);
    for rep in 0..reps {
        let t = Instant::now();
        let status = std::process::Command::new("sha256sum")
            .args(files)
            .stdout(std::process::Stdio::null())
            .status()?;
        sha = sha.min(t.elapsed());
        if !status.success() {
            bail!("sha256sum failed");
        }
        let cpu = cpu_time();
        bare = bare.min(bare_insert(
            &state.with_extension(format!("bare{rep}.db")),
            &chunk_sets,
        )?);
        bare_cpu = bare_cpu.min(cpu_time().saturating_sub(cpu));
        // grove end to end: read, decode, chunk, hash, store, index, audit, commit.
        let cpu = cpu_time();
        let (_, secs) = ingest_files(&state.with_extension(format!("grove{rep}")), files)?;
        grove_cpu = grove_cpu.min(cpu_time().saturating_sub(cpu));
        grove = grove.min(Duration::from_secs_f64(secs));
    }
    drop(chunk_sets);
    println!(
        "\ningest {name}: {mb:.1} MB in {} file(s), best of {reps}",
        files.len()
    );
    println!(
        "  sha256sum            {:>8.1} MB/s",
        mb / sha.as_secs_f64()
    );
    println!(
        "  bare FTS5 insert     {:>8.1} MB/s",
        mb / bare.as_secs_f64()
    );
    println!(
        "  grove book add       {:>8.1} MB/s   ({:.2}x the bare FTS5 insert time; goal <= 1.5x)",
        mb / grove.as_secs_f64(),
        grove.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "  CPU time (both threads): bare {:.0} ms, grove {:.0} ms ({:.2}x)",
        bare_cpu.as_secs_f64() * 1e3,
        grove_cpu.as_secs_f64() * 1e3,
        grove_cpu.as_secs_f64() / bare_cpu.as_secs_f64()
    );
    Ok(())
}

/// User + system CPU time of this process so far (all threads).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The same index layout grove uses (one FTS5 table per book), with nothing
/// else: no chunk rows, hashes, Merkle blocks or audit.
fn bare_insert(path: &Path, chunk_sets: &[Vec<grove::text::Chunk>]) -> anyhow::Result<Duration> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "wal")?;
    let t = Instant::now();
    let mut rowid = 0i64;
    for (b, chunks) in chunk_sets.iter().enumerate() {
        let tx =
            rusqlite::Transaction::new_unchecked(&conn, rusqlite::TransactionBehavior::Deferred)?;
        tx.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t{b} USING fts5 (text, content = '', tokenize = 'porter unicode61 remove_diacritics 2')"
        ))?;
        {
            let mut stmt =
                tx.prepare(&format!("INSERT INTO t{b} (rowid, text) VALUES (?1, ?2)"))?;
            for c in chunks {
                rowid += 1;
                stmt.execute(rusqlite::params![rowid, c.text])?;
            }
        }
        tx.commit()?;
    }
    Ok(t.elapsed())
}

fn ingest_files(state: &Path, files: &[PathBuf]) -> anyhow::Result<(u64, f64)> {
    let store = Store::new(state);
    let mut shard = store.open_or_create("main")?;
    let t = Instant::now();
    let mut bytes = 0u64;
    for (i, f) in files.iter().enumerate() {
        let input = grove::source::read_path(f, LIMITS.max_book_bytes)?;
        bytes += input.len() as u64;
        let text = book::BookText::decode(&input, LIMITS.max_book_bytes)?;
        drop(input);
        shard.ingest(
            &format!("bench/book-{i}"),
            &text,
            LIMITS.max_chunk_bytes,
            &f.display().to_string(),
            0,
            &mut |_| {},
        )?;
    }
    Ok((bytes, t.elapsed().as_secs_f64()))
}

/// Pseudo-words with a Zipf-like frequency, so the index sees a realistic
/// vocabulary: a few very common words and a long tail.
struct Words {
    vocab: Vec<String>,
    state: u64,
}

impl Words {
    fn new(seed: u64) -> Words {
        const SYL: &[&str] = &[
            "ka", "to", "ri", "mel", "an", "dor", "is", "whe", "la", "sun", "ber", "o", "pra",
            "ve", "tin", "gal", "mo", "rek", "shi", "un", "ta", "cor", "fle", "nd", "ast",
        ];
        let mut w = Words {
            vocab: Vec::new(),
            state: seed,
        };
        for i in 0..20_000usize {
            let n = 1 + (i % 4);
            let mut s = String::new();
            let mut x = i;
            for _ in 0..n {
                s.push_str(SYL[x % SYL.len()]);
                x = x / SYL.len() + 7;
            }
            w.vocab.push(s);
        }
        w
    }

    fn next(&mut self) -> u64 {
        self.state = self
            .state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.state >> 11
    }

    fn word(&mut self) -> &str {
        // Zipf-ish: rank = vocab^u with u uniform, so low ranks dominate.
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        let rank = ((self.vocab.len() as f64).powf(u) as usize).saturating_sub(1);
        &self.vocab[rank.min(self.vocab.len() - 1)]
    }
}

fn generate_corpus(dir: &Path, total_mb: usize, book_bytes: usize) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut words = Words::new(42);
    let books = (total_mb << 20).div_ceil(book_bytes);
    let mut files = Vec::new();
    for b in 0..books {
        let mut text = format!(
            "Title: Generated Book {b}\nAuthor: Bench Writer\n[EBook #{b}]\n\n*** START OF THE PROJECT GUTENBERG EBOOK GENERATED ***\n\n"
        );
        while text.len() < book_bytes {
            let n = 30 + words.next() as usize % 150;
            for i in 0..n {
                text.push_str(words.word());
                text.push(if i % 11 == 10 { '\n' } else { ' ' });
            }
            text.push_str(".\n\n");
        }
        let path = dir.join(format!("book-{b}.txt"));
        std::fs::write(&path, text)?;
        files.push(path);
    }
    Ok(files)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn search_and_proofs(state: &Path) -> anyhow::Result<()> {
    let store = Store::new(state);
    let shard = store.open("main")?;
    let books = shard.books(false)?;
    println!(
        "\nsearch on a shard of {} books, book-scoped top-6:",
        books.len()
    );
    let mut words = Words::new(7);
    let mut times = Vec::new();
    let mut hits = 0usize;
    for i in 0..2000 {
        let book = &books[i % books.len()];
        let n = 2 + i % 3;
        let query: Vec<String> = (0..n).map(|_| words.word().to_string()).collect();
        let t = Instant::now();
        hits += shard
            .search(&query.join(" "), SearchScope::Book(book), 6)?
            .len();
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "  {} queries, {:.1} hits/query: p50 {:?}, p99 {:?} (goal p50 < 1 ms, p99 < 5 ms)",
        times.len(),
        hits as f64 / times.len() as f64,
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    let mut times = Vec::new();
    for i in 0..5000u64 {
        let book = &books[i as usize % books.len()];
        let index = (i * 7919) % book.count;
        let t = Instant::now();
        let p = shard.proof(book, index)?;
        times.push(t.elapsed());
        if i % 500 == 0 {
            grove::merkle::verify(&p.leaf, index, book.count, &p.proof, &book.root)?;
        }
    }
    times.sort();
    println!(
        "proof serving from storage: {} proofs, p50 {:?}, p99 {:?} (goal p50 < 50 µs)",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    Ok(())
}

fn peak_rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("VmHWM not found in /proc/self/status")
}
