//! The `grove` command line: one file per command group, run on a [`Ctx`].

pub mod audit;
pub mod book;
pub mod shard;

use std::path::PathBuf;

use serde::Serialize;

/// What every command gets: the resolved settings and output mode.
pub struct Ctx {
    /// Validated settings (file, env, flags already merged).
    pub settings: grove::config::Settings,
    /// The state directory every database lives under.
    pub state_dir: PathBuf,
    /// Print JSON for scripting instead of human text.
    pub json: bool,
}

impl Ctx {
    pub fn store(&self) -> grove::store::Store {
        grove::store::Store::new(&self.state_dir)
    }
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Milliseconds since the Unix epoch (the store's clock).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `value` or a dash for human output of missing metadata.
pub fn or_dash(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("-")
}
