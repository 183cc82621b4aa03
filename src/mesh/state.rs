//! The membership state machine: (state, input) -> (new state, transition).
//!
//! Every entry point takes `&self` and returns either a refusal (the state is
//! untouched) or a new state plus a [`Transition`]: the effects to persist,
//! the messages to send and the audit events, which the store writes in one
//! transaction before the caller swaps the new state in. Time (`now_ms`) and
//! randomness (`rng`) are injected, so a seeded simulation is deterministic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::CryptoRng;
use serde_json::json;

use super::MeshError;
use super::codec::{self, SigCheck, bytes16, bytes32, label, tag};
use super::envelope::{self, ENVELOPE_LEN, EnvelopeContext, EnvelopeSender};
use super::invite::{self, Invite};
use super::names::{self, Field};
use super::roster::{ApprovedInvite, Change, Member, QuorumRule, Roster};
use crate::identity::{self, Identity, PublicIdentity};
use crate::wire::mesh as wire;
use crate::wire::mesh::mesh_message::Kind;

/// Timing rules, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub proposal_ttl_ms: i64,
    pub invite_ttl_ms: i64,
    pub key_grace_ms: i64,
    pub commit_backup_ms: i64,
}

impl Default for Timing {
    fn default() -> Self {
        super::MeshSettings::default().timing()
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

/// An epoch secret this node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretEntry {
    pub roster_hash: [u8; 32],
    pub epoch: u64,
    pub secret: [u8; 32],
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
fn invite_of(change: &Change, add_invite: Option<[u8; 16]>) -> Option<[u8; 16]> {
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
}

/// The whole membership state of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshState {
    pub me: PublicIdentity,
    pub timing: Timing,
    pub mesh: Option<MeshInfo>,
    pub rosters: BTreeMap<[u8; 32], Arc<RosterNode>>,
    pub tip: [u8; 32],
    pub secrets: BTreeMap<[u8; 32], SecretEntry>,
    pub proposals: BTreeMap<[u8; 32], Arc<ProposalRec>>,
    pub votes: BTreeMap<(u64, Vec<u8>), VoteRec>,
    /// Proposals of the current roster that were rejected or withdrawn.
    pub closed: BTreeMap<[u8; 32], ClosedRec>,
    pub evidence: Vec<Evidence>,
    pub invites: BTreeMap<[u8; 16], InviteRec>,
    pub revoked: BTreeMap<[u8; 16], Vec<u8>>,
    pub used_invites: BTreeMap<[u8; 16], [u8; 32]>,
    pub history: Vec<HistoryEntry>,
    pub pending_join: Option<PendingJoin>,
    /// False after a restart until a member answered a sync request; no votes until then.
    pub synced: bool,
    /// Hash of the sync request this node is waiting on (not persisted).
    pub pending_sync: Option<[u8; 32]>,
}

/// A working copy plus the effects made on it.
struct Tx {
    s: MeshState,
    t: Transition,
}

impl Tx {
    fn effect(&mut self, e: Effect) {
        match &e {
            Effect::PutMesh(m) => self.s.mesh = Some(m.clone()),
            Effect::PutRoster(n) => {
                self.s.rosters.insert(n.hash, n.clone());
            }
            Effect::SetTip(h) => self.s.tip = *h,
            Effect::PutSecret(x) => {
                self.s.secrets.insert(x.roster_hash, x.clone());
            }
            Effect::EraseSecret(h) => {
                self.s.secrets.remove(h);
            }
            Effect::PutProposal(p) => {
                self.s.proposals.insert(p.hash, p.clone());
            }
            Effect::DeleteProposal(h) => {
                self.s.proposals.remove(h);
            }
            Effect::PutVote(v) => {
                self.s.votes.insert((v.epoch, v.voter.clone()), v.clone());
            }
            Effect::DeleteVotesBefore(epoch) => {
                self.s.votes.retain(|(e, _), _| *e >= *epoch);
            }
            Effect::PutClosed(c) => {
                self.s.closed.insert(c.hash, c.clone());
            }
            Effect::DeleteClosed(h) => {
                self.s.closed.remove(h);
            }
            Effect::PutEvidence(ev) => self.s.evidence.push(ev.clone()),
            Effect::PutInvite(i) => {
                self.s.invites.insert(i.id, i.clone());
            }
            Effect::PutRevocation { id, signed } => {
                self.s.revoked.insert(*id, signed.clone());
            }
            Effect::PutUsedInvite { id, proposal } => {
                self.s.used_invites.insert(*id, *proposal);
            }
            Effect::PutHistory(h) => self.s.history.push(h.clone()),
            Effect::SetPendingJoin(p) => self.s.pending_join = p.clone(),
        }
        self.t.effects.push(e);
    }

    fn audit(&mut self, kind: &'static str, body: serde_json::Value) {
        self.t.audit.push(AuditEvent { kind, body });
    }

    fn send(&mut self, to: Dest, kind: Kind) {
        let msg = wire::MeshMessage { kind: Some(kind) };
        self.t.outbound.push(Outbound {
            to,
            message: codec::encode(&msg),
        });
    }

    fn done(self) -> (MeshState, Transition) {
        (self.s, self.t)
    }
}

/// A verified commit, ready to apply.
struct CheckedCommit {
    node: RosterNode,
    proposal_hash: [u8; 32],
    invite_id: Option<[u8; 16]>,
    /// This node's secret for the new epoch, when it is a member of it.
    secret: Option<[u8; 32]>,
    joiner: Option<Vec<u8>>,
}

fn h(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

impl MeshState {
    /// The state of a node that has no mesh yet.
    pub fn empty(me: PublicIdentity, timing: Timing) -> MeshState {
        MeshState {
            me,
            timing,
            mesh: None,
            rosters: BTreeMap::new(),
            tip: [0u8; 32],
            secrets: BTreeMap::new(),
            proposals: BTreeMap::new(),
            votes: BTreeMap::new(),
            closed: BTreeMap::new(),
            evidence: Vec::new(),
            invites: BTreeMap::new(),
            revoked: BTreeMap::new(),
            used_invites: BTreeMap::new(),
            history: Vec::new(),
            pending_join: None,
            synced: true,
            pending_sync: None,
        }
    }

    fn tx(&self) -> Tx {
        Tx {
            s: self.clone(),
            t: Transition::default(),
        }
    }

    /// The current roster node.
    pub fn tip_node(&self) -> Option<&Arc<RosterNode>> {
        self.rosters.get(&self.tip)
    }

    /// The current roster.
    /// A proposal or vote is bound to (mesh, epoch, roster hash) and counts
    /// only at this node's tip: another mesh, an older epoch (void), or a
    /// roster this node does not have (sync first) are refused. Returns the
    /// roster hash.
    fn check_tip_binding(
        &self,
        roster: &Roster,
        what: &'static str,
        hash_what: &'static str,
        mesh_id: &[u8],
        epoch: u64,
        roster_hash: &[u8],
    ) -> Result<[u8; 32], MeshError> {
        if mesh_id != roster.mesh_id {
            return Err(MeshError::WrongMesh(what));
        }
        if epoch < roster.epoch {
            return Err(MeshError::StaleEpoch {
                what,
                got: epoch,
                current: roster.epoch,
            });
        }
        let roster_hash = bytes32(roster_hash, hash_what)?;
        if epoch > roster.epoch || roster_hash != self.tip {
            return Err(MeshError::UnknownRoster { what, epoch });
        }
        Ok(roster_hash)
    }

    pub fn roster(&self) -> Option<&Roster> {
        self.tip_node().map(|n| &n.roster)
    }

    /// The current epoch (0 when there is no mesh).
    pub fn epoch(&self) -> u64 {
        self.roster().map_or(0, |r| r.epoch)
    }

    /// True when this node is in the current roster.
    pub fn is_member(&self) -> bool {
        self.roster().is_some_and(|r| {
            r.member_with_key(&self.me.peer_id, &self.me.ed25519)
                .is_some()
        })
    }

    /// The current epoch secret, when this node is a member.
    pub fn current_secret(&self) -> Option<[u8; 32]> {
        self.secrets.get(&self.tip).map(|s| s.secret)
    }

    /// The chain of roster hashes from the tip back to the oldest known roster.
    pub fn chain(&self) -> Vec<[u8; 32]> {
        let mut out = Vec::new();
        let mut at = Some(self.tip);
        while let Some(hash) = at {
            let Some(node) = self.rosters.get(&hash) else {
                break;
            };
            out.push(hash);
            at = node.parent;
        }
        out
    }

    fn mesh_id(&self) -> Result<[u8; 16], MeshError> {
        self.mesh
            .as_ref()
            .map(|m| m.mesh_id)
            .ok_or(MeshError::NoMesh)
    }

    /// The current roster when this node is in it; otherwise why not (no
    /// mesh, removed at an epoch, or not a member yet).
    pub fn require_member(&self) -> Result<&Roster, MeshError> {
        let roster = self.roster().ok_or(MeshError::NoMesh)?;
        if roster
            .member_with_key(&self.me.peer_id, &self.me.ed25519)
            .is_none()
        {
            if let (Some(r), Some(mesh)) = (self.removal(), &self.mesh) {
                return Err(MeshError::Removed {
                    mesh: mesh.name.clone(),
                    epoch: r.epoch,
                });
            }
            return Err(MeshError::NotAMember);
        }
        Ok(roster)
    }

    /// When this node was a member and its current roster no longer lists
    /// it: the commit that removed it.
    pub fn removal(&self) -> Option<Removal> {
        if self.is_member() {
            return None;
        }
        let me = |n: &RosterNode| {
            n.roster
                .member_with_key(&self.me.peer_id, &self.me.ed25519)
                .is_some()
        };
        // Walk back from the tip to the first roster without this node
        // whose parent still had it.
        let mut at = self.tip_node()?.clone();
        loop {
            let parent = self.rosters.get(&at.parent?)?;
            if me(parent) {
                let at_ms = self
                    .history
                    .iter()
                    .find(|h| h.roster_hash == at.hash)
                    .map(|h| h.at_ms);
                return Some(Removal {
                    epoch: at.roster.epoch,
                    roster_hash: at.hash,
                    commit_hash: at.roster.commit_hash,
                    proposal_hash: at.proposal_hash,
                    at_ms,
                });
            }
            at = parent.clone();
        }
    }

    /// Forgets a join this node asked for and was not welcomed into (the
    /// inviter refused it or cannot be reached), so it can use another invite.
    pub fn cancel_join(&self) -> Result<(MeshState, Transition), MeshError> {
        if self.mesh.is_some() {
            return Err(MeshError::MeshExists);
        }
        let pending = self
            .pending_join
            .clone()
            .ok_or_else(|| MeshError::Refused("no join pending on this node".into()))?;
        let mut tx = self.tx();
        tx.effect(Effect::SetPendingJoin(None));
        tx.audit(
            "mesh.join.cancel",
            json!({"mesh_id": h(&pending.mesh_id), "invite_id": h(&pending.invite_id)}),
        );
        Ok(tx.done())
    }

    // ----- local commands -------------------------------------------------

    /// Creates epoch 0 with this node as the only member, named `founder`.
    pub fn init<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        name: &str,
        quorum: QuorumRule,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        self.init_as(id, name, "founder", quorum, now_ms, rng)
    }

    /// Creates epoch 0 with this node as the only member, shown as `member_name`.
    pub fn init_as<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        name: &str,
        member_name: &str,
        quorum: QuorumRule,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        names::check(Field::DisplayName, member_name)?;
        names::check(Field::MeshName, name)?;
        if self.mesh.is_some() || self.pending_join.is_some() {
            return Err(MeshError::MeshExists);
        }
        quorum.validate()?;
        let mut mesh_id = [0u8; 16];
        rng.fill_bytes(&mut mesh_id);
        let me = self.member_entry(id, member_name, 0);
        let roster = Roster::genesis(mesh_id, name, me, quorum);
        let hash = roster.hash();
        let mut secret = [0u8; 32];
        rng.fill_bytes(&mut secret);
        let mut tx = self.tx();
        tx.effect(Effect::PutMesh(MeshInfo {
            mesh_id,
            name: name.to_string(),
        }));
        tx.effect(Effect::PutRoster(Arc::new(RosterNode {
            roster,
            hash,
            parent: None,
            commit: None,
            proposal_hash: None,
        })));
        tx.effect(Effect::SetTip(hash));
        tx.effect(Effect::PutSecret(SecretEntry {
            roster_hash: hash,
            epoch: 0,
            secret,
            erase_at_ms: None,
        }));
        tx.effect(Effect::PutHistory(HistoryEntry {
            epoch: 0,
            roster_hash: hash,
            commit_hash: [0u8; 32],
            switched: false,
            at_ms: now_ms,
        }));
        tx.s.synced = true;
        tx.audit(
            "mesh.init",
            json!({"mesh_id": h(&mesh_id), "name": name, "roster_hash": h(&hash),
                   "quorum": [quorum.numerator, quorum.denominator]}),
        );
        Ok(tx.done())
    }

    fn member_entry(&self, id: &Identity, name: &str, joined_epoch: u64) -> Member {
        let p = id.public();
        Member {
            peer_id: p.peer_id,
            ed25519: p.ed25519,
            x25519: p.x25519,
            x25519_binding: p.x25519_binding,
            name: name.to_string(),
            joined_epoch,
        }
    }

