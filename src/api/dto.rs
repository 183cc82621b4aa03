//! JSON shapes of the book, shard, search and audit commands
//! (documented with examples in docs/cli-json.md). Hashes are lowercase hex;
//! missing metadata is `null`.

use serde::{Deserialize, Serialize};

use crate::store::{BookRecord, IngestStatus, ProofRecord, SearchHit};

/// One book version.
#[derive(Debug, Serialize, Deserialize)]
pub struct Book {
    pub key: String,
    pub version: u32,
    pub status: String,
    pub root: String,
    pub count: u64,
    pub title: Option<String>,
    pub author: Option<String>,
    pub language: Option<String>,
    pub ebook: Option<u64>,
    pub shard: String,
    pub source: String,
    pub bytes: u64,
    pub added_ms: i64,
    /// Spec version names the root was computed under.
    pub spec: Spec,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Spec {
    pub decoding: String,
    pub chunking: String,
    pub hashing: String,
}

impl From<&BookRecord> for Book {
    fn from(b: &BookRecord) -> Book {
        Book {
            key: b.key.clone(),
            version: b.version,
            status: b.status.as_str().to_string(),
            root: hex::encode(b.root),
            count: b.count,
            title: b.title.clone(),
            author: b.author.clone(),
            language: b.language.clone(),
            ebook: b.ebook,
            shard: b.shard.clone(),
            source: b.source.clone(),
            bytes: b.bytes,
            added_ms: b.added_ms,
            spec: Spec {
                decoding: b.decoding.clone(),
                chunking: b.chunking.clone(),
                hashing: b.hashing.clone(),
            },
        }
    }
}

/// `book add`: the stored version and what the ingest did.
#[derive(Debug, Serialize, Deserialize)]
pub struct Added {
    pub key: String,
    pub version: u32,
    pub root: String,
    pub count: u64,
    pub title: Option<String>,
    pub author: Option<String>,
    pub language: Option<String>,
    pub ebook: Option<u64>,
    pub shard: String,
    /// `added`, `unchanged` or `new-version`.
    pub status: String,
}

impl Added {
    pub fn new(status: IngestStatus, b: &BookRecord) -> Added {
        Added {
            key: b.key.clone(),
            version: b.version,
            root: hex::encode(b.root),
            count: b.count,
            title: b.title.clone(),
            author: b.author.clone(),
            language: b.language.clone(),
            ebook: b.ebook,
            shard: b.shard.clone(),
            status: status.as_str().to_string(),
        }
    }
}

/// `book list`.
#[derive(Debug, Serialize, Deserialize)]
pub struct BookList {
    pub books: Vec<Book>,
}

/// One step of an inclusion proof.
#[derive(Debug, Serialize, Deserialize)]
pub struct Step {
    pub sibling: String,
    pub is_left: bool,
}

/// `book proof`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Proof {
    pub key: String,
    pub version: u32,
    pub index: u64,
    pub count: u64,
    pub root: String,
    pub leaf: String,
    pub label: String,
    pub text: String,
    pub proof: Vec<Step>,
}

impl Proof {
    pub fn new(book: &BookRecord, p: &ProofRecord) -> Proof {
        Proof {
            key: book.key.clone(),
            version: book.version,
            index: p.index,
            count: book.count,
            root: hex::encode(book.root),
            leaf: hex::encode(p.leaf),
            label: p.label.clone(),
            text: p.text.clone(),
            proof: p
                .proof
                .iter()
                .map(|s| Step {
                    sibling: hex::encode(s.sibling),
                    is_left: s.is_left,
                })
                .collect(),
        }
    }
}

/// One search hit.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hit {
    pub key: String,
    pub version: u32,
    pub title: Option<String>,
    pub author: Option<String>,
    pub node_id: String,
    pub label: String,
    pub index: u64,
    pub score: f64,
    pub content: String,
    pub leaf: String,
    /// The member holding the book (mesh-wide search only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_id: Option<String>,
}

impl From<&SearchHit> for Hit {
    fn from(h: &SearchHit) -> Hit {
        Hit {
            key: h.key.clone(),
            version: h.version,
            title: h.title.clone(),
            author: h.author.clone(),
            node_id: h.node_id.clone(),
            label: h.label.clone(),
            index: h.index,
            score: h.score,
            content: h.content.clone(),
            leaf: hex::encode(h.leaf),
            peer_id: None,
        }
    }
}

