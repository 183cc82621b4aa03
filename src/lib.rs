//! grove: a federated peer-to-peer node daemon holding Merkle-committed book
//! shards, a private membership mesh, and grounded two-book moots.
//!
//! Modules in reading order (one book, as data): `text` decodes and chunks a
//! Gutenberg file, `merkle` commits to the chunks, `store` keeps them in
//! SQLite shards with search and proofs; `identity` and `mesh` decide
//! membership; `grounding` and `moot` run a conversation between books on a
//! `model`. See docs/ARCHITECTURE.md for the code map and invariants.

pub mod announce;
pub mod api;
pub mod backup;
pub mod book;
pub mod config;
pub mod daemon;
pub mod db;
pub mod grounding;
pub mod identity;
pub mod merkle;
pub mod mesh;
pub mod model;
pub mod moot;
pub mod net;
pub mod source;
pub mod store;
pub mod text;
pub mod wire;

/// Milliseconds since the Unix epoch: the clock of audit events, versions
/// and invites (passed into pure code, never read there).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
