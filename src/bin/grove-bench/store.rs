//! Store benchmarks: ingest throughput against `sha256sum` and a bare FTS5
//! insert of the same chunks (and what keeping statistics for search across
//! books costs), peak RSS for a 100 MB corpus, book-scoped and all-books
//! search latency on 100 books, and proof serving latency.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use grove::book;
use grove::store::{BookRecord, SearchScope, Shard, Store};

use super::net::grove_bin;

/// The book limits the benchmark ingests under.
struct Limits {
    max_book_bytes: u64,
    max_chunk_bytes: u64,
}

const LIMITS: Limits = Limits {
    max_book_bytes: 64 << 20,
    max_chunk_bytes: 64 << 10,
};

/// `grove-bench store [--corpus-mb N] [--book-kb N] [--search-only [--state DIR]]`
/// (defaults: 100 MB of 1 MiB books; `--search-only` ingests the generated
/// corpus once, into DIR when given and reusing it when it holds a shard, and
/// measures only search and proofs), or `grove-bench store --handle
/// [--before BIN]` (what the store handle changes: `grove book add` into a
/// state directory of 100 books, this build beside BIN's, and a hosted
/// turn's store work).
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = match Invocation::parse(args)? {
        Invocation::Bench(options) => options,
        Invocation::IngestChild { state, files } => {
            // Internal: ingest the given files in this process and print peak RSS.
            let (bytes, secs) = ingest_files(&state, &files)?;
            println!("{bytes} {secs} {}", peak_rss_kib()?);
            return Ok(());
        }
    };
    if options.handle {
        book_add(options.before.as_deref())?;
        return turn_store_time();
    }
    let Options {
        corpus_mb,
        book_kb,
        search_only,
        kept_state,
        ..
    } = options;
    let tmp = tempfile::tempdir()?;
    println!("# grove store benchmark (release build recommended)\n");
    if search_only {
        let state = kept_state.unwrap_or_else(|| tmp.path().join("state"));
        if !Store::new(&state).shard_path("main").is_file() {
            let books = (corpus_mb * 1024).div_ceil(book_kb);
            println!("generating and ingesting a {corpus_mb} MB corpus of {books} books…");
            let files = generate_corpus(&tmp.path().join("gen"), corpus_mb, book_kb << 10)?;
            ingest_files(&state, &files)?;
        }
        return search_and_proofs(&state);
    }

    // The whole book, from the shared corpus (the repository keeps only an
    // excerpt for its tests).
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
    ingest_peak_rss(&tmp.path().join("rss-state"), &files)?;

    // Search and proofs on a shard of 100 books (reuses the generated shard).
    search_and_proofs(&tmp.path().join("gen-state").with_extension("grove0"))?;
    Ok(())
}

/// What `grove-bench store` was asked to measure.
struct Options {
    corpus_mb: usize,
    book_kb: usize,
    search_only: bool,
    kept_state: Option<PathBuf>,
    /// Measure what the store handle changes instead.
    handle: bool,
    /// The grove binary of the build before, for `--handle`.
    before: Option<PathBuf>,
}

/// How the bench was called: to measure, or as the child ingesting files
/// for the peak RSS figure.
enum Invocation {
    Bench(Options),
    IngestChild { state: PathBuf, files: Vec<PathBuf> },
}

impl Invocation {
    fn parse(args: &[String]) -> anyhow::Result<Invocation> {
        let mut o = Options {
            corpus_mb: 100,
            book_kb: 1024,
            search_only: false,
            kept_state: None,
            handle: false,
            before: None,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--corpus-mb" => o.corpus_mb = it.next().context("--corpus-mb N")?.parse()?,
                "--book-kb" => o.book_kb = it.next().context("--book-kb N")?.parse()?,
                "--search-only" => o.search_only = true,
                "--handle" => o.handle = true,
                "--before" => o.before = Some(PathBuf::from(it.next().context("--before BIN")?)),
                "--state" => o.kept_state = Some(PathBuf::from(it.next().context("--state DIR")?)),
                "--ingest-child" => {
                    let state = PathBuf::from(it.next().context("state dir")?);
                    let files: Vec<PathBuf> = it.map(PathBuf::from).collect();
                    return Ok(Invocation::IngestChild { state, files });
                }
                other => bail!("unknown argument {other}"),
            }
        }
        Ok(Invocation::Bench(o))
    }
}

