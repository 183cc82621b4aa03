//! `grove ask`: a question put to this node's books, answered by its model
//! one claim line per passage, every claim checked against the books.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use grove::ask::{AskRecord, AskSettings, ClaimVerdict, Evidence, check_question};
use serde::Serialize;

use crate::cli::{Ctx, Show};

#[derive(clap::Args, Debug, Clone)]
pub struct AskArgs {
    /// The question (at most 500 characters).
    pub question: String,
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

/// `grove ask`.
pub fn ask(args: &AskArgs, ctx: &Ctx) -> anyhow::Result<()> {
    let question = check_question(&args.question)?;
    let store = grove::store::Store::new(&ctx.state_dir);
    let evidence = store.evidence(&question, &args.books, args.k as usize)?;
    let mut model = grove::model::open_model(&ctx.settings().model, &ctx.state_dir)?;
    let settings = AskSettings {
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
        let r = &self.record;
        let v = &r.verification;
        writeln!(out, "{}\n", r.question)?;
        if r.evidence.is_empty() {
            writeln!(
                out,
                "No passage of the books asked matches the question: there is nothing to answer from.\n"
            )?;
        }
        for claim in &v.claims {
            render_claim(out, claim, &r.evidence)?;
        }
        writeln!(
            out,
            "{}rung {} of 4, {}: {} ({}; {} of {} lines held up{})",
            if v.claims.is_empty() { "" } else { "\n" },
            v.rung.number(),
            v.rung.name(),
            v.rung.describe(),
            v.label.as_str(),
            v.supported,
            v.lines,
            match v.unsourced {
                0 => String::new(),
                n => format!(", {n} without a pointer"),
            }
        )?;
        if let Some(class) = v.warrant {
            let class = class.as_str().replace('-', " ");
            match &v.warrant_violation {
                _ if !v.warrant_checked => writeln!(
                    out,
                    "warrant ({class}): not checked, no claim passed its checks"
                )?,
                None => writeln!(out, "warrant ({class}): holds")?,
                Some(violation) => writeln!(out, "warrant: {}", violation.describe())?,
            }
        }
        writeln!(
            out,
            "model: {}{}",
            r.model,
            if r.guided { ", guided" } else { "" }
        )?;
        if !r.evidence.is_empty() {
            writeln!(out, "\nevidence:")?;
            for e in &r.evidence {
                writeln!(
                    out,
                    "  E{:<3} {}, {}  id {}…  {}",
                    e.pointer,
                    e.book,
                    e.label,
                    &e.id[..12.min(e.id.len())],
                    e.title
                )?;
            }
        }
        if let Some(file) = &self.out {
            writeln!(out, "\nrecord written to {}", file.display())?;
        }
        Ok(())
    }
}

/// One claim: its line, its verdict in words, and the slice of its passage
/// that holds it up.
fn render_claim(out: &mut dyn Write, c: &ClaimVerdict, evidence: &[Evidence]) -> io::Result<()> {
    writeln!(out, "{:>3}  {}", c.line, c.raw)?;
    let verdict = match (&c.support, c.violations.first()) {
        _ if !c.sourced => "not held up: it cites no passage".to_string(),
        (Some(s), None) => format!("held up ({})", s.as_str()),
        (Some(s), Some(v)) => format!("held up ({}); but {}", s.as_str(), v.describe()),
        (None, Some(v)) => format!("not held up: {}", v.describe()),
        (None, None) => "not held up: its passages do not say this closely enough".to_string(),
    };
    writeln!(out, "     {verdict}")?;
    if let Some(slice) = &c.slice
        && let Some(e) = evidence.iter().find(|e| e.pointer == slice.pointer)
        && let Some(text) = e.text.get(slice.start..slice.end)
    {
        let before = if slice.start > 0 { "…" } else { "" };
        let after = if slice.end < e.text.len() { "…" } else { "" };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(out, "     E{} {}: {before}{text}{after}", e.pointer, e.book)?;
    }
    Ok(())
}
