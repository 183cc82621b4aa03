//! A book as it comes in (pure): decoded, judged, split into header and body,
//! and chunked. Decoding refuses a bad input before any transaction starts;
//! `Shard::ingest` hashes and stores the chunks as they come (a chunk over the
//! limit found midway rolls it back).

use crate::text::{self, Chunk, ChunkError, Metadata, NotText};

/// Why a book could not be prepared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PrepareError {
    #[error("the input is empty")]
    Empty,
    #[error("the input holds NUL bytes (at byte {0}); it is not a text file")]
    NulByte(usize),
    #[error(
        "the input looks like UTF-16 ({0}), which gutenberg-v1 does not decode; convert it to UTF-8 first, e.g. `iconv -f UTF-16 -t UTF-8 FILE > FILE.txt`"
    )]
    Utf16(&'static str),
    #[error("{0}; pass --force to store it anyway")]
    NotText(#[from] NotText),
    #[error("the input is {bytes} bytes, over the limit of {limit} (limits.max_book_bytes)")]
    TooLarge { bytes: u64, limit: u64 },
    #[error(transparent)]
    Chunks(#[from] ChunkError),
}

/// A decoded book, checked and ready to chunk: its text, metadata and
/// where its body lies in the text.
#[derive(Debug, Clone)]
pub struct BookText {
    pub text: String,
    pub meta: Metadata,
    pub body: std::ops::Range<usize>,
    /// Size of the input in bytes.
    pub bytes: u64,
}

impl BookText {
    /// Refuses empty, oversized and binary input, then decodes and splits it.
    pub fn decode(input: &[u8], max_book_bytes: u64) -> Result<BookText, PrepareError> {
        if input.is_empty() {
            return Err(PrepareError::Empty);
        }
        if input.len() as u64 > max_book_bytes {
            return Err(PrepareError::TooLarge {
                bytes: input.len() as u64,
                limit: max_book_bytes,
            });
        }
        if let Some(at) = input.iter().position(|b| *b == 0) {
            return Err(utf16_order(input).map_or(PrepareError::NulByte(at), PrepareError::Utf16));
        }
        let text = text::decode(input);
        let (meta, body) = text::split(&text);
        Ok(BookText {
            text,
            meta,
            body,
            bytes: input.len() as u64,
        })
    }

    pub fn body(&self) -> &str {
        &self.text[self.body.clone()]
    }

    /// Chunks the body (`para-200-v1`): the one way from a decoded book to
    /// its chunks. `out` receives each chunk as soon as it is complete, so
    /// an ingest stores while it reads; a chunk over `max_chunk_bytes` or a
    /// body with no chunk at all is refused. Returns the chunk count.
    pub fn chunk(
        &self,
        max_chunk_bytes: u64,
        out: &mut dyn FnMut(Chunk),
    ) -> Result<u64, ChunkError> {
        let max = usize::try_from(max_chunk_bytes).unwrap_or(usize::MAX);
        let mut chunker = text::Chunker::new(max);
        for para in text::paragraphs(self.body()) {
            chunker.push(&para, out)?;
        }
        chunker.finish(out)
    }

    /// Every chunk of the body at once ([`BookText::chunk`]).
    pub fn chunks(&self, max_chunk_bytes: u64) -> Result<Vec<Chunk>, ChunkError> {
        let mut chunks = Vec::new();
        self.chunk(max_chunk_bytes, &mut |c| chunks.push(c))?;
        Ok(chunks)
    }

    /// Whether the decoded input is text (`text::judge`); every ingest runs
    /// it unless the operator forces the input in.
    pub fn judge(&self) -> Result<(), PrepareError> {
        Ok(text::judge(&self.text)?)
    }
}

/// `little-endian` or `big-endian` when NUL-holding input looks like UTF-16:
/// a byte-order mark, or NULs in most odd (or even) positions, as ASCII-range
/// text in UTF-16 has. Only asked once NULs have refused the input, so
/// `FF FE` without NULs stays windows-1252 as `gutenberg-v1` says.
fn utf16_order(input: &[u8]) -> Option<&'static str> {
    match input {
        [0xFF, 0xFE, ..] => return Some("little-endian"),
        [0xFE, 0xFF, ..] => return Some("big-endian"),
        _ => {}
    }
    let sample = &input[..input.len().min(1 << 16)];
    let pairs = sample.len() / 2;
    if pairs < 2 {
        return None;
    }
    let zeros_at = |parity: usize| {
        sample
            .chunks_exact(2)
            .filter(|pair| pair[parity] == 0)
            .count()
    };
    if zeros_at(1) * 2 > pairs && zeros_at(0) * 10 < pairs {
        Some("little-endian")
    } else if zeros_at(0) * 2 > pairs && zeros_at(1) * 10 < pairs {
        Some("big-endian")
    } else {
        None
    }
}

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error(
        "invalid key `{0}`: a key is GENRE/SLUG, lowercase letters, digits and '-', each part starting with a letter or digit (e.g. fiction/moby-dick)"
    )]
    Invalid(String),
    #[error("invalid key `{start}…`: it is {len} bytes, over the limit of {MAX_KEY_BYTES}")]
    TooLong { start: String, len: usize },
    #[error("the book has no title to make a key from; pass --key GENRE/SLUG")]
    NoTitle,
}

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;