/// `grove book add` of one more 100 KiB book into a state directory holding
/// 100 (the CLI with no daemon, as an operator runs it, process start
/// included): p50 and p95 over 20 adds, for this build's grove and, with
/// `before`, another build's, each on its own copy of the same books.
fn book_add(before: Option<&Path>) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let files = generate_corpus(&tmp.path().join("gen"), 12, 100 << 10)?;
    anyhow::ensure!(files.len() >= 120, "120 generated books");
    let (held, added) = files.split_at(100);
    let mut builds = vec![("this build", grove_bin()?)];
    if let Some(bin) = before {
        builds.push(("before", bin.to_path_buf()));
    }
    println!("# grove book add into a state directory of 100 books (20 adds, no daemon)\n");
    for (label, bin) in builds {
        let state = tmp.path().join(label.replace(' ', "-"));
        ingest_files(&state, held)?;
        let mut times = Vec::new();
        for (i, f) in added.iter().take(20).enumerate() {
            let key = format!("bench/added-{i}");
            let args = ["book", "add", &f.to_string_lossy(), "--key", &key];
            let t = Instant::now();
            let out = super::net::grove(&bin, &state, &args).output()?;
            times.push(t.elapsed());
            anyhow::ensure!(
                out.status.success(),
                "{} book add: {}",
                bin.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        times.sort();
        println!(
            "{label} ({}): p50 {:.1} ms, p95 {:.1} ms",
            bin.display(),
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.95).as_secs_f64() * 1e3,
        );
    }
    Ok(())
}

/// The store work of a hosted turn on the speaking node, on a shard of 100
/// books: as it was (a store per call, so the turn's retrieval opened the
/// shards and the policy's search opened them again and searched again)
/// and as it is (the store worker's handle, shards open, one search whose
/// best score the policy reads). Median over 200 turns each.
fn turn_store_time() -> anyhow::Result<()> {
    use grove::moot::speaker;
    use grove::store::retriever::BookRetriever;
    let tmp = tempfile::tempdir()?;
    let files = generate_corpus(&tmp.path().join("gen"), 12, 120 << 10)?;
    let state = tmp.path().join("state");
    ingest_files(&state, &files)?;
    let books: Vec<String> = Store::new(&state)
        .open("main")?
        .books(false)?
        .into_iter()
        .map(|b| b.key)
        .collect();
    let mut words = Words::new(11);
    let turns: Vec<(String, String)> = (0..200)
        .map(|i| {
            let q = (0..3).map(|_| words.word().to_string()).collect::<Vec<_>>();
            (books[i % books.len()].clone(), q.join(" "))
        })
        .collect();
    let cited = std::collections::BTreeSet::new();
    let mut before = Vec::new();
    for (key, query) in &turns {
        let t = Instant::now();
        let mut store = Store::new(&state);
        let mut r = BookRetriever::open(&mut store, key)?;
        for p in speaker::retrieve(&mut r, key, query, 6, &cited)? {
            r.proof(p.index)?;
        }
        let mut again = Store::new(&state);
        BookRetriever::open(&mut again, key)?.best_score(query, 6)?;
        before.push(t.elapsed());
    }
    let mut handle = Store::new(&state);
    let mut after = Vec::new();
    for (key, query) in &turns {
        let t = Instant::now();
        let mut r = BookRetriever::open(&mut handle, key)?;
        for p in speaker::retrieve(&mut r, key, query, 6, &cited)? {
            r.proof(p.index)?;
        }
        anyhow::ensure!(r.best_of_last_search().is_some(), "the policy's score");
        after.push(t.elapsed());
    }
    before.sort();
    after.sort();
    let median = |v: &[Duration]| percentile(v, 0.5).as_secs_f64() * 1e3;
    println!(
        "\nhosted turn, the speaker's store work (100 books, 200 turns): median {:.2} ms before \
         (a store per call: two opens, two searches), {:.2} ms now (one handle, one search)",
        median(&before),
        median(&after),
    );
    Ok(())
}

