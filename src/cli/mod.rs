//! The `grove` command line: one file per command group, run on a [`Ctx`].

use std::path::PathBuf;

/// What every command gets: the resolved settings and output mode.
pub struct Ctx {
    /// Validated settings (file, env, flags already merged).
    pub settings: grove::config::Settings,
    /// The state directory every database lives under.
    pub state_dir: PathBuf,
    /// Print JSON for scripting instead of human text.
    pub json: bool,
}