    /// Creates a signed invite; `output` holds its text form.
    pub fn create_invite<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        bootstrap: Vec<String>,
        note: String,
        ttl_ms: Option<i64>,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        names::check(Field::InviteNote, &note)?;
        let roster = self.require_member()?;
        let ttl = ttl_ms.unwrap_or(self.timing.invite_ttl_ms);
        if ttl <= 0 {
            return Err(MeshError::Refused(
                "invite lifetime must be positive".into(),
            ));
        }
        let (inv, signed) = invite::create(
            id,
            invite::InviteParams {
                mesh_id: roster.mesh_id,
                mesh_name: &roster.mesh_name,
                bootstrap,
                note,
                now_ms,
                ttl_ms: ttl,
            },
            rng,
        );
        // An invite no joiner could read back is not kept (many addresses
        // can make one too large even with a short note).
        invite::check_size(&signed)?;
        let text = invite::to_text(&signed);
        let mut tx = self.tx();
        tx.effect(Effect::PutInvite(InviteRec {
            id: inv.invite_id,
            signed: codec::encode(&signed),
            created_ms: inv.created_ms,
            expires_ms: inv.expires_ms,
            note: inv.note.clone(),
            status: InviteStatus::Open,
        }));
        tx.audit(
            "mesh.invite.create",
            json!({"invite_id": h(&inv.invite_id), "expires_ms": inv.expires_ms}),
        );
        tx.t.output = Some(text);
        Ok(tx.done())
    }

    /// Revokes an invite this node issued and announces the revocation.
    pub fn revoke_invite(
        &self,
        id: &Identity,
        invite_id: [u8; 16],
        now_ms: i64,
    ) -> Result<(MeshState, Transition), MeshError> {
        let mesh_id = self.mesh_id()?;
        let mut rec = self
            .invites
            .get(&invite_id)
            .cloned()
            .ok_or_else(|| MeshError::UnknownInvite(h(&invite_id)))?;
        match rec.status {
            InviteStatus::Open => {}
            InviteStatus::Revoked => return Err(MeshError::InviteRevoked),
            InviteStatus::Used => return Err(MeshError::InviteUsed),
            InviteStatus::Void => return Err(MeshError::InviteVoid),
        }
        rec.status = InviteStatus::Revoked;
        let signed = codec::sign(
            id,
            tag::REVOCATION,
            &wire::Revocation {
                mesh_id: mesh_id.to_vec(),
                invite_id: invite_id.to_vec(),
                inviter: id.peer_id(),
                revoked_ms: now_ms,
            },
        );
        let mut tx = self.tx();
        tx.effect(Effect::PutInvite(rec));
        tx.effect(Effect::PutRevocation {
            id: invite_id,
            signed: codec::encode(&signed),
        });
        tx.audit("mesh.invite.revoke", json!({"invite_id": h(&invite_id)}));
        tx.send(Dest::All, Kind::Revocation(signed));
        tx_end_revoked(&mut tx, id, invite_id, now_ms);
        Ok(tx.done())
    }

    /// Joiner side: checks an invite and asks the inviter to be added.
    /// `output` holds the encoded message (hex) for offline hand-over.
    pub fn request_join(
        &self,
        id: &Identity,
        invite_text: &str,
        name: &str,
        now_ms: i64,
    ) -> Result<(MeshState, Transition), MeshError> {
        if self.mesh.is_some() {
            return Err(MeshError::MeshExists);
        }
        names::check(Field::DisplayName, name)?;
        let signed_invite = invite::from_text(invite_text)?;
        let inv = invite::verify(&signed_invite)?;
        invite::check_not_expired(&inv, now_ms)?;
        let p = id.public();
        let req = wire::JoinRequest {
            mesh_id: inv.mesh_id.to_vec(),
            invite: Some(signed_invite),
            ed25519: p.ed25519.to_vec(),
            x25519: p.x25519.to_vec(),
            x25519_binding: p.x25519_binding.to_vec(),
            name: name.to_string(),
            created_ms: now_ms,
        };
        let signed = codec::sign(id, tag::JOIN, &req);
        let mut tx = self.tx();
        tx.effect(Effect::SetPendingJoin(Some(PendingJoin {
            mesh_id: inv.mesh_id,
            invite_id: inv.invite_id,
            inviter: inv.inviter.clone(),
            name: name.to_string(),
        })));
        tx.audit(
            "mesh.join.request",
            json!({"mesh_id": h(&inv.mesh_id), "invite_id": h(&inv.invite_id),
                   "inviter": identity::peer_id_text(&inv.inviter)}),
        );
        tx.send(Dest::Peer(inv.inviter.clone()), Kind::JoinRequest(signed));
        tx.t.output = tx.t.outbound.last().map(|o| h(&o.message));
        Ok(tx.done())
    }

    /// Proposes a change; the proposal comes with the proposer's yes vote.
    pub fn propose<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        change: ProposalChange,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        let mut tx = self.tx();
        tx_propose(&mut tx, id, change, now_ms, rng)?;
        Ok(tx.done())
    }
}

fn tx_propose<R: CryptoRng + ?Sized>(
    tx: &mut Tx,
    id: &Identity,
    change: ProposalChange,
    now_ms: i64,
    rng: &mut R,
) -> Result<(), MeshError> {
    let roster = tx.s.require_member()?.clone();
    if !tx.s.synced {
        return Err(MeshError::NotSynced);
    }
    let epoch = roster.epoch;
    if let Some(mine) = tx.s.binding_vote(&id.peer_id(), now_ms) {
        return Err(already_voted(mine, now_ms));
    }
    let wire_change = match change {
        ProposalChange::Add(req) => wire::proposal::Change::Add(req),
        ProposalChange::Kick(peer) => wire::proposal::Change::Kick(peer),
        ProposalChange::Rotate => {
            let mut nonce = vec![0u8; 16];
            rng.fill_bytes(&mut nonce);
            wire::proposal::Change::Rotate(nonce)
        }
        ProposalChange::Quorum(q) => wire::proposal::Change::Quorum(q.to_wire()),
        ProposalChange::Approve { invite, name } => {
            wire::proposal::Change::Approve(wire::InviteApproval {
                invite: Some(invite),
                name,
            })
        }
        ProposalChange::RevokeApproval(id) => wire::proposal::Change::RevokeApproval(id.to_vec()),
    };
    let body = wire::Proposal {
        mesh_id: roster.mesh_id.to_vec(),
        epoch,
        roster_hash: tx.s.tip.to_vec(),
        proposer: id.peer_id(),
        created_ms: now_ms,
        expires_ms: now_ms.saturating_add(tx.s.timing.proposal_ttl_ms),
        change: Some(wire_change),
    };
    let signed = codec::sign(id, tag::PROPOSAL, &body);
    let rec = tx.s.check_proposal(&signed, now_ms, true)?;
    let hash = rec.hash;
    tx.effect(Effect::PutProposal(Arc::new(rec)));
    tx.audit(
        "mesh.proposal",
        json!({"proposal": h(&hash), "epoch": epoch, "by": "self"}),
    );
    tx.send(Dest::All, Kind::Proposal(signed));
    tx_cast_vote(tx, id, hash, true, now_ms)?;
    tx_try_commit(tx, id, hash, false, now_ms, rng)
}

impl MeshState {
    /// Votes on an open proposal of the current epoch.
    pub fn vote<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        proposal_hash: [u8; 32],
        yes: bool,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        self.require_member()?;
        if !self.synced {
            return Err(MeshError::NotSynced);
        }
        let mut tx = self.tx();
        tx_cast_vote(&mut tx, id, proposal_hash, yes, now_ms)?;
        tx_try_commit(&mut tx, id, proposal_hash, false, now_ms, rng)?;
        Ok(tx.done())
    }
}

fn tx_cast_vote(
    tx: &mut Tx,
    id: &Identity,
    proposal_hash: [u8; 32],
    yes: bool,
    now_ms: i64,
) -> Result<(), MeshError> {
    let p =
        tx.s.proposals
            .get(&proposal_hash)
            .cloned()
            .ok_or_else(|| MeshError::UnknownProposal(h(&proposal_hash)))?;
    if now_ms >= p.expires_ms {
        return Err(MeshError::ProposalExpired);
    }
    if revoked_proposal(&tx.s, &p) {
        return Err(MeshError::InviteRevoked);
    }
    let me = id.peer_id();
    // A later vote at the same epoch names the one it releases and carries
    // why that one is free (§5), so every node can check it alike.
    let mut seq = 0;
    let mut releases = None;
    let mut release = None;
    let prev =
        tx.s.votes
            .get(&(p.epoch, me.clone()))
            .filter(|v| v.roster_hash == p.roster_hash)
            .cloned();
    if let Some(prev) = prev {
        if prev.proposal_hash == proposal_hash {
            if prev.yes == yes {
                return Err(MeshError::Duplicate("vote"));
            }
            return Err(already_voted(&prev, now_ms));
        }
        let mut proof = match tx.s.closed.get(&prev.proposal_hash) {
            Some(c) => codec::decode_canonical::<wire::VoteRelease>(&c.proof, "stored closure")?,
            None if p.created_ms >= prev.proposal_expires_ms => wire::VoteRelease::default(),
            None => return Err(already_voted(&prev, now_ms)),
        };
        let prev_signed = codec::decode_canonical::<wire::Signed>(&prev.signed, "stored vote")?;
        releases = Some(codec::hash(label::VOTE, &prev_signed.body));
        proof.previous = Some(prev_signed);
        seq = prev.seq + 1;
        release = Some(proof);
    }
    let body = wire::Vote {
        mesh_id: tx.s.mesh_id()?.to_vec(),
        epoch: p.epoch,
        roster_hash: p.roster_hash.to_vec(),
        proposal_hash: proposal_hash.to_vec(),
        yes,
        voter: me.clone(),
        proposal_created_ms: p.created_ms,
        proposal_expires_ms: p.expires_ms,
        seq,
        releases: releases.map(|r| r.to_vec()).unwrap_or_default(),
    };
    let signed = codec::sign(id, tag::VOTE, &body);
    let rec = VoteRec {
        epoch: p.epoch,
        voter: me,
        roster_hash: p.roster_hash,
        proposal_hash,
        yes,
        proposal_created_ms: p.created_ms,
        proposal_expires_ms: p.expires_ms,
        signed: codec::encode(&signed),
        seq,
        releases,
        release: release.as_ref().map(codec::encode),
    };
    tx.effect(Effect::PutVote(rec));
    tx.audit(
        "mesh.vote",
        json!({"proposal": h(&proposal_hash), "epoch": p.epoch, "yes": yes, "by": "self"}),
    );
    match release {
        Some(r) => tx.send(
            Dest::All,
            Kind::ReleasedVote(wire::ReleasedVote {
                vote: Some(signed),
                release: Some(r),
            }),
        ),
        None => tx.send(Dest::All, Kind::Vote(signed)),
    }
    if !yes {
        tx_check_rejection(tx, proposal_hash, now_ms)?;
    }
    Ok(())
}

/// The refusal for a vote or proposal while `v` still binds this node.
fn already_voted(v: &VoteRec, now_ms: i64) -> MeshError {
    let left_ms = v.proposal_expires_ms.saturating_sub(now_ms).max(0);
    MeshError::AlreadyVoted {
        epoch: v.epoch,
        proposal: h(&v.proposal_hash),
        expires_in_secs: left_ms.saturating_add(999) / 1000,
    }
}

/// The facts of one signed vote that the release and conflict rules use.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VoteFacts {
    hash: [u8; 32],
    proposal: [u8; 32],
    seq: u32,
    releases: Option<[u8; 32]>,
    created_ms: i64,
    expires_ms: i64,
}

impl VoteFacts {
    fn of(body: &wire::Vote, signed_body: &[u8]) -> Result<VoteFacts, MeshError> {
        let releases = match (body.seq, body.releases.is_empty()) {
            (0, true) => None,
            (0, false) | (_, true) => {
                return Err(MeshError::malformed(
                    "vote",
                    "a vote names the vote it releases exactly when seq > 0",
                ));
            }
            _ => Some(bytes32(&body.releases, "vote releases")?),
        };
        Ok(VoteFacts {
            hash: codec::hash(label::VOTE, signed_body),
            proposal: bytes32(&body.proposal_hash, "vote proposal hash")?,
            seq: body.seq,
            releases,
            created_ms: body.proposal_created_ms,
            expires_ms: body.proposal_expires_ms,
        })
    }

    fn of_rec(v: &VoteRec) -> Result<VoteFacts, MeshError> {
        let signed = codec::decode_canonical::<wire::Signed>(&v.signed, "stored vote")?;
        Ok(VoteFacts {
            hash: codec::hash(label::VOTE, &signed.body),
            proposal: v.proposal_hash,
            seq: v.seq,
            releases: v.releases,
            created_ms: v.proposal_created_ms,
            expires_ms: v.proposal_expires_ms,
        })
    }
}

