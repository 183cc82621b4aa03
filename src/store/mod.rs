//! SQLite shards: books, chunks, Merkle levels, search and the audit chain.
pub mod audit;
