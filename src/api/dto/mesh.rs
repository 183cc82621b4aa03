//! JSON shapes of the mesh commands: invites, joins, proposals, votes and
//! the roster's status. Times are Unix milliseconds.

use serde::{Deserialize, Serialize};

/// `mesh invite`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteCreated {
    pub invite: String,
    pub id: String,
    /// Expiry, Unix milliseconds.
    pub expires: i64,
    /// Addresses the invite tells the joiner to dial.
    pub bootstrap: Vec<String>,
}

/// One invite in `mesh invite list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteView {
    pub id: String,
    /// open, used, revoked, void or expired.
    pub status: String,
    pub expires: i64,
    pub note: String,
}

/// `mesh invite list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteList {
    pub invites: Vec<InviteView>,
}

/// `mesh join`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JoinResult {
    /// `joined`, or `pending` while the members vote.
    pub state: String,
    pub mesh_id: String,
    /// Hex ticket the node polls the inviter with while pending.
    pub ticket: Option<String>,
    pub epoch: Option<u64>,
}

/// Votes on one proposal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Votes {
    pub yes: usize,
    pub no: usize,
    /// Yes votes the current roster needs.
    pub needed: usize,
    /// Peer ids of the members who voted yes.
    pub yes_by: Vec<String>,
    /// Their display names, in the same order (empty when not in the roster).
    #[serde(default)]
    pub yes_names: Vec<String>,
}

/// One open proposal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProposalView {
    pub id: String,
    /// add, kick, rotate or quorum.
    pub kind: String,
    /// The peer added or kicked, or the new quorum rule; null for rotate.
    pub target: Option<String>,
    /// The display name of the peer added or kicked.
    #[serde(default)]
    pub target_name: Option<String>,
    pub proposer: String,
    /// The proposer's display name in the roster.
    #[serde(default)]
    pub proposer_name: Option<String>,
    pub votes: Votes,
    pub expires: i64,
}

/// `mesh proposals`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProposalList {
    pub proposals: Vec<ProposalView>,
}

/// One member in `mesh status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberView {
    pub peer_id: String,
    pub name: String,
    pub online: bool,
    /// Last time a connection to it was seen, Unix ms (null: never; this node: now).
    pub last_seen: Option<i64>,
    pub joined_epoch: u64,
}

/// `mesh status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposed {
    pub id: String,
    /// The epoch after the proposal (higher when it committed at once).
    pub epoch: u64,
    pub committed: bool,
}

/// `mesh vote`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Voted {
    pub id: String,
    /// The vote cast: true for yes.
    pub yes: bool,
    pub epoch: u64,
    pub committed: bool,
}

/// `mesh invite revoke`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Revoked {
    pub id: String,
}
