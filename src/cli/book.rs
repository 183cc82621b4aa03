//! `grove book …`: add, list, show, remove, proof, verify, search.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{Context, bail};
use clap::Subcommand;
use grove::api::dto;
use grove::book;
use grove::store::{DEFAULT_SHARD, StoreError};

use super::{Ctx, now_ms, or_dash, print_json};

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
    },
    /// List current books (with --all, every version, removed ones too).
    List {
        #[arg(long)]
        all: bool,
    },
    /// Show one book.
    Show {
        key: String,
        #[arg(long = "book-version", value_name = "N")]
        version: Option<u32>,
    },
    /// Remove a book from search and listings, keeping its history (audited).
    Remove { key: String },
    /// Print chunk INDEX with its Merkle inclusion proof.
    Proof {
        key: String,
        index: u64,
        #[arg(long = "book-version", value_name = "N")]
        version: Option<u32>,
    },
    /// Recompute leaves and root from the stored text and check the stored
    /// root, proof data and search index agree.
    Verify {
        key: String,
        #[arg(long = "book-version", value_name = "N")]
        version: Option<u32>,
    },
    /// BM25 search in one book (--key) or every book.
    Search {
        /// Free text; FTS5 syntax in it is treated as plain words.
        #[arg(allow_hyphen_values = true)]
        query: String,
        #[arg(long)]
        key: Option<String>,
        #[arg(short = 'k', default_value_t = 6)]
        k: usize,
        #[arg(long = "book-version", value_name = "N", requires = "key")]
        version: Option<u32>,
    },
}

pub fn run(cmd: BookCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        BookCmd::Add { source, key, shard } => add(ctx, &source, key, shard),
        BookCmd::List { all } => list(ctx, all),
        BookCmd::Show { key, version } => {
            let book = ctx.store().shard_of(&key)?.book(&key, version)?;
            if ctx.json {
                return print_json(&dto::Book::from(&book));
            }
            println!("key:      {}", book.key);
            println!("version:  {} ({})", book.version, book.status.as_str());
            println!("title:    {}", or_dash(&book.title));
            println!("author:   {}", or_dash(&book.author));
            println!("language: {}", or_dash(&book.language));
            println!(
                "ebook:    {}",
                book.ebook.map_or("-".to_string(), |n| n.to_string())
            );
            println!("shard:    {}", book.shard);
            println!("root:     {}", hex::encode(book.root));
            println!("chunks:   {}", book.count);
            println!("bytes:    {}", book.bytes);
            println!("source:   {}", book.source);
            println!(
                "spec:     {} {} {}",
                book.decoding, book.chunking, book.hashing
            );
            Ok(())
        }
        BookCmd::Remove { key } => {
            let mut shard = ctx.store().shard_of(&key)?;
            let book = shard.remove(&key, now_ms())?;
            if ctx.json {
                return print_json(&dto::Book::from(&book));
            }
            println!(
                "removed {} (version {}; history kept)",
                book.key, book.version
            );
            Ok(())
        }
        BookCmd::Proof {
            key,
            index,
            version,
        } => {
            let shard = ctx.store().shard_of(&key)?;
            let book = shard.book(&key, version)?;
            let proof = shard.proof(&book, index)?;
            let out = dto::Proof::new(&book, &proof);
            if ctx.json {
                return print_json(&out);
            }
            println!(
                "{} {} of {} chunks, root {}",
                out.key, out.label, out.count, out.root
            );
            println!("leaf {}", out.leaf);
            for step in &out.proof {
                println!(
                    "  {} {}",
                    if step.is_left { "L" } else { "R" },
                    step.sibling
                );
            }
            println!("\n{}", out.text);
            Ok(())
        }
        BookCmd::Verify { key, version } => {
            let shard = ctx.store().shard_of(&key)?;
            let book = shard.book(&key, version)?;
            let report = shard.verify(&book)?;
            let ok = report.problems.is_empty();
            if ctx.json {
                print_json(&dto::Verified {
                    key: book.key.clone(),
                    version: book.version,
                    root: hex::encode(book.root),
                    count: book.count,
                    chunks_checked: report.chunks_checked,
                    ok,
                    problems: report.problems.clone(),
                })?;
            } else {
                for p in &report.problems {
                    println!("problem: {p}");
                }
                if ok {
                    println!(
                        "ok: {} version {}: {} chunks, root {} recomputed; proof data and search index agree",
                        book.key,
                        book.version,
                        report.chunks_checked,
                        hex::encode(book.root)
                    );
                }
            }
            if !ok {
                bail!(
                    "{} version {} failed verification ({} problems)",
                    book.key,
                    book.version,
                    report.problems.len()
                );
            }
            Ok(())
        }
        BookCmd::Search {
            query,
            key,
            k,
            version,
        } => {
            let hits = ctx
                .store()
                .search(&query, key.as_deref().map(|k| (k, version)), k)?;
            if ctx.json {
                return print_json(&dto::Hits {
                    hits: hits.iter().map(dto::Hit::from).collect(),
                });
            }
            if hits.is_empty() {
                println!("no hits");
            }
            for h in &hits {
                let preview: String = h.content.chars().take(240).collect();
                println!(
                    "{:8.3}  {}  {}  ({})",
                    h.score,
                    h.node_id,
                    h.label,
                    or_dash(&h.title)
                );
                println!(
                    "          {preview}{}\n",
                    if h.content.chars().count() > 240 {
                        "…"
                    } else {
                        ""
                    }
                );
            }
            Ok(())
        }
    }
}

