//! `grove ask`: a question put to this node's books (or with `--mesh`, to
//! every member's), answered by its model one claim line per passage, every
//! claim checked against the books; `grove ask verify`, the offline check.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use grove::api::ask::{Answered, AskCall, CacheChoice, CacheNote, LocalAsk};
use grove::ask::AskRecord;
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
    #[arg(short = 'k', long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=grove::api::ask::MAX_ASK_K as i64))]
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
    /// Ask every member's books (through the daemon): each passage from a
    /// peer carries its Merkle proof against the root its holder announced.
    #[arg(long)]
    pub mesh: bool,
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
        /// Also prove every passage of a mesh ask is of a book a member of
        /// this mesh announced: the chain from its genesis, the holders'
        /// signed announcements.
        #[arg(long, value_name = "MESH_ID")]
        expect_mesh: Option<String>,
    },
}

/// `grove ask`: on the daemon when one runs (the only way to ask the
/// mesh), else in this process on the node's own books.
pub fn ask(args: &AskArgs, ctx: &Ctx) -> anyhow::Result<()> {
    if let Some(AskCmd::Verify { file, expect_mesh }) = &args.cmd {
        return verify(file, expect_mesh.as_deref(), ctx);
    }
    let call = AskCall {
        question: args.question.clone().unwrap_or_default(),
        books: args.books.clone(),
        k: args.k,
        temperature: args.temperature,
        seed: args.seed,
        cache: match args.cache {
            CacheArg::Strict => Some(CacheChoice::Strict),
            CacheArg::Equivalent => Some(CacheChoice::Equivalent),
            CacheArg::Off => None,
        },
        mesh: args.mesh,
    };
    let local = || {
        let parts = LocalAsk::new(&ctx.state_dir, &ctx.settings().model);
        grove::api::ask::ask(&call, &parts)
    };
    let answered = if args.mesh {
        ctx.daemon()?.ask_call(&call)?
    } else {
        match ctx.daemon_if_running() {
            Some(client) => super::or_local::or_local(client.ask_call(&call), local)?,
            None => local()?,
        }
    };
    if let Some(out) = &args.out {
        let text = serde_json::to_string_pretty(&answered.record)? + "\n";
        std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    }
    let Answered {
        record,
        cache,
        errors,
    } = answered;
    if ctx.json {
        // The JSON is the record; who was not asked still reaches a script.
        for e in &errors {
            eprintln!("not asked: {e}");
        }
    }
    ctx.show(&Asked {
        record,
        cache,
        errors,
        out: args.out.clone(),
    })
}

/// An answered question: the record (the JSON), and for people where it
/// was written.
#[derive(Serialize)]
#[serde(transparent)]
struct Asked {
    record: AskRecord,
    #[serde(skip)]
    cache: CacheNote,
    /// Members a mesh ask went on without.
    #[serde(skip)]
    errors: Vec<String>,
    #[serde(skip)]
    out: Option<PathBuf>,
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
        for e in &self.errors {
            writeln!(err, "not asked: {e}")?;
        }
        let short = |root: &str| root.chars().take(16).collect::<String>();
        match &self.cache {
            CacheNote::Asked => Ok(()),
            CacheNote::Hit => writeln!(
                err,
                "answered from the cache: the roots of the books it cites are unchanged (run root {})",
                self.record.run.root
            ),
            CacheNote::Stale { changed } if changed.is_empty() => writeln!(
                err,
                "the cached answer no longer matches the key it was stored under; asked again"
            ),
            CacheNote::Stale { changed } => {
                for c in changed {
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
/// A mesh ask's anchor is checked whenever the record carries one; with
/// `--expect-mesh` it must, and be of that mesh.
fn verify(file: &std::path::Path, expect_mesh: Option<&str>, ctx: &Ctx) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let record: AskRecord = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an ask record (ask-v1 or ask-v2)", file.display()))?;
    let (mut root, mut problems) = match grove::ask::check(&record) {
        Ok(root) => (Some(root), Vec::new()),
        Err(problems) => (None, problems),
    };
    let mut mesh = None;
    if record.mesh.is_some() || expect_mesh.is_some() {
        match grove::ask::check_anchor(&record, expect_mesh) {
            Ok(anchored) => mesh = Some(anchored.mesh_id),
            Err(more) => {
                problems.extend(more);
                root = None;
            }
        }
    }
    let verdict = Verified {
        valid: root.is_some(),
        root,
        passages: record.evidence.len(),
        label: record.verification.label.as_str(),
        mesh,
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
    /// The mesh every passage was proven to be announced in, for a mesh ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    mesh: Option<String>,
    problems: Vec<String>,
}

impl Show for Verified {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        match &self.root {
            Some(root) => {
                writeln!(
                    out,
                    "valid: {} passages proven against their books' roots, the verification ({}) and every stage recomputed; run root {root}",
                    self.passages, self.label
                )?;
                match &self.mesh {
                    Some(mesh) => writeln!(
                        out,
                        "every passage is of a book its holder announced in mesh {mesh}, whose roster the record proves from the genesis"
                    ),
                    None => Ok(()),
                }
            }
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
