//! Whether decoded input is text, judged before anything is stored: the
//! shares of character classes in each stretch of it (no dictionary, so the
//! rule holds for every language and script).
//!
//! Random or binary bytes decode to *something* (invalid UTF-8 falls back to
//! windows-1252, where every byte is a character), so decoding alone cannot
//! refuse them. Their mark is the share of control characters: about 13 % of
//! random bytes decode to one, written text has next to none. Text that went
//! through a lossy conversion is full of U+FFFD, and a dump of symbols has
//! few letters or digits. Each test is per stretch, so a text file with a
//! binary blob appended is refused too, and a short file needs a few bad
//! characters, not one, to fail.

/// Characters per judged stretch (the last one may be shorter).
pub const STRETCH_CHARS: usize = 4096;

/// A stretch fails a share test only with at least this many bad
/// characters, so one stray control character in a short file passes.
const MIN_BAD: usize = 5;

/// The tests, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextTest {
    /// At most 1 % control characters (tab, line feed and form feed are text).
    ControlCharacters,
    /// At most 1 % U+FFFD replacement characters.
    ReplacementCharacters,
    /// At least 30 % of the non-space characters are letters or digits.
    LettersAndDigits,
}

impl TextTest {
    /// The name errors give the test.
    pub fn name(self) -> &'static str {
        match self {
            TextTest::ControlCharacters => "control characters",
            TextTest::ReplacementCharacters => "replacement characters",
            TextTest::LettersAndDigits => "letters and digits",
        }
    }
}

/// The first stretch that failed a test, and by how much.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "it does not look like text: the `{}` test failed on characters {}..{}: {} ({} of {} characters), {}",
    test.name(), start, start + len, describe(*test, *share_permille), bad, judged, limit(*test)
)]
pub struct NotText {
    pub test: TextTest,
    /// Index of the stretch's first character in the decoded text.
    pub start: usize,
    /// Characters in the stretch.
    pub len: usize,
    /// Characters the test counted as bad (for letters: not letter or digit).
    pub bad: usize,
    /// Characters the share is taken of.
    pub judged: usize,
    /// `bad` in thousandths of `judged`.
    pub share_permille: usize,
}

fn describe(test: TextTest, permille: usize) -> String {
    let pct = format!("{}.{}%", permille / 10, permille % 10);
    match test {
        TextTest::ControlCharacters => format!("{pct} are control characters"),
        TextTest::ReplacementCharacters => format!("{pct} are U+FFFD replacement characters"),
        TextTest::LettersAndDigits => {
            format!("{pct} of the non-space characters are neither letters nor digits")
        }
    }
}

fn limit(test: TextTest) -> &'static str {
    match test {
        TextTest::ControlCharacters | TextTest::ReplacementCharacters => "over the limit of 1%",
        TextTest::LettersAndDigits => "over the limit of 70%",
    }
}

/// Counts of one stretch's character classes.
#[derive(Default)]
struct Classes {
    chars: usize,
    control: usize,
    replacement: usize,
    non_space: usize,
    alphanumeric: usize,
}

impl Classes {
    fn add(&mut self, c: char) {
        self.chars += 1;
        if c.is_control() && !matches!(c, '\t' | '\n' | '\x0c') {
            self.control += 1;
        } else if c == '\u{FFFD}' {
            self.replacement += 1;
        }
        if !c.is_whitespace() {
            self.non_space += 1;
            if c.is_alphanumeric() {
                self.alphanumeric += 1;
            }
        }
    }

    /// The first test this stretch fails.
    fn verdict(&self, start: usize) -> Result<(), NotText> {
        let fail = |test, bad: usize, judged: usize| NotText {
            test,
            start,
            len: self.chars,
            bad,
            judged,
            share_permille: bad * 1000 / judged.max(1),
        };
        let over_one_percent = |bad: usize| bad >= MIN_BAD && bad * 100 > self.chars;
        if over_one_percent(self.control) {
            return Err(fail(TextTest::ControlCharacters, self.control, self.chars));
        }
        if over_one_percent(self.replacement) {
            return Err(fail(
                TextTest::ReplacementCharacters,
                self.replacement,
                self.chars,
            ));
        }
        let other = self.non_space - self.alphanumeric;
        if other >= MIN_BAD && other * 10 > self.non_space * 7 {
            return Err(fail(TextTest::LettersAndDigits, other, self.non_space));
        }
        Ok(())
    }
}

/// Judges decoded text stretch by stretch; the first failing stretch and
/// test is the error.
pub fn judge(text: &str) -> Result<(), NotText> {
    let mut classes = Classes::default();
    let mut start = 0;
    for c in text.chars() {
        classes.add(c);
        if classes.chars == STRETCH_CHARS {
            classes.verdict(start)?;
            start += STRETCH_CHARS;
            classes = Classes::default();
        }
    }
    if classes.chars > 0 {
        classes.verdict(start)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeded bytes, uniform over 1..=255 (NULs removed, as the input).
    fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let b = (state >> 56) as u8;
            if b != 0 {
                out.push(b);
            }
        }
        out
    }

    #[test]
    fn prose_in_several_scripts_passes() {
        let english = "It was the best of times, it was the worst of times.\n\n\tChapter 1.\x0c\n";
        let french = "Ça a été un été très chaud à Noël, dit-elle.";
        let russian = "Все счастливые семьи похожи друг на друга.";
        let chinese = "道可道，非常道。名可名，非常名。";
        for text in [english, french, russian, chinese] {
            assert_eq!(judge(&text.repeat(200)), Ok(()), "{text}");
        }
        // Numbered tables and identifiers are letters and digits too.
        let table: String = (0..2000).map(|i| format!("q{i}_{} ", i % 7)).collect();
        assert_eq!(judge(&table), Ok(()));
        // A stray control or replacement character in a short text passes.
        assert_eq!(judge("Caf\u{e9} \u{81} text \u{FFFD}."), Ok(()));
    }

    #[test]
    fn random_bytes_fail_the_control_test_in_every_stretch() {
        let bytes = random_bytes(200_000, 7);
        let text = crate::text::decode(&bytes);
        let e = judge(&text).unwrap_err();
        assert_eq!(e.test, TextTest::ControlCharacters);
        assert_eq!(e.start, 0);
        assert!(e.share_permille > 80, "{e}");
        // Every stretch of random bytes fails on its own, wherever it sits.
        let mut late = "Plain words. ".repeat(2000);
        late.push_str(&text);
        let e = judge(&late).unwrap_err();
        assert!(e.start >= 4096 * 6, "{e}");
        assert!(
            e.to_string().contains("`control characters` test failed"),
            "{e}"
        );
    }

    #[test]
    fn lossy_text_and_symbol_dumps_are_refused_by_name() {
        let lossy = "word \u{FFFD}\u{FFFD} ".repeat(500);
        assert_eq!(
            judge(&lossy).unwrap_err().test,
            TextTest::ReplacementCharacters
        );
        let symbols = "#@!$%^&*()<>?{}[]|~ ".repeat(300);
        assert_eq!(
            judge(&symbols).unwrap_err().test,
            TextTest::LettersAndDigits
        );
    }
}
