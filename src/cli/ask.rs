//! `grove ask`: a question put to this node's books, answered by its model
//! one claim line per passage, every claim checked against the books.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use grove::ask::cache::{CacheMode, answer_key, cited_roots, lookup_key};
use grove::ask::{AskRecord, AskSettings, check_question};
use grove::store::ask_cache::{AskCache, Found, RootChange};
use serde::Serialize;

use crate::cli::{Ctx, Show};

#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AskArgs {
    #[command(subcommand)]
    pub cmd: Option<AskCmd>,
    /// The question (at most 500 characters).
    #[arg(required = true)]
    pub question: Option<String>,
    /// Ask only this book (repeat for more); default: every book.
    #[arg(long = "book", value_name = "KEY")]
    pub books: Vec<String>,
    /// Passages to answer from, one claim line each.
    #[arg(short = 'k', long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=12))]
    pub k: u32,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.3)]
    pub temperature: f64,
    /// Sampling seed of the first line.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the answer's record (JSON) to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Serve a cached answer while its books' roots hold: `strict` matches
    /// the exact question, `equivalent` the question with case and
    /// punctuation aside; `off` asks the model every time.
    #[arg(long, value_enum, default_value_t = CacheArg::Strict)]
    pub cache: CacheArg,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheArg {
    Strict,
    Equivalent,
    Off,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum AskCmd {
    /// Check an answer's record offline: every passage's proof against its
    /// book's root, the verification recomputed, every stage of the run.
    Verify {
        /// The record (`grove ask --out FILE`).
        file: PathBuf,
    },
}

/// `grove ask`.
pub fn ask(args: &AskArgs, ctx: &Ctx) -> anyhow::Result<()> {
    if let Some(AskCmd::Verify { file }) = &args.cmd {
        return verify(file, ctx);
    }
    let question = check_question(args.question.as_deref().unwrap_or_default())?;
    let store = grove::store::Store::new(&ctx.state_dir);
    let settings = AskSettings {
        k: args.k,
        temperature: args.temperature,
        seed: args.seed,
        ..AskSettings::default()
    };
    let mode = match args.cache {
        CacheArg::Strict => Some(CacheMode::Strict),
        CacheArg::Equivalent => Some(CacheMode::Equivalent),
        CacheArg::Off => None,
    };
    // A state directory not made yet holds no books, and so no answers.
    let cache = match mode.filter(|_| ctx.state_dir.is_dir()) {
        Some(mode) => {
            let profile = ctx.settings().model.profile(&ctx.state_dir);
            let lookup = lookup_key(&question, mode, &profile, &settings, &args.books);
            Some((AskCache::open(&ctx.state_dir)?, lookup))
        }
        None => None,
    };
    let mut from_cache = None;
    if let Some((cache, lookup)) = &cache {
        match cache.find(lookup, &store)? {
            Found::Fresh(record) => return show(ctx, args, *record, Some(CacheNote::Hit)),
            Found::Stale(changed) => from_cache = Some(CacheNote::Stale(changed)),
            Found::Nothing => {}
        }
    }
    let evidence = store.evidence(&question, &args.books, args.k as usize)?;
    let mut model = grove::model::open_model(&ctx.settings().model, &ctx.state_dir)?;
    let record = grove::ask::answer(&mut *model, &question, &args.books, evidence, &settings)
        .context("the model did not answer")?;
    // An answer from no evidence is not kept: a book added later may hold
    // what this one could not find.
    if let Some((cache, lookup)) = &cache
        && !record.evidence.is_empty()
    {
        let key = answer_key(lookup, &cited_roots(&record));
        cache.put(lookup, &key, &record, grove::now_ms())?;
    }
    show(ctx, args, record, from_cache)
}

/// What the cache did for an ask.
enum CacheNote {
    /// The answer was served from the cache.
    Hit,
    /// A cached answer was found but its books changed: it was asked again.
    Stale(Vec<RootChange>),
}

fn show(
    ctx: &Ctx,
    args: &AskArgs,
    record: AskRecord,
    cache: Option<CacheNote>,
) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        let text = serde_json::to_string_pretty(&record)? + "\n";
        std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    }
    ctx.show(&Asked {
        record,
        out: args.out.clone(),
        cache,
    })
}

/// An answered question: the record (the JSON), and for people where it
/// was written.
#[derive(Serialize)]
#[serde(transparent)]
struct Asked {
    record: AskRecord,
    #[serde(skip)]
    out: Option<PathBuf>,
    #[serde(skip)]
    cache: Option<CacheNote>,
}

impl Show for Asked {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        write!(out, "{}", grove::ask::render::render(&self.record))?;
        if let Some(file) = &self.out {
            writeln!(out, "\nrecord written to {}", file.display())?;
        }
        Ok(())
    }

    fn note(&self, err: &mut dyn Write) -> io::Result<()> {
        match &self.cache {
            None => Ok(()),
            Some(CacheNote::Hit) => writeln!(
                err,
                "answered from the cache: the roots of the books it cites are unchanged (run root {})",
                self.record.run.root
            ),
            Some(CacheNote::Stale(changed)) if changed.is_empty() => writeln!(
                err,
                "the cached answer no longer matches the key it was stored under; asked again"
            ),
            Some(CacheNote::Stale(changed)) => {
                for c in changed {
                    let short = |root: &str| root.chars().take(16).collect::<String>();
                    let now = c.now.as_deref().map_or("no longer held".to_string(), |r| {
                        format!("now {}…", short(r))
                    });
                    writeln!(
                        err,
                        "the cached answer is stale: {} changed (root {}… {now}); asked again",
                        c.book,
                        short(&c.was)
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// `grove ask verify FILE`: exit 0 when every check agrees, 1 otherwise.
fn verify(file: &std::path::Path, ctx: &Ctx) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let record: AskRecord = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an ask record (ask-v1)", file.display()))?;
    let (root, problems) = match grove::ask::check(&record) {
        Ok(root) => (Some(root), Vec::new()),
        Err(problems) => (None, problems),
    };
    let verdict = Verified {
        valid: root.is_some(),
        root,
        passages: record.evidence.len(),
        label: record.verification.label.as_str(),
        problems,
    };
    ctx.show(&verdict)?;
    if verdict.valid {
        Ok(())
    } else {
        anyhow::bail!("{} does not verify", file.display())
    }
}

/// What `ask verify` found.
#[derive(Serialize)]
struct Verified {
    valid: bool,
    /// The run's root, recomputed, when valid.
    root: Option<String>,
    passages: usize,
    label: &'static str,
    problems: Vec<String>,
}

impl Show for Verified {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        match &self.root {
            Some(root) => writeln!(
                out,
                "valid: {} passages proven against their books' roots, the verification ({}) and every stage recomputed; run root {root}",
                self.passages, self.label
            ),
            None => {
                writeln!(out, "INVALID:")?;
                for p in &self.problems {
                    writeln!(out, "  {p}")?;
                }
                Ok(())
            }
        }
    }
}