/// True when two different signed votes by one member at one roster cannot
/// both be honest (§5): two votes on one proposal; two with the same number
/// whose proposals' lifetimes overlap; or consecutive ones where the later
/// names another vote as the one it releases. Depends on the two votes only,
/// so every node holding them judges alike.
fn votes_conflict(a: &VoteFacts, b: &VoteFacts) -> bool {
    if a.hash == b.hash {
        return false;
    }
    if a.proposal == b.proposal {
        return true;
    }
    let (lo, hi) = if a.seq <= b.seq { (a, b) } else { (b, a) };
    if lo.seq == hi.seq {
        return !(hi.created_ms >= lo.expires_ms || lo.created_ms >= hi.expires_ms);
    }
    if lo.seq + 1 == hi.seq {
        return hi.releases != Some(lo.hash);
    }
    false
}

/// Checks that `withdrawal` is the proposer's withdrawal of `proposal_hash`
/// at this roster (`proposer` and `proposer_key` come from the proposal).
fn check_withdrawal_body(
    roster: &Roster,
    roster_hash: &[u8; 32],
    proposal_hash: &[u8; 32],
    proposer: &[u8],
    proposer_key: &[u8; 32],
    withdrawal: &wire::Withdrawal,
    signer: &[u8; 32],
) -> Result<(), MeshError> {
    if withdrawal.mesh_id != roster.mesh_id {
        return Err(MeshError::WrongMesh("withdrawal"));
    }
    if withdrawal.epoch != roster.epoch
        || withdrawal.roster_hash != roster_hash
        || withdrawal.proposal_hash != proposal_hash
    {
        return Err(MeshError::InvalidRelease(
            "the withdrawal is for another proposal or roster".into(),
        ));
    }
    if withdrawal.proposer != proposer || signer != proposer_key {
        return Err(MeshError::NotProposer(h(proposal_hash)));
    }
    if roster.member_with_key(proposer, signer).is_none() {
        return Err(MeshError::NotMember("withdrawal"));
    }
    Ok(())
}

/// Checks a closure proof (a withdrawal with its proposal, or no votes) of
/// `proposal_hash` at `roster`; needs nothing but the roster.
fn check_closure(
    roster: &Roster,
    roster_hash: &[u8; 32],
    proposal_hash: &[u8; 32],
    proof: &wire::VoteRelease,
) -> Result<CloseReason, MeshError> {
    if let Some(w) = &proof.withdrawal {
        if !proof.no_votes.is_empty() {
            return Err(MeshError::InvalidRelease(
                "both a withdrawal and no votes".into(),
            ));
        }
        let sp = proof.proposal.as_ref().ok_or_else(|| {
            MeshError::InvalidRelease("a withdrawal travels with its proposal".into())
        })?;
        if codec::hash(label::PROPOSAL, &sp.body) != *proposal_hash {
            return Err(MeshError::InvalidRelease(
                "the carried proposal is not the released vote's".into(),
            ));
        }
        let (prop, prop_signer) =
            codec::open_signed::<wire::Proposal>(sp, tag::PROPOSAL, "proposal")?;
        let (wb, signer) =
            codec::open_signed::<wire::Withdrawal>(w, tag::WITHDRAWAL, "withdrawal")?;
        check_withdrawal_body(
            roster,
            roster_hash,
            proposal_hash,
            &prop.proposer,
            &prop_signer,
            &wb,
            &signer,
        )?;
        return Ok(CloseReason::Withdrawn);
    }
    let mut parsed = Vec::with_capacity(proof.no_votes.len());
    for v in &proof.no_votes {
        parsed.push(codec::parse_signed::<wire::Vote>(v, tag::VOTE, "no vote")?);
    }
    let mut voters: BTreeSet<&[u8]> = BTreeSet::new();
    let mut checks = Vec::with_capacity(parsed.len());
    for v in &parsed {
        let b = &v.msg;
        if b.mesh_id != roster.mesh_id
            || b.epoch != roster.epoch
            || b.roster_hash != roster_hash
            || b.proposal_hash != proposal_hash
            || b.yes
        {
            return Err(MeshError::InvalidRelease(
                "a carried vote is not a no on the released vote's proposal".into(),
            ));
        }
        if roster.member_with_key(&b.voter, &v.signer).is_none() {
            return Err(MeshError::NotMember("no vote"));
        }
        if !voters.insert(&b.voter) {
            return Err(MeshError::InvalidRelease(
                "two no votes by one member".into(),
            ));
        }
        checks.push(SigCheck {
            signer: v.signer,
            tag: v.tag,
            body: &v.body,
            signature: v.signature,
        });
    }
    let needed = roster.rejection_needed();
    if voters.len() < needed {
        return Err(MeshError::InvalidRelease(format!(
            "{} no votes; {needed} reject this roster's proposals",
            voters.len()
        )));
    }
    codec::verify_batch(&checks, "no votes")?;
    Ok(CloseReason::Rejected)
}

/// What a carried release showed: the released vote and, when it was
/// released by a closure rather than expiry, that closure.
struct CheckedRelease {
    previous: VoteFacts,
    previous_signed: Vec<u8>,
    closure: Option<(CloseReason, wire::VoteRelease)>,
}

/// Checks the release carried with vote `body` (signed by `signer`): the
/// released vote is this voter's vote number seq - 1 at the same roster,
/// named by the vote, on another proposal, and is free by expiry or by the
/// closure of its proposal.
fn check_release(
    roster: &Roster,
    roster_hash: &[u8; 32],
    body: &wire::Vote,
    facts: &VoteFacts,
    signer: &[u8; 32],
    release: &wire::VoteRelease,
) -> Result<CheckedRelease, MeshError> {
    let prev_signed = release
        .previous
        .as_ref()
        .ok_or_else(|| MeshError::InvalidRelease("no released vote".into()))?;
    let (pb, psigner) = codec::open_signed::<wire::Vote>(prev_signed, tag::VOTE, "released vote")?;
    if psigner != *signer
        || pb.voter != body.voter
        || pb.mesh_id != body.mesh_id
        || pb.epoch != body.epoch
        || pb.roster_hash != body.roster_hash
    {
        return Err(MeshError::InvalidRelease(
            "the released vote is not this voter's at this roster".into(),
        ));
    }
    let previous = VoteFacts::of(&pb, &prev_signed.body)?;
    if previous.seq + 1 != facts.seq || Some(previous.hash) != facts.releases {
        return Err(MeshError::InvalidRelease(
            "the carried vote is not the one this vote names".into(),
        ));
    }
    if previous.proposal == facts.proposal {
        return Err(MeshError::InvalidRelease(
            "a vote cannot release a vote on its own proposal".into(),
        ));
    }
    let closes = release.withdrawal.is_some() || !release.no_votes.is_empty();
    let closure = if closes {
        let reason = check_closure(roster, roster_hash, &previous.proposal, release)?;
        let mut proof = release.clone();
        proof.previous = None;
        Some((reason, proof))
    } else {
        if facts.created_ms < previous.expires_ms {
            return Err(MeshError::InvalidRelease(
                "the released vote's proposal had not expired when this vote's was made, \
                 and no withdrawal or rejection is carried"
                    .into(),
            ));
        }
        None
    };
    Ok(CheckedRelease {
        previous,
        previous_signed: codec::encode(prev_signed),
        closure,
    })
}

/// Records that `proposal_hash` (of the current roster) closed early and
/// drops it from the open proposals; the proof is kept so this node's next
/// vote can carry it.
fn tx_close(
    tx: &mut Tx,
    proposal_hash: [u8; 32],
    reason: CloseReason,
    proof: &wire::VoteRelease,
    now_ms: i64,
) {
    if tx.s.closed.contains_key(&proposal_hash) {
        return;
    }
    let epoch = tx.s.epoch();
    tx.effect(Effect::PutClosed(ClosedRec {
        hash: proposal_hash,
        epoch,
        roster_hash: tx.s.tip,
        reason,
        proof: codec::encode(proof),
        at_ms: now_ms,
    }));
    if tx.s.proposals.contains_key(&proposal_hash) {
        tx.effect(Effect::DeleteProposal(proposal_hash));
    }
    tx.audit(
        match reason {
            CloseReason::Rejected => "mesh.proposal.reject",
            CloseReason::Withdrawn => "mesh.proposal.withdraw",
        },
        json!({"proposal": h(&proposal_hash), "epoch": epoch}),
    );
}

/// Closes an open proposal as rejected once its no votes make its quorum
/// unreachable; the proof is exactly that many signed no votes.
fn tx_check_rejection(tx: &mut Tx, proposal_hash: [u8; 32], now_ms: i64) -> Result<(), MeshError> {
    let Some(p) = tx.s.proposals.get(&proposal_hash).cloned() else {
        return Ok(());
    };
    let Some(roster) = tx.s.roster().cloned() else {
        return Ok(());
    };
    if p.roster_hash != tx.s.tip {
        return Ok(());
    }
    // A pre-approved add needs no quorum, so no votes cannot reject it.
    let body: wire::Proposal =
        codec::decode_canonical::<wire::Signed>(&p.signed, "stored proposal")
            .and_then(|s| codec::decode_canonical(&s.body, "stored proposal"))?;
    if approved_add(&roster, &body) {
        return Ok(());
    }
    let needed = roster.rejection_needed();
    let no: Vec<&VoteRec> = tx
        .s
        .votes
        .range((p.epoch, Vec::new())..(p.epoch + 1, Vec::new()))
        .map(|(_, v)| v)
        .filter(|v| v.proposal_hash == proposal_hash && !v.yes && v.roster_hash == p.roster_hash)
        .filter(|v| roster.member(&v.voter).is_some())
        .take(needed)
        .collect();
    if no.len() < needed {
        return Ok(());
    }
    let mut no_votes = Vec::with_capacity(needed);
    for v in no {
        no_votes.push(codec::decode_canonical::<wire::Signed>(
            &v.signed,
            "stored vote",
        )?);
    }
    let proof = wire::VoteRelease {
        previous: None,
        proposal: Some(codec::decode_canonical::<wire::Signed>(
            &p.signed,
            "stored proposal",
        )?),
        withdrawal: None,
        no_votes,
    };
    tx_close(tx, proposal_hash, CloseReason::Rejected, &proof, now_ms);
    Ok(())
}

/// The message that carries a stored vote: a `ReleasedVote` when it came
/// with its release, else a plain `Vote`.
pub fn vote_message(v: &VoteRec) -> Result<Vec<u8>, MeshError> {
    let signed = codec::decode_canonical::<wire::Signed>(&v.signed, "stored vote")?;
    let kind = match &v.release {
        Some(r) => Kind::ReleasedVote(wire::ReleasedVote {
            vote: Some(signed),
            release: Some(codec::decode_canonical(r, "stored release")?),
        }),
        None => Kind::Vote(signed),
    };
    Ok(codec::encode(&wire::MeshMessage { kind: Some(kind) }))
}

impl MeshState {
    /// `voter`'s vote at the current roster that still binds it for a
    /// proposal created at `created_ms`: its proposal neither closed
    /// (rejected, withdrawn) nor expired by then.
    pub fn binding_vote(&self, voter: &[u8], created_ms: i64) -> Option<&VoteRec> {
        let v = self.votes.get(&(self.epoch(), voter.to_vec()))?;
        let binds = v.roster_hash == self.tip
            && !self.closed.contains_key(&v.proposal_hash)
            && created_ms < v.proposal_expires_ms;
        binds.then_some(v)
    }

    /// Withdraws this node's own open proposal: signs a withdrawal, closes
    /// the proposal here and sends the withdrawal; every vote on it is free.
    pub fn withdraw(
        &self,
        id: &Identity,
        proposal_hash: [u8; 32],
        now_ms: i64,
    ) -> Result<(MeshState, Transition), MeshError> {
        let mut tx = self.tx();
        tx_withdraw(&mut tx, id, proposal_hash, now_ms)?;
        Ok(tx.done())
    }
}

/// Signs this node's withdrawal of its own open proposal and closes it.
fn tx_withdraw(
    tx: &mut Tx,
    id: &Identity,
    proposal_hash: [u8; 32],
    now_ms: i64,
) -> Result<(), MeshError> {
    let roster = tx.s.require_member()?.clone();
    if tx.s.closed.contains_key(&proposal_hash) {
        return Err(MeshError::Duplicate("withdrawal"));
    }
    let p =
        tx.s.proposals
            .get(&proposal_hash)
            .cloned()
            .ok_or_else(|| MeshError::UnknownProposal(h(&proposal_hash)))?;
    if p.proposer != id.peer_id() {
        return Err(MeshError::NotProposer(h(&proposal_hash)));
    }
    if now_ms >= p.expires_ms {
        return Err(MeshError::ProposalExpired);
    }
    let body = wire::Withdrawal {
        mesh_id: roster.mesh_id.to_vec(),
        epoch: p.epoch,
        roster_hash: p.roster_hash.to_vec(),
        proposal_hash: proposal_hash.to_vec(),
        proposer: id.peer_id(),
        withdrawn_ms: now_ms,
    };
    let signed = codec::sign(id, tag::WITHDRAWAL, &body);
    let proof = wire::VoteRelease {
        previous: None,
        proposal: Some(codec::decode_canonical::<wire::Signed>(
            &p.signed,
            "stored proposal",
        )?),
        withdrawal: Some(signed.clone()),
        no_votes: Vec::new(),
    };
    tx_close(tx, proposal_hash, CloseReason::Withdrawn, &proof, now_ms);
    tx.send(Dest::All, Kind::Withdrawal(signed));
    Ok(())
}

