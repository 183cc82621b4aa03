//! JSON shapes of hosted moots: their state, lines, starts and exports.

use serde::{Deserialize, Serialize};

/// A tree of a hosted moot: the member holding the book, and the book.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootTree {
    pub peer_id: String,
    pub key: String,
    pub title: String,
}

/// `moot show`: state is `running`, `paused` (with `reason`) or `finished`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootView {
    pub id: String,
    pub state: String,
    pub reason: Option<String>,
    /// The hosting node's peer id.
    pub host: String,
    pub trees: Vec<MootTree>,
    pub topic: Option<String>,
    pub turns: u32,
    pub turns_done: u32,
    /// Wall time of each accepted turn as the host saw it, in ms: the
    /// request, the speaker's retrieval, model and signing, and the host's
    /// checks.
    #[serde(default)]
    pub turn_ms: Vec<u64>,
    /// The accepted turns so far, as `moot watch` prints them.
    #[serde(default)]
    pub lines: Vec<MootLine>,
    /// The transcript once the moot finished.
    pub transcript: Option<crate::moot::transcript::TranscriptRecord>,
}

/// One accepted turn of a hosted moot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootLine {
    pub turn: u32,
    /// The speaking tree's key and title.
    pub key: String,
    pub title: String,
    pub text: String,
    pub grounded: bool,
    /// The speaking node's decision: speak or pass, why, how long it took.
    #[serde(default)]
    pub decision: Option<crate::moot::transcript::DecisionRecord>,
    /// When the turn landed on the host, Unix ms (0 for a turn saved
    /// before landing times were kept).
    #[serde(default)]
    pub at: i64,
}

/// One moot in `moot list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootSummary {
    pub id: String,
    pub state: String,
    pub reason: Option<String>,
    pub topic: Option<String>,
    pub trees: Vec<MootTree>,
    pub turns_done: u32,
    pub turns: u32,
}

/// `moot list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootList {
    pub moots: Vec<MootSummary>,
    /// Moot files found at start that could not be read; they are left in
    /// place for the operator (restore them from a backup).
    #[serde(default)]
    pub damaged: Vec<DamagedMoot>,
}

/// A moot file the node could not read at start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DamagedMoot {
    pub path: String,
    /// What is wrong with it, e.g. where the JSON ends early.
    pub error: String,
}

/// `POST /v1/moot/start` (JSON body).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootStart {
    /// `PEER:KEY`, in speaking order.
    pub trees: Vec<String>,
    pub topic: Option<String>,
    pub turns: Option<u32>,
    pub k: Option<usize>,
    pub max_tokens: Option<u32>,
}

/// `moot start`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootStarted {
    pub id: String,
}

/// `moot export`: the transcript plus the host-signed export body (hex of a
/// `grove.mesh.Signed` over `grove.moot.ExportBody`), which holds every
/// signed turn, the roster and the announcements; `moot verify` checks it
/// offline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootExport {
    pub format: String,
    pub version: u32,
    pub id: String,
    pub host: String,
    pub mesh_id: String,
    pub roster_hash: String,
    pub transcript: crate::moot::transcript::TranscriptRecord,
    pub signed: String,
}
