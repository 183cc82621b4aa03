//! `grove book …`: add, list, show, remove, proof, verify, search.

use std::io::{self, IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, bail};
use clap::Subcommand;
use grove::api::books::{AddRequest, ApiError, BookApi, ErrorKind, SearchRequest};
use grove::api::dto;
use grove::api::routes;
use grove::book;
use serde::Serialize;

use super::{Ctx, Show, or_dash};

#[derive(Subcommand)]
pub enum BookCmd {
    /// Ingest one book from a file or an http(s) URL.
    Add {
        /// A path, or an http:// or https:// URL.
        source: String,
        /// GENRE/SLUG; default books/<slug of the title>.
        #[arg(long)]
        key: Option<String>,
        /// Shard to store it in (default `default_shard`, else `main`).
        #[arg(long)]
        shard: Option<String>,
        /// Store it even when it does not look like text (too many control
        /// or replacement characters, too few letters and digits).
        #[arg(long)]
        force: bool,
    },
    /// List current books (with --all, every version, removed ones too).
    List {
        /// Every version of every key, superseded and removed ones too.
        #[arg(long)]
        all: bool,
    },
    /// Show one book.
    Show {
        /// The book's key, GENRE/SLUG (see `book list`).
        key: String,
        /// Which version of the key (default: the current one; see `book list --all`).
        #[arg(long = "book-version", value_name = "N")]
        version: Option<u32>,
    },
    /// Remove a book from search and listings, keeping its history (audited).
    Remove {
        /// The book's key, GENRE/SLUG (see `book list`).
        key: String,
    },
    /// Print chunk INDEX with its Merkle inclusion proof.
    Proof {
        /// The book's key, GENRE/SLUG (see `book list`).
        key: String,
        /// The chunk's position in the book, from 0 (`book show` gives the count).
        index: u64,
        /// Which version of the key (default: the current one; see `book list --all`).
        #[arg(long = "book-version", value_name = "N")]
        version: Option<u32>,
    },
    /// Recompute leaves and root from the stored text and check the stored
    /// root, proof data and search index agree.
    Verify {
        /// The book's key, GENRE/SLUG (see `book list`).
        key: String,
        /// Which version of the key (default: the current one; see `book list --all`).
        #[arg(long = "book-version", value_name = "N")]
        version: Option<u32>,
    },
    /// BM25 search in one book (--key) or every book.
    Search {
        /// Free text; FTS5 syntax in it is treated as plain words.
        #[arg(allow_hyphen_values = true)]
        query: String,
        /// Search only this book (its key, GENRE/SLUG).
        #[arg(long)]
        key: Option<String>,
        /// How many hits to print.
        #[arg(short = 'k', default_value_t = 6)]
        k: usize,
        /// With --key: search this version of the book (default: the current one).
        #[arg(long = "book-version", value_name = "N", requires = "key")]
        version: Option<u32>,
        /// Search every member's books too (through the daemon); each hit names its peer.
        #[arg(long, conflicts_with = "version")]
        mesh: bool,
    },
}

pub fn run(cmd: BookCmd, ctx: &Ctx) -> anyhow::Result<()> {
    let mut books = ctx.books();
    let api: &mut dyn BookApi = books.as_mut();
    match cmd {
        BookCmd::Add {
            source,
            key,
            shard,
            force,
        } => ctx.show(&add(ctx, api, &source, key, shard, force)?),
        BookCmd::List { all } => ctx.show(&Listing {
            list: api.list(all)?,
            all,
        }),
        BookCmd::Show { key, version } => ctx.show(&api.show(&key, version)?),
        BookCmd::Remove { key } => ctx.show(&Removed(api.remove(&key)?)),
        BookCmd::Proof {
            key,
            index,
            version,
        } => ctx.show(&api.proof(&key, index, version)?),
        BookCmd::Verify { key, version } => verify(ctx, api, &key, version),
        BookCmd::Search {
            query,
            key,
            k,
            version,
            mesh,
        } => {
            let request = SearchRequest {
                query,
                key,
                version,
                k,
            };
            let hits = if mesh {
                search_mesh(ctx, &request)?
            } else {
                api.search(&request)?
            };
            ctx.show(&hits)
        }
    }
}

/// `grove book verify`: the report, then a failure when it found problems.
fn verify(ctx: &Ctx, api: &mut dyn BookApi, key: &str, version: Option<u32>) -> anyhow::Result<()> {
    let report = api.verify(key, version)?;
    ctx.show(&report)?;
    if !report.ok {
        bail!(
            "{} version {} failed verification ({} problems)",
            report.key,
            report.version,
            report.problems.len()
        );
    }
    Ok(())
}