impl MeshState {
    /// The messages this node re-sends while they matter: its own open
    /// proposals, its votes at the current roster (each whole, a later vote
    /// with its release) and its withdrawals.
    pub fn republish(&self) -> Vec<Vec<u8>> {
        let me = &self.me.peer_id;
        let mut out = Vec::new();
        for p in self.proposals.values().filter(|p| &p.proposer == me) {
            if let Ok(signed) = codec::decode_canonical::<wire::Signed>(&p.signed, "proposal") {
                out.push(codec::encode(&wire::MeshMessage {
                    kind: Some(Kind::Proposal(signed)),
                }));
            }
        }
        for v in self
            .votes
            .values()
            .filter(|v| &v.voter == me && v.roster_hash == self.tip)
        {
            if let Ok(m) = vote_message(v) {
                out.push(m);
            }
        }
        for c in self
            .closed
            .values()
            .filter(|c| c.reason == CloseReason::Withdrawn && c.roster_hash == self.tip)
        {
            let withdrawal = codec::decode_canonical::<wire::VoteRelease>(&c.proof, "closure")
                .ok()
                .and_then(|proof| proof.withdrawal)
                .filter(|w| w.signer == self.me.ed25519);
            if let Some(w) = withdrawal {
                out.push(codec::encode(&wire::MeshMessage {
                    kind: Some(Kind::Withdrawal(w)),
                }));
            }
        }
        out
    }
}

fn tx_receive_withdrawal(tx: &mut Tx, signed: &wire::Signed, now_ms: i64) -> Result<(), MeshError> {
    let roster = tx.s.roster().cloned().ok_or(MeshError::NoMesh)?;
    let (wb, signer) =
        codec::open_signed::<wire::Withdrawal>(signed, tag::WITHDRAWAL, "withdrawal")?;
    let roster_hash = tx.s.check_tip_binding(
        &roster,
        "withdrawal",
        "withdrawal roster hash",
        &wb.mesh_id,
        wb.epoch,
        &wb.roster_hash,
    )?;
    let proposal_hash = bytes32(&wb.proposal_hash, "withdrawal proposal hash")?;
    if tx.s.closed.contains_key(&proposal_hash) {
        return Err(MeshError::Duplicate("withdrawal"));
    }
    let p =
        tx.s.proposals
            .get(&proposal_hash)
            .cloned()
            .ok_or_else(|| MeshError::UnknownProposal(h(&proposal_hash)))?;
    let sp = codec::decode_canonical::<wire::Signed>(&p.signed, "stored proposal")?;
    let proposer_key = bytes32(&sp.signer, "stored proposal signer")?;
    check_withdrawal_body(
        &roster,
        &roster_hash,
        &proposal_hash,
        &p.proposer,
        &proposer_key,
        &wb,
        &signer,
    )?;
    let proof = wire::VoteRelease {
        previous: None,
        proposal: Some(sp),
        withdrawal: Some(signed.clone()),
        no_votes: Vec::new(),
    };
    tx_close(tx, proposal_hash, CloseReason::Withdrawn, &proof, now_ms);
    Ok(())
}

impl MeshState {
    /// A signed sync request listing this node's recent chain.
    pub fn sync_request(
        &self,
        id: &Identity,
        now_ms: i64,
    ) -> Result<(MeshState, Transition), MeshError> {
        let mesh_id = self.mesh_id()?;
        let chain = self.chain();
        let mut known: Vec<Vec<u8>> = chain
            .iter()
            .take(SYNC_LOCATOR_LEN)
            .map(|x| x.to_vec())
            .collect();
        if chain.len() > SYNC_LOCATOR_LEN
            && let Some(oldest) = chain.last()
        {
            known.push(oldest.to_vec());
        }
        let body = wire::SyncRequest {
            mesh_id: mesh_id.to_vec(),
            requester: id.peer_id(),
            known,
            sent_ms: now_ms,
        };
        let signed = codec::sign(id, tag::SYNC_REQUEST, &body);
        let mut tx = self.tx();
        tx.s.pending_sync = Some(codec::hash(label::MESSAGE, &signed.body));
        tx.send(Dest::All, Kind::SyncRequest(signed));
        Ok(tx.done())
    }

    /// Periodic work: erase secrets past their grace, drop expired proposals,
    /// and build a commit for a proposal whose proposer did not.
    pub fn tick<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        let mut tx = self.tx();
        let due: Vec<[u8; 32]> = self
            .secrets
            .values()
            .filter(|s| s.erase_at_ms.is_some_and(|at| at <= now_ms))
            .map(|s| s.roster_hash)
            .collect();
        for hash in due {
            let epoch = self.secrets.get(&hash).map_or(0, |s| s.epoch);
            tx.effect(Effect::EraseSecret(hash));
            tx.audit(
                "mesh.secret.erase",
                json!({"roster_hash": h(&hash), "epoch": epoch}),
            );
        }
        let expired: Vec<[u8; 32]> = self
            .proposals
            .values()
            .filter(|p| now_ms >= p.expires_ms)
            .map(|p| p.hash)
            .collect();
        for hash in expired {
            tx.effect(Effect::DeleteProposal(hash));
            tx.audit("mesh.proposal.expire", json!({"proposal": h(&hash)}));
        }
        if self.is_member() && self.synced {
            let candidates: Vec<[u8; 32]> =
                tx.s.proposals
                    .values()
                    .filter(|p| now_ms >= p.created_ms.saturating_add(self.timing.commit_backup_ms))
                    .map(|p| p.hash)
                    .collect();
            for hash in candidates {
                if tx.s.proposals.contains_key(&hash) {
                    tx_try_commit(&mut tx, id, hash, true, now_ms, rng)?;
                }
            }
        }
        Ok(tx.done())
    }

    // ----- received messages ----------------------------------------------

    /// Handles one received `MeshMessage`.
    pub fn receive<R: CryptoRng + ?Sized>(
        &self,
        id: &Identity,
        bytes: &[u8],
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(MeshState, Transition), MeshError> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(MeshError::malformed("message", "too large"));
        }
        let msg: wire::MeshMessage = codec::decode_canonical(bytes, "message")?;
        let kind = msg
            .kind
            .ok_or_else(|| MeshError::malformed("message", "empty"))?;
        if let Kind::Welcome(w) = kind {
            return self.receive_welcome(id, &w, now_ms);
        }
        let mut tx = self.tx();
        if self.mesh.is_none() {
            return Err(MeshError::NoMesh);
        }
        // A removed node still takes commits (public, verifiable) so the
        // fork choice can bring it back if its removal lost a convergent
        // switch, answers sync requests with the commits it holds (the
        // one that removed it may have reached no one else) and sends a
        // joiner it invited its lost welcome again; it takes part in
        // nothing else.
        let follows_only = matches!(
            kind,
            Kind::Commit(_) | Kind::SyncResponse(_) | Kind::SyncRequest(_) | Kind::JoinRequest(_)
        );
        if !self.is_member() && !follows_only {
            return Err(MeshError::NotAMember);
        }
        match kind {
            Kind::Proposal(s) => {
                let rec = tx.s.check_proposal(&s, now_ms, false)?;
                let hash = rec.hash;
                tx.effect(Effect::PutProposal(Arc::new(rec)));
                tx.audit(
                    "mesh.proposal",
                    json!({"proposal": h(&hash), "epoch": tx.s.epoch()}),
                );
                // Its no votes may have come first.
                tx_check_rejection(&mut tx, hash, now_ms)?;
                tx_try_commit(&mut tx, id, hash, false, now_ms, rng)?;
            }
            Kind::Vote(s) => {
                let hash = self.receive_vote(&mut tx, &s, None, now_ms)?;
                if tx.t.refused.is_none() {
                    tx_try_commit(&mut tx, id, hash, false, now_ms, rng)?;
                }
            }
            Kind::ReleasedVote(rv) => {
                let (Some(s), Some(release)) = (rv.vote, rv.release) else {
                    return Err(MeshError::malformed(
                        "released vote",
                        "needs a vote and its release",
                    ));
                };
                let hash = self.receive_vote(&mut tx, &s, Some(&release), now_ms)?;
                if tx.t.refused.is_none() {
                    tx_try_commit(&mut tx, id, hash, false, now_ms, rng)?;
                }
            }
            Kind::Withdrawal(s) => tx_receive_withdrawal(&mut tx, &s, now_ms)?,
            Kind::Commit(s) => {
                tx_apply_commit(&mut tx, id, &s, now_ms)?;
            }
            Kind::Revocation(s) => tx_receive_revocation(&mut tx, id, &s, now_ms)?,
            Kind::JoinRequest(s) => self.receive_join_request(&mut tx, id, &s, now_ms, rng)?,
            Kind::SyncRequest(s) => self.answer_sync(&mut tx, id, &s)?,
            Kind::SyncResponse(s) => self.receive_sync_response(&mut tx, id, &s, now_ms)?,
            Kind::Welcome(_) => {}
        }
        Ok(tx.done())
    }

    /// Checks a signed proposal against the current roster.
    fn check_proposal(
        &self,
        signed: &wire::Signed,
        now_ms: i64,
        own: bool,
    ) -> Result<ProposalRec, MeshError> {
        let roster = self.roster().ok_or(MeshError::NoMesh)?;
        let (body, signer) =
            codec::open_signed::<wire::Proposal>(signed, tag::PROPOSAL, "proposal")?;
        let roster_hash = self.check_tip_binding(
            roster,
            "proposal",
            "proposal roster hash",
            &body.mesh_id,
            body.epoch,
            &body.roster_hash,
        )?;
        let hash = codec::hash(label::PROPOSAL, &signed.body);
        if (self.proposals.contains_key(&hash) && !own) || self.closed.contains_key(&hash) {
            return Err(MeshError::Duplicate("proposal"));
        }
        let (rec_change, joiner, invite_id) =
            check_proposal_body(roster, &self.tip, &body, &signer)?;
        // Single use (§8) is judged here, on what this node has seen
        // committed on any branch, and not in commit checks: whether a
        // commit is valid must follow from its parent roster and itself, or
        // nodes that received different siblings would disagree (§7).
        let used_invite = invite_of(&rec_change, invite_id);
        if let Some(inv) = used_invite
            && self.used_invites.get(&inv).is_some_and(|p| *p != hash)
        {
            return Err(MeshError::InviteUsed);
        }
        if body.expires_ms <= body.created_ms
            || body.expires_ms - body.created_ms > MAX_PROPOSAL_TTL_MS
        {
            return Err(MeshError::InvalidProposal("bad lifetime".into()));
        }
        if body.created_ms > now_ms.saturating_add(MAX_CLOCK_SKEW_MS) {
            return Err(MeshError::InvalidProposal("created in the future".into()));
        }
        // A backdated proposal could claim votes released that are not.
        if body.created_ms < now_ms.saturating_sub(MAX_CLOCK_SKEW_MS) {
            return Err(MeshError::InvalidProposal("created too long ago".into()));
        }
        if now_ms >= body.expires_ms {
            return Err(MeshError::ProposalExpired);
        }
        if let Some(inv) = used_invite
            && self.revoked.contains_key(&inv)
        {
            return Err(MeshError::InviteRevoked);
        }
        Ok(ProposalRec {
            hash,
            signed: codec::encode(signed),
            epoch: body.epoch,
            roster_hash,
            proposer: body.proposer,
            created_ms: body.created_ms,
            expires_ms: body.expires_ms,
            change: rec_change,
            joiner,
            invite_id,
        })
    }

    /// Records a received vote; an equivocating vote is refused but its
    /// evidence kept. A vote with seq > 0 counts only with its release:
    /// carried (`release`), or evident from the released vote this node
    /// holds.
    fn receive_vote(
        &self,
        tx: &mut Tx,
        signed: &wire::Signed,
        release: Option<&wire::VoteRelease>,
        now_ms: i64,
    ) -> Result<[u8; 32], MeshError> {
        let roster = self.roster().ok_or(MeshError::NoMesh)?;
        let (body, signer) = codec::open_signed::<wire::Vote>(signed, tag::VOTE, "vote")?;
        let roster_hash = self.check_tip_binding(
            roster,
            "vote",
            "vote roster hash",
            &body.mesh_id,
            body.epoch,
            &body.roster_hash,
        )?;
        if roster.member_with_key(&body.voter, &signer).is_none() {
            return Err(MeshError::NotMember("vote"));
        }
        if body.proposal_expires_ms <= body.proposal_created_ms {
            return Err(MeshError::malformed("vote", "proposal lifetime"));
        }
        let facts = VoteFacts::of(&body, &signed.body)?;
        let proposal_hash = facts.proposal;
        if let Some(p) = self.proposals.get(&proposal_hash)
            && (p.created_ms != body.proposal_created_ms
                || p.expires_ms != body.proposal_expires_ms)
        {
            return Err(MeshError::malformed(
                "vote",
                "proposal times do not match the proposal",
            ));
        }
        let encoded = codec::encode(signed);
        // A vote stored for a sibling roster of this epoch (before a switch) binds nothing here.
        let prev = self
            .votes
            .get(&(body.epoch, body.voter.clone()))
            .filter(|v| v.roster_hash == roster_hash);
        if prev.is_some_and(|p| p.signed == encoded) {
            return Err(MeshError::Duplicate("vote"));
        }
        let prev_facts = prev.map(VoteFacts::of_rec).transpose()?;
        let checked = match (release, facts.releases) {
            (Some(_), None) => {
                return Err(MeshError::malformed(
                    "released vote",
                    "a first vote releases nothing",
                ));
            }
            (Some(r), Some(_)) => Some(check_release(
                roster,
                &roster_hash,
                &body,
                &facts,
                &signer,
                r,
            )?),
            (None, Some(named)) => {
                // Sent without its release (a plain re-send): it counts only
                // when this node holds the vote it releases and sees why that
                // one is free, or already holds a later one (compared below).
                let evident = match (prev, &prev_facts) {
                    (Some(p), Some(pf)) => {
                        pf.seq >= facts.seq
                            || (pf.seq + 1 == facts.seq
                                && pf.hash == named
                                && (facts.created_ms >= pf.expires_ms
                                    || self.closed.contains_key(&p.proposal_hash)))
                    }
                    _ => false,
                };
                if !evident {
                    return Err(MeshError::ReleaseMissing);
                }
                None
            }
            (None, None) => None,
        };
        if let Some(pf) = &prev_facts {
            let second = if votes_conflict(pf, &facts) {
                Some(encoded.clone())
            } else {
                checked
                    .as_ref()
                    .filter(|c| votes_conflict(pf, &c.previous))
                    .map(|c| c.previous_signed.clone())
            };
            if let (Some(second), Some(prev)) = (second, prev) {
                let voter = identity::peer_id_text(&body.voter);
                let known = self
                    .evidence
                    .iter()
                    .any(|e| e.epoch == body.epoch && e.voter == body.voter && e.second == second);
                if known {
                    return Err(MeshError::Duplicate("equivocation evidence"));
                }
                tx.effect(Effect::PutEvidence(Evidence {
                    epoch: body.epoch,
                    voter: body.voter.clone(),
                    first: prev.signed.clone(),
                    second,
                    at_ms: now_ms,
                }));
                tx.audit(
                    "mesh.equivocation",
                    json!({"voter": voter, "epoch": body.epoch}),
                );
                tx.t.refused = Some(MeshError::Equivocation {
                    voter,
                    epoch: body.epoch,
                });
                return Ok(proposal_hash);
            }
            let newer =
                facts.seq > pf.seq || (facts.seq == pf.seq && facts.created_ms >= pf.expires_ms);
            if !newer {
                // A vote the member already released: outdated, not conflicting.
                return Err(MeshError::StaleEpoch {
                    what: "released vote",
                    got: body.epoch,
                    current: roster.epoch,
                });
            }
        }
        if let Some(CheckedRelease {
            closure: Some((reason, proof)),
            previous,
            ..
        }) = &checked
        {
            tx_close(tx, previous.proposal, *reason, proof, now_ms);
        }
        tx.effect(Effect::PutVote(VoteRec {
            epoch: body.epoch,
            voter: body.voter.clone(),
            roster_hash,
            proposal_hash,
            yes: body.yes,
            proposal_created_ms: body.proposal_created_ms,
            proposal_expires_ms: body.proposal_expires_ms,
            signed: encoded,
            seq: facts.seq,
            releases: facts.releases,
            release: release.map(codec::encode),
        }));
        tx.audit(
            "mesh.vote",
            json!({"proposal": h(&proposal_hash), "epoch": body.epoch, "yes": body.yes,
                   "voter": identity::peer_id_text(&body.voter)}),
        );
        if !body.yes {
            tx_check_rejection(tx, proposal_hash, now_ms)?;
        }
        Ok(proposal_hash)
    }
}

