//! The records the state machine keeps: rosters, secrets, proposals,
//! votes, invites and history, and the transition a change produces.

use super::*;

/// Timing rules, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub proposal_ttl_ms: i64,
    pub invite_ttl_ms: i64,
    pub key_grace_ms: i64,
    pub commit_backup_ms: i64,
}

/// The defaults of `[mesh]` in grove.toml (the settings start from these).
impl Default for Timing {
    fn default() -> Self {
        Timing {
            proposal_ttl_ms: 24 * 3600 * 1000,
            invite_ttl_ms: 24 * 3600 * 1000,
            key_grace_ms: 600 * 1000,
            commit_backup_ms: 60 * 1000,
        }
    }
}

/// Longest proposal lifetime accepted from others (a week).
pub const MAX_PROPOSAL_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// How far in the future a proposal's creation time may lie (clock skew allowance).
pub const MAX_CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

/// Largest mesh message accepted (a 1000-member commit is about 200 KB).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// How many recent roster hashes a sync request lists.
pub const SYNC_LOCATOR_LEN: usize = 16;

/// One node of the roster tree: a roster and the commit that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RosterNode {
    pub roster: Roster,
    pub hash: [u8; 32],
    /// Roster hash of the parent epoch (None at genesis or a joiner's first known roster).
    pub parent: Option<[u8; 32]>,
    /// Encoded `Signed { Commit }` that made it (None at genesis or a joiner's first roster).
    pub commit: Option<Vec<u8>>,
    pub proposal_hash: Option<[u8; 32]>,
}

/// An epoch secret this node holds. Cloning it (as every transaction's
/// working copy of the state does) shares the secret, never copies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretEntry {
    pub roster_hash: [u8; 32],
    pub epoch: u64,
    pub secret: Arc<EpochSecret>,
    /// When it is erased (set once it is no longer the current epoch's secret).
    pub erase_at_ms: Option<i64>,
}

/// A proposal accepted for the current roster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalRec {
    pub hash: [u8; 32],
    /// Encoded `Signed { Proposal }`.
    pub signed: Vec<u8>,
    pub epoch: u64,
    pub roster_hash: [u8; 32],
    pub proposer: Vec<u8>,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub change: Change,
    /// The joiner's peer id for an add.
    pub joiner: Option<Vec<u8>>,
    pub invite_id: Option<[u8; 16]>,
}

impl ProposalRec {
    /// The invite this proposal would use up or approve (§8).
    pub fn invite(&self) -> Option<[u8; 16]> {
        invite_of(&self.change, self.invite_id)
    }
}

/// The invite a change uses up or approves: an add's (`add_invite`), or an
/// approval's. A revocation of it ends the proposal (§8).
pub(super) fn invite_of(change: &Change, add_invite: Option<[u8; 16]>) -> Option<[u8; 16]> {
    match change {
        Change::Approve(a) => Some(a.invite_id),
        _ => add_invite,
    }
}

/// The vote that currently counts for one member at one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteRec {
    pub epoch: u64,
    pub voter: Vec<u8>,
    pub roster_hash: [u8; 32],
    pub proposal_hash: [u8; 32],
    pub yes: bool,
    pub proposal_created_ms: i64,
    pub proposal_expires_ms: i64,
    /// Encoded `Signed { Vote }`.
    pub signed: Vec<u8>,
    /// This voter's vote number at the epoch (0 for its first).
    pub seq: u32,
    /// The vote hash of the vote this one releases (seq - 1), from seq 1 on.
    pub releases: Option<[u8; 32]>,
    /// Encoded `VoteRelease` carried with it (this node's own votes, and
    /// received ones that came with theirs), so it can be sent again whole.
    pub release: Option<Vec<u8>>,
}

/// How a proposal closed before it was committed or expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Signed no votes made its quorum unreachable.
    Rejected,
    /// Its proposer signed a withdrawal.
    Withdrawn,
}

impl CloseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Rejected => "rejected",
            CloseReason::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(s: &str) -> Option<CloseReason> {
        Some(match s {
            "rejected" => CloseReason::Rejected,
            "withdrawn" => CloseReason::Withdrawn,
            _ => return None,
        })
    }
}

/// A proposal of the current roster that closed early, with the signed
/// artifacts that prove it (anyone can check them against the roster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedRec {
    pub hash: [u8; 32],
    pub epoch: u64,
    pub roster_hash: [u8; 32],
    pub reason: CloseReason,
    /// Encoded `VoteRelease` without `previous`: the proposal and its
    /// withdrawal, or the no votes. A vote that releases a vote on this
    /// proposal carries it.
    pub proof: Vec<u8>,
    pub at_ms: i64,
}

/// Two conflicting signed votes by one member at one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub epoch: u64,
    pub voter: Vec<u8>,
    pub first: Vec<u8>,
    pub second: Vec<u8>,
    pub at_ms: i64,
}

/// A commit that lists this node in its next roster but whose envelope for
/// it did not open: the node follows the chain past it without that
/// epoch's secret (a non-reader, until a later commit re-keys it). The
/// commit itself is kept with its roster (`RosterNode::commit`), so anyone
/// can re-check the committer's signature over the envelope; whether the
/// envelope was bad or this node's key is, is not yet provable to others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEnvelope {
    /// The epoch the commit made.
    pub epoch: u64,
    /// The hash of the roster it made.
    pub roster_hash: [u8; 32],
    /// Its commit hash (`commit_hash` of that roster).
    pub commit_hash: [u8; 32],
    /// The committer's peer id.
    pub committer: Vec<u8>,
    pub at_ms: i64,
}

