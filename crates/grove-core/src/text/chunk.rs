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

/// Incremental packing: paragraphs go in one at a time, chunks come out as
/// soon as they are complete (so an ingest can store while it reads).
#[derive(Debug)]
pub struct Chunker {
    max_chunk_bytes: usize,
    units: Vec<String>,
    words: usize,
    emitted: u64,
}

impl Chunker {
    pub fn new(max_chunk_bytes: usize) -> Chunker {
        Chunker {
            max_chunk_bytes,
            units: Vec::new(),
            words: 0,
            emitted: 0,
        }
    }

    /// Adds one paragraph; `out` receives every chunk it completes.
    pub fn push(&mut self, para: &str, out: &mut dyn FnMut(Chunk)) -> Result<(), ChunkError> {
        let words: Vec<&str> = para.split(' ').collect();
        if words.len() <= WORDS_PER_CHUNK {
            return self.unit(para.to_string(), words.len(), out);
        }
        for piece in words.chunks(WORDS_PER_CHUNK) {
            self.unit(piece.join(" "), piece.len(), out)?;
        }
        Ok(())
    }

    fn unit(
        &mut self,
        unit: String,
        n: usize,
        out: &mut dyn FnMut(Chunk),
    ) -> Result<(), ChunkError> {
        if !self.units.is_empty() && self.words + n > WORDS_PER_CHUNK {
            self.emit(out)?;
        }
        self.units.push(unit);
        self.words += n;
        Ok(())
    }

    fn emit(&mut self, out: &mut dyn FnMut(Chunk)) -> Result<(), ChunkError> {
        let text = self.units.join("\n\n");
        self.units.clear();
        self.words = 0;
        let index = self.emitted;
        if text.len() > self.max_chunk_bytes {
            return Err(ChunkError::TooLarge {
                index,
                bytes: text.len(),
                limit: self.max_chunk_bytes,
            });
        }
        self.emitted += 1;
        out(Chunk { index, text });
        Ok(())
    }

    /// Emits the last chunk; a text that gave no chunk at all is refused.
    pub fn finish(mut self, out: &mut dyn FnMut(Chunk)) -> Result<u64, ChunkError> {
        if !self.units.is_empty() {
            self.emit(out)?;
        }
        if self.emitted == 0 {
            return Err(ChunkError::Empty);
        }
        Ok(self.emitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk_paragraphs(paragraphs: &[String], max: usize) -> Result<Vec<Chunk>, ChunkError> {
        let mut chunker = Chunker::new(max);
        let mut chunks = Vec::new();
        for para in paragraphs {
            chunker.push(para, &mut |c| chunks.push(c))?;
        }
        chunker.finish(&mut |c| chunks.push(c))?;
        Ok(chunks)
    }

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