/// Checks a key against `^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]*$` (at most 128 bytes).
pub fn validate_key(key: &str) -> Result<(), KeyError> {
    let part_ok = |p: &str| {
        p.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if key.len() > MAX_KEY_BYTES {
        return Err(KeyError::TooLong {
            start: key.chars().take(24).collect(),
            len: key.len(),
        });
    }
    match key.split_once('/') {
        Some((genre, slug)) if part_ok(genre) && part_ok(slug) => Ok(()),
        _ => Err(KeyError::Invalid(key.to_string())),
    }
}

/// The default key for a title: `books/<slug>`.
pub fn default_key(title: &str) -> Result<String, KeyError> {
    let slug = slug(title);
    if slug.is_empty() {
        return Err(KeyError::NoTitle);
    }
    Ok(format!("books/{slug}"))
}

/// Lowercase ASCII letters and digits of the title (diacritics dropped), other
/// runs turned into single '-', at most 60 bytes, cut at a '-'.
pub fn slug(title: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let mut out = String::new();
    for c in title.nfkd() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !unicode_normalization::char::is_combining_mark(c) && !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut slug = out.trim_matches('-').to_string();
    if slug.len() > 60 {
        let cut = slug[..60].rfind('-').unwrap_or(60);
        slug.truncate(cut);
    }
    slug
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_BOOK: u64 = 1 << 20;
    const MAX_CHUNK: u64 = 1 << 16;

    /// Decodes and chunks `input` the way an ingest does.
    fn prepare(input: &[u8], max_book: u64) -> Result<Vec<Chunk>, PrepareError> {
        Ok(BookText::decode(input, max_book)?.chunks(MAX_CHUNK)?)
    }

    #[test]
    fn slugs_and_keys() {
        assert_eq!(slug("Moby Dick; Or, The Whale"), "moby-dick-or-the-whale");
        assert_eq!(slug("Café Naïve"), "cafe-naive");
        assert_eq!(default_key("  "), Err(KeyError::NoTitle));
        assert!(validate_key("fiction/moby-dick").is_ok());
        for bad in ["Fiction/x", "fiction", "/x", "a/-b", "a/b/c", "a/b c", ""] {
            assert!(validate_key(bad).is_err(), "{bad}");
        }
        let long = format!("books/{}", "a".repeat(200));
        let e = validate_key(&long).unwrap_err().to_string();
        assert!(e.contains("206 bytes, over the limit of 128"), "{e}");
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert_eq!(prepare(b"", MAX_BOOK).unwrap_err(), PrepareError::Empty);
        assert_eq!(
            prepare(b"ab\0c", MAX_BOOK).unwrap_err(),
            PrepareError::NulByte(2)
        );
        assert_eq!(
            prepare(b"\n \n\t\n", MAX_BOOK).unwrap_err(),
            PrepareError::Chunks(ChunkError::Empty)
        );
        assert!(matches!(
            prepare(b"abcd", 3),
            Err(PrepareError::TooLarge { .. })
        ));
    }

    #[test]
    fn utf16_is_named_and_ff_fe_without_nuls_is_not() {
        let le: Vec<u8> = "Hello, world.\n"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        let be: Vec<u8> = "Hello, world.\n"
            .encode_utf16()
            .flat_map(|u| u.to_be_bytes())
            .collect();
        assert_eq!(
            prepare(&le, MAX_BOOK).unwrap_err(),
            PrepareError::Utf16("little-endian")
        );
        assert_eq!(
            prepare(&be, MAX_BOOK).unwrap_err(),
            PrepareError::Utf16("big-endian")
        );
        let mut bom = vec![0xFF, 0xFE];
        bom.extend_from_slice(&le);
        assert!(matches!(
            prepare(&bom, MAX_BOOK),
            Err(PrepareError::Utf16(_))
        ));
        assert!(prepare(b"\xff\xfeAB caf\xe9\n", MAX_BOOK).is_ok());
        assert_eq!(
            prepare(b"ab\0c\0\0d", MAX_BOOK).unwrap_err(),
            PrepareError::NulByte(2)
        );
    }
}