/// Peak RSS of ingesting `files` into `state`, in a fresh process.
fn ingest_peak_rss(state: &Path, files: &[PathBuf]) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .arg("store")
        .arg("--ingest-child")
        .arg(state)
        .args(files)
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
    let mut best = Best::default();
    for rep in 0..reps {
        best.measure(rep, files, state)?;
    }
    println!(
        "\ningest {name}: {mb:.1} MB in {} file(s), best of {reps}",
        files.len()
    );
    best.print(mb);
    Ok(())
}

/// The best (least) time of each way of storing the corpus over the reps,
/// and the sizes on disk the last rep left.
struct Best {
    sha: Duration,
    bare: Duration,
    /// The bare insert's share spent reading, decoding and chunking.
    bare_prep: Duration,
    grove: Duration,
    bare_cpu: Duration,
    grove_cpu: Duration,
    /// The bare insert that also stores each chunk's text.
    with_text: Duration,
    /// The bare insert's database and grove's shard.
    sizes: (u64, u64),
}

impl Default for Best {
    fn default() -> Best {
        Best {
            sha: Duration::MAX,
            bare: Duration::MAX,
            bare_prep: Duration::MAX,
            grove: Duration::MAX,
            bare_cpu: Duration::MAX,
            grove_cpu: Duration::MAX,
            with_text: Duration::MAX,
            sizes: (0, 0),
        }
    }
}

impl Best {
    /// Rep `rep`: `sha256sum`, the bare insert and grove's ingest,
    /// each into fresh databases beside `state`.
    fn measure(&mut self, rep: usize, files: &[PathBuf], state: &Path) -> anyhow::Result<()> {
        let t = Instant::now();
        let status = std::process::Command::new("sha256sum")
            .args(files)
            .stdout(std::process::Stdio::null())
            .status()?;
        self.sha = self.sha.min(t.elapsed());
        if !status.success() {
            bail!("sha256sum failed");
        }
        let cpu = cpu_time();
        let bare = bare_insert(&state.with_extension(format!("bare{rep}.db")), files, false)?;
        if bare.time < self.bare {
            (self.bare, self.bare_prep) = (bare.time, bare.prep);
        }
        let size = bare.size;
        self.bare_cpu = self.bare_cpu.min(cpu_time().saturating_sub(cpu));
        self.sizes.0 = size;
        let with_text = bare_insert(&state.with_extension(format!("text{rep}.db")), files, true)?;
        self.with_text = self.with_text.min(with_text.time);
        // grove end to end: read, decode, chunk, hash, store, index, audit, commit.
        let cpu = cpu_time();
        let (_, secs) = ingest_files(&state.with_extension(format!("grove{rep}")), files)?;
        self.grove_cpu = self.grove_cpu.min(cpu_time().saturating_sub(cpu));
        self.grove = self.grove.min(Duration::from_secs_f64(secs));
        self.sizes.1 = shard_size(&state.with_extension(format!("grove{rep}")))?;
        Ok(())
    }

