//! Decoding, metadata, paragraphs and chunks per `books.md` (pure, no IO).
//!
//! `gutenberg` turns file bytes into metadata and paragraphs (`gutenberg-v1`);
//! `chunk` packs paragraphs into chunks (`para-200-v1`); `judge` decides
//! whether decoded input is text at all, before it is stored; `class` holds
//! the Unicode character classes of rules that sort characters by category.
//! The output bytes are what every peer hashes, so nothing here may depend
//! on locale or platform.

pub mod chunk;
pub mod class;
pub mod gutenberg;
pub mod judge;

pub use chunk::{Chunk, ChunkError, Chunker, label};
pub use gutenberg::{Metadata, decode, paragraphs, split};
pub use judge::{NotText, TextTest, judge};

/// Name of the decoding and metadata rules, recorded with every book.
pub const DECODING: &str = "gutenberg-v1";
/// Name of the chunking rules, recorded with every book.
pub const CHUNKING: &str = "para-200-v1";
