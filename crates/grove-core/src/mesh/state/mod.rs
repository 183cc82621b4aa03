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
use super::agreement;
use super::codec::{self, SigCheck, bytes16, bytes32, label, tag};
use super::envelope::{self, ENVELOPE_LEN, EnvelopeContext, EnvelopeSender};
use super::invite::{self, Invite};
use super::names::{self, Field};
use super::roster::{ApprovedInvite, Change, CommitForm, KeyUpdate, Member, QuorumRule, Roster};
use super::secret::EpochSecret;
use crate::identity::{self, Identity, PublicIdentity};
use crate::wire::mesh as wire;
use crate::wire::mesh::mesh_message::Kind;

mod apply;
mod chain;
mod commands;
mod evidence;
pub mod fixture;
mod gossip_keys;
mod join;
mod receive;
mod records;
mod rules;
#[cfg(test)]
mod tests;
mod tx;
mod votes;

use self::apply::*;
pub use self::chain::{
    Anchor, ChainError, VerifiedChain, WELCOME_CHAIN_MAX_BYTES, chain_to, verify_chain,
};
use self::commands::*;
pub use self::evidence::check_envelope_evidence;
use self::evidence::*;
use self::join::*;
pub use self::join::{JoinCheck, invite_hash, parse_join_request, verify_join_request};
use self::receive::*;
pub use self::records::*;
pub use self::rules::proposal_change;
use self::rules::*;
pub use self::rules::{
    approved_add, build_commit, envelopes_of, fork_choice, proposer_alone, withhold_all_envelopes,
    withhold_envelope,
};
use self::tx::*;
pub use self::votes::vote_message;
use self::votes::*;

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
    /// Commits whose envelope for this node did not open, oldest first.
    pub bad_envelopes: Vec<BadEnvelope>,
    /// Checked evidence of envelopes that do not open, this node's own
    /// and other members', by (roster hash, accuser) (§7b).
    pub proven_bad: BTreeMap<([u8; 32], Vec<u8>), ProvenBadEnvelope>,
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
            bad_envelopes: Vec::new(),
            proven_bad: BTreeMap::new(),
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
    pub fn current_secret(&self) -> Option<&EpochSecret> {
        self.secrets.get(&self.tip).map(|s| &*s.secret)
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

    pub fn mesh_id(&self) -> Result<[u8; 16], MeshError> {
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

    /// True once this node's key update to `x25519` is settled (§8b): the
    /// tip and its parent both name that key for this node, so the update
    /// is at least one commit deep. Before that a competing commit at the
    /// update's epoch (a key update passes on one yes, so one can race a
    /// quorum commit) may still win fork choice, and its envelope for this
    /// node is wrapped to the old key: the old key is kept until then.
    pub fn key_settled(&self, x25519: &[u8; 32]) -> bool {
        let names = |n: &RosterNode| {
            n.roster
                .member(&self.me.peer_id)
                .is_some_and(|m| &m.x25519 == x25519)
        };
        self.tip_node().is_some_and(|tip| {
            names(tip)
                && tip
                    .parent
                    .and_then(|p| self.rosters.get(&p))
                    .is_some_and(|p| names(p))
        })
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
}
