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

/// Characters of a value an error shows whole.
pub const SHOWN_CHARS: usize = 80;

/// A value as an error shows it: whole up to 80 characters, else its start
/// and its length; control characters escaped, so it stays on one line.
pub fn shown(value: &str) -> String {
    let escape = |s: &str| -> String {
        s.chars()
            .flat_map(|c| {
                let escaped: Vec<char> = if c.is_control() {
                    c.escape_default().collect()
                } else {
                    vec![c]
                };
                escaped
            })
            .collect()
    };
    let n = value.chars().count();
    if n <= SHOWN_CHARS {
        return escape(value);
    }
    let head: String = value.chars().take(SHOWN_CHARS - 20).collect();
    format!("{}… ({n} characters)", escape(&head))
}