    /// The rates for `mb` megabytes, and the sizes on disk.
    fn print(&self, mb: f64) {
        let (bare, sizes) = (self.bare, self.sizes);
        println!(
            "  sha256sum            {:>8.1} MB/s",
            mb / self.sha.as_secs_f64()
        );
        println!(
            "  bare FTS5 insert     {:>8.1} MB/s   ({:.0} ms of {:.0} reading, decoding and chunking)",
            mb / bare.as_secs_f64(),
            self.bare_prep.as_secs_f64() * 1e3,
            bare.as_secs_f64() * 1e3,
        );
        println!(
            "  bare, and the text   {:>8.1} MB/s   ({:.2}x the bare insert: each chunk's text in a plain table too)",
            mb / self.with_text.as_secs_f64(),
            self.with_text.as_secs_f64() / bare.as_secs_f64()
        );
        println!(
            "  grove book add       {:>8.1} MB/s   ({:.2}x the bare FTS5 insert time, goal <= 1.2x (issue #52); {:.2}x the bare insert with the text)",
            mb / self.grove.as_secs_f64(),
            self.grove.as_secs_f64() / bare.as_secs_f64(),
            self.grove.as_secs_f64() / self.with_text.as_secs_f64()
        );
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "  on disk: the bare FTS5 table {:.1} MiB, the grove shard {:.1} MiB ({:.2}x: chunk text, Merkle levels, statistics)",
            mib(sizes.0),
            mib(sizes.1),
            sizes.1 as f64 / sizes.0 as f64
        );
        println!(
            "  CPU time (both threads): bare {:.0} ms, grove {:.0} ms ({:.2}x)",
            self.bare_cpu.as_secs_f64() * 1e3,
            self.grove_cpu.as_secs_f64() * 1e3,
            self.grove_cpu.as_secs_f64() / self.bare_cpu.as_secs_f64()
        );
    }
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

/// What the bare insert took: all of it, the part before the index
/// (read, decode, chunk), and the database's size.
struct BareInsert {
    time: Duration,
    prep: Duration,
    size: u64,
}

/// The bare insert: every chunk into one contentless FTS5 table (the
/// shard's one index, as grove keeps it), one transaction per book: the
/// full-text work an ingest cannot avoid. It is timed from the file, as
/// grove's ingest is: reading, decoding and chunking are work both do,
/// so the ratio is what grove adds (hashing, Merkle levels, chunk text,
/// statistics, the audit row), not the text pipeline they share.
/// With `with_text`, each chunk's text also goes into a plain table, as
/// grove keeps it: the floor for an ingest that stores what it indexes.
fn bare_insert(path: &Path, files: &[PathBuf], with_text: bool) -> anyhow::Result<BareInsert> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "wal")?;
    conn.execute_batch(
        "CREATE VIRTUAL TABLE everything USING fts5 (text, content = '', contentless_delete = 1,
             tokenize = 'porter unicode61 remove_diacritics 2');",
    )?;
    if with_text {
        conn.execute_batch("CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL);")?;
    }
    let t = Instant::now();
    let mut prep = Duration::ZERO;
    let mut rowid = 0i64;
    for f in files {
        let p = Instant::now();
        let text = book::BookText::decode(&std::fs::read(f)?, LIMITS.max_book_bytes)?;
        let chunks = text.chunks(LIMITS.max_chunk_bytes)?;
        drop(text);
        prep += p.elapsed();
        let tx =
            rusqlite::Transaction::new_unchecked(&conn, rusqlite::TransactionBehavior::Deferred)?;
        {
            let mut stmt = tx.prepare("INSERT INTO everything (rowid, text) VALUES (?1, ?2)")?;
            let mut text = with_text
                .then(|| tx.prepare("INSERT INTO texts (id, text) VALUES (?1, ?2)"))
                .transpose()?;
            for c in &chunks {
                rowid += 1;
                stmt.execute(rusqlite::params![rowid, c.text])?;
                if let Some(text) = &mut text {
                    text.execute(rusqlite::params![rowid, c.text])?;
                }
            }
        }
        tx.commit()?;
    }
    let time = t.elapsed();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    drop(conn);
    Ok(BareInsert {
        time,
        prep,
        size: std::fs::metadata(path)?.len(),
    })
}

