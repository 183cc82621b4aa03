//! Names and notes people give (display names, mesh names, invite notes):
//! the one rule for what they may hold, and [`Escaped`], the one way to
//! print text that came from a peer.
//!
//! The rule: Unicode letters, marks, numbers, punctuation, symbols and
//! spaces (`[\p{L}\p{M}\p{N}\p{P}\p{S}\p{Zs}]`); so no control or format
//! characters (line breaks, tabs, ANSI escapes, bidi overrides, zero-width
//! characters), no line or paragraph separators, nothing private-use or
//! unassigned, no U+FFFD (what bytes that were not UTF-8 decode to). No
//! blank at either end; a name is never empty; lengths are
//! counted in characters. Symbols are allowed (`C++`, `$`, emoji): they
//! print as themselves and cannot forge a line. The mesh state machine
//! applies the rule to every add and approval, so every member decides the
//! same; it is not applied to rosters already stored, so a mesh made before
//! the rule still loads.

use std::fmt;
use std::sync::OnceLock;

use crate::text::class::CharClass;

/// What a piece of text names; each has its own limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// A member's display name (`mesh join --as`, `mesh init --as`, `node.name`).
    DisplayName,
    /// The mesh's name (`mesh init --name`).
    MeshName,
    /// The note kept with an invite (`mesh invite --note`); may be empty.
    InviteNote,
}

impl Field {
    /// The most characters a value may have.
    pub const fn max_chars(self) -> usize {
        match self {
            Field::DisplayName | Field::MeshName => 64,
            // An invite note travels in the signed invite, whose text form
            // must stay short enough to paste (MAX_INVITE_BYTES in all).
            Field::InviteNote => 200,
        }
    }

    pub const fn what(self) -> &'static str {
        match self {
            Field::DisplayName => "display name",
            Field::MeshName => "mesh name",
            Field::InviteNote => "invite note",
        }
    }
}

/// Why a name or note is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("the {what} is empty")]
    Empty { what: &'static str },
    #[error("the {what} is {chars} characters long; at most {max}")]
    TooLong {
        what: &'static str,
        chars: usize,
        max: usize,
    },
    #[error("the {what} starts or ends with a blank")]
    Blank { what: &'static str },
    #[error(
        "the {what} holds {}, a {kind} (character {at}); names and notes hold letters, marks, \
         numbers, punctuation, symbols and spaces",
        codepoint(*.found)
    )]
    Forbidden {
        what: &'static str,
        found: char,
        kind: &'static str,
        at: usize,
    },
}

fn codepoint(c: char) -> String {
    format!("U+{:04X}", u32::from(c))
}

/// The characters a name or note may hold.
fn allowed() -> &'static CharClass {
    static CLASS: OnceLock<CharClass> = OnceLock::new();
    CLASS.get_or_init(|| CharClass::unicode(r"[\p{L}\p{M}\p{N}\p{P}\p{S}\p{Zs}]"))
}

fn is_allowed(c: char) -> bool {
    // Printable ASCII (space to tilde) is the common case. U+FFFD is a
    // symbol, but in a name it stands for bytes that were not UTF-8 (a
    // lossy decoding, e.g. of `%FF` in a query), so it is refused too.
    matches!(c, ' '..='~') || (!c.is_ascii() && c != '\u{fffd}' && allowed().contains(c))
}

/// What kind of character a refused one is, for the error.
fn kind_of(c: char) -> &'static str {
    static FORMAT: OnceLock<CharClass> = OnceLock::new();
    if c == '\n' || c == '\r' || c == '\u{2028}' || c == '\u{2029}' || c == '\u{85}' {
        "line break"
    } else if c == '\t' {
        "tab"
    } else if c == '\u{fffd}' {
        "replacement character (the text was not valid UTF-8)"
    } else if c == '\u{1b}' {
        "terminal escape"
    } else if c.is_control() {
        "control character"
    } else if FORMAT
        .get_or_init(|| CharClass::unicode(r"\p{Cf}"))
        .contains(c)
    {
        "format character (invisible, e.g. zero-width or a text-direction override)"
    } else {
        "character that is unassigned, private-use or a separator"
    }
}

