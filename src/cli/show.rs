//! One way to print a command's answer: pretty JSON with `--json`, else the
//! human text its [`Show`] impl writes. Commands build a DTO and call
//! [`Ctx::show`]; only progress lines for people (a moot's turns as they
//! land, "installing …") look at `ctx.json` themselves.

use std::io::{self, Write};

use serde::Serialize;

use super::Ctx;

/// A command's answer: serializable for `--json`, readable for people.
pub trait Show: Serialize {
    /// The human text, on stdout.
    fn text(&self, out: &mut dyn Write) -> io::Result<()>;

    /// A remark for people on stderr after the text (how to go on, what was
    /// skipped); stdout keeps only the answer, so scripts can read it.
    fn note(&self, _err: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

impl Ctx {
    /// Prints `value`: pretty JSON with `--json`, else its text and note.
    pub fn show<T: Show + ?Sized>(&self, value: &T) -> anyhow::Result<()> {
        if self.json {
            return print_json(value);
        }
        value.text(&mut io::stdout().lock())?;
        value.note(&mut io::stderr().lock())?;
        Ok(())
    }

    /// Prints one item of a stream (`moot watch`): one compact JSON line
    /// with `--json`, else its text.
    pub fn show_line<T: Show + ?Sized>(&self, value: &T) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_string(value)?);
            return Ok(());
        }
        value.text(&mut io::stdout().lock())?;
        Ok(())
    }
}

/// Prints a value as pretty JSON on stdout (for outputs that are JSON in
/// every mode, such as `moot export`).
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// `value` or a dash for human output of missing metadata.
pub fn or_dash(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("-")
}