fn add(ctx: &Ctx, source: &str, key: Option<String>, shard: Option<String>) -> anyhow::Result<()> {
    let limits = &ctx.settings.limits;
    if let Some(key) = &key {
        book::validate_key(key)?;
    }
    let shard_name = shard
        .or_else(|| ctx.settings.default_shard.clone())
        .unwrap_or_else(|| DEFAULT_SHARD.to_string());
    grove::store::validate_shard_name(&shard_name)?;
    let bar = progress_bar();
    let bytes = if grove::source::is_url(source) {
        bar.set_message("downloading");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the download runtime")?;
        let mut on_progress = |done: u64, total: Option<u64>| {
            if let Some(total) = total {
                bar.set_length(total);
            }
            bar.set_position(done);
        };
        runtime.block_on(grove::source::fetch_url(
            source,
            &ctx.settings.fetch,
            limits.max_book_bytes,
            &mut on_progress,
        ))?
    } else {
        grove::source::read_path(Path::new(source), limits.max_book_bytes)?
    };
    let text = book::BookText::decode(&bytes, limits.max_book_bytes)
        .with_context(|| format!("{source}: not stored"))?;
    drop(bytes);
    let key = match key {
        Some(k) => k,
        None => book::default_key(&text.meta.title)?,
    };
    let store = ctx.store();
    if let Some(other) = store.find_book(&key)? {
        if other.name() != shard_name {
            return Err(StoreError::KeyInOtherShard {
                key,
                shard: other.name().to_string(),
            }
            .into());
        }
    }
    let mut shard = store.open_or_create(&shard_name)?;
    bar.set_message("chunks stored");
    bar.set_position(0);
    bar.set_length(0);
    let source_name = if grove::source::is_url(source) {
        source.to_string()
    } else {
        std::fs::canonicalize(source).map_or(source.to_string(), |p| p.display().to_string())
    };
    let (status, record) = shard
        .ingest(
            &key,
            &text,
            limits.max_chunk_bytes,
            &source_name,
            now_ms(),
            &mut |n| bar.set_position(n),
        )
        .with_context(|| format!("{source}: not stored"))?;
    bar.finish_and_clear();
    if ctx.json {
        return print_json(&dto::Added::new(status, &record));
    }
    println!(
        "{}: {} ({} by {}), {} chunks, root {} in shard {}",
        status.as_str(),
        record.key,
        or_dash(&record.title),
        or_dash(&record.author),
        record.count,
        hex::encode(record.root),
        record.shard
    );
    Ok(())
}

/// A progress bar on a terminal; hidden (prints nothing) when stderr is piped.
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

fn list(ctx: &Ctx, all: bool) -> anyhow::Result<()> {
    let mut books = Vec::new();
    for shard in ctx.store().open_all()? {
        books.extend(shard.books(all)?);
    }
    books.sort_by(|a, b| (&a.key, a.version).cmp(&(&b.key, b.version)));
    if ctx.json {
        return print_json(&dto::BookList {
            books: books.iter().map(dto::Book::from).collect(),
        });
    }
    if books.is_empty() {
        println!("no books");
    }
    for b in &books {
        let status = if all {
            format!(" v{} {}", b.version, b.status.as_str())
        } else {
            String::new()
        };
        println!(
            "{}{}  {} chunks  {} — {}  [{}]",
            b.key,
            status,
            b.count,
            or_dash(&b.title),
            or_dash(&b.author),
            b.shard
        );
    }
    Ok(())
}
