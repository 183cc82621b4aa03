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
    /// With `--approved`: the approval proposal's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// With `--approved`: true when the approval is already committed (a
    /// mesh of one), else the members vote on `approval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
}

/// One invite in `mesh invite list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteView {
    pub id: String,
    /// open, used, revoked, void or expired.
    pub status: String,
    pub expires: i64,
    pub note: String,
    /// `approved` while the current roster lists its approval (a joiner
    /// with it is added without a vote), `proposed` while the approval is
    /// being voted on, else null.
    pub approval: Option<String>,
}

/// `mesh invite list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteList {
    pub invites: Vec<InviteView>,
}

/// `POST /v1/mesh/join`'s body: an invite can be long, so it travels in
/// the body, not the URL.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinCall {
    pub invite: String,
    /// The display name (`--as`); none: `node.name`, else the host name.
    #[serde(default)]
    pub name: Option<String>,
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
    /// For a kick: the epochs of the checked evidence that the member it
    /// removes sealed an envelope that does not open (§7b).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backed_by: Vec<u64>,
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

/// An envelope that did not open, in `mesh status` (§7b).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BadEnvelopeView {
    /// The epoch the commit made.
    pub epoch: u64,
    /// Who sealed it (the committer) and for whom (the accuser).
    pub committer: String,
    pub committer_name: Option<String>,
    pub accuser: String,
    pub accuser_name: Option<String>,
    /// True when checked evidence proves the envelope, not the accuser's
    /// key, at fault; false for this node's own that it could not prove.
    pub proven: bool,
}

/// The commit that removed this node, in `mesh status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemovalView {
    /// The first epoch without this node.
    pub epoch: u64,
    /// The kick (or leave) proposal that removed it.
    pub proposal: Option<String>,
    pub commit: String,
    /// When this node applied that commit, Unix ms (null: learned by sync).
    pub at: Option<i64>,
}

/// The join a pending node waits on, in `mesh status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingJoinView {
    pub invite_id: String,
    pub inviter: String,
    pub name: String,
    /// What the node waits for, in words.
    pub waiting_for: String,
}

/// `mesh status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeshStatus {
    /// `member`; `pending` (asked to join, waiting: see `join`; the roster
    /// fields are empty); `removed` (see `removed`); `outsider` (holds a
    /// roster it is not in, e.g. not welcomed yet).
    pub state: String,
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
    /// Envelopes that did not open for their recipient: this node's own
    /// (proven or not) and other members' it checked the proof of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bad_envelopes: Vec<BadEnvelopeView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<RemovalView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<PendingJoinView>,
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
    /// True when this vote's no made the quorum unreachable: the proposal
    /// closed as rejected, and every vote on it is free.
    #[serde(default)]
    pub rejected: bool,
}

/// `mesh withdraw`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Withdrawn {
    pub id: String,
    pub epoch: u64,
}

/// `mesh invite revoke`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Revoked {
    pub id: String,
    /// For an approved invite: the proposal that ends its approval (a
    /// commit, so the members vote on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_revocation: Option<String>,
}

/// One membership event, a line of `/v1/events` and `mesh watch --json`
/// (and the `GROVE_EVENT*` variables of a hook).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeshEvent {
    /// proposal_opened, vote_cast, committed, rejected, withdrawn, expired,
    /// joined, removed, member_online, member_offline, envelope_proven (a
    /// committer sealed an envelope that does not open: `target` is the
    /// committer, `peer` its recipient); watch_dropped ends a watch that
    /// fell behind.
    pub event: String,
    /// When this node saw it, Unix ms.
    pub at: i64,
    pub epoch: u64,
    /// The proposal it concerns (hex id).
    pub proposal: Option<String>,
    /// The proposal's kind: add, kick, rotate or quorum.
    pub kind: Option<String>,
    /// The peer added or kicked, or the new quorum rule.
    pub target: Option<String>,
    /// Who: the proposer, the voter, the member that joined, left or went
    /// online or offline.
    pub peer: Option<String>,
    /// That member's display name.
    pub name: Option<String>,
    /// A vote's choice.
    pub yes: Option<bool>,
    /// The event in words.
    pub detail: String,
}