/// Checks `text` against the rule for `field`.
pub fn check(field: Field, text: &str) -> Result<(), NameError> {
    let what = field.what();
    if text.is_empty() {
        return if field == Field::InviteNote {
            Ok(())
        } else {
            Err(NameError::Empty { what })
        };
    }
    if let Some((i, c)) = text.chars().enumerate().find(|(_, c)| !is_allowed(*c)) {
        return Err(NameError::Forbidden {
            what,
            found: c,
            kind: kind_of(c),
            at: i + 1,
        });
    }
    let chars = text.chars().count();
    if chars > field.max_chars() {
        return Err(NameError::TooLong {
            what,
            chars,
            max: field.max_chars(),
        });
    }
    if text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace) {
        return Err(NameError::Blank { what });
    }
    Ok(())
}

/// Prints text that came from a peer (or was stored before the rule) so
/// it cannot forge output: what the rule refuses is written as an escape
/// (`\n`, `\t`, `\r`, else `\u{…}`), so a name cannot start a new line,
/// colour a terminal or reverse the text after it. Text the rule allows
/// prints as itself.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.0.chars() {
            match c {
                _ if is_allowed(c) => f.write_char(c)?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                _ => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// [`Escaped`] as an owned string (for text built once and printed later).
pub fn escaped(text: &str) -> String {
    Escaped(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_pass() {
        for name in [
            "alice",
            "Zoë Ødegaard",
            "名前",
            "C++ club",
            "O'Brien-Smith (lab 2)",
            "café au lait ☕",
            "e\u{301}", // e + combining acute (a mark)
            "x",
        ] {
            assert_eq!(check(Field::DisplayName, name), Ok(()), "{name:?}");
        }
        assert_eq!(check(Field::InviteNote, ""), Ok(()));
        assert_eq!(check(Field::DisplayName, &"é".repeat(64)), Ok(()));
    }

    #[test]
    fn forging_and_blank_names_are_refused() {
        for (name, kind) in [
            ("evil\nFAKE LOG LINE joined at epoch 99", "line break"),
            ("red\u{1b}[31m", "terminal escape"),
            ("a\tb", "tab"),
            ("nul\0", "control character"),
            ("abc\u{202e}txt.exe", "format character"),
            ("zero\u{200b}width", "format character"),
            ("line\u{2028}sep", "line break"),
            ("private\u{e000}", "unassigned"),
            ("lossy\u{fffd}\u{fffd}", "not valid UTF-8"),
        ] {
            match check(Field::DisplayName, name) {
                Err(NameError::Forbidden { kind: k, .. }) => {
                    assert!(k.contains(kind), "{name:?}: {k}")
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
        assert!(matches!(
            check(Field::MeshName, ""),
            Err(NameError::Empty { .. })
        ));
        for blank in [" ", "  lead", "trail ", "\u{3000}wide"] {
            assert!(
                matches!(
                    check(Field::DisplayName, blank),
                    Err(NameError::Blank { .. })
                ),
                "{blank:?}"
            );
        }
        assert!(matches!(
            check(Field::DisplayName, &"é".repeat(65)),
            Err(NameError::TooLong { chars: 65, .. })
        ));
        assert!(matches!(
            check(Field::InviteNote, &"n".repeat(4000)),
            Err(NameError::TooLong { max: 200, .. })
        ));
    }

    #[test]
    fn escaping_keeps_allowed_text_and_defuses_the_rest() {
        assert_eq!(escaped("Zoë ☕"), "Zoë ☕");
        assert_eq!(
            escaped("evil\nFAKE\t\u{1b}[31m\u{202e}"),
            "evil\\nFAKE\\t\\u{1b}[31m\\u{202e}"
        );
        // What is escaped passes the rule.
        assert_eq!(
            check(Field::DisplayName, &escaped("a\u{0}b\r\nc\u{200d}")),
            Ok(())
        );
    }
}