/// A state directory's main shard file, checkpointed.
fn shard_size(state: &Path) -> anyhow::Result<u64> {
    let path = Store::new(state).shard_path("main");
    let conn = rusqlite::Connection::open(&path)?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    drop(conn);
    Ok(std::fs::metadata(&path)?.len())
}

fn ingest_files(state: &Path, files: &[PathBuf]) -> anyhow::Result<(u64, f64)> {
    let mut store = Store::new(state);
    let shard = store.open_or_create("main")?;
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
    let mut store = Store::new(state);
    let shard = store.open("main")?;
    let books = shard.books(false)?;
    println!("\nsearch on a shard of {} books, top-6:", books.len());
    // The same queries for every scope: two to four Zipf-distributed words.
    let mut words = Words::new(7);
    let queries: Vec<String> = (0..2000)
        .map(|i| {
            let n = 2 + i % 3;
            (0..n)
                .map(|_| words.word().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let (mut times, mut hits) = (Vec::new(), 0usize);
    for (i, query) in queries.iter().enumerate() {
        let book = &books[i % books.len()];
        let t = Instant::now();
        hits += shard.search(query, SearchScope::Book(book), 6)?.len();
        times.push(t.elapsed());
    }
    report(
        "book-scoped",
        "goal p50 < 1 ms, p99 < 5 ms",
        &mut times,
        hits,
    );
    // All books ranked as one collection: far fewer queries, each reads
    // every book's index.
    all_books_search(state, shard, &queries[..400])?;
    proof_serving(shard, &books)
}

/// Prints a search's latency over its queries and its hits per query.
fn report(what: &str, goal: &str, times: &mut [Duration], hits: usize) {
    times.sort();
    println!(
        "  {what}: {} queries, {:.1} hits/query: p50 {:?}, p99 {:?} ({goal})",
        times.len(),
        hits as f64 / times.len() as f64,
        percentile(times, 0.5),
        percentile(times, 0.99)
    );
}

/// Search across all books: on the open shard, its two rounds apart, and
/// with the store opened per query as one CLI call does.
fn all_books_search(state: &Path, shard: &Shard, all: &[String]) -> anyhow::Result<()> {
    let (mut times, mut hits) = (Vec::new(), 0usize);
    for query in all {
        let t = Instant::now();
        hits += shard.search(query, SearchScope::All, 6)?.len();
        times.push(t.elapsed());
    }
    report("all books", "goal p50 < 5 ms", &mut times, hits);
    let (mut times, mut stats_times) = (Vec::new(), Vec::new());
    for query in all {
        let t = Instant::now();
        let stats = shard.query_stats(query, 6)?;
        stats_times.push(t.elapsed());
        shard.search_ranked(query, &stats, 6)?;
        times.push(t.elapsed() - stats_times[stats_times.len() - 1]);
    }
    report("  of which round 1 (stats)", "", &mut stats_times, 0);
    report("  of which round 2 (scoring)", "", &mut times, 0);
    // As a running node answers it: the store worker's handle, every
    // shard open since its first search.
    let mut handle = Store::new(state);
    let (mut times, mut hits) = (Vec::new(), 0usize);
    for query in &all[..100] {
        let t = Instant::now();
        hits += handle.search(query, None, 6)?.len();
        times.push(t.elapsed());
    }
    report(
        "all books, through one store handle",
        "what a running node pays",
        &mut times,
        hits,
    );
    // As `grove book search` without a daemon runs it: a new handle, so
    // the shards opened, per query.
    let (mut times, mut hits) = (Vec::new(), 0usize);
    for query in &all[..100] {
        let t = Instant::now();
        hits += Store::new(state).search(query, None, 6)?.len();
        times.push(t.elapsed());
    }
    report(
        "all books, opening the store per query",
        "what one CLI call pays",
        &mut times,
        hits,
    );
    Ok(())
}

/// Proofs served from the stored Merkle levels, every 500th verified.
fn proof_serving(shard: &Shard, books: &[BookRecord]) -> anyhow::Result<()> {
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
