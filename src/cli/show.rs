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

/// A moment for people: local date and time, and how far it is from `now_ms`
/// (`2026-12-02 09:14 (in 23 h)`, `2026-12-01 08:02 (5 min ago)`). Both are
/// Unix milliseconds; `--json` keeps them as they are.
pub fn when(ms: i64, now_ms: i64) -> String {
    format!("{} ({})", local_time(ms), relative(ms - now_ms))
}

/// `YYYY-MM-DD HH:MM` in the local time zone (`TZ`, else the system's).
fn local_time(ms: i64) -> String {
    let secs: libc::time_t = ms.div_euclid(1000) as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r fills in; both pointers
    // are valid for the call and localtime_r keeps neither.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return format!("{ms} (Unix ms)");
        }
        tm
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min
    )
}

/// `in 23 h`, `5 min ago`, `now`: the largest unit that fits, rounded down.
pub fn relative(delta_ms: i64) -> String {
    let secs = delta_ms.unsigned_abs() / 1000;
    let amount = match secs {
        0 => return "now".into(),
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86_400),
    };
    if delta_ms > 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_pick_the_largest_unit() {
        assert_eq!(relative(0), "now");
        assert_eq!(relative(999), "now");
        assert_eq!(relative(40_000), "in 40 s");
        assert_eq!(relative(-5 * 60_000 - 1), "5 min ago");
        assert_eq!(relative(23 * 3_600_000 + 59 * 60_000), "in 23 h");
        assert_eq!(relative(-47 * 3_600_000), "47 h ago");
        assert_eq!(relative(7 * 86_400_000), "in 7 d");
    }

    #[test]
    fn moments_show_a_local_date_and_no_milliseconds() {
        let now = 1_796_000_000_000; // 2026-12-01
        let text = when(now + 86_400_000, now);
        assert!(text.ends_with("(in 24 h)"), "{text}");
        let date = text.split(' ').next().unwrap();
        assert_eq!(date.len(), 10, "{text}");
        assert!(date.starts_with("2026-12-0"), "{text}");
        assert!(!text.contains("1796"), "{text}");
    }
}
