//! `grove completions SHELL` (a shell's completion script on stdout) and the
//! hidden `grove manpages DIR` (one man page per command), both generated
//! from the one CLI definition, `Args` in `src/main.rs`, so the package's
//! completions and pages describe exactly the binary they ship with.

use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;

/// The commands that describe the command line itself; flattened into the
/// top-level command list.
#[derive(clap::Subcommand)]
pub enum GenerateCmd {
    /// Print the completion script for SHELL on stdout (the Debian package
    /// installs bash, zsh and fish ones; e.g. `grove completions bash >
    /// ~/.local/share/bash-completion/completions/grove`).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a man page for grove and every subcommand into DIR (the
    /// package build runs this; hidden from help, the man pages and the
    /// completions).
    #[command(hide = true)]
    Manpages {
        /// The directory the `*.1` pages are written to (created if missing).
        dir: PathBuf,
    },
}

pub fn run(cmd: GenerateCmd) -> anyhow::Result<()> {
    let command = crate::Args::command();
    match cmd {
        GenerateCmd::Completions { shell } => {
            let name = command.get_name().to_string();
            // clap_complete completes hidden subcommands too: leave them out.
            let shown: Vec<clap::Command> = command
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .cloned()
                .collect();
            let mut visible = clap::Command::new(env!("CARGO_BIN_NAME"))
                .args(command.get_arguments().cloned())
                .subcommands(shown);
            clap_complete::generate(shell, &mut visible, name, &mut std::io::stdout().lock());
            Ok(())
        }
        GenerateCmd::Manpages { dir } => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, &dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))
        }
    }
}