/// Builds the commit for `proposal_hash` when its yes votes reach quorum.
/// Only the proposer builds, unless `backup` (a later tick, by anyone).
fn tx_try_commit<R: CryptoRng + ?Sized>(
    tx: &mut Tx,
    id: &Identity,
    proposal_hash: [u8; 32],
    backup: bool,
    now_ms: i64,
    rng: &mut R,
) -> Result<(), MeshError> {
    let Some(p) = tx.s.proposals.get(&proposal_hash).cloned() else {
        return Ok(());
    };
    if p.roster_hash != tx.s.tip
        || now_ms >= p.expires_ms
        || !tx.s.is_member()
        || revoked_proposal(&tx.s, &p)
    {
        return Ok(());
    }
    if !backup && p.proposer != id.peer_id() {
        return Ok(());
    }
    let Some(roster) = tx.s.roster().cloned() else {
        return Ok(());
    };
    let proposal = codec::decode_canonical::<wire::Signed>(&p.signed, "stored proposal")?;
    let body: wire::Proposal = codec::decode_canonical(&proposal.body, "stored proposal")?;
    let approved = approved_add(&roster, &body);
    let needed = votes_needed(&roster, &body);
    let mut yes: Vec<&VoteRec> =
        tx.s.votes
            .range((p.epoch, Vec::new())..(p.epoch + 1, Vec::new()))
            .map(|(_, v)| v)
            .filter(|v| v.proposal_hash == proposal_hash && v.yes && v.roster_hash == p.roster_hash)
            .filter(|v| roster.member(&v.voter).is_some())
            .filter(|v| !approved || v.voter == p.proposer)
            .collect();
    if yes.len() < needed {
        return Ok(());
    }
    yes.truncate(needed);
    let mut votes = Vec::with_capacity(needed);
    for v in yes {
        votes.push(codec::decode_canonical::<wire::Signed>(
            &v.signed,
            "stored vote",
        )?);
    }
    let mut secret = [0u8; 32];
    rng.fill_bytes(&mut secret);
    let sender = EnvelopeSender::new(rng);
    let signed = build_commit(
        id, &roster, &tx.s.tip, proposal, votes, &p.change, &secret, &sender,
    )?;
    tx_apply_commit(tx, id, &signed, now_ms)?;
    tx.send(Dest::All, Kind::Commit(signed.clone()));
    if let Some(joiner) = &p.joiner {
        tx.send(
            Dest::Peer(joiner.clone()),
            Kind::Welcome(wire::Welcome {
                commit: Some(signed),
                prev_roster: roster.encode(),
            }),
        );
    }
    Ok(())
}

impl MeshState {
    /// Fully checks a commit against its parent roster (which this node must have).
    fn check_commit(
        &self,
        id: &Identity,
        signed: &wire::Signed,
    ) -> Result<CheckedCommit, MeshError> {
        let parsed = codec::parse_signed::<wire::Commit>(signed, tag::COMMIT, "commit")?;
        let commit = &parsed.msg;
        let core: wire::CommitCore = codec::decode_canonical(&commit.core, "commit core")?;
        let mesh_id = self.mesh_id()?;
        if core.mesh_id != mesh_id {
            return Err(MeshError::WrongMesh("commit"));
        }
        let next_hash = codec::hash(label::ROSTER, &commit.next_roster);
        if self.rosters.contains_key(&next_hash) {
            return Err(MeshError::Duplicate("commit"));
        }
        let prev_hash = bytes32(&core.prev_roster_hash, "commit parent")?;
        let Some(prev) = self.rosters.get(&prev_hash) else {
            // Built on a roster this node does not have: an old branch, or this node is behind.
            if core.new_epoch <= self.epoch() {
                return Err(MeshError::StaleEpoch {
                    what: "commit",
                    got: core.new_epoch,
                    current: self.epoch(),
                });
            }
            return Err(MeshError::UnknownRoster {
                what: "commit",
                epoch: core.new_epoch,
            });
        };
        check_commit_against(id, &prev.roster, &prev_hash, &parsed, &core, &self.votes)
    }
}

/// Extends this node's tree below a roster it holds without parent (the
/// roster a joiner was welcomed from, trusted on first use, §8): when
/// `commits` hold the commit that made that roster (its core hashes to the
/// roster's `commit_hash`) and the commit that made its parent (whose next
/// roster hashes to the parent hash that core names), the parent is trusted
/// by those hashes, and the first commit is checked in full against it.
/// Repeated down as far as the commits reach, so that a joiner whose
/// welcome came from a losing sibling can reach the fork point and follow
/// the fork choice like everyone else (§9, §11).
fn tx_link_roots(tx: &mut Tx, id: &Identity, commits: &[wire::Signed]) {
    let Ok(mesh_id) = tx.s.mesh_id() else {
        return;
    };
    // Each commit by the hash of the roster it makes.
    let mut by_next: BTreeMap<[u8; 32], (&wire::Signed, wire::Commit)> = BTreeMap::new();
    for c in commits {
        let Ok(parsed) = codec::parse_signed::<wire::Commit>(c, tag::COMMIT, "commit") else {
            continue;
        };
        by_next.insert(
            codec::hash(label::ROSTER, &parsed.msg.next_roster),
            (c, parsed.msg),
        );
    }
    for _ in 0..commits.len() {
        let mut linked = false;
        for root in tx.s.unlinked_roots() {
            let Some((signed, commit)) = by_next.get(&root.hash) else {
                continue;
            };
            if codec::hash(label::COMMIT, &commit.core) != root.roster.commit_hash {
                continue;
            }
            let Ok(core) = codec::decode_canonical::<wire::CommitCore>(&commit.core, "commit core")
            else {
                continue;
            };
            let Ok(parent_hash) = bytes32(&core.prev_roster_hash, "commit parent") else {
                continue;
            };
            let parent = match tx.s.rosters.get(&parent_hash) {
                Some(p) => p.clone(),
                None => {
                    let Some((_, made_parent)) = by_next.get(&parent_hash) else {
                        continue;
                    };
                    let Ok(roster) = Roster::decode(&made_parent.next_roster) else {
                        continue;
                    };
                    if roster.mesh_id != mesh_id {
                        continue;
                    }
                    Arc::new(RosterNode {
                        roster,
                        hash: parent_hash,
                        parent: None,
                        commit: None,
                        proposal_hash: None,
                    })
                }
            };
            let Ok(parsed) = codec::parse_signed::<wire::Commit>(signed, tag::COMMIT, "commit")
            else {
                continue;
            };
            let Ok(checked) = check_commit_against(
                id,
                &parent.roster,
                &parent_hash,
                &parsed,
                &core,
                &tx.s.votes,
            ) else {
                continue;
            };
            if checked.node.hash != root.hash {
                continue;
            }
            if !tx.s.rosters.contains_key(&parent_hash) {
                tx.effect(Effect::PutRoster(parent));
            }
            tx.effect(Effect::PutRoster(Arc::new(checked.node)));
            linked = true;
        }
        if !linked {
            break;
        }
    }
}

fn tx_apply_commit(
    tx: &mut Tx,
    id: &Identity,
    signed: &wire::Signed,
    now_ms: i64,
) -> Result<(), MeshError> {
    let checked = tx.s.check_commit(id, signed)?;
    tx_insert_checked(tx, checked, now_ms);
    Ok(())
}

/// Adds a checked commit to the tree and moves the tip by the fork-choice rule.
fn tx_insert_checked(tx: &mut Tx, checked: CheckedCommit, now_ms: i64) {
    let node = Arc::new(checked.node);
    let hash = node.hash;
    let epoch = node.roster.epoch;
    tx.effect(Effect::PutRoster(node.clone()));
    if let Some(inv) = checked.invite_id {
        tx.effect(Effect::PutUsedInvite {
            id: inv,
            proposal: checked.proposal_hash,
        });
        if let Some(mut rec) = tx.s.invites.get(&inv).cloned()
            && rec.status == InviteStatus::Open
        {
            rec.status = InviteStatus::Used;
            tx.effect(Effect::PutInvite(rec));
        }
    }
    if let Some(secret) = checked.secret {
        tx.effect(Effect::PutSecret(SecretEntry {
            roster_hash: hash,
            epoch,
            secret,
            erase_at_ms: None,
        }));
    }
    tx.audit(
            "mesh.commit.accept",
            json!({"epoch": epoch, "roster_hash": h(&hash), "commit_hash": h(&node.roster.commit_hash),
                   "proposal": h(&checked.proposal_hash), "joiner": checked.joiner.as_ref().map(|j| identity::peer_id_text(j))}),
        );
    let best = fork_choice(&tx.s.rosters);
    if best != tx.s.tip {
        tx_move_tip(tx, best, now_ms);
    } else if checked.secret.is_some() {
        // A losing sibling: keep its secret only for the grace window.
        tx_schedule_erase(tx, hash, now_ms);
    }
}

fn tx_schedule_erase(tx: &mut Tx, roster_hash: [u8; 32], now_ms: i64) {
    if let Some(mut s) = tx.s.secrets.get(&roster_hash).cloned()
        && s.erase_at_ms.is_none()
    {
        s.erase_at_ms = Some(now_ms.saturating_add(tx.s.timing.key_grace_ms));
        tx.effect(Effect::PutSecret(s));
    }
}

