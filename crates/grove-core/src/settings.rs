//! The one shape of a refused setting: the full key (`moot.k`,
//! `hooks.program`) and why. Every settings check returns it, in the core
//! and at the edges; the grove crate's `ConfigError` shows it.

/// A setting refused by its check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config key `{key}`: {reason}")]
pub struct Invalid {
    /// The dotted key as the operator writes it in grove.toml.
    pub key: &'static str,
    pub reason: String,
}

impl Invalid {
    pub fn new(key: &'static str, reason: impl Into<String>) -> Invalid {
        Invalid {
            key,
            reason: reason.into(),
        }
    }
}
