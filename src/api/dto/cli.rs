//! JSON shapes only the command line prints (no control route answers them):
//! `moot verify` of a transcript or an export, `model install`, `model chat`.

use serde::{Deserialize, Serialize};

use crate::moot::verify::Mismatch;

/// One disagreement `moot verify` found; `turn` is null when it concerns
/// the whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MismatchView {
    pub turn: Option<u32>,
    pub what: String,
}

impl From<&Mismatch> for MismatchView {
    fn from(m: &Mismatch) -> MismatchView {
        MismatchView {
            turn: m.turn,
            what: m.what.clone(),
        }
    }
}

/// Who vouches for a verified moot export (absent for a plain transcript).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VouchedBy {
    pub mesh_id: String,
    pub roster_hash: String,
    /// The hosting node's peer id.
    pub host: String,
    /// Signed turns checked (the human text names it; not in the JSON).
    #[serde(skip)]
    pub signed_turns: usize,
    /// What ties the roster to the mesh id: `self-certified` (the genesis
    /// hashes to the id and the chain replays to the roster), `legacy-id`
    /// (the chain replays from a random id) or `none` (no chain: version 1).
    pub chain: String,
    /// Epochs the chain replayed (0 without one).
    pub chain_epochs: usize,
    /// True when what the reader pinned (`--expect-mesh` on a
    /// self-certified id, or `--expect-roster`) anchors the export.
    pub anchored: bool,
    /// Why not, and what to pin, when `anchored` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unanchored: Option<String>,
}

/// `moot verify FILE`: a transcript, or an export with who vouches for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootVerified {
    pub file: String,
    pub utterances: usize,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub vouched: Option<VouchedBy>,
    pub ok: bool,
    pub mismatches: Vec<MismatchView>,
}

impl MootVerified {
    /// The one builder of the report, for transcripts and exports alike,
    /// from the one verdict (`moot::export::verify_file`).
    pub fn new(file: &std::path::Path, verdict: crate::moot::export::FileVerdict) -> MootVerified {
        MootVerified {
            file: file.display().to_string(),
            utterances: verdict.utterances,
            vouched: verdict.vouched.map(|v| {
                use crate::moot::export::ChainStatus;
                let (chain, chain_epochs) = match v.chain {
                    ChainStatus::SelfCertified { epochs } => ("self-certified", epochs),
                    ChainStatus::LegacyId { epochs } => ("legacy-id", epochs),
                    ChainStatus::NoChain => ("none", 0),
                };
                VouchedBy {
                    unanchored: v.unanchored_because(),
                    anchored: v.anchored_by.is_some(),
                    mesh_id: v.mesh_id,
                    roster_hash: v.roster_hash,
                    host: v.host,
                    signed_turns: v.signed_turns,
                    chain: chain.into(),
                    chain_epochs,
                }
            }),
            ok: verdict.mismatches.is_empty(),
            mismatches: verdict.mismatches.iter().map(MismatchView::from).collect(),
        }
    }
}

/// `model install`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelInstalled {
    /// The file the embedded backend will load.
    pub model_file: String,
    pub downloaded: bool,
    pub converted: bool,
}

/// `model install --hub ...` and `model install --gguf ...`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GgufInstalled {
    /// The installed file; `model.path` takes its name.
    pub model_file: String,
    /// The file was already there with this sha256 (nothing written).
    pub already_installed: bool,
    /// Bytes came over the network in this run.
    pub downloaded: bool,
    /// Bytes of an interrupted download that were kept (0: none).
    pub resumed_from: u64,
    pub bytes: u64,
    pub sha256: String,
    /// The commit the hub resolved the revision to (hub installs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// `general.name` from the GGUF header.
    pub model_name: String,
    /// Bytes of memory the embedded backend needs for it (an estimate).
    pub memory_needed: u64,
    /// `MemAvailable` now, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_available: Option<u64>,
}

/// `model chat`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelReply {
    /// The backend and model that answered.
    pub model: String,
    pub reply: String,
    pub seed: u64,
    pub open_seconds: f64,
    pub answer_seconds: f64,
}

/// `config check`: the effective configuration (file, environment,
/// defaults), every key with its value, secrets masked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigReport {
    /// The config file read, or null when none was (defaults and environment).
    pub file: Option<String>,
    /// The `GROVE_*` variables that set keys.
    pub environment: Vec<String>,
    pub ok: bool,
    /// Every key, nested by section (`net.listen` is `settings.net.listen`).
    pub settings: serde_json::Value,
}