/// `grove book search --mesh`: every member's books, through the daemon.
fn search_mesh(ctx: &Ctx, request: &SearchRequest) -> anyhow::Result<dto::Hits> {
    Ok(ctx.daemon()?.search_call(request, true)?)
}

/// `grove book add`: reads or downloads the source, then stores it.
fn add(
    ctx: &Ctx,
    api: &mut dyn BookApi,
    source: &str,
    key: Option<String>,
    shard: Option<String>,
    force: bool,
) -> anyhow::Result<dto::Added> {
    let limits = &ctx.settings().limits;
    // Refuse a bad key or shard name before reading or downloading anything.
    if let Some(key) = &key {
        book::validate_key(key)?;
    }
    if let Some(shard) = &shard {
        grove::store::validate_shard_name(shard)?;
    }
    let bar = progress_bar();
    let bytes = if grove::source::is_url(source) {
        download(ctx, source, &bar)?
    } else {
        grove::source::read_path(Path::new(source), limits.max_book_bytes)?
    };
    let source_name = if grove::source::is_url(source) {
        source.to_string()
    } else {
        std::fs::canonicalize(source).map_or(source.to_string(), |p| p.display().to_string())
    };
    bar.set_message("chunks stored");
    bar.set_position(0);
    let request = AddRequest {
        key,
        shard,
        source: source_name,
        force,
    };
    let added = match api.add(&request, &bytes, &mut |n| bar.set_position(n)) {
        Err(lost) if lost.kind == ErrorKind::Lost => {
            bar.finish_and_clear();
            return settle_lost_add(ctx, &lost, &request, &bytes);
        }
        answered => answered?,
    };
    bar.finish_and_clear();
    Ok(added)
}

/// How long a `book add` whose connection was lost waits for the daemon to
/// answer again or be gone before it gives up finding out.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// `book add` whose connection to the daemon ended before the answer:
/// waits until the daemon answers again or is gone, then adds the same
/// bytes again through whichever holds the store now. An add is
/// idempotent (the same text under the same key is `unchanged`), so this
/// finds out whether the lost one landed, and stores the book if it did not.
fn settle_lost_add(
    ctx: &Ctx,
    lost: &ApiError,
    request: &AddRequest,
    bytes: &[u8],
) -> anyhow::Result<dto::Added> {
    let started = std::time::Instant::now();
    let through_daemon = loop {
        match ctx.daemon_if_running() {
            None => break false,
            Some(daemon) => {
                let answers = daemon
                    .request::<dto::NodeInfo>(hyper::Method::GET, routes::NODE, Vec::new())
                    .is_ok();
                if answers {
                    break true;
                }
            }
        }
        if started.elapsed() > SETTLE_WAIT {
            bail!(
                "{lost}
after {} s the daemon neither answers nor has stopped, so grove could not check",
                SETTLE_WAIT.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let added = ctx.books().add(request, bytes, &mut |_| {}).map_err(|e| {
        anyhow::anyhow!(
            "{lost}
checking by adding it again failed: {e}"
        )
    })?;
    let by = if through_daemon {
        "through the daemon, which answers again"
    } else {
        "by grove itself, as no daemon runs now"
    };
    if added.status == "unchanged" {
        eprintln!(
            "grove: the connection to the daemon ended before it answered; checked {by}: {} version {} is stored, so nothing more was done",
            added.key, added.version
        );
    } else {
        eprintln!(
            "grove: the connection to the daemon ended before it answered, and the book had not been stored; it is stored now ({by})"
        );
    }
    Ok(added)
}

/// Downloads `url`, saying while it waits how long it has waited, what
/// arrived, and when it gives up (with the key that sets that): a bar on a
/// terminal, a line every few seconds otherwise.
fn download(ctx: &Ctx, url: &str, bar: &indicatif::ProgressBar) -> anyhow::Result<Vec<u8>> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let fetch = &ctx.settings().fetch;
    bar.set_message("bytes downloaded");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the download runtime")?;
    let received = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&received);
    let on_bar = bar.clone();
    let mut on_progress = move |done: u64, _total: Option<u64>| {
        seen.store(done, Ordering::Relaxed);
        on_bar.set_position(done);
    };
    let started = std::time::Instant::now();
    let terminal = !bar.is_hidden();
    runtime.block_on(async {
        let download = grove::source::fetch_url(
            url,
            fetch,
            ctx.settings().limits.max_book_bytes,
            &mut on_progress,
        );
        tokio::pin!(download);
        let first = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut ticks = tokio::time::interval_at(first, std::time::Duration::from_secs(5));
        loop {
            tokio::select! {
                done = &mut download => return Ok(done?),
                _ = ticks.tick() => {
                    let line = format!(
                        "{} s, {} bytes so far (gives up after {} s: fetch.timeout_secs)",
                        started.elapsed().as_secs(),
                        received.load(Ordering::Relaxed),
                        fetch.timeout_secs
                    );
                    if terminal {
                        bar.set_message(format!("bytes downloaded, {line}"));
                    } else {
                        eprintln!("fetching {url}: {line}");
                    }
                }
            }
        }
    })
}

/// A progress counter on a terminal; hidden (prints nothing) when stderr is piped.
fn progress_bar() -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {pos:>8} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// `book list`: the list, and whether it holds every version (the text
/// then names each one's version and status).
#[derive(Serialize)]
#[serde(transparent)]
struct Listing {
    list: dto::BookList,
    #[serde(skip)]
    all: bool,
}

/// `book remove`: the removed version (same JSON as `book show`).
#[derive(Serialize)]
#[serde(transparent)]
struct Removed(dto::Book);

impl Show for dto::Added {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{}: {} ({} by {}), {} chunks, root {} in shard {}",
            self.status,
            self.key,
            or_dash(&self.title),
            or_dash(&self.author),
            self.count,
            self.root,
            self.shard
        )
    }
}

