//! `grove book …`: add, list, show, remove, proof, verify, search.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{Context, bail};
use clap::Subcommand;
use grove::api::books::{AddRequest, BookApi, SearchRequest};
use grove::book;

use super::{Ctx, or_dash, print_json};

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
        /// Search every member's books too (through the daemon); each hit names its peer.
        #[arg(long, conflicts_with = "version")]
        mesh: bool,
    },
}

pub fn run(cmd: BookCmd, ctx: &Ctx) -> anyhow::Result<()> {
    let books = ctx.books();
    let api: &dyn BookApi = books.as_ref();
    match cmd {
        BookCmd::Add { source, key, shard } => add(ctx, api, &source, key, shard),
        BookCmd::List { all } => {
            let list = api.list(all)?;
            if ctx.json {
                return print_json(&list);
            }
            if list.books.is_empty() {
                println!("no books");
            }
            for b in &list.books {
                let status = if all {
                    format!(" v{} {}", b.version, b.status)
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
        BookCmd::Show { key, version } => {
            let book = api.show(&key, version)?;
            if ctx.json {
                return print_json(&book);
            }
            println!("key:      {}", book.key);
            println!("version:  {} ({})", book.version, book.status);
            println!("title:    {}", or_dash(&book.title));
            println!("author:   {}", or_dash(&book.author));
            println!("language: {}", or_dash(&book.language));
            println!(
                "ebook:    {}",
                book.ebook.map_or("-".to_string(), |n| n.to_string())
            );
            println!("shard:    {}", book.shard);
            println!("root:     {}", book.root);
            println!("chunks:   {}", book.count);
            println!("bytes:    {}", book.bytes);
            println!("source:   {}", book.source);
            println!(
                "spec:     {} {} {}",
                book.spec.decoding, book.spec.chunking, book.spec.hashing
            );
            Ok(())
        }
        BookCmd::Remove { key } => {
            let book = api.remove(&key)?;
            if ctx.json {
                return print_json(&book);
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
            let out = api.proof(&key, index, version)?;
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
            let report = api.verify(&key, version)?;
            if ctx.json {
                print_json(&report)?;
            } else {
                for p in &report.problems {
                    println!("problem: {p}");
                }
                if report.ok {
                    println!(
                        "ok: {} version {}: {} chunks, root {} recomputed; proof data and search index agree",
                        report.key, report.version, report.chunks_checked, report.root
                    );
                }
            }
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
                let client = ctx.daemon()?;
                let mut params = form_urlencoded::Serializer::new(String::new());
                params.append_pair("q", &request.query);
                params.append_pair("k", &request.k.to_string());
                params.append_pair("mesh", "true");
                if let Some(key) = &request.key {
                    params.append_pair("key", key);
                }
                client.request(
                    hyper::Method::GET,
                    &format!("/v1/books/search?{}", params.finish()),
                    Vec::new(),
                )?
            } else {
                api.search(&request)?
            };
            if ctx.json {
                return print_json(&hits);
            }
            if hits.hits.is_empty() {
                println!("no hits");
            }
            for e in &hits.errors {
                eprintln!("warning: {e}");
            }
            for h in &hits.hits {
                let preview: String = h.content.chars().take(240).collect();
                println!(
                    "{:8.3}  {}  {}  ({}){}",
                    h.score,
                    h.node_id,
                    h.label,
                    or_dash(&h.title),
                    h.peer_id
                        .as_ref()
                        .map(|p| format!("  on {p}"))
                        .unwrap_or_default()
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

fn add(
    ctx: &Ctx,
    api: &dyn BookApi,
    source: &str,
    key: Option<String>,
    shard: Option<String>,
) -> anyhow::Result<()> {
    let limits = &ctx.settings.limits;
    // Refuse a bad key or shard name before reading or downloading anything.
    if let Some(key) = &key {
        book::validate_key(key)?;
    }
    if let Some(shard) = &shard {
        grove::store::validate_shard_name(shard)?;
    }
    let bar = progress_bar();
    let bytes = if grove::source::is_url(source) {
        bar.set_message("bytes downloaded");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the download runtime")?;
        let mut on_progress = |done: u64, _total: Option<u64>| bar.set_position(done);
        runtime.block_on(grove::source::fetch_url(
            source,
            &ctx.settings.fetch,
            limits.max_book_bytes,
            &mut on_progress,
        ))?
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
    };
    let added = api.add(&request, &bytes, &mut |n| bar.set_position(n))?;
    bar.finish_and_clear();
    if ctx.json {
        return print_json(&added);
    }
    println!(
        "{}: {} ({} by {}), {} chunks, root {} in shard {}",
        added.status,
        added.key,
        or_dash(&added.title),
        or_dash(&added.author),
        added.count,
        added.root,
        added.shard
    );
    Ok(())
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
