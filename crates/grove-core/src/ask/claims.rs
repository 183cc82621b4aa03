//! An answer's lines read as claims: each line one claim ending in its
//! evidence pointers (`The Pequod's captain is Ahab. [E2]`). A line
//! with no pointer is unsourced; a line whose pointers are malformed or
//! stand anywhere but at its end does not parse.

/// One line of an answer, as the verifier reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimLine {
    /// 1-based line number among the answer's non-blank lines.
    pub line: usize,
    /// The line as written (trimmed).
    pub raw: String,
    /// The claim: the line without its list marker and pointer groups.
    pub text: String,
    /// The pointers' numbers in order (`E2` is 2); a number too large to
    /// read is `u32::MAX`, which resolves to nothing.
    pub pointers: Vec<u32>,
    pub shape: LineShape,
}

/// What a line is, before any evidence is looked at.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineShape {
    /// Text ending in one or more well-formed pointer groups.
    Claim,
    /// Text with no pointer at all.
    Unsourced,
    /// A pointer group that is malformed or not at the line's end.
    Unparsed(String),
}

/// Reads an answer's non-blank lines.
pub fn parse_answer(answer: &str) -> Vec<ClaimLine> {
    answer
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, raw)| parse_line(i + 1, raw))
        .collect()
}

fn parse_line(line: usize, raw: &str) -> ClaimLine {
    let mut body = strip_list_marker(raw);
    let mut groups: Vec<Vec<u32>> = Vec::new();
    // Pointer groups are peeled off the end, marks allowed after them
    // ("… Ahab [E2].", "… [E2];.").
    loop {
        let trimmed = body.trim_end_matches(|c: char| c.is_whitespace() || ".,;:!?".contains(c));
        match trailing_group(trimmed) {
            Some((rest, pointers)) => {
                groups.push(pointers);
                body = rest;
            }
            None => break,
        }
    }
    groups.reverse();
    let pointers: Vec<u32> = groups.into_iter().flatten().collect();
    let text = body.trim().to_string();
    let shape = if let Some(problem) = stray_pointer(&text) {
        LineShape::Unparsed(problem)
    } else if pointers.is_empty() {
        LineShape::Unsourced
    } else {
        LineShape::Claim
    };
    ClaimLine {
        line,
        raw: raw.to_string(),
        text,
        pointers,
        shape,
    }
}

/// A line's text after a list marker (`- `, `* `, `• `, `3. `, `3) `).
fn strip_list_marker(raw: &str) -> &str {
    for marker in ["- ", "* ", "\u{2022} "] {
        if let Some(rest) = raw.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    let digits = raw.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = &raw[digits..];
        for marker in [". ", ") "] {
            if let Some(rest) = rest.strip_prefix(marker) {
                return rest.trim_start();
            }
        }
    }
    raw
}

/// A well-formed pointer group at the end of `s`: `[E1]`, `[E1, E3]`,
/// `[e2 e4]`; returns the text before it and the numbers.
fn trailing_group(s: &str) -> Option<(&str, Vec<u32>)> {
    let inner_end = s.strip_suffix(']')?;
    let open = inner_end.rfind('[')?;
    let pointers = parse_group(&inner_end[open + 1..])?;
    Some((&s[..open], pointers))
}

/// The pointers of a group's inside: `E` and digits, separated by runs of
/// commas and white space, optional white space around.
fn parse_group(inner: &str) -> Option<Vec<u32>> {
    let inner = inner.trim();
    if inner.is_empty() || inner.ends_with(',') || inner.starts_with(',') {
        return None;
    }
    let mut pointers = Vec::new();
    for item in inner.split(|c: char| c == ',' || c.is_whitespace()) {
        if item.is_empty() {
            continue;
        }
        let digits = item.strip_prefix(['E', 'e'])?;
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        pointers.push(digits.parse().unwrap_or(u32::MAX));
    }
    Some(pointers)
}

/// Why the text left after the trailing groups still holds a pointer, if it
/// does: a group in the middle of the line, or one that does not parse.
fn stray_pointer(text: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = text[from..].find('[') {
        let open = from + at;
        let after = text[open + 1..].trim_start();
        if after.starts_with(['E', 'e']) && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
            let well_formed = text[open..]
                .find(']')
                .and_then(|close| parse_group(&text[open + 1..open + close]))
                .is_some();
            return Some(if well_formed {
                "a pointer stands before the line's end".to_string()
            } else {
                "a pointer group is malformed".to_string()
            });
        }
        from = open + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> ClaimLine {
        parse_answer(line).remove(0)
    }

    #[test]
    fn pointers_end_the_line() {
        let c = one("The Pequod's captain is Ahab. [E2]");
        assert_eq!(c.shape, LineShape::Claim);
        assert_eq!(c.text, "The Pequod's captain is Ahab.");
        assert_eq!(c.pointers, vec![2]);
        let c = one("- He wants the whale [E1, e3] [E4];.");
        assert_eq!(c.text, "He wants the whale");
        assert_eq!(c.pointers, vec![1, 3, 4]);
        assert_eq!(one("2. Ahab. [E9999999999]").pointers, vec![u32::MAX]);
    }

    #[test]
    fn lines_without_pointers_are_unsourced() {
        let lines = parse_answer("Ahab is the captain.\n\n  I am not sure [see E1] of it. ");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].shape, LineShape::Unsourced);
        assert_eq!(lines[1].line, 2);
        assert_eq!(lines[1].shape, LineShape::Unsourced);
    }

    #[test]
    fn stray_or_malformed_pointers_do_not_parse() {
        assert!(matches!(
            one("Ahab [E1] is captain.").shape,
            LineShape::Unparsed(_)
        ));
        assert!(matches!(
            one("Ahab is captain [E1,]").shape,
            LineShape::Unparsed(_)
        ));
        assert!(matches!(
            one("Ahab is captain [E1").shape,
            LineShape::Unparsed(_)
        ));
        assert!(matches!(
            one("Ahab is captain [E1 x]").shape,
            LineShape::Unparsed(_)
        ));
    }
}