impl Show for Listing {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.list.books.is_empty() {
            writeln!(out, "no books")?;
        }
        for b in &self.list.books {
            let status = if self.all {
                format!(" v{} {}", b.version, b.status)
            } else {
                String::new()
            };
            writeln!(
                out,
                "{}{}  {} chunks  {} — {}  [{}]",
                b.key,
                status,
                b.count,
                or_dash(&b.title),
                or_dash(&b.author),
                b.shard
            )?;
        }
        Ok(())
    }
}

impl Show for dto::Book {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "key:      {}", self.key)?;
        writeln!(out, "version:  {} ({})", self.version, self.status)?;
        writeln!(out, "title:    {}", or_dash(&self.title))?;
        writeln!(out, "author:   {}", or_dash(&self.author))?;
        writeln!(out, "language: {}", or_dash(&self.language))?;
        writeln!(
            out,
            "ebook:    {}",
            self.ebook.map_or("-".to_string(), |n| n.to_string())
        )?;
        writeln!(out, "shard:    {}", self.shard)?;
        writeln!(out, "root:     {}", self.root)?;
        writeln!(out, "chunks:   {}", self.count)?;
        writeln!(out, "bytes:    {}", self.bytes)?;
        writeln!(out, "source:   {}", self.source)?;
        writeln!(
            out,
            "spec:     {} {} {}",
            self.spec.decoding, self.spec.chunking, self.spec.hashing
        )
    }
}

impl Show for Removed {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "removed {} (version {}; history kept)",
            self.0.key, self.0.version
        )
    }
}

impl Show for dto::Proof {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{} {} of {} chunks, root {}",
            self.key, self.label, self.count, self.root
        )?;
        writeln!(out, "leaf {}", self.leaf)?;
        for step in &self.proof {
            writeln!(
                out,
                "  {} {}",
                if step.is_left { "L" } else { "R" },
                step.sibling
            )?;
        }
        writeln!(out, "\n{}", self.text)
    }
}

impl Show for dto::Verified {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        for p in &self.problems {
            writeln!(out, "problem: {p}")?;
        }
        if self.ok {
            writeln!(
                out,
                "ok: {} version {}: {} chunks, root {} recomputed; proof data and search index agree",
                self.key, self.version, self.chunks_checked, self.root
            )?;
        }
        Ok(())
    }
}

impl Show for dto::Hits {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.hits.is_empty() {
            writeln!(out, "no hits")?;
        }
        for h in &self.hits {
            let preview: String = h.content.chars().take(240).collect();
            writeln!(
                out,
                "{:8.3}  {}  {}  ({}){}",
                h.score,
                h.node_id,
                h.label,
                or_dash(&h.title),
                h.peer_id
                    .as_ref()
                    .map(|p| format!("  on {p}"))
                    .unwrap_or_default()
            )?;
            writeln!(
                out,
                "          {preview}{}\n",
                if h.content.chars().count() > 240 {
                    "…"
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }

    fn note(&self, err: &mut dyn Write) -> io::Result<()> {
        for e in &self.errors {
            writeln!(err, "warning: {e}")?;
        }
        Ok(())
    }
}
