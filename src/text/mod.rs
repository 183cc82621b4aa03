//! Decoding, metadata, paragraphs and chunks per books.md (pure).
