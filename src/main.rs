//! The `grove` binary: parses flags, loads settings, runs one command, and
//! maps errors to a message on stderr and a non-zero exit.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "grove",
    version,
    about = "grove: Merkle-committed book shards, a private mesh, grounded moots"
)]
struct Args {
    /// State directory (else `state_dir`, GROVE_STATE_DIR, $STATE_DIRECTORY, a per-user default).
    #[arg(long, global = true, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Config file (TOML); default /etc/grove/grove.toml when present.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print JSON for scripting.
    #[arg(long, global = true)]
    json: bool,
    /// The daemon's control socket (else control.socket, GROVE_CONTROL__SOCKET,
    /// $RUNTIME_DIRECTORY, the state directory's when a node runs there,
    /// /run/grove/grove.sock without --state, then the state directory's).
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest, list, prove, verify and search books.
    Book {
        #[command(subcommand)]
        cmd: cli::book::BookCmd,
    },
    /// Shards and their roots.
    Shard {
        #[command(subcommand)]
        cmd: cli::shard::ShardCmd,
    },
    /// This node's keys and peer id.
    Identity {
        #[command(subcommand)]
        cmd: cli::identity::IdentityCmd,
    },
    /// Mesh membership: init, invites, proposals, votes.
    Mesh {
        #[command(subcommand)]
        cmd: cli::mesh::MeshCmd,
    },
    /// Ask the books a question: every claim of the answer checked against them.
    Ask(cli::ask::AskArgs),
    /// Moots: grounded conversations between two books.
    Moot {
        #[command(subcommand)]
        cmd: cli::moot::MootCmd,
    },
    /// The node's local model: install the embedded default, or chat once.
    Model {
        #[command(subcommand)]
        cmd: cli::model::ModelCmd,
    },
    /// The node daemon.
    Node {
        #[command(subcommand)]
        cmd: cli::node::NodeCmd,
    },
    /// Peers this node knows: members, connections, addresses (daemon).
    Peers,
    /// Every member's latest announced shard roots and books (daemon).
    Roots,
    /// A consistent copy of the state directory (databases and keys) into DEST.
    Backup {
        /// Directory to create for the copy (it must not exist yet).
        dest: PathBuf,
    },
    /// The effective configuration: `config check` validates and prints it.
    Config {
        #[command(subcommand)]
        cmd: cli::config::ConfigCmd,
    },
    /// The audit chains of every database in the state directory.
    Audit {
        #[command(subcommand)]
        cmd: cli::audit::AuditCmd,
    },
    #[command(flatten)]
    Generate(cli::completions::GenerateCmd),
}

fn main() -> ExitCode {
    // Output piped into `head` should end the program quietly, as for other
    // Unix tools, not panic on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<cli::Unanchored>() => ExitCode::from(cli::Unanchored::EXIT_STATUS),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        state,
        config: config_file,
        json,
        socket,
        command,
    } = args;
    let command = match command {
        // Checked before anything else reads the settings (or a state dir).
        Command::Config { cmd } => return cli::config::run(cmd, config_file.as_deref(), json),
        Command::Generate(cmd) => return cli::completions::run(cmd),
        other => other,
    };
    // A flag overrides the config like any other key, and is checked with
    // it: the daemon binds the socket there and commands talk to it there.
    let overrides = grove::config::Overrides {
        socket,
        listen: match &command {
            Command::Node {
                cmd: cli::node::NodeCmd::Run { listen },
            } => listen.clone(),
            _ => Vec::new(),
        },
    };
    let config = grove::config::Settings::load(config_file.as_deref())?.check(overrides)?;
    let state_dir = config.settings().resolve_state_dir(state.as_deref())?;
    let socket = config
        .settings()
        .client_socket(state.as_deref(), &state_dir);
    let ctx = cli::Ctx {
        config,
        state_dir,
        json,
        socket,
    };
    match command {
        Command::Book { cmd } => cli::book::run(cmd, &ctx),
        Command::Shard { cmd } => cli::shard::run(cmd, &ctx),
        Command::Audit { cmd } => cli::audit::run(cmd, &ctx),
        Command::Node { cmd } => cli::node::run(cmd, &ctx),
        Command::Identity { cmd } => cli::identity::run(cmd, &ctx),
        Command::Mesh { cmd } => cli::mesh::run(cmd, &ctx),
        Command::Ask(args) => cli::ask::ask(&args, &ctx),
        Command::Moot { cmd } => cli::moot::run(cmd, &ctx),
        Command::Model { cmd } => cli::model::run(cmd, &ctx),
        Command::Peers => cli::peers::peers(&ctx),
        Command::Roots => cli::peers::roots(&ctx),
        Command::Backup { dest } => cli::backup::backup(&ctx, &dest),
        Command::Config { cmd } => cli::config::run(cmd, config_file.as_deref(), json),
        Command::Generate(cmd) => cli::completions::run(cmd),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument and flag of every command, as `grove a b --flag`,
    /// that has no help text.
    fn args_without_help(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let builtin = matches!(
                arg.get_action(),
                clap::ArgAction::Help | clap::ArgAction::HelpLong | clap::ArgAction::Version
            );
            if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                let name = match arg.get_long() {
                    Some(long) => format!("--{long}"),
                    None => arg.get_id().as_str().to_uppercase(),
                };
                missing.push(format!("{path} {name}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_about().is_none() && sub.get_name() != "help" {
                missing.push(format!("{path} {} (the command itself)", sub.get_name()));
            }
            args_without_help(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }

    #[test]
    fn every_argument_and_flag_has_help_text() {
        let cmd = super::Args::command();
        cmd.clone().debug_assert();
        let mut missing = Vec::new();
        args_without_help(&cmd, "grove", &mut missing);
        assert!(
            missing.is_empty(),
            "arguments without help text:\n  {}",
            missing.join("\n  ")
        );
    }
}
