//! `grove moot`: moots run on this node ([`local`]: `run`, `check`), moots
//! hosted by the running daemon between members' books ([`hosted`]:
//! `start`, `list`, `show`, `watch`, `resume`, `export`), and the offline
//! re-check of a transcript or an export ([`verify`]).

pub mod hosted;
pub mod local;
pub mod verify;

use std::path::PathBuf;

use crate::cli::Ctx;

/// The flags `moot run` (local) and `moot start` (hosted) share; unset
/// ones come from the `moot` config section.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MootFlags {
    /// What the books talk about (default: each opens on its own title).
    #[arg(long)]
    pub topic: Option<String>,
    /// Number of turns, both books together [config: moot.turns, default 8].
    #[arg(long)]
    pub turns: Option<u32>,
    /// Passages retrieved per turn [config: moot.k, default 6].
    #[arg(short = 'k', long = "k")]
    pub k: Option<usize>,
    /// Token budget of one reply [config: moot.max_tokens].
    #[arg(long)]
    pub max_tokens: Option<u32>,
}

#[derive(clap::Subcommand, Debug)]
pub enum MootCmd {
    /// Run a moot between two stored books on the local model.
    Run(local::RunArgs),
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
    Start(hosted::StartArgs),
    /// The moots this node hosts.
    List,
    /// One hosted moot: state (running, paused and why, finished) and transcript.
    Show {
        /// The moot's id (see `grove moot list`).
        id: String,
    },
    /// Print a hosted moot's turns as they land, until it finishes or pauses.
    Watch {
        /// The moot's id (see `grove moot list`).
        id: String,
    },
    /// Resume a paused moot (turns already accepted are kept).
    Resume {
        /// The paused moot's id (see `grove moot list`).
        id: String,
    },
    /// Print a finished moot's export (signed by this node) for `moot verify`.
    Export {
        /// The finished moot's id (see `grove moot list`).
        id: String,
    },
}

pub fn run(cmd: MootCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        MootCmd::Run(args) => local::run_stored(&args, ctx),
        MootCmd::Check => local::check(ctx),
        MootCmd::Verify {
            file,
            expect_mesh,
            expect_roster,
        } => verify::verify(ctx, &file, expect_mesh.as_deref(), expect_roster.as_deref()),
        MootCmd::Start(args) => hosted::start(&args, ctx),
        MootCmd::List => hosted::list(ctx),
        MootCmd::Show { id } => hosted::show(&id, ctx),
        MootCmd::Watch { id } => hosted::watch(&id, ctx),
        MootCmd::Resume { id } => hosted::resume(&id, ctx),
        MootCmd::Export { id } => hosted::export(&id, ctx),
    }
}
