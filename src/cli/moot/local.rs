//! `grove moot run` and `grove moot check` on this node: both books from
//! the local store and the node's own model, no daemon and no mesh.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use grove::grounding::CheckInput;
use grove::model::ChatModel;
use grove::moot::host::{repeated_book, run_local};
use grove::moot::stats::Stats;
use grove::moot::transcript::TranscriptRecord;
use grove::moot::{MootSettings, Retriever, Tree, Utterance};
use serde::Serialize;

use crate::cli::{Ctx, Show};

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Key of the book that speaks first.
    #[arg(long)]
    pub a: String,
    /// Key of the other book.
    #[arg(long)]
    pub b: String,
    #[command(flatten)]
    pub moot: super::MootFlags,
    /// Sampling temperature [config: moot.temperature, default 0.6].
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Base sampling seed [config: moot.seed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the transcript (JSON) to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl RunArgs {
    /// The settings of this run: `base` (from config) overridden by flags.
    pub fn settings(&self, base: &MootSettings) -> MootSettings {
        let mut s = base.clone();
        if let Some(v) = self.moot.turns {
            s.turns = v;
        }
        if let Some(v) = self.moot.k {
            s.k = v;
        }
        if let Some(v) = self.temperature {
            s.temperature = v;
        }
        if let Some(v) = self.moot.max_tokens {
            s.max_tokens = v;
        }
        if let Some(v) = self.seed {
            s.seed = v;
        }
        s
    }
}

/// `grove moot check`.
pub fn check(ctx: &Ctx) -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the check input from stdin")?;
    let input: CheckInput = serde_json::from_str(&input).context(
        "stdin must be JSON {reply, passages: [{tag, content}], pool: [{tag, content}], others: {N: text}, own: {N: text}}",
    )?;
    let output = input.run()?;
    let text = if ctx.json {
        serde_json::to_string(&output)?
    } else {
        serde_json::to_string_pretty(&output)?
    };
    println!("{text}");
    Ok(())
}

/// `grove moot run` on this node: both books from the local store, each
/// searching its own book, and the node's configured model.
pub fn run_stored(args: &RunArgs, ctx: &Ctx) -> anyhow::Result<()> {
    if let Some(key) = repeated_book([args.a.as_str(), args.b.as_str()]) {
        bail!("a moot needs two different books; `{key}` was given twice");
    }
    let mut store = grove::store::Store::new(&ctx.state_dir);
    let [mut a, mut b] = store
        .retrievers([args.a.as_str(), args.b.as_str()])
        .context("the moot's books")?;
    let trees = [a.tree(), b.tree()];
    let mut model = grove::model::open_model(&ctx.settings().model, &ctx.state_dir)?;
    run_moot(
        args,
        ctx,
        &ctx.settings().moot,
        trees,
        [&mut a, &mut b],
        &mut *model,
    )
}

/// `grove moot run`: the books (their metadata and searches, in order a, b)
/// and the model come from the caller; `base` is the `moot` config section.
fn run_moot(
    args: &RunArgs,
    ctx: &Ctx,
    base: &MootSettings,
    trees: [Tree; 2],
    retrievers: [&mut dyn Retriever; 2],
    model: &mut dyn ChatModel,
) -> anyhow::Result<()> {
    let settings = args.settings(base);
    let json = ctx.json;
    if !json {
        println!(
            "moot: {} and {}, {} turns, k={}, on {}{}{}",
            trees[0].label(),
            trees[1].label(),
            settings.turns,
            settings.k,
            model.describe(),
            if model.guides_decoding() {
                ", guided decoding"
            } else {
                ""
            },
            args.moot
                .topic
                .as_deref()
                .map(|t| format!(", topic {t:?}"))
                .unwrap_or_default()
        );
    }
    let moot = run_local(
        trees,
        args.moot.topic.clone(),
        settings,
        retrievers,
        model,
        &mut |u| {
            if !json {
                print!("{}", render_utterance(u));
            }
        },
    )?;
    let record = TranscriptRecord::from(&moot);
    if let Some(out) = &args.out {
        std::fs::write(out, record.to_json_pretty() + "\n")
            .with_context(|| format!("writing transcript {}", out.display()))?;
    }
    ctx.show(&Ran {
        record,
        stats: moot.stats,
        out: args.out.clone(),
    })
}

/// A finished local moot: its transcript (the JSON), and for people the
/// stats and where the transcript was written (the turns were printed as
/// they landed).
#[derive(Serialize)]
#[serde(transparent)]
struct Ran {
    record: TranscriptRecord,
    #[serde(skip)]
    stats: Stats,
    #[serde(skip)]
    out: Option<PathBuf>,
}

impl Show for Ran {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        write!(out, "{}", render_stats(&self.stats))?;
        if let Some(file) = &self.out {
            writeln!(out, "transcript written to {}", file.display())?;
        }
        Ok(())
    }
}

/// An utterance for people: speaker, move, text, citations and verdict.
fn render_utterance(u: &Utterance) -> String {
    let mut s = format!(
        "\n── turn {} · {} · {} ──\n{}\n",
        u.turn,
        u.title,
        u.intent.as_str(),
        u.text
    );
    for (tag, node) in &u.cited {
        let label = u
            .retrieved
            .iter()
            .find(|p| &p.tag == tag)
            .map(|p| p.passage.label.as_str())
            .unwrap_or("?");
        s.push_str(&format!("   [{tag}] {label} ({node})\n"));
    }
    let g = &u.grounding.counts;
    s.push_str(&format!(
        "   {} · quotes {}/{} found{}{}{}\n",
        if u.grounded {
            "grounded"
        } else {
            "NOT grounded"
        },
        g.quotes_found,
        g.quotes_total,
        if g.other_quotes_total > 0 {
            format!(" · other {}/{}", g.other_quotes_found, g.other_quotes_total)
        } else {
            String::new()
        },
        if u.snaps.is_empty() {
            String::new()
        } else {
            format!(" · {} snapped/unquoted", u.snaps.len())
        },
        if u.attempts > 1 { " · retried" } else { "" },
    ));
    s
}

/// The stats as `name: value` lines.
fn render_stats(stats: &Stats) -> String {
    let value = serde_json::to_value(stats).unwrap_or_default();
    let mut s = String::from("\nstats:\n");
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            s.push_str(&format!("  {k}: {v}\n"));
        }
    }
    s
}