fn tx_move_tip(tx: &mut Tx, new_tip: [u8; 32], now_ms: i64) {
    let old_tip = tx.s.tip;
    let Some(node) = tx.s.rosters.get(&new_tip).cloned() else {
        return;
    };
    let switched = node.parent != Some(old_tip);
    tx.effect(Effect::SetTip(new_tip));
    tx.effect(Effect::PutHistory(HistoryEntry {
        epoch: node.roster.epoch,
        roster_hash: new_tip,
        commit_hash: node.roster.commit_hash,
        switched,
        at_ms: now_ms,
    }));
    tx.audit(
        if switched {
            "mesh.switch"
        } else {
            "mesh.epoch"
        },
        json!({"epoch": node.roster.epoch, "roster_hash": h(&new_tip),
                   "members": node.roster.members.len(), "from": h(&old_tip)}),
    );
    let others: Vec<[u8; 32]> =
        tx.s.secrets
            .keys()
            .filter(|k| **k != new_tip)
            .copied()
            .collect();
    for k in others {
        tx_schedule_erase(tx, k, now_ms);
    }
    let stale: Vec<[u8; 32]> =
        tx.s.proposals
            .values()
            .filter(|p| p.roster_hash != new_tip)
            .map(|p| p.hash)
            .collect();
    for p in stale {
        tx.effect(Effect::DeleteProposal(p));
    }
    let closed: Vec<[u8; 32]> =
        tx.s.closed
            .values()
            .filter(|c| c.roster_hash != new_tip)
            .map(|c| c.hash)
            .collect();
    for c in closed {
        tx.effect(Effect::DeleteClosed(c));
    }
    let keep_from = node.roster.epoch.saturating_sub(1);
    if tx.s.votes.keys().any(|(e, _)| *e < keep_from) {
        tx.effect(Effect::DeleteVotesBefore(keep_from));
    }
    if !tx.s.is_member() {
        let open: Vec<InviteRec> =
            tx.s.invites
                .values()
                .filter(|i| i.status == InviteStatus::Open)
                .cloned()
                .collect();
        for mut i in open {
            i.status = InviteStatus::Void;
            tx.effect(Effect::PutInvite(i));
        }
        tx.audit("mesh.removed", json!({"epoch": node.roster.epoch}));
    }
}

fn tx_receive_revocation(
    tx: &mut Tx,
    id: &Identity,
    signed: &wire::Signed,
    now_ms: i64,
) -> Result<(), MeshError> {
    let roster = tx.s.roster().cloned().ok_or(MeshError::NoMesh)?;
    let (body, signer) =
        codec::open_signed::<wire::Revocation>(signed, tag::REVOCATION, "revocation")?;
    if body.mesh_id != roster.mesh_id {
        return Err(MeshError::WrongMesh("revocation"));
    }
    let invite_id = bytes16(&body.invite_id, "revocation invite id")?;
    let derived =
        identity::peer_id_bytes(&signer).map_err(|_| MeshError::BadSignature("revocation"))?;
    if derived != body.inviter {
        return Err(MeshError::BadSignature("revocation"));
    }
    if roster.member_with_key(&body.inviter, &signer).is_none() {
        return Err(MeshError::NotMember("revocation"));
    }
    if tx.s.revoked.contains_key(&invite_id) {
        return Err(MeshError::Duplicate("revocation"));
    }
    tx.effect(Effect::PutRevocation {
        id: invite_id,
        signed: codec::encode(signed),
    });
    tx.audit("mesh.revocation", json!({"invite_id": h(&invite_id)}));
    tx_end_revoked(tx, id, invite_id, now_ms);
    Ok(())
}

/// Ends the open proposals that use or approve a revoked invite: this
/// node withdraws its own (a signed withdrawal, so every vote on them is
/// released at every node, §5); those of others it no longer votes on or
/// commits (`revoked_proposal`) and closes when their proposers' withdrawals
/// arrive. They stay held until then so that the withdrawal can close them
/// here too: a proposal dropped unclosed would keep its votes bound until
/// it expired.
fn tx_end_revoked(tx: &mut Tx, id: &Identity, invite_id: [u8; 16], now_ms: i64) {
    let me = id.peer_id();
    let own: Vec<[u8; 32]> =
        tx.s.proposals
            .values()
            .filter(|p| p.invite() == Some(invite_id) && p.proposer == me)
            .map(|p| p.hash)
            .collect();
    for p in own {
        // Only an expired proposal cannot be withdrawn; its votes are free anyway.
        let _ = tx_withdraw(tx, id, p, now_ms);
    }
}

/// True when the proposal uses or approves an invite this node holds as revoked.
fn revoked_proposal(s: &MeshState, p: &ProposalRec) -> bool {
    p.invite().is_some_and(|i| s.revoked.contains_key(&i))
}

impl MeshState {
    fn receive_join_request<R: CryptoRng + ?Sized>(
        &self,
        tx: &mut Tx,
        id: &Identity,
        signed: &wire::Signed,
        now_ms: i64,
        rng: &mut R,
    ) -> Result<(), MeshError> {
        let (join, _) = parse_join_request(signed)?;
        let inv = join.invite;
        if inv.mesh_id != self.mesh_id()? {
            return Err(MeshError::WrongMesh("join request"));
        }
        if inv.inviter != id.peer_id() {
            return Err(MeshError::Refused(
                "join request for an invite another member issued".into(),
            ));
        }
        let mut rec = self
            .invites
            .get(&inv.invite_id)
            .cloned()
            .ok_or(MeshError::InviteForged)?;
        if rec.status == InviteStatus::Used {
            // The same joiner asking again (its welcome was lost): send it
            // again, even when this inviter has since been removed: no one
            // else answers that joiner, which the roster already counts.
            if let Some(welcome) = self.welcome_for(&join.member) {
                tx.send(
                    Dest::Peer(join.member.peer_id.clone()),
                    Kind::Welcome(welcome),
                );
                return Ok(());
            }
            return Err(MeshError::InviteUsed);
        }
        let roster = self.require_member()?.clone();
        verify_join_request(signed, &roster)?;
        match rec.status {
            InviteStatus::Open => {}
            InviteStatus::Used => return Err(MeshError::InviteUsed),
            InviteStatus::Revoked => return Err(MeshError::InviteRevoked),
            InviteStatus::Void => return Err(MeshError::InviteVoid),
        }
        invite::check_not_expired(&inv, now_ms)?;
        if self.used_invites.contains_key(&inv.invite_id) {
            return Err(MeshError::InviteUsed);
        }
        rec.status = InviteStatus::Used;
        tx.effect(Effect::PutInvite(rec));
        tx.audit(
            "mesh.join.accept",
            json!({"invite_id": h(&inv.invite_id), "joiner": identity::peer_id_text(&join.member.peer_id)}),
        );
        tx_propose(tx, id, ProposalChange::Add(signed.clone()), now_ms, rng)
    }

    /// The welcome that added `member`, when it is in the current roster and
    /// this node holds the commit that added it and the roster before.
    pub fn welcome_for(&self, member: &Member) -> Option<wire::Welcome> {
        let current = self
            .roster()?
            .member_with_key(&member.peer_id, &member.ed25519)?;
        let node = self
            .chain()
            .into_iter()
            .filter_map(|h| self.rosters.get(&h))
            .find(|n| n.roster.epoch == current.joined_epoch)?;
        let parent = self.rosters.get(&node.parent?)?;
        let commit =
            codec::decode_canonical::<wire::Signed>(node.commit.as_ref()?, "stored commit").ok()?;
        Some(wire::Welcome {
            commit: Some(commit),
            prev_roster: parent.roster.encode(),
        })
    }

    fn answer_sync(
        &self,
        tx: &mut Tx,
        id: &Identity,
        signed: &wire::Signed,
    ) -> Result<(), MeshError> {
        let (body, signer) =
            codec::open_signed::<wire::SyncRequest>(signed, tag::SYNC_REQUEST, "sync request")?;
        if body.mesh_id != self.mesh_id()? {
            return Err(MeshError::WrongMesh("sync request"));
        }
        if body.known.len() > SYNC_LOCATOR_LEN + 1 {
            return Err(MeshError::malformed(
                "sync request",
                "too many known rosters",
            ));
        }
        let member_somewhere = self
            .rosters
            .values()
            .any(|n| n.roster.member_with_key(&body.requester, &signer).is_some());
        if !member_somewhere {
            return Err(MeshError::NotMember("sync request"));
        }
        let known: BTreeSet<[u8; 32]> = body
            .known
            .iter()
            .filter_map(|k| <[u8; 32]>::try_from(k.as_slice()).ok())
            .collect();
        let chain = self.chain();
        let mut nodes = Vec::new();
        for hash in &chain {
            if known.contains(hash) {
                break;
            }
            if let Some(n) = self.rosters.get(hash) {
                nodes.push(n);
            }
        }
        nodes.reverse();
        // A requester on a losing branch also gets the commits of that
        // branch down to where it leaves this chain: a joiner welcomed on
        // that branch holds no roster before the one it joined from, and
        // links it to the fork point with them (§11).
        let on_chain: BTreeSet<[u8; 32]> = chain.iter().copied().collect();
        let mut side = Vec::new();
        let mut seen = BTreeSet::new();
        for k in &known {
            let mut at = *k;
            let mut branch = Vec::new();
            while !on_chain.contains(&at) && seen.insert(at) {
                let Some(n) = self.rosters.get(&at) else {
                    break;
                };
                branch.push(n);
                let Some(p) = n.parent else {
                    break;
                };
                at = p;
            }
            branch.reverse();
            side.extend(branch);
        }
        let mut commits = Vec::new();
        for c in side.iter().chain(&nodes).filter_map(|n| n.commit.as_ref()) {
            commits.push(codec::decode_canonical::<wire::Signed>(c, "stored commit")?);
        }
        let mut revocations = Vec::new();
        for r in self.revoked.values() {
            revocations.push(codec::decode_canonical::<wire::Signed>(
                r,
                "stored revocation",
            )?);
        }
        let response = wire::SyncResponse {
            mesh_id: self.mesh_id()?.to_vec(),
            responder: id.peer_id(),
            request_hash: codec::hash(label::MESSAGE, &signed.body).to_vec(),
            commits,
            revocations,
        };
        let signed_response = codec::sign(id, tag::SYNC_RESPONSE, &response);
        tx.send(
            Dest::Peer(body.requester),
            Kind::SyncResponse(signed_response),
        );
        Ok(())
    }

