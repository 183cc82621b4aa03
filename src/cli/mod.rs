//! The `grove` command line: one file per command group, run on a [`Ctx`];
//! every answer is a DTO printed through [`Ctx::show`].

pub mod ask;
pub mod audit;
pub mod backup;
pub mod book;
pub mod completions;
pub mod config;
pub mod doctor;
pub mod identity;
pub mod mesh;
pub mod model;
pub mod moot;
pub mod node;
pub mod or_local;
pub mod peers;
pub mod shard;
pub mod show;

use std::path::PathBuf;

pub use show::{Show, or_dash, print_json, when};

/// `moot verify` found an export valid that nothing the reader pinned
/// anchors: the report said so; the program exits with
/// [`Unanchored::EXIT_STATUS`], apart from success (0) and failure (1).
#[derive(Debug, thiserror::Error)]
#[error("valid, but unanchored")]
pub struct Unanchored;

impl Unanchored {
    pub const EXIT_STATUS: u8 = 3;
}

/// What every command gets: the checked configuration and output mode.
pub struct Ctx {
    /// The configuration, checked once (file, env and flags merged).
    pub config: grove::config::Config,
    /// The state directory every database lives under.
    pub state_dir: PathBuf,
    /// Print JSON for scripting instead of human text.
    pub json: bool,
    /// The control socket commands talk to (`Settings::client_socket`).
    pub socket: PathBuf,
}

impl Ctx {
    /// The book operations: through the daemon when one answers on the
    /// control socket (so there is one writer), else directly on the state.
    pub fn books(&self) -> Box<dyn grove::api::books::BookApi> {
        let local = grove::books::LocalBooks::new(
            &self.state_dir,
            self.settings().limits.clone(),
            self.settings().default_shard.clone(),
        );
        match grove::api::client::Client::connect(&self.socket) {
            // A daemon gone by the time the request is sent: done here.
            Some(client) => Box::new(or_local::OrLocal { client, local }),
            None => Box::new(local),
        }
    }
}

impl Ctx {
    /// The checked settings.
    pub fn settings(&self) -> &grove::config::Settings {
        self.config.settings()
    }

    /// The control socket this node's daemon answers on.
    pub fn socket(&self) -> PathBuf {
        self.socket.clone()
    }

    /// A client of the running daemon, when one answers.
    pub fn daemon_if_running(&self) -> Option<grove::api::client::Client> {
        grove::api::client::Client::connect(&self.socket())
    }

    /// A client of the running daemon, or the one-line error saying it is
    /// not running and which socket was tried.
    pub fn daemon(&self) -> anyhow::Result<grove::api::client::Client> {
        self.daemon_if_running().ok_or_else(|| {
            anyhow::anyhow!(
                "the grove daemon is not running (nothing answers on {}); start it with `grove node run`",
                self.socket().display()
            )
        })
    }
}
