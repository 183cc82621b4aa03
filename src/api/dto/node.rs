//! JSON shapes of the running node: who answers on the socket, its identity,
//! peers, announced roots, counters, backups and received gossip.

use serde::{Deserialize, Serialize};

/// `GET /v1/node`: who is answering on the socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfo {
    pub peer_id: String,
    /// Addresses actually bound (after `/tcp/0` picked a port).
    pub listen: Vec<String>,
    pub version: String,
    pub state_dir: String,
    pub pid: u32,
    pub started_ms: i64,
}

/// `GET /health`: `ok` while every part the watchdog checks is alive,
/// else `failed` with the part that stopped (HTTP 503).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// `ok`, `failed` (a part of the node stopped: `part`) or `damaged`
    /// (the integrity check found damage: `damage`).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Each damaged database: the file, what the check found, the way out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damage: Vec<String>,
}

/// `identity show`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdentityView {
    pub peer_id: String,
    pub ed25519: String,
    pub x25519: String,
}

/// One peer in `peers`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerView {
    pub peer_id: String,
    pub name: Option<String>,
    pub member: bool,
    pub connected: bool,
    pub last_seen: Option<i64>,
    pub addresses: Vec<String>,
    /// How it is reached now (none when not connected).
    #[serde(default)]
    pub link: Option<LinkKind>,
    /// The latest ping round trip, in milliseconds.
    #[serde(default)]
    pub rtt_ms: Option<u64>,
    /// Whether a live connection to it carries the members-only protocols
    /// (gossip, sync, search, turns): this node admitted it as a member's.
    /// A new member's connection from before its add is not admitted; it is
    /// replaced a few seconds after the add.
    #[serde(default)]
    pub admitted: bool,
    /// The link as the doctor words it: "direct (punched)", "direct", or
    /// "relayed (<why>)" (none when not connected).
    #[serde(default)]
    pub path: Option<String>,
}

/// `peers`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerList {
    pub peers: Vec<PeerView>,
}

/// A book inside a root announcement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnnouncedBook {
    pub key: String,
    pub title: Option<String>,
    pub author: Option<String>,
    pub root: String,
    pub count: u64,
    pub version: u32,
}

/// A shard inside a root announcement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnnouncedShard {
    pub name: String,
    pub root: Option<String>,
    pub books: Vec<AnnouncedBook>,
}

/// One member's latest verified announcement.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RootsView {
    pub roots: Vec<MemberRoots>,
}

/// `node stats`.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackupDone {
    pub dest: String,
    pub files: Vec<String>,
    pub bytes: u64,
}

/// One received gossip payload, still sealed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SealedGossip {
    pub topic: String,
    /// The encoded `grove.mesh.Gossip` message, hex.
    pub sealed: String,
}

/// `GET /v1/node/gossip`: the last sealed gossip payloads received.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecentGossip {
    pub messages: Vec<SealedGossip>,
}

impl From<&crate::identity::PublicIdentity> for IdentityView {
    fn from(p: &crate::identity::PublicIdentity) -> IdentityView {
        IdentityView {
            peer_id: crate::identity::peer_id_text(&p.peer_id),
            ed25519: hex::encode(p.ed25519),
            x25519: hex::encode(p.x25519),
        }
    }
}

/// A relay this node holds (or asks for) a slot on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorReservation {
    pub relay: String,
    pub address: String,
    /// "reserved" or "pending".
    pub state: String,
    pub since_ms: i64,
    pub renewed_ms: Option<i64>,
    /// This node's addresses through it.
    pub relayed: Vec<String>,
}

/// A member as the doctor sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorMember {
    pub peer_id: String,
    pub name: String,
    pub connected: bool,
    pub link: Option<LinkKind>,
    /// "direct (punched)", "direct", or "relayed (<why>)", the why one of
    /// "punch failed N times", "both ends symmetric", "punching disabled",
    /// "punch under way" (none when not connected).
    #[serde(default)]
    pub path: Option<String>,
    /// The direct link came from a hole punch.
    #[serde(default)]
    pub punched: bool,
    /// Why the link is relayed, when it is.
    #[serde(default)]
    pub relayed_why: Option<String>,
    pub address: Option<String>,
    pub rtt_ms: Option<u64>,
}

/// `node doctor`: how this node is reached and reaches its members.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Doctor {
    /// "public", "private" or "unknown".
    pub reachability: String,
    pub why: String,
    /// How this node's NAT maps its address, from what its peers see:
    /// "endpoint-independent", "endpoint-dependent (symmetric)" or "unknown".
    #[serde(default)]
    pub mapping: String,
    pub listen: Vec<String>,
    /// The addresses peers see this node at.
    pub observed: Vec<String>,
    /// The addresses confirmed public (what a relay on this node hands out).
    pub external: Vec<String>,
    /// This node's addresses through relays.
    pub relayed: Vec<String>,
    /// What announcements and invites carry.
    pub advertised: Vec<String>,
    pub reservations: Vec<DoctorReservation>,
    pub members: Vec<DoctorMember>,
    /// Relay counters (reservations, circuits, relayed bytes).
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// How a peer is reached: "direct", or "relayed" through another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    Direct,
    Relayed,
}

impl LinkKind {
    /// A link as the doctor and `peers` word it: "direct (punched)",
    /// "direct", or "relayed (<why>)".
    pub fn path(relayed: bool, punched: bool, why_relayed: Option<String>) -> String {
        match (why_relayed, relayed, punched) {
            (Some(why), true, _) => format!("relayed ({why})"),
            (None, true, _) => "relayed".into(),
            (_, false, true) => "direct (punched)".into(),
            (_, false, false) => "direct".into(),
        }
    }

    pub fn of(relayed: bool) -> LinkKind {
        if relayed {
            LinkKind::Relayed
        } else {
            LinkKind::Direct
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Direct => "direct",
            LinkKind::Relayed => "relayed",
        }
    }
}

impl std::fmt::Display for LinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