/// A checked proof that a committer sealed an envelope that does not open
/// for its recipient (§7b): the accuser's signed `EnvelopeEvidence`, which
/// anyone holding the commit's parent roster can check again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvenBadEnvelope {
    /// The epoch the commit made, and the hashes of its roster and commit.
    pub epoch: u64,
    pub roster_hash: [u8; 32],
    pub commit_hash: [u8; 32],
    /// The committer's peer id: at fault.
    pub committer: Vec<u8>,
    /// The recipient's peer id, which signed the evidence.
    pub accuser: Vec<u8>,
    /// The signed `EnvelopeEvidence`, as it travels.
    pub signed: Vec<u8>,
    /// When this node checked it.
    pub at_ms: i64,
}

/// Status of an invite this node issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InviteStatus {
    Open,
    Used,
    Revoked,
    /// The inviter left or was removed.
    Void,
}

impl InviteStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InviteStatus::Open => "open",
            InviteStatus::Used => "used",
            InviteStatus::Revoked => "revoked",
            InviteStatus::Void => "void",
        }
    }

    pub fn parse(s: &str) -> Option<InviteStatus> {
        Some(match s {
            "open" => InviteStatus::Open,
            "used" => InviteStatus::Used,
            "revoked" => InviteStatus::Revoked,
            "void" => InviteStatus::Void,
            _ => return None,
        })
    }
}

/// An invite this node issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InviteRec {
    pub id: [u8; 16],
    /// Encoded `Signed { Invite }`.
    pub signed: Vec<u8>,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub note: String,
    pub status: InviteStatus,
}

/// A join this node asked for and is waiting on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingJoin {
    pub mesh_id: [u8; 16],
    pub invite_id: [u8; 16],
    pub inviter: Vec<u8>,
    pub name: String,
}

/// One change of this node's current epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub epoch: u64,
    pub roster_hash: [u8; 32],
    pub commit_hash: [u8; 32],
    /// True when this replaced a commit at the same or an earlier epoch (the convergent switch).
    pub switched: bool,
    pub at_ms: i64,
}

/// The commit that removed this node from the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The first epoch without this node.
    pub epoch: u64,
    pub roster_hash: [u8; 32],
    pub commit_hash: [u8; 32],
    /// The kick (or leave) proposal the commit carried.
    pub proposal_hash: Option<[u8; 32]>,
    /// When this node applied it (None when it learned it only by sync
    /// without moving its tip there).
    pub at_ms: Option<i64>,
}

/// The mesh this node belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshInfo {
    pub mesh_id: [u8; 16],
    pub name: String,
}

/// One persisted change; the store applies these in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    PutMesh(MeshInfo),
    PutRoster(Arc<RosterNode>),
    SetTip([u8; 32]),
    PutSecret(SecretEntry),
    EraseSecret([u8; 32]),
    PutProposal(Arc<ProposalRec>),
    DeleteProposal([u8; 32]),
    PutVote(VoteRec),
    DeleteVotesBefore(u64),
    PutClosed(ClosedRec),
    DeleteClosed([u8; 32]),
    PutEvidence(Evidence),
    PutBadEnvelope(BadEnvelope),
    PutProvenBadEnvelope(ProvenBadEnvelope),
    PutInvite(InviteRec),
    PutRevocation { id: [u8; 16], signed: Vec<u8> },
    PutUsedInvite { id: [u8; 16], proposal: [u8; 32] },
    PutHistory(HistoryEntry),
    SetPendingJoin(Option<PendingJoin>),
}

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// Every member (mesh gossip).
    All,
    /// One peer, by peer id bytes.
    Peer(Vec<u8>),
}

/// A message to send: an encoded `MeshMessage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    pub to: Dest,
    pub message: Vec<u8>,
}

/// One audit event (kind + JSON body) to append in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    pub kind: &'static str,
    pub body: serde_json::Value,
}

/// What one input did: persist `effects` and `audit`, then send `outbound`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transition {
    pub effects: Vec<Effect>,
    pub outbound: Vec<Outbound>,
    pub audit: Vec<AuditEvent>,
    /// Set when the input was refused but left evidence (equivocation).
    pub refused: Option<MeshError>,
    /// Present when the caller asked for something to show (e.g. invite text).
    pub output: Option<String>,
}

impl Transition {
    /// True when nothing is persisted.
    pub fn is_empty(&self) -> bool {
        self.effects.is_empty() && self.audit.is_empty()
    }
}

/// A change to propose (the add carries the joiner's signed join request).
#[derive(Debug, Clone)]
pub enum ProposalChange {
    Add(wire::Signed),
    Kick(Vec<u8>),
    Rotate,
    Quorum(QuorumRule),
    /// Approve a signed invite in advance (`name` empty: any display name).
    Approve {
        invite: wire::Signed,
        name: String,
    },
    /// End the approval of an invite.
    RevokeApproval([u8; 16]),
    /// Replace a member's X25519 key (the proposer's own: §8b).
    UpdateKey(KeyUpdate),
    /// Move the mesh to a later commit form (§7).
    CommitForm(CommitForm),
}