    fn receive_sync_response(
        &self,
        tx: &mut Tx,
        id: &Identity,
        signed: &wire::Signed,
        now_ms: i64,
    ) -> Result<(), MeshError> {
        let (body, signer) =
            codec::open_signed::<wire::SyncResponse>(signed, tag::SYNC_RESPONSE, "sync response")?;
        if body.mesh_id != self.mesh_id()? {
            return Err(MeshError::WrongMesh("sync response"));
        }
        let request = bytes32(&body.request_hash, "sync response request hash")?;
        if self.pending_sync != Some(request) {
            return Err(MeshError::Refused(
                "sync response to a request this node is not waiting on".into(),
            ));
        }
        let derived = identity::peer_id_bytes(&signer)
            .map_err(|_| MeshError::BadSignature("sync response"))?;
        if derived != body.responder {
            return Err(MeshError::BadSignature("sync response"));
        }
        let responder_known = self
            .roster()
            .is_some_and(|r| r.member_with_key(&body.responder, &signer).is_some());
        // A former member's commits are checked in full like any; only a
        // current member's answer makes this node synced.
        let former = self
            .rosters
            .values()
            .any(|n| n.roster.member_with_key(&body.responder, &signer).is_some());
        if !responder_known && !former {
            return Err(MeshError::NotMember("sync response"));
        }
        tx_link_roots(tx, id, &body.commits);
        for c in &body.commits {
            match tx.s.check_commit(id, c) {
                Ok(checked) => tx_insert_checked(tx, checked, now_ms),
                Err(MeshError::Duplicate(_)) | Err(MeshError::StaleEpoch { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        for r in &body.revocations {
            match tx_receive_revocation(tx, id, r, now_ms) {
                Ok(()) | Err(MeshError::Duplicate(_)) | Err(MeshError::NotMember(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let responder_member = responder_known
            || tx
                .s
                .roster()
                .is_some_and(|r| r.member_with_key(&body.responder, &signer).is_some());
        if !responder_member {
            return Ok(());
        }
        if !tx.s.synced {
            tx.audit(
                "mesh.synced",
                json!({"epoch": tx.s.epoch(), "from": identity::peer_id_text(&body.responder)}),
            );
        }
        // pending_sync stays set: more members may answer the same request,
        // and a node on a losing branch learns the winning one from any of them.
        tx.s.synced = true;
        Ok(())
    }

    /// The rosters held without their parent, genesis aside: the one a
    /// joiner was welcomed from (§8), or the lowest linked below it. When
    /// such a roster is on a branch that lost the fork choice, the winning
    /// branch leaves from below it (`tx_link_roots`).
    fn unlinked_roots(&self) -> Vec<Arc<RosterNode>> {
        self.rosters
            .values()
            .filter(|n| n.parent.is_none() && n.roster.epoch > 0)
            .cloned()
            .collect()
    }

    fn receive_welcome(
        &self,
        id: &Identity,
        welcome: &wire::Welcome,
        now_ms: i64,
    ) -> Result<(MeshState, Transition), MeshError> {
        let pending = self
            .pending_join
            .clone()
            .ok_or_else(|| MeshError::Refused("no join pending on this node".into()))?;
        if self.mesh.is_some() {
            return Err(MeshError::MeshExists);
        }
        let signed = welcome
            .commit
            .as_ref()
            .ok_or_else(|| MeshError::malformed("welcome", "no commit"))?;
        let prev = Roster::decode(&welcome.prev_roster)?;
        if prev.mesh_id != pending.mesh_id {
            return Err(MeshError::WrongMesh("welcome"));
        }
        let prev_hash = prev.hash();
        // The inviter must be a member of the roster the joiner is added to.
        prev.member(&pending.inviter).ok_or(MeshError::InviteVoid)?;
        let parsed = codec::parse_signed::<wire::Commit>(signed, tag::COMMIT, "commit")?;
        let core: wire::CommitCore = codec::decode_canonical(&parsed.msg.core, "commit core")?;
        if bytes32(&core.prev_roster_hash, "commit parent")? != prev_hash {
            return Err(MeshError::InvalidCommit(
                "welcome roster does not match the commit".into(),
            ));
        }
        let checked =
            check_commit_against(id, &prev, &prev_hash, &parsed, &core, &BTreeMap::new())?;
        let secret = checked.secret.ok_or(MeshError::NotAMember)?;
        if checked.invite_id != Some(pending.invite_id) {
            return Err(MeshError::InvalidCommit(
                "the commit does not use this node's invite".into(),
            ));
        }
        let mut tx = self.tx();
        tx.effect(Effect::PutMesh(MeshInfo {
            mesh_id: prev.mesh_id,
            name: prev.mesh_name.clone(),
        }));
        tx.effect(Effect::PutRoster(Arc::new(RosterNode {
            roster: prev,
            hash: prev_hash,
            parent: None,
            commit: None,
            proposal_hash: None,
        })));
        let node = Arc::new(checked.node);
        let hash = node.hash;
        let epoch = node.roster.epoch;
        tx.effect(Effect::PutRoster(node.clone()));
        if let Some(inv) = checked.invite_id {
            tx.effect(Effect::PutUsedInvite {
                id: inv,
                proposal: checked.proposal_hash,
            });
        }
        tx.effect(Effect::SetTip(hash));
        tx.effect(Effect::PutSecret(SecretEntry {
            roster_hash: hash,
            epoch,
            secret,
            erase_at_ms: None,
        }));
        tx.effect(Effect::PutHistory(HistoryEntry {
            epoch,
            roster_hash: hash,
            commit_hash: node.roster.commit_hash,
            switched: false,
            at_ms: now_ms,
        }));
        tx.effect(Effect::SetPendingJoin(None));
        tx.s.synced = true;
        tx.audit(
            "mesh.welcome",
            json!({"mesh_id": h(&pending.mesh_id), "epoch": epoch, "roster_hash": h(&hash)}),
        );
        Ok(tx.done())
    }

    // ----- gossip keys ----------------------------------------------------

    /// The gossip key of the current epoch.
    pub fn gossip_key(&self) -> Option<(u64, [u8; 32])> {
        let mesh_id = self.mesh.as_ref()?.mesh_id;
        let s = self.secrets.get(&self.tip)?;
        Some((s.epoch, envelope::gossip_key(&mesh_id, s.epoch, &s.secret)))
    }

    /// Seals a gossip payload under the current epoch key.
    pub fn seal_gossip<R: CryptoRng + ?Sized>(
        &self,
        topic: &str,
        payload: &[u8],
        rng: &mut R,
    ) -> Result<wire::Gossip, MeshError> {
        let mesh_id = self.mesh_id()?;
        let (epoch, key) = self.gossip_key().ok_or(MeshError::NotAMember)?;
        let (nonce, ciphertext) = envelope::seal_gossip(&key, &mesh_id, epoch, topic, payload, rng)
            .map_err(|e| MeshError::Refused(e.to_string()))?;
        Ok(wire::Gossip {
            mesh_id: mesh_id.to_vec(),
            epoch,
            topic: topic.to_string(),
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Seals an encoded `MeshMessage` for gossip under the key of the epoch
    /// it belongs to: a proposal or vote under its own roster's key, a commit
    /// under its parent roster's key (the members who must apply it hold
    /// only that one), anything else under the current key. Falls back to the
    /// current key when the older one is already erased.
    pub fn seal_mesh_message<R: CryptoRng + ?Sized>(
        &self,
        topic: &str,
        message: &[u8],
        rng: &mut R,
    ) -> Result<wire::Gossip, MeshError> {
        let bound = bound_roster(message).filter(|h| self.secrets.contains_key(h));
        let Some(roster_hash) = bound else {
            return self.seal_gossip(topic, message, rng);
        };
        let mesh_id = self.mesh_id()?;
        let s = &self.secrets[&roster_hash];
        let key = envelope::gossip_key(&mesh_id, s.epoch, &s.secret);
        let (nonce, ciphertext) =
            envelope::seal_gossip(&key, &mesh_id, s.epoch, topic, message, rng)
                .map_err(|e| MeshError::Refused(e.to_string()))?;
        Ok(wire::Gossip {
            mesh_id: mesh_id.to_vec(),
            epoch: s.epoch,
            topic: topic.to_string(),
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Opens a gossip payload with any epoch key this node still holds
    /// (the current one, or one still inside its grace window).
    pub fn open_gossip(&self, g: &wire::Gossip) -> Result<Vec<u8>, MeshError> {
        let mesh_id = self.mesh_id()?;
        if g.mesh_id != mesh_id {
            return Err(MeshError::WrongMesh("gossip"));
        }
        for s in self.secrets.values().filter(|s| s.epoch == g.epoch) {
            let key = envelope::gossip_key(&mesh_id, s.epoch, &s.secret);
            if let Ok(plain) =
                envelope::open_gossip(&key, &mesh_id, g.epoch, &g.topic, &g.nonce, &g.ciphertext)
            {
                return Ok(plain);
            }
        }
        Err(MeshError::Refused(format!(
            "no key of epoch {} opens this gossip",
            g.epoch
        )))
    }
}

/// The roster an encoded `MeshMessage` is bound to, when it names one.
fn bound_roster(message: &[u8]) -> Option<[u8; 32]> {
    use prost::Message;
    let msg = wire::MeshMessage::decode(message).ok()?;
    let roster = match msg.kind? {
        Kind::Proposal(s) => wire::Proposal::decode(s.body.as_slice()).ok()?.roster_hash,
        Kind::Vote(s) => wire::Vote::decode(s.body.as_slice()).ok()?.roster_hash,
        Kind::ReleasedVote(rv) => {
            wire::Vote::decode(rv.vote?.body.as_slice())
                .ok()?
                .roster_hash
        }
        Kind::Withdrawal(s) => {
            wire::Withdrawal::decode(s.body.as_slice())
                .ok()?
                .roster_hash
        }
        Kind::Commit(s) => {
            let commit = wire::Commit::decode(s.body.as_slice()).ok()?;
            wire::CommitCore::decode(commit.core.as_slice())
                .ok()?
                .prev_roster_hash
        }
        _ => return None,
    };
    roster.try_into().ok()
}

/// A verified join request.
pub struct JoinCheck {
    pub member: Member,
    pub invite: Invite,
}

/// Verifies a signed join request: signature, key binding, and its invite's
/// signature, mesh and inviter (who must be in `roster`). Not the expiry.
pub fn verify_join_request(
    signed: &wire::Signed,
    roster: &Roster,
) -> Result<(JoinCheck, wire::JoinRequest), MeshError> {
    let (check, req) = parse_join_request(signed)?;
    if req.mesh_id != roster.mesh_id || check.invite.mesh_id != roster.mesh_id {
        return Err(MeshError::WrongMesh("join request"));
    }
    if roster
        .member_with_key(&check.invite.inviter, &check.invite.inviter_key)
        .is_none()
    {
        return Err(MeshError::InviteVoid);
    }
    Ok((check, req))
}

/// Verifies a join request's own signatures and keys (no roster needed).
pub fn parse_join_request(
    signed: &wire::Signed,
) -> Result<(JoinCheck, wire::JoinRequest), MeshError> {
    let (req, signer) = codec::open_signed::<wire::JoinRequest>(signed, tag::JOIN, "join request")?;
    let signed_invite = req
        .invite
        .as_ref()
        .ok_or_else(|| MeshError::malformed("join request", "no invite"))?;
    let inv = invite::verify(signed_invite)?;
    let ed = bytes32(&req.ed25519, "join request ed25519 key")?;
    if ed != signer {
        return Err(MeshError::BadSignature("join request"));
    }
    let member = Member {
        peer_id: identity::peer_id_bytes(&ed)
            .map_err(|_| MeshError::malformed("join request", "bad key"))?,
        ed25519: ed,
        x25519: bytes32(&req.x25519, "join request x25519 key")?,
        x25519_binding: req
            .x25519_binding
            .as_slice()
            .try_into()
            .map_err(|_| MeshError::malformed("join request", "binding is not 64 bytes"))?,
        name: req.name.clone(),
        joined_epoch: 0,
    };
    member.verify_keys()?;
    Ok((
        JoinCheck {
            member,
            invite: inv,
        },
        req,
    ))
}

/// A proposal's change, the joiner's peer id and the invite id (for an add).
pub(crate) type ParsedChange = (Change, Option<Vec<u8>>, Option<Vec<u8>>);

/// The change a proposal carries, without checks against a roster.
pub(crate) fn proposal_change(body: &wire::Proposal) -> Result<ParsedChange, MeshError> {
    let change = body
        .change
        .as_ref()
        .ok_or_else(|| MeshError::malformed("proposal", "no change"))?;
    Ok(match change {
        wire::proposal::Change::Add(req) => {
            let (join, _) = parse_join_request(req)?;
            let joiner = join.member.peer_id.clone();
            (
                Change::Add(join.member),
                Some(joiner),
                Some(join.invite.invite_id.to_vec()),
            )
        }
        wire::proposal::Change::Kick(peer) => (Change::Kick(peer.clone()), None, None),
        wire::proposal::Change::Rotate(_) => (Change::Rotate, None, None),
        wire::proposal::Change::Quorum(q) => {
            (Change::Quorum(QuorumRule::from_wire(q)?), None, None)
        }
        wire::proposal::Change::Approve(a) => (Change::Approve(approval_of(a)?.0), None, None),
        wire::proposal::Change::RevokeApproval(id) => (
            Change::RevokeApproval(bytes16(id, "revoked approval id")?),
            None,
            None,
        ),
    })
}

/// The hash an approval pins its invite by (§8a).
pub fn invite_hash(signed_invite: &wire::Signed) -> [u8; 32] {
    codec::hash(label::INVITE, &codec::encode(signed_invite))
}

/// The approval an `approve` change asks for, and its verified invite.
fn approval_of(a: &wire::InviteApproval) -> Result<(ApprovedInvite, Invite), MeshError> {
    let signed = a
        .invite
        .as_ref()
        .ok_or_else(|| MeshError::malformed("approval", "no invite"))?;
    let inv = invite::verify(signed)?;
    Ok((
        ApprovedInvite {
            invite_id: inv.invite_id,
            invite_hash: invite_hash(signed),
            inviter: inv.inviter.clone(),
            expires_ms: inv.expires_ms,
            name: a.name.clone(),
            approved_epoch: 0,
        },
        inv,
    ))
}

/// True when `body` is an add that `roster` pre-approved (§8a): the
/// roster lists an approval of exactly the invite the join request carries
/// (its hash), the name matches when one was set, the proposal was made
/// before the approval expired, and its proposer is the inviter. Such an
/// add passes on its proposer's yes alone.
pub fn approved_add(roster: &Roster, body: &wire::Proposal) -> bool {
    let Some(wire::proposal::Change::Add(req)) = &body.change else {
        return false;
    };
    let Ok((join, req)) = parse_join_request(req) else {
        return false;
    };
    let Some(signed_invite) = &req.invite else {
        return false;
    };
    roster.approval(&join.invite.invite_id).is_some_and(|a| {
        a.invite_hash == invite_hash(signed_invite)
            && (a.name.is_empty() || a.name == join.member.name)
            && body.created_ms < a.expires_ms
            && a.inviter == body.proposer
            && join.invite.inviter == body.proposer
    })
}

/// Yes votes a proposal needs at `roster`: its quorum, or one (the
/// proposer's) for a pre-approved add.
fn votes_needed(roster: &Roster, body: &wire::Proposal) -> usize {
    if approved_add(roster, body) {
        1
    } else {
        roster.quorum_needed()
    }
}

type CheckedChange = (Change, Option<Vec<u8>>, Option<[u8; 16]>);

/// Checks a proposal body against its roster (the signature is already verified).
fn check_proposal_body(
    roster: &Roster,
    roster_hash: &[u8; 32],
    body: &wire::Proposal,
    signer: &[u8; 32],
) -> Result<CheckedChange, MeshError> {
    if body.roster_hash != roster_hash {
        return Err(MeshError::InvalidProposal("wrong roster hash".into()));
    }
    if roster.member_with_key(&body.proposer, signer).is_none() {
        return Err(MeshError::NotMember("proposal"));
    }
    let change = body
        .change
        .as_ref()
        .ok_or_else(|| MeshError::malformed("proposal", "no change"))?;
    let (change, joiner, invite_id) = match change {
        wire::proposal::Change::Add(req) => {
            let (join, _) = verify_join_request(req, roster)?;
            if body.created_ms >= join.invite.expires_ms {
                return Err(MeshError::InviteExpired);
            }
            let joiner = join.member.peer_id.clone();
            (
                Change::Add(join.member),
                Some(joiner),
                Some(join.invite.invite_id),
            )
        }
        wire::proposal::Change::Kick(peer) => (Change::Kick(peer.clone()), None, None),
        wire::proposal::Change::Rotate(nonce) => {
            if nonce.len() != 16 {
                return Err(MeshError::malformed(
                    "proposal",
                    "rotate nonce is not 16 bytes",
                ));
            }
            (Change::Rotate, None, None)
        }
        wire::proposal::Change::Quorum(q) => {
            (Change::Quorum(QuorumRule::from_wire(q)?), None, None)
        }
        wire::proposal::Change::Approve(a) => {
            let (approval, inv) = approval_of(a)?;
            if inv.mesh_id != roster.mesh_id {
                return Err(MeshError::WrongMesh("approved invite"));
            }
            if roster
                .member_with_key(&inv.inviter, &inv.inviter_key)
                .is_none()
            {
                return Err(MeshError::InviteVoid);
            }
            if body.created_ms >= inv.expires_ms {
                return Err(MeshError::InviteExpired);
            }
            (Change::Approve(approval), None, None)
        }
        wire::proposal::Change::RevokeApproval(id) => (
            Change::RevokeApproval(bytes16(id, "revoked approval id")?),
            None,
            None,
        ),
    };
    roster.check_change(&change)?;
    Ok((change, joiner, invite_id))
}

/// The invite an add proposal uses.
fn add_invite_id(body: &wire::Proposal) -> Option<[u8; 16]> {
    proposal_change(body)
        .ok()
        .and_then(|(_, _, id)| id)
        .and_then(|id| <[u8; 16]>::try_from(id).ok())
}

/// Builds and signs a commit: next roster, one envelope per next member.
#[allow(clippy::too_many_arguments)]
pub fn build_commit(
    id: &Identity,
    roster: &Roster,
    roster_hash: &[u8; 32],
    proposal: wire::Signed,
    votes: Vec<wire::Signed>,
    change: &Change,
    secret: &[u8; 32],
    sender: &EnvelopeSender,
) -> Result<wire::Signed, MeshError> {
    let core = wire::CommitCore {
        mesh_id: roster.mesh_id.to_vec(),
        new_epoch: roster.epoch + 1,
        prev_roster_hash: roster_hash.to_vec(),
        proposal: Some(proposal),
        votes,
        committer: id.peer_id(),
        ephemeral_x25519: sender.ephemeral_public().to_vec(),
    };
    let body: wire::Proposal = core
        .proposal
        .as_ref()
        .map(|p| codec::decode_canonical(&p.body, "proposal"))
        .transpose()?
        .unwrap_or_default();
    let invite_id = add_invite_id(&body);
    let core_bytes = codec::encode(&core);
    let commit_hash = codec::hash(label::COMMIT, &core_bytes);
    let next = roster.next(change, commit_hash, body.created_ms, invite_id);
    let next_bytes = next.encode();
    let next_hash = codec::hash(label::ROSTER, &next_bytes);
    let envelopes = wrap_all(&next, &next_hash, secret, sender)?;
    let commit = wire::Commit {
        core: core_bytes,
        next_roster: next_bytes,
        envelopes,
    };
    Ok(codec::sign(id, tag::COMMIT, &commit))
}

/// Wraps the secret for every member, split over the available cores.
fn wrap_all(
    next: &Roster,
    next_hash: &[u8; 32],
    secret: &[u8; 32],
    sender: &EnvelopeSender,
) -> Result<Vec<wire::Envelope>, MeshError> {
    let wrap_part = |part: &[Member]| -> Result<Vec<wire::Envelope>, MeshError> {
        let keys: Vec<[u8; 32]> = part.iter().map(|m| m.x25519).collect();
        let shared = sender.shared_secrets(&keys);
        part.iter()
            .zip(shared)
            .map(|(m, shared)| {
                let ctx = EnvelopeContext {
                    mesh_id: &next.mesh_id,
                    new_epoch: next.epoch,
                    roster_hash: next_hash,
                    recipient: &m.peer_id,
                };
                let ciphertext = shared
                    .and_then(|s| sender.wrap_with_shared(&s, &m.x25519, &ctx, secret))
                    .map_err(|e| MeshError::InvalidCommit(format!("envelope for a member: {e}")))?;
                Ok(wire::Envelope {
                    recipient: m.peer_id.clone(),
                    ciphertext,
                })
            })
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if next.members.len() < 32 || threads < 2 {
        return wrap_part(&next.members);
    }
    let chunk = next.members.len().div_ceil(threads);
    let results: Vec<Result<Vec<wire::Envelope>, MeshError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = next
            .members
            .chunks(chunk)
            .map(|part| scope.spawn(move || wrap_part(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(MeshError::InvalidCommit("envelope worker failed".into()))
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(next.members.len());
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

/// Checks a commit against its parent roster: every signature (batch), the
/// quorum of votes, every hash, the next roster, and this node's envelope.
#[allow(clippy::too_many_arguments)]
fn check_commit_against(
    id: &Identity,
    prev: &Roster,
    prev_hash: &[u8; 32],
    parsed: &codec::Unverified<wire::Commit>,
    core: &wire::CommitCore,
    verified_votes: &BTreeMap<(u64, Vec<u8>), VoteRec>,
) -> Result<CheckedCommit, MeshError> {
    let commit = &parsed.msg;
    if core.mesh_id != prev.mesh_id {
        return Err(MeshError::WrongMesh("commit"));
    }
    if core.new_epoch != prev.epoch + 1 {
        return Err(MeshError::InvalidCommit("epoch is not parent + 1".into()));
    }
    if prev
        .member_with_key(&core.committer, &parsed.signer)
        .is_none()
    {
        return Err(MeshError::NotMember("commit"));
    }
    let signed_proposal = core
        .proposal
        .as_ref()
        .ok_or_else(|| MeshError::malformed("commit", "no proposal"))?;
    let proposal =
        codec::parse_signed::<wire::Proposal>(signed_proposal, tag::PROPOSAL, "proposal")?;
    let proposal_hash = codec::hash(label::PROPOSAL, &signed_proposal.body);
    if proposal.msg.mesh_id != prev.mesh_id || proposal.msg.epoch != prev.epoch {
        return Err(MeshError::InvalidCommit(
            "proposal is for another epoch".into(),
        ));
    }
    if proposal.msg.expires_ms <= proposal.msg.created_ms {
        return Err(MeshError::InvalidCommit("proposal lifetime".into()));
    }
    let (change, joiner, invite_id) =
        check_proposal_body(prev, prev_hash, &proposal.msg, &proposal.signer)?;
    let mut checks = Vec::with_capacity(core.votes.len() + 2);
    checks.push(SigCheck {
        signer: parsed.signer,
        tag: parsed.tag,
        body: &parsed.body,
        signature: parsed.signature,
    });
    checks.push(SigCheck {
        signer: proposal.signer,
        tag: proposal.tag,
        body: &proposal.body,
        signature: proposal.signature,
    });
    let approved = approved_add(prev, &proposal.msg);
    let needed = votes_needed(prev, &proposal.msg);
    let mut seen: BTreeSet<&[u8]> = BTreeSet::new();
    let mut parsed_votes = Vec::with_capacity(core.votes.len());
    for v in &core.votes {
        parsed_votes.push(codec::parse_signed::<wire::Vote>(v, tag::VOTE, "vote")?);
    }
    for (i, v) in parsed_votes.iter().enumerate() {
        let b = &v.msg;
        if b.mesh_id != prev.mesh_id
            || b.epoch != prev.epoch
            || b.roster_hash != prev_hash
            || b.proposal_hash != proposal_hash
            || !b.yes
            || b.proposal_created_ms != proposal.msg.created_ms
            || b.proposal_expires_ms != proposal.msg.expires_ms
        {
            return Err(MeshError::InvalidCommit(
                "a vote is not a yes on this proposal".into(),
            ));
        }
        if prev.member_with_key(&b.voter, &v.signer).is_none() {
            return Err(MeshError::NotMember("vote in commit"));
        }
        if !seen.insert(&b.voter) {
            return Err(MeshError::InvalidCommit("two votes by one member".into()));
        }
        // A vote this node already verified when it arrived (the same signed
        // bytes) needs no second verification.
        let already = verified_votes
            .get(&(b.epoch, b.voter.clone()))
            .is_some_and(|known| {
                known.proposal_hash == proposal_hash
                    && known.signed == codec::encode(&core.votes[i])
            });
        if already {
            continue;
        }
        checks.push(SigCheck {
            signer: v.signer,
            tag: v.tag,
            body: &v.body,
            signature: v.signature,
        });
    }
    if seen.len() < needed {
        return Err(MeshError::InvalidCommit(format!(
            "{} yes votes, quorum is {needed}",
            seen.len()
        )));
    }
    // A pre-approved add passes on its proposer's (the inviter's) yes.
    if approved && !seen.contains(proposal.msg.proposer.as_slice()) {
        return Err(MeshError::InvalidCommit(
            "a pre-approved add needs its proposer's yes".into(),
        ));
    }
    codec::verify_batch(&checks, "commit")?;
    let commit_hash = codec::hash(label::COMMIT, &commit.core);
    let next = prev.next(&change, commit_hash, proposal.msg.created_ms, invite_id);
    let next_bytes = next.encode();
    if next_bytes != commit.next_roster {
        return Err(MeshError::InvalidCommit(
            "next roster does not follow from the proposal".into(),
        ));
    }
    let next_hash = codec::hash(label::ROSTER, &next_bytes);
    if commit.envelopes.len() != next.members.len() {
        return Err(MeshError::InvalidCommit(
            "not one envelope per member".into(),
        ));
    }
    let ephemeral = bytes32(&core.ephemeral_x25519, "commit ephemeral key")?;
    let mut secret = None;
    let me = id.peer_id();
    for (env, m) in commit.envelopes.iter().zip(&next.members) {
        if env.recipient != m.peer_id || env.ciphertext.len() != ENVELOPE_LEN {
            return Err(MeshError::InvalidCommit(
                "envelopes do not match the roster".into(),
            ));
        }
        if m.peer_id == me {
            let ctx = EnvelopeContext {
                mesh_id: &next.mesh_id,
                new_epoch: next.epoch,
                roster_hash: &next_hash,
                recipient: &m.peer_id,
            };
            let s = envelope::open_envelope(id.x25519_secret(), &ephemeral, &ctx, &env.ciphertext)
                .map_err(|_| MeshError::EnvelopeDoesNotOpen)?;
            secret = Some(s);
        }
    }
    let signed_commit = wire::Signed {
        body: parsed.body.clone(),
        signer: parsed.signer.to_vec(),
        signature: parsed.signature.to_vec(),
    };
    Ok(CheckedCommit {
        node: RosterNode {
            roster: next,
            hash: next_hash,
            parent: Some(*prev_hash),
            commit: Some(codec::encode(&signed_commit)),
            proposal_hash: Some(proposal_hash),
        },
        proposal_hash,
        invite_id,
        secret,
        joiner,
    })
}

/// The fork-choice rule: the highest epoch wins; between rosters of one
/// epoch, compare the two branches where they split and take the one whose
/// commit hash there is lowest. Every node with the same rosters picks the same tip.
pub fn fork_choice(rosters: &BTreeMap<[u8; 32], Arc<RosterNode>>) -> [u8; 32] {
    let Some(max_epoch) = rosters.values().map(|n| n.roster.epoch).max() else {
        return [0u8; 32];
    };
    let mut best: Option<[u8; 32]> = None;
    for n in rosters.values().filter(|n| n.roster.epoch == max_epoch) {
        best = Some(match best {
            None => n.hash,
            Some(b) => {
                if prefer(rosters, n.hash, b) {
                    n.hash
                } else {
                    b
                }
            }
        });
    }
    best.unwrap_or([0u8; 32])
}

/// True when roster `a` is preferred to `b` (same epoch): at their split,
/// `a`'s branch has the lower commit hash.
fn prefer(rosters: &BTreeMap<[u8; 32], Arc<RosterNode>>, a: [u8; 32], b: [u8; 32]) -> bool {
    let (mut x, mut y) = (a, b);
    loop {
        let (Some(nx), Some(ny)) = (rosters.get(&x), rosters.get(&y)) else {
            return x < y;
        };
        if nx.parent == ny.parent || nx.parent.is_none() || ny.parent.is_none() {
            return (nx.roster.commit_hash, nx.hash) < (ny.roster.commit_hash, ny.hash);
        }
        match (nx.parent, ny.parent) {
            (Some(px), Some(py)) => {
                x = px;
                y = py;
            }
            _ => return x < y,
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
