//! `grove node run`: the long-lived node, in the foreground.

use std::io::{self, Write};

use anyhow::Context;
use clap::Subcommand;
use grove::api::dto;
use grove::api::routes;

use super::{Ctx, Show};

#[derive(Subcommand)]
pub enum NodeCmd {
    /// Run the node in the foreground (as systemd's grove.service does).
    Run {
        /// Listen address (multiaddr), repeatable; replaces `net.listen`.
        #[arg(long = "listen", value_name = "MULTIADDR")]
        listen: Vec<String>,
    },
    /// Show the running node: peer id, bound addresses, state directory.
    Status,
    /// Counters: messages accepted and dropped by reason, peers, epochs, requests served.
    Stats,
    /// How this node is reached: reachability and why, its addresses, its
    /// relay slots, and each member's link (direct or relayed) and round-trip time.
    Doctor,
}

pub fn run(cmd: NodeCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        NodeCmd::Stats => {
            let stats: dto::NodeStats =
                ctx.daemon()?
                    .request(hyper::Method::GET, routes::NODE_STATS, Vec::new())?;
            ctx.show(&stats)
        }
        NodeCmd::Status => {
            let socket = ctx.socket();
            let Some(client) = grove::api::client::Client::connect(&socket) else {
                anyhow::bail!(
                    "the grove daemon is not running (nothing answers on {})",
                    socket.display()
                );
            };
            let info: dto::NodeInfo =
                client.request(hyper::Method::GET, routes::NODE, Vec::new())?;
            ctx.show(&info)
        }
        NodeCmd::Doctor => super::doctor::run(ctx),
        // `--listen` is one of the overrides the configuration was
        // checked with (main.rs).
        NodeCmd::Run { listen: _ } => run_node(ctx),
    }
}

/// `grove node run`: the daemon in the foreground until SIGTERM or SIGINT.
fn run_node(ctx: &Ctx) -> anyhow::Result<()> {
    // The configuration was checked as `grove config check` checks it;
    // what the start adds is the hook program's presence.
    ctx.config.check_start()?;
    init_logging(ctx.config.log_filter(), &ctx.settings().log.format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        // Listen before the node reports ready, so an early SIGTERM is
        // a clean shutdown rather than the default kill.
        let shutdown = shutdown_signal()?;
        grove::daemon::run(ctx.config.clone(), ctx.state_dir.clone(), shutdown).await?;
        anyhow::Ok(())
    });
    // A hosted moot may be inside a model call; it is saved after
    // every turn and resumes at the next start, so it does not hold
    // up the exit (dropping the runtime would wait for it).
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}

impl Show for dto::NodeStats {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "peer id {}  up {} s",
            self.peer_id,
            self.uptime_ms / 1000
        )?;
        writeln!(
            out,
            "epoch {} ({} changes seen)  members {}  connected peers {}",
            self.epoch, self.epochs_seen, self.members, self.peers_connected
        )?;
        if let Some(line) = model_line(&self.counters) {
            writeln!(out, "{line}")?;
        }
        for (name, n) in &self.counters {
            writeln!(out, "  {name:40} {n}")?;
        }
        Ok(())
    }
}

/// The model's counters as one line, with tokens per second where the
/// backend timed prompt and generation apart; `None` before its first
/// completion.
fn model_line(counters: &std::collections::BTreeMap<String, u64>) -> Option<String> {
    let get = |name: &str| counters.get(name).copied().unwrap_or(0);
    let (answered, failed) = (
        get("model.completions.answered"),
        get("model.completions.failed"),
    );
    if answered + failed == 0 {
        return None;
    }
    let secs = |name: &str| get(name) as f64 / 1e9;
    let rate = |tokens: u64, name: &str| match secs(name) {
        s if s > 0.0 => format!(" ({:.1}/s)", tokens as f64 / s),
        _ => String::new(),
    };
    let (prompt, generated) = (get("model.prompt.tokens"), get("model.generated.tokens"));
    Some(format!(
        "model {answered} completions ({failed} failed) in {:.2} s  prompt {prompt} tokens{}  generated {generated} tokens{}",
        secs("model.completion.ns"),
        rate(prompt, "model.prompt.ns"),
        rate(generated, "model.generation.ns"),
    ))
}

impl Show for dto::NodeInfo {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "peer id:   {}", self.peer_id)?;
        for addr in &self.listen {
            writeln!(out, "listening: {addr}")?;
        }
        writeln!(out, "state:     {}", self.state_dir)?;
        writeln!(out, "pid:       {}  (grove {})", self.pid, self.version)
    }
}

/// A future completing on the first SIGTERM or SIGINT; the handlers are
/// installed when this returns.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    })
}

/// Logs to stderr with `filter` (checked: [`grove::config::LogSettings::filter`]):
/// lines for people, or with `log.format = "json"` one JSON object per line
/// (timestamp, level, fields, target). Under journald (JOURNAL_STREAM set)
/// text lines carry no timestamps or colours, since the journal adds its own.
fn init_logging(filter: &str, format: &str) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(filter).context("config key `log.level`")?;
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    if format == "json" {
        builder.json().with_target(true).with_ansi(false).init();
    } else if journald {
        builder.without_time().with_ansi(false).init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
    Ok(())
}