/// `book search`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hits {
    pub hits: Vec<Hit>,
    /// Members that did not answer a mesh-wide search, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// `book verify`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Verified {
    pub key: String,
    pub version: u32,
    pub root: String,
    pub count: u64,
    pub chunks_checked: u64,
    pub ok: bool,
    pub problems: Vec<String>,
}

/// A book inside `shard list`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ShardBook {
    pub key: String,
    pub root: String,
    pub count: u64,
}

/// One shard inside `shard list`; `root` is null for a shard with no books.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shard {
    pub name: String,
    pub root: Option<String>,
    pub books: Vec<ShardBook>,
}

/// `shard list`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ShardList {
    pub shards: Vec<Shard>,
}

/// One audit chain in `audit verify`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Chain {
    pub file: String,
    pub events: u64,
    pub head: Option<String>,
    pub ok: bool,
    pub error: Option<String>,
}

/// `audit verify`.
#[derive(Debug, Serialize, Deserialize)]
pub struct AuditReport {
    pub ok: bool,
    pub chains: Vec<Chain>,
}

/// An error answer of the control API.
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

/// `GET /v1/node`: who is answering on the socket.
#[derive(Debug, Serialize, Deserialize)]
pub struct NodeInfo {
    pub peer_id: String,
    /// Addresses actually bound (after `/tcp/0` picked a port).
    pub listen: Vec<String>,
    pub version: String,
    pub state_dir: String,
    pub pid: u32,
    pub started_ms: i64,
}

/// `identity show`.
#[derive(Debug, Serialize, Deserialize)]
pub struct IdentityView {
    pub peer_id: String,
    pub ed25519: String,
    pub x25519: String,
}

/// `mesh invite`.
#[derive(Debug, Serialize, Deserialize)]
pub struct InviteCreated {
    pub invite: String,
    pub id: String,
    /// Expiry, Unix milliseconds.
    pub expires: i64,
    /// Addresses the invite tells the joiner to dial.
    pub bootstrap: Vec<String>,
}

/// One invite in `mesh invite list`.
#[derive(Debug, Serialize, Deserialize)]
pub struct InviteView {
    pub id: String,
    /// open, used, revoked, void or expired.
    pub status: String,
    pub expires: i64,
    pub note: String,
}

/// `mesh invite list`.
#[derive(Debug, Serialize, Deserialize)]
pub struct InviteList {
    pub invites: Vec<InviteView>,
}

/// `mesh join`.
#[derive(Debug, Serialize, Deserialize)]
pub struct JoinResult {
    /// `joined`, or `pending` while the members vote.
    pub state: String,
    pub mesh_id: String,
    /// Hex ticket the node polls the inviter with while pending.
    pub ticket: Option<String>,
    pub epoch: Option<u64>,
}

/// Votes on one proposal.
#[derive(Debug, Serialize, Deserialize)]
pub struct Votes {
    pub yes: usize,
    pub no: usize,
    /// Yes votes the current roster needs.
    pub needed: usize,
    /// Peer ids of the members who voted yes.
    pub yes_by: Vec<String>,
}

/// One open proposal.
#[derive(Debug, Serialize, Deserialize)]
pub struct ProposalView {
    pub id: String,
    /// add, kick, rotate or quorum.
    pub kind: String,
    /// The peer added or kicked, or the new quorum rule; null for rotate.
    pub target: Option<String>,
    pub proposer: String,
    pub votes: Votes,
    pub expires: i64,
}

/// `mesh proposals`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ProposalList {
    pub proposals: Vec<ProposalView>,
}

/// One member in `mesh status`.
#[derive(Debug, Serialize, Deserialize)]
pub struct MemberView {
    pub peer_id: String,
    pub name: String,
    pub online: bool,
    /// Last time a connection to it was seen, Unix ms (null: never; this node: now).
    pub last_seen: Option<i64>,
    pub joined_epoch: u64,
}

