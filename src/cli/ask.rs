//! `grove ask`: a question put to this node's books, answered by its model
//! one claim line per passage, every claim checked against the books.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use grove::ask::{AskRecord, AskSettings, check_question};
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
    let evidence = store.evidence(&question, &args.books, args.k as usize)?;
    let mut model = grove::model::open_model(&ctx.settings().model, &ctx.state_dir)?;
    let settings = AskSettings {
        k: args.k,
        temperature: args.temperature,
        seed: args.seed,
        ..AskSettings::default()
    };
    let record = grove::ask::answer(&mut *model, &question, &args.books, evidence, &settings)
        .context("the model did not answer")?;
    if let Some(out) = &args.out {
        let text = serde_json::to_string_pretty(&record)? + "\n";
        std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    }
    ctx.show(&Asked {
        record,
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
}

/// `grove ask verify FILE`: exit 0 when every check agrees, 1 otherwise.
fn verify(file: &std::path::Path, ctx: &Ctx) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let record: AskRecord = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an ask record (ask-v1)", file.display()))?;
    let verdict = Verified {
        valid: false,
        root: None,
        passages: record.evidence.len(),
        label: record.verification.label.as_str(),
        problems: Vec::new(),
    };
    let verdict = match grove::ask::check(&record) {
        Ok(root) => Verified {
            valid: true,
            root: Some(root),
            ..verdict
        },
        Err(problems) => Verified {
            problems,
            ..verdict
        },
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
