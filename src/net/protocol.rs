//! Every name grove speaks on the wire, in one place: the request-response
//! protocols (with their size limit and timeout), the gossip topics and the
//! identify protocol. Nothing else in the crate spells a protocol id.

use std::time::Duration;

use super::NetConfig;

/// The largest join call.
const JOIN_MAX_BYTES: usize = 64 * 1024;

/// The identify protocol version grove announces.
pub const IDENTIFY: &str = "/grove/1";

/// A request-response protocol. Each is versioned in its name; a new
/// version is a new variant, so an old peer is refused rather than misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// A joiner's request (and its polling ticket) to its inviter; open to
    /// non-members holding an invite.
    Join,
    /// A member asks for the commits it lacks.
    Sync,
    /// A member searches this node's books.
    Search,
    /// A moot's host asks this node to speak a turn for a book it holds.
    Turn,
    /// A stranger presents an open invite of this mesh to a member that
    /// relays, for a pass to reach the invite's inviter through it.
    RelayPass,
}

impl Protocol {
    pub const ALL: [Protocol; 5] = [
        Protocol::Join,
        Protocol::Sync,
        Protocol::Search,
        Protocol::Turn,
        Protocol::RelayPass,
    ];

    /// Whether only roster members may open it (the members-only gate of
    /// [`super::gate`] wraps its behaviour).
    pub fn members_only(self) -> bool {
        match self {
            Protocol::Sync | Protocol::Search | Protocol::Turn => true,
            Protocol::Join | Protocol::RelayPass => false,
        }
    }

    /// The protocol id negotiated on the stream.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Join => "/grove/join/1",
            Protocol::Sync => "/grove/sync/1",
            Protocol::Search => "/grove/search/1",
            Protocol::Turn => "/grove/turn/1",
            Protocol::RelayPass => "/grove/relay-pass/1",
        }
    }

    /// The short name counters use (`requests.served.join`).
    pub fn short(self) -> &'static str {
        match self {
            Protocol::Join => "join",
            Protocol::Sync => "sync",
            Protocol::Search => "search",
            Protocol::Turn => "turn",
            Protocol::RelayPass => "relay-pass",
        }
    }

    /// The protocol a negotiated id names, if grove speaks it.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// How long a request may take before it fails: a turn runs the
    /// speaker's model, everything else answers from memory or the store.
    pub fn timeout(self, config: &NetConfig) -> Duration {
        match self {
            Protocol::Turn => config.turn_timeout,
            _ => config.request_timeout,
        }
    }

    /// The largest request frame, in bytes. A join call (an invite and a
    /// signed request, or a ticket) stays far below 64 KiB, and anyone may
    /// send one: a stranger may send nothing bigger.
    pub fn max_request_bytes(self, config: &NetConfig) -> usize {
        match self {
            Protocol::Join | Protocol::RelayPass => config.max_message_bytes.min(JOIN_MAX_BYTES),
            _ => config.max_message_bytes,
        }
    }

    /// The largest response frame, in bytes (a welcome carries a roster).
    pub fn max_response_bytes(self, config: &NetConfig) -> usize {
        config.max_message_bytes
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The gossip topic of a mesh's membership messages.
pub fn mesh_topic(mesh_id: &[u8; 16]) -> String {
    format!("grove/{}/mesh/1", hex::encode(mesh_id))
}

/// The gossip topic of a mesh's shard-root announcements.
pub fn roots_topic(mesh_id: &[u8; 16]) -> String {
    format!("grove/{}/roots/1", hex::encode(mesh_id))
}

/// Why the network dropped something, for counters (`dropped.<reason>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// An inbound connection failed before it was established.
    IncomingConnection,
    /// A dial failed.
    OutgoingConnection,
    /// An inbound request failed (oversized, malformed, timed out, or the
    /// answer could not be sent).
    InboundRequest,
    /// An inbound request arrived while the node's queue was full.
    Overloaded,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::IncomingConnection => "incoming-connection",
            DropReason::OutgoingConnection => "outgoing-connection",
            DropReason::InboundRequest => "inbound-request",
            DropReason::Overloaded => "overloaded",
        }
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
