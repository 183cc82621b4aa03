//! HTML building blocks of the web pages: escaping (everything that comes
//! from books, names or peers goes through [`esc`]) and the page shell.

use std::fmt::Write;

/// `s` escaped for HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: the shell with its navigation, `body`, and the scripts
/// (paths under `/web/`) it loads.
pub fn page(title: &str, body: &str, scripts: &[&str]) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · grove</title><link rel=\"stylesheet\" href=\"/web/style.css\">",
        esc(title)
    );
    for s in scripts {
        let _ = write!(out, "<script src=\"/web/{s}\" defer></script>");
    }
    let _ = writeln!(
        out,
        "</head><body><a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header class=\"top\"><nav aria-label=\"grove\"><a href=\"/\">grove</a> \
         <a href=\"/asks\">ask the books</a> <a href=\"/verify\">verify an export</a></nav></header>\
         <main id=\"main\">{body}</main></body></html>"
    );
    out
}

/// A Unix-ms time as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A hex string cut to its first 12 characters, the whole in `title`.
pub fn short_hex(hex: &str) -> String {
    let cut: String = hex.chars().take(12).collect();
    format!("<code title=\"{}\">{}…</code>", esc(hex), esc(&cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>\"a\"&'b'</script>"),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn utc_of_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_764_633_600_000), "2025-12-02 00:00:00 UTC");
    }
}
