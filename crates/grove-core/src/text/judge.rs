//! Whether decoded input is text, judged before anything is stored: the
//! shares of character classes in it (no dictionary, so the rule holds for
//! every language and script).
//!
//! Random or binary bytes decode to *something* (invalid UTF-8 falls back to
//! windows-1252, where every byte is a character), so decoding alone cannot
//! refuse them. Their mark is the share of control characters: about 13 % of
//! random bytes decode to one, written text has next to none. Text that went
//! through a lossy conversion is full of U+FFFD. Those two tests run on each
//! stretch, so a text file with a binary blob appended is refused too.
//!
//! A dump of symbols has few letters or digits, but so does a stretch of a
//! real book: a table, a diagram, ASCII art, a ledger or a table of contents
//! in rows of dots (the Jargon File has one 4 KB stretch at 74 % symbols in
//! 1.4 million characters at 7.5 %). So the letters-and-digits share is
//! judged over the whole text: a book with a few such stretches passes, a
//! file that is mostly symbols does not. A short file needs a few bad
//! characters, not one, to fail any test.

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
    /// At least 30 % of the whole text's non-space characters are letters
    /// or digits.
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

/// The test that failed, where (the first failing stretch, or the whole
/// text for letters and digits), and by how much.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "it does not look like text: the `{}` test failed on {}characters {}..{}: {} ({} of {} characters), {}",
    test.name(), whole(*test), start, start + len, describe(*test, *share_permille), bad, judged, limit(*test)
)]
pub struct NotText {
    pub test: TextTest,
    /// Index of the judged range's first character in the decoded text.
    pub start: usize,
    /// Characters in the judged range.
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

fn whole(test: TextTest) -> &'static str {
    match test {
        TextTest::LettersAndDigits => "the whole text, ",
        TextTest::ControlCharacters | TextTest::ReplacementCharacters => "",
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

    fn fail(&self, test: TextTest, start: usize, bad: usize, judged: usize) -> NotText {
        NotText {
            test,
            start,
            len: self.chars,
            bad,
            judged,
            share_permille: bad * 1000 / judged.max(1),
        }
    }

    /// The first per-stretch test (control, then replacement characters)
    /// this stretch fails.
    fn stretch_verdict(&self, start: usize) -> Result<(), NotText> {
        let over_one_percent = |bad: usize| bad >= MIN_BAD && bad * 100 > self.chars;
        if over_one_percent(self.control) {
            let e = self.fail(TextTest::ControlCharacters, start, self.control, self.chars);
            return Err(e);
        }
        if over_one_percent(self.replacement) {
            let e = self.fail(
                TextTest::ReplacementCharacters,
                start,
                self.replacement,
                self.chars,
            );
            return Err(e);
        }
        Ok(())
    }

    /// The letters-and-digits test, on counts that span the whole text.
    fn letters_verdict(&self) -> Result<(), NotText> {
        let other = self.non_space - self.alphanumeric;
        if other >= MIN_BAD && other * 10 > self.non_space * 7 {
            return Err(self.fail(TextTest::LettersAndDigits, 0, other, self.non_space));
        }
        Ok(())
    }

    fn absorb(&mut self, stretch: &Classes) {
        self.chars += stretch.chars;
        self.control += stretch.control;
        self.replacement += stretch.replacement;
        self.non_space += stretch.non_space;
        self.alphanumeric += stretch.alphanumeric;
    }
}

/// Judges decoded text: control and replacement characters stretch by
/// stretch (the first failing stretch is the error), then letters and
/// digits over the whole text.
pub fn judge(text: &str) -> Result<(), NotText> {
    let mut whole = Classes::default();
    let mut stretch = Classes::default();
    for c in text.chars() {
        stretch.add(c);
        if stretch.chars == STRETCH_CHARS {
            stretch.stretch_verdict(whole.chars)?;
            whole.absorb(&stretch);
            stretch = Classes::default();
        }
    }
    if stretch.chars > 0 {
        stretch.stretch_verdict(whole.chars)?;
        whole.absorb(&stretch);
    }
    whole.letters_verdict()
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

    /// Prose of `n` characters or more, from a seeded mix of sentences.
    fn prose(n: usize, seed: u64) -> String {
        let sentences = [
            "The whale rose beside the boat, and the men fell silent. ",
            "Nobody on the quay could say where the ship had gone. ",
            "A hacker is one who enjoys the intellectual challenge of overcoming limits. ",
            "Marriage, n. the state or condition of a community consisting of a master. ",
            "\n\n",
        ];
        let mut state = seed;
        let mut out = String::new();
        while out.len() < n {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            out.push_str(sentences[(state >> 60) as usize % sentences.len()]);
        }
        out
    }

    /// A piece of ASCII art as books have them (a diagram in a manual).
    fn ascii_art(lines: usize) -> String {
        let rows = [
            "    +--------+      +--------+      +---------+\n",
            "    |  /\\/\\  |----->| [====] |<---->| ##::## |\n",
            "    +---++---+      +--------+      +----++---+\n",
            "        ||  \\\\___________________________//  ||\n",
            "   .....::......::::.....:::::.....::::...::....\n",
        ];
        (0..lines).map(|i| rows[i % rows.len()]).collect()
    }

    #[test]
    fn a_book_with_art_and_tables_passes_a_symbol_dump_does_not() {
        // 2 % of the text is ASCII art, in one block and in scattered ones.
        let body = prose(400_000, 3);
        let art = ascii_art(180);
        assert!(
            art.len() * 50 >= body.len() / 2,
            "{} of {}",
            art.len(),
            body.len()
        );
        let mut one_block = body.clone();
        one_block.insert_str(200_000, &art);
        assert_eq!(judge(&one_block), Ok(()));
        let mut scattered = String::new();
        for (i, piece) in body.as_bytes().chunks(40_000).enumerate() {
            scattered.push_str(std::str::from_utf8(piece).unwrap());
            scattered.push_str(&ascii_art(18 + i % 3));
        }
        assert_eq!(judge(&scattered), Ok(()));
        // A table of contents in rows of dots, at the start of a short book.
        let toc: String = (1..=60)
            .map(|i| {
                format!(
                    "Chapter {i} ..................................... {}\n",
                    i * 7
                )
            })
            .collect();
        assert_eq!(judge(&(toc + &prose(30_000, 4))), Ok(()));
        // A file that is mostly symbols is refused, over the whole text.
        let dump = ascii_art(2000) + &prose(5_000, 5);
        let e = judge(&dump).unwrap_err();
        assert_eq!(e.test, TextTest::LettersAndDigits);
        assert_eq!((e.start, e.len), (0, dump.chars().count()));
        assert!(
            e.to_string()
                .contains("`letters and digits` test failed on the whole text, characters 0.."),
            "{e}"
        );
    }

    #[test]
    fn binary_inside_a_text_is_refused_where_it_sits() {
        // A text with a binary blob appended: the blob's stretches fail the
        // control test, though the whole text is mostly prose.
        let mut bytes = prose(300_000, 6).into_bytes();
        let at = bytes.len();
        bytes.extend(random_bytes(20_000, 9));
        let text = crate::text::decode(&bytes);
        let e = judge(&text).unwrap_err();
        assert_eq!(e.test, TextTest::ControlCharacters);
        assert!(e.start + e.len > at - STRETCH_CHARS, "{e}");
        // A PNG: signature, chunks and compressed pixels.
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x01\0\0\0\x01\0\x08\x06\0\0\0".to_vec();
        png.extend(random_bytes(30_000, 11));
        png.extend(b"\0\0\0\0IEND\xaeB`\x82");
        let e = judge(&crate::text::decode(&png)).unwrap_err();
        assert_eq!(e.test, TextTest::ControlCharacters, "{e}");
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
