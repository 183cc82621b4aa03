//! `grove moot`: run a moot between two books, check one reply, verify a
//! transcript.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use grove::model::ChatModel;
use grove::moot::host::run_local;
use grove::moot::stats::Stats;
use grove::moot::transcript::{CheckInput, StatsRecord, TranscriptRecord};
use grove::moot::verify::{ChunkLookup, verify};
use grove::moot::{MootSettings, Retriever, Tree, Utterance};

use crate::cli::Ctx;

#[derive(clap::Subcommand, Debug)]
pub enum MootCmd {
    /// Run a moot between two stored books on the local model.
    Run(RunArgs),
    /// Grade and snap one reply: JSON `{reply, passages, pool, others, own}`
    /// on stdin, JSON `{grounding, passes, text, snaps}` on stdout.
    Check,
    /// Re-check a transcript from the transcript alone; exits non-zero on
    /// any mismatch.
    Verify {
        /// The transcript file (JSON), or a moot export (`grove moot export`).
        file: PathBuf,
        /// For an export: fail unless the mesh that vouches for it is this one.
        #[arg(long)]
        expect_mesh: Option<String>,
        /// For an export: fail unless the roster that vouches for it has this hash.
        #[arg(long)]
        expect_roster: Option<String>,
    },
    /// Start a moot hosted by the running node between books held on members.
    Start(super::moots::StartArgs),
    /// The moots this node hosts.
    List,
    /// One hosted moot: state (running, paused and why, finished) and transcript.
    Show { id: String },
    /// Print a hosted moot's turns as they land, until it finishes or pauses.
    Watch { id: String },
    /// Resume a paused moot (turns already accepted are kept).
    Resume { id: String },
    /// Print a finished moot's export (signed by this node) for `moot verify`.
    Export { id: String },
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Key of the book that speaks first.
    #[arg(long)]
    pub a: String,
    /// Key of the other book.
    #[arg(long)]
    pub b: String,
    /// What the books talk about (default: each opens on its own title).
    #[arg(long)]
    pub topic: Option<String>,
    /// Number of turns, both books together [config: moot.turns, default 8].
    #[arg(long)]
    pub turns: Option<u32>,
    /// Passages per turn [config: moot.k, default 6].
    #[arg(short = 'k', long = "k")]
    pub k: Option<usize>,
    /// Sampling temperature [config: moot.temperature, default 0.6].
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Token budget of one reply [config: moot.max_tokens].
    #[arg(long)]
    pub max_tokens: Option<u32>,
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
        if let Some(v) = self.turns {
            s.turns = v;
        }
        if let Some(v) = self.k {
            s.k = v;
        }
        if let Some(v) = self.temperature {
            s.temperature = v;
        }
        if let Some(v) = self.max_tokens {
            s.max_tokens = v;
        }
        if let Some(v) = self.seed {
            s.seed = v;
        }
        s
    }
}

/// Runs `check` and `verify`. `run` needs the store and the model, so the
/// caller dispatches it to [`run_moot`] with both books opened.
pub fn run(cmd: MootCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        MootCmd::Check => check(ctx),
        MootCmd::Verify {
            file,
            expect_mesh,
            expect_roster,
        } => {
            // Where the local store holds a book, its passages are also
            // checked against the stored chunks.
            let mut store = grove::store::Store::new(&ctx.state_dir);
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            if super::moots::is_export(&text) {
                return super::moots::verify_export(
                    &file,
                    &text,
                    expect_mesh.as_deref(),
                    expect_roster.as_deref(),
                    &mut store,
                    ctx,
                );
            }
            if expect_mesh.is_some() || expect_roster.is_some() {
                bail!("--expect-mesh and --expect-roster apply to moot exports only");
            }
            verify_file(&file, Some(&mut store), ctx)
        }
        MootCmd::Start(args) => super::moots::start(&args, ctx),
        MootCmd::List => super::moots::list(ctx),
        MootCmd::Show { id } => super::moots::show(&id, ctx),
        MootCmd::Watch { id } => super::moots::watch(&id, ctx),
        MootCmd::Resume { id } => super::moots::resume(&id, ctx),
        MootCmd::Export { id } => super::moots::export(&id, ctx),
        MootCmd::Run(args) => run_stored(&args, ctx),
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

/// `grove moot verify FILE`. `store` checks passages against stored chunks
/// where it holds the book.
pub fn verify_file(
    file: &Path,
    store: Option<&mut dyn ChunkLookup>,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading transcript {}", file.display()))?;
    let transcript = TranscriptRecord::from_json(&text)
        .with_context(|| format!("reading transcript {}", file.display()))?;
    let mismatches = verify(&transcript, store)?;
    if ctx.json {
        let list: Vec<serde_json::Value> = mismatches
            .iter()
            .map(|m| serde_json::json!({"turn": m.turn, "what": m.what}))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "file": file.display().to_string(),
                "utterances": transcript.utterances.len(),
                "ok": mismatches.is_empty(),
                "mismatches": list,
            })
        );
    } else {
        for m in &mismatches {
            println!("MISMATCH {m}");
        }
        if mismatches.is_empty() {
            println!(
                "ok: {} utterances re-graded, re-snapped and hashed; stats agree",
                transcript.utterances.len()
            );
        }
    }
    if !mismatches.is_empty() {
        bail!("{} mismatches in {}", mismatches.len(), file.display());
    }
    Ok(())
}

/// `grove moot run` on this node: both books from the local store, each
/// searching its own book, and the node's configured model.
fn run_stored(args: &RunArgs, ctx: &Ctx) -> anyhow::Result<()> {
    if args.a == args.b {
        bail!(
            "a moot needs two different books; `{}` was given twice",
            args.a
        );
    }
    let store = grove::store::Store::new(&ctx.state_dir);
    let open = |key: &str| {
        grove::store::retriever::BookRetriever::open(&store, key)
            .with_context(|| format!("book `{key}` for the moot"))
    };
    let (mut a, mut b) = (open(&args.a)?, open(&args.b)?);
    let trees = [a.tree(), b.tree()];
    let mut model = grove::model::open_model(&ctx.settings.model, &ctx.state_dir)?;
    run_moot(
        args,
        ctx,
        &ctx.settings.moot,
        trees,
        [&mut a, &mut b],
        &mut *model,
    )
}

/// `grove moot run`: the books (their metadata and searches, in order a, b)
/// and the model come from the caller; `base` is the `moot` config section.
pub fn run_moot(
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
            "moot: {} ({}) and {} ({}), {} turns, k={}, on {}{}{}",
            trees[0].name(),
            trees[0].key,
            trees[1].name(),
            trees[1].key,
            settings.turns,
            settings.k,
            model.describe(),
            if model.guides_decoding() {
                ", guided decoding"
            } else {
                ""
            },
            args.topic
                .as_deref()
                .map(|t| format!(", topic {t:?}"))
                .unwrap_or_default()
        );
    }
    let moot = run_local(
        trees,
        args.topic.clone(),
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
    if json {
        println!("{}", record.to_json_pretty());
    } else {
        print!("{}", render_stats(&moot.stats));
        if let Some(out) = &args.out {
            println!("transcript written to {}", out.display());
        }
    }
    Ok(())
}

/// An utterance for people: speaker, move, text, citations and verdict.
pub fn render_utterance(u: &Utterance) -> String {
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
    let g = &u.grounding;
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
pub fn render_stats(stats: &Stats) -> String {
    let value = serde_json::to_value(StatsRecord::from(stats)).unwrap_or_default();
    let mut s = String::from("\nstats:\n");
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            s.push_str(&format!("  {k}: {v}\n"));
        }
    }
    s
}