/// `mesh status`.
#[derive(Debug, Serialize, Deserialize)]
pub struct MeshStatus {
    pub mesh_id: String,
    pub name: String,
    pub epoch: u64,
    pub roster_hash: String,
    pub quorum: String,
    /// This node's peer id.
    pub peer_id: String,
    pub member: bool,
    /// False after a restart until a member answered a sync.
    pub synced: bool,
    pub members: Vec<MemberView>,
    pub proposals: Vec<ProposalView>,
    pub evidence: usize,
}

/// `mesh propose …`, `mesh leave`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Proposed {
    pub id: String,
    /// The epoch after the proposal (higher when it committed at once).
    pub epoch: u64,
    pub committed: bool,
}

/// `mesh vote`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Voted {
    pub id: String,
    pub epoch: u64,
    pub committed: bool,
}

/// `mesh invite revoke`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Revoked {
    pub id: String,
}

/// One peer in `peers`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerView {
    pub peer_id: String,
    pub name: Option<String>,
    pub member: bool,
    pub connected: bool,
    pub last_seen: Option<i64>,
    pub addresses: Vec<String>,
}

/// `peers`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerList {
    pub peers: Vec<PeerView>,
}

/// A book inside a root announcement.
#[derive(Debug, Serialize, Deserialize)]
pub struct AnnouncedBook {
    pub key: String,
    pub title: Option<String>,
    pub author: Option<String>,
    pub root: String,
    pub count: u64,
    pub version: u32,
}

/// A shard inside a root announcement.
#[derive(Debug, Serialize, Deserialize)]
pub struct AnnouncedShard {
    pub name: String,
    pub root: Option<String>,
    pub books: Vec<AnnouncedBook>,
}

/// One member's latest verified announcement.
#[derive(Debug, Serialize, Deserialize)]
pub struct MemberRoots {
    pub peer_id: String,
    pub name: String,
    pub seq: u64,
    /// When the member announced it, Unix ms (its clock).
    pub time: i64,
    /// When this node received it, Unix ms.
    pub received: i64,
    pub addresses: Vec<String>,
    pub shards: Vec<AnnouncedShard>,
}

/// `roots`.
#[derive(Debug, Serialize, Deserialize)]
pub struct RootsView {
    pub roots: Vec<MemberRoots>,
}

/// `node stats`.
#[derive(Debug, Serialize, Deserialize)]
pub struct NodeStats {
    pub peer_id: String,
    pub uptime_ms: i64,
    pub epoch: u64,
    /// Epoch changes this node has seen since it started.
    pub epochs_seen: u64,
    pub members: usize,
    pub peers_connected: usize,
    /// Counters by name: `gossip.accepted`, `gossip.rejected.<reason>`,
    /// `requests.served.<protocol>`, `dropped.<reason>` and so on.
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// `backup`.
#[derive(Debug, Serialize, Deserialize)]
pub struct BackupDone {
    pub dest: String,
    pub files: Vec<String>,
    pub bytes: u64,
}

/// One received gossip payload, still sealed.
#[derive(Debug, Serialize, Deserialize)]
pub struct SealedGossip {
    pub topic: String,
    /// The encoded `grove.mesh.Gossip` message, hex.
    pub sealed: String,
}

/// `GET /v1/node/gossip`: the last sealed gossip payloads received.
#[derive(Debug, Serialize, Deserialize)]
pub struct RecentGossip {
    pub messages: Vec<SealedGossip>,
}

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
}

/// A hosted moot as the host keeps it on disk: its view plus every signed
/// turn and the announcements that vouch for the trees' roots (hex).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootFile {
    pub view: MootView,
    pub turns: Vec<String>,
    pub announcements: Vec<String>,
    /// What a resume needs: the trees as `PEER_ID:KEY` and the settings.
    #[serde(default)]
    pub plan: Option<MootPlan>,
    /// Rolling summaries written so far, in order (replayed on resume).
    #[serde(default)]
    pub summaries: Vec<String>,
}

/// A hosted moot's trees and settings, kept so it can be resumed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootPlan {
    pub trees: Vec<String>,
    pub topic: Option<String>,
    pub turns: u32,
    pub k: usize,
    pub temperature: f64,
    pub max_tokens: u32,
    pub seed: u64,
    pub summary_every: u32,
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
