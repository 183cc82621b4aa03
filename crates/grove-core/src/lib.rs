//! grove's pure core: everything that decides, with no IO. Text and its
//! Merkle commitment, grounding and the decode guide, the chat interface,
//! keys and signing, the membership state machine, and the moot engine.
//!
//! The crate graph keeps it pure: this crate depends on no SQLite, async
//! runtime, network, web or tensor crate (`cargo tree -p grove-core`), so
//! none of them can be reached from here. Time comes in as arguments
//! (milliseconds since the Unix epoch); randomness as an `rng` argument or
//! from `rand`. The grove crate holds the edges: store, model engines, net,
//! daemon, api and cli. See docs/ARCHITECTURE.md.

pub mod announce;
pub mod ask;
pub mod book;
pub mod chat;
pub mod content;
pub mod events;
pub mod grounding;
pub mod guide;
pub mod identity;
pub mod merkle;
pub mod mesh;
pub mod moot;
pub mod sampling;
pub mod settings;
pub mod text;
pub mod wire;
