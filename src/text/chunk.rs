//! `para-200-v1`: packing paragraphs into chunks of at most 200 words.

/// Words per chunk (W in the spec).
pub const WORDS_PER_CHUNK: usize = 200;

/// One chunk: its index and text (units joined by a blank line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub index: u64,
    pub text: String,
}

/// Why a text could not be chunked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChunkError {
    #[error("the text has no paragraphs between its markers, so it yields no chunks")]
    Empty,
    #[error("chunk {index} is {bytes} bytes, over the limit of {limit} (limits.max_chunk_bytes)")]
    TooLarge {
        index: u64,
        bytes: usize,
        limit: usize,
    },
}

/// A chunk's label: `chunk:` and its index in at least four digits.
pub fn label(index: u64) -> String {
    format!("chunk:{index:04}")
}

/// Packs paragraphs (already normalized, single-spaced) into chunks, refusing
/// a book with no chunks or any chunk over `max_chunk_bytes`.
pub fn chunk_paragraphs(
    paragraphs: &[String],
    max_chunk_bytes: usize,
) -> Result<Vec<Chunk>, ChunkError> {
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut current_words = 0usize;
    let emit = |units: &mut Vec<String>, chunks: &mut Vec<Chunk>| -> Result<(), ChunkError> {
        let text = units.join("\n\n");
        units.clear();
        let index = chunks.len() as u64;
        if text.len() > max_chunk_bytes {
            return Err(ChunkError::TooLarge {
                index,
                bytes: text.len(),
                limit: max_chunk_bytes,
            });
        }
        chunks.push(Chunk { index, text });
        Ok(())
    };
    for para in paragraphs {
        let words: Vec<&str> = para.split(' ').collect();
        let units: Vec<(String, usize)> = if words.len() <= WORDS_PER_CHUNK {
            vec![(para.clone(), words.len())]
        } else {
            words
                .chunks(WORDS_PER_CHUNK)
                .map(|piece| (piece.join(" "), piece.len()))
                .collect()
        };
        for (unit, n) in units {
            if !current.is_empty() && current_words + n > WORDS_PER_CHUNK {
                emit(&mut current, &mut chunks)?;
                current_words = 0;
            }
            current.push(unit);
            current_words += n;
        }
    }
    if !current.is_empty() {
        emit(&mut current, &mut chunks)?;
    }
    if chunks.is_empty() {
        return Err(ChunkError::Empty);
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_pad_to_four_digits() {
        assert_eq!(label(7), "chunk:0007");
        assert_eq!(label(12345), "chunk:12345");
    }

    #[test]
    fn long_paragraph_is_cut_and_packed() {
        let long: Vec<String> = (0..450).map(|i| format!("w{i}")).collect();
        let paras = vec!["intro".to_string(), long.join(" ")];
        let chunks = chunk_paragraphs(&paras, 1 << 20).unwrap();
        // "intro" (1) + 200 > 200, so the first piece starts a new chunk.
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks[0].text, "intro");
        assert_eq!(chunks[3].text.split(' ').count(), 50);
    }

    #[test]
    fn oversized_chunk_is_refused() {
        let paras = vec!["x".repeat(100)];
        assert_eq!(
            chunk_paragraphs(&paras, 10),
            Err(ChunkError::TooLarge {
                index: 0,
                bytes: 100,
                limit: 10
            })
        );
    }
}
