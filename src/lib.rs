//! grove: a federated peer-to-peer node daemon holding Merkle-committed book
//! shards, a private membership mesh, and grounded two-book moots.
//!
//! This crate is the edges: `store` keeps books in SQLite shards with search
//! and proofs, `mesh::store` persists membership, `model` runs the local
//! model, `net` the libp2p swarm, `daemon` the node, `api` and `cli` its
//! control. The pure parts (`text`, `merkle`, `grounding`, the guide, keys,
//! the mesh state machine, the moot engine) are the `grove-core` crate,
//! re-exported under the same paths. See docs/ARCHITECTURE.md.

// The pure core, under the paths the edges and tests name.
pub use grove_core::{announce, ask, book, events, grounding, merkle, moot, text, wire};

pub mod api;
pub mod backup;
pub mod books;
pub mod config;
pub mod daemon;
pub mod db;
pub mod identity;
pub mod mesh;
pub mod model;
pub mod net;
pub mod source;
pub mod state_dir;
pub mod store;

/// Milliseconds since the Unix epoch: the clock of audit events, versions
/// and invites (passed into pure code, never read there).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
