//! The roster of one epoch: members, quorum rule, and the commit that made it.
//!
//! Members are kept sorted by peer id bytes, so a roster has one encoding and
//! one hash; lookups are binary searches.

use super::MeshError;
use super::codec::{self, bytes16, bytes32, label};
use super::names::{self, Field};
use crate::identity;
use crate::wire::mesh as wire;

/// One member as listed in a roster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub peer_id: Vec<u8>,
    pub ed25519: [u8; 32],
    pub x25519: [u8; 32],
    pub x25519_binding: [u8; 64],
    pub name: String,
    pub joined_epoch: u64,
}

/// Why a quorum rule an operator wrote is refused.
#[derive(Debug, thiserror::Error)]
pub enum QuorumParseError {
    #[error("quorum `{text}`: {part} is not a number")]
    NotANumber { text: String, part: &'static str },
    #[error(transparent)]
    Invalid(#[from] MeshError),
}

/// Yes votes needed: `yes * denominator > members * numerator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumRule {
    pub numerator: u32,
    pub denominator: u32,
}

impl QuorumRule {
    /// Strict majority.
    pub const MAJORITY: QuorumRule = QuorumRule {
        numerator: 1,
        denominator: 2,
    };

    /// Refuses a rule that would let a quorum be half the roster or less
    /// (two quorums must always overlap) or that no roster could meet.
    pub fn validate(self) -> Result<QuorumRule, MeshError> {
        let (n, d) = (u64::from(self.numerator), u64::from(self.denominator));
        let reason = if d == 0 {
            "the denominator is 0"
        } else if d > 1000 {
            "the denominator is over 1000"
        } else if n >= d {
            "yes votes must be more than this share of the members, and no roster can give more than all of them; write a fraction below 1, e.g. 2/3"
        } else if n * 2 < d {
            "it is below one half: two quorums could pass without sharing a member; write a fraction of at least 1/2"
        } else {
            return Ok(self);
        };
        Err(MeshError::BadQuorum {
            numerator: self.numerator,
            denominator: self.denominator,
            reason,
        })
    }

    /// Parses `N/D` (or a bare `N` meaning N/100, a percentage), as the
    /// operator writes it, and validates it.
    pub fn parse(text: &str) -> Result<QuorumRule, QuorumParseError> {
        let (n, d) = text.split_once('/').unwrap_or((text, "100"));
        let number = |s: &str, part: &'static str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| QuorumParseError::NotANumber {
                    text: text.to_string(),
                    part,
                })
        };
        let rule = QuorumRule {
            numerator: number(n, "numerator")?,
            denominator: number(d, "denominator")?,
        };
        Ok(rule.validate()?)
    }

    /// The smallest number of yes votes that is a quorum of `members`.
    pub fn needed(self, members: usize) -> usize {
        let n = members as u64;
        let num = u64::from(self.numerator);
        let den = u64::from(self.denominator.max(1));
        // smallest y with y * den > n * num
        ((n * num) / den + 1) as usize
    }

    pub fn to_wire(self) -> wire::QuorumRule {
        wire::QuorumRule {
            numerator: self.numerator,
            denominator: self.denominator,
        }
    }

    pub fn from_wire(w: &wire::QuorumRule) -> Result<QuorumRule, MeshError> {
        QuorumRule {
            numerator: w.numerator,
            denominator: w.denominator,
        }
        .validate()
    }
}

/// A roster: who is in the mesh at one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roster {
    pub mesh_id: [u8; 16],
    pub mesh_name: String,
    pub epoch: u64,
    pub members: Vec<Member>,
    pub quorum: QuorumRule,
    /// Hash of the commit core that made this epoch; zero at genesis.
    pub commit_hash: [u8; 32],
    /// Invites approved in advance (§8a), sorted by invite id.
    pub approved: Vec<ApprovedInvite>,
    /// At epoch 0 of a mesh with a self-certifying id: the nonce the id
    /// commits to (§3a). `None` at every later epoch and in legacy meshes.
    pub genesis_nonce: Option<[u8; 16]>,
    /// How the commits built on this roster carry their envelopes (§7).
    pub commit_form: CommitForm,
}

/// How a commit carries its envelopes (docs/mesh-protocol.md §7): the
/// roster a commit is built on decides, so every node judges it alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum CommitForm {
    /// In the signed body (protocol 1.0 to 1.2): a stored commit has to
    /// keep every envelope, this node's own included, or its signature no
    /// longer verifies.
    #[default]
    Inline,
    /// The body signs each envelope's hash and the envelopes travel beside
    /// it (1.3): a node stores and sends on a commit without its own
    /// envelope, so nothing it keeps opens with its long-term key.
    Hashed,
}

impl CommitForm {
    /// The form a mesh made by this version starts in.
    pub const LATEST: CommitForm = CommitForm::Hashed;

    pub fn to_wire(self) -> u32 {
        match self {
            CommitForm::Inline => 0,
            CommitForm::Hashed => 1,
        }
    }

    /// The form numbered `n` in `what` (a roster, or a proposal's change).
    pub fn from_wire(n: u32, what: &'static str) -> Result<CommitForm, MeshError> {
        match n {
            0 => Ok(CommitForm::Inline),
            1 => Ok(CommitForm::Hashed),
            _ => Err(MeshError::malformed(
                what,
                format!("commit form {n} is from a newer protocol"),
            )),
        }
    }
}

/// An invite the members approved in advance: a joiner presenting exactly
/// this invite is added on its inviter's yes alone, once, before expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedInvite {
    pub invite_id: [u8; 16],
    /// `SHA-256("grove-mesh/v1/invite-hash\0" || signed invite bytes)`.
    pub invite_hash: [u8; 32],
    pub inviter: Vec<u8>,
    pub expires_ms: i64,
    /// The display name the add must carry; empty for any.
    pub name: String,
    pub approved_epoch: u64,
}

impl ApprovedInvite {
    pub fn to_wire(&self) -> wire::ApprovedInvite {
        wire::ApprovedInvite {
            invite_id: self.invite_id.to_vec(),
            invite_hash: self.invite_hash.to_vec(),
            inviter: self.inviter.clone(),
            expires_ms: self.expires_ms,
            name: self.name.clone(),
            approved_epoch: self.approved_epoch,
        }
    }

    pub fn from_wire(w: &wire::ApprovedInvite) -> Result<ApprovedInvite, MeshError> {
        Ok(ApprovedInvite {
            invite_id: bytes16(&w.invite_id, "approved invite id")?,
            invite_hash: bytes32(&w.invite_hash, "approved invite hash")?,
            inviter: w.inviter.clone(),
            expires_ms: w.expires_ms,
            name: w.name.clone(),
            approved_epoch: w.approved_epoch,
        })
    }
}

/// A membership change carried by a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Add(Member),
    Kick(Vec<u8>),
    Rotate,
    Quorum(QuorumRule),
    /// Approve an invite in advance (its `approved_epoch` is set by `next`).
    Approve(ApprovedInvite),
    /// End an approval, by invite id.
    RevokeApproval([u8; 16]),
    /// A member's new X25519 key, bound to its (unchanged) Ed25519 key
    /// (§8b).
    UpdateKey(KeyUpdate),
    /// Move the mesh to a later commit form (§7, protocol 1.3).
    CommitForm(CommitForm),
}

/// An X25519 key binding (a 64-byte signature) from the wire, in `what`.
pub(crate) fn binding64(bytes: &[u8], what: &'static str) -> Result<[u8; 64], MeshError> {
    bytes
        .try_into()
        .map_err(|_| MeshError::malformed(what, "binding is not 64 bytes"))
}

/// A member's replacement X25519 key and its binding signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUpdate {
    pub member: Vec<u8>,
    pub x25519: [u8; 32],
    pub x25519_binding: [u8; 64],
}

impl KeyUpdate {
    pub fn to_wire(&self) -> wire::KeyUpdate {
        wire::KeyUpdate {
            member: self.member.clone(),
            x25519: self.x25519.to_vec(),
            x25519_binding: self.x25519_binding.to_vec(),
        }
    }

    pub fn from_wire(w: &wire::KeyUpdate) -> Result<KeyUpdate, MeshError> {
        Ok(KeyUpdate {
            member: w.member.clone(),
            x25519: bytes32(&w.x25519, "key update x25519 key")?,
            x25519_binding: binding64(&w.x25519_binding, "key update")?,
        })
    }
}

impl Member {
    /// The member entry of a node's public keys, named `name`, joined at
    /// `joined_epoch`.
    pub fn new(public: crate::identity::PublicIdentity, name: &str, joined_epoch: u64) -> Member {
        Member {
            peer_id: public.peer_id,
            ed25519: public.ed25519,
            x25519: public.x25519,
            x25519_binding: public.x25519_binding,
            name: name.to_string(),
            joined_epoch,
        }
    }

    pub fn to_wire(&self) -> wire::Member {
        wire::Member {
            peer_id: self.peer_id.clone(),
            ed25519: self.ed25519.to_vec(),
            x25519: self.x25519.to_vec(),
            x25519_binding: self.x25519_binding.to_vec(),
            name: self.name.clone(),
            joined_epoch: self.joined_epoch,
        }
    }

    pub fn from_wire(w: &wire::Member) -> Result<Member, MeshError> {
        Ok(Member {
            peer_id: w.peer_id.clone(),
            ed25519: bytes32(&w.ed25519, "member ed25519 key")?,
            x25519: bytes32(&w.x25519, "member x25519 key")?,
            x25519_binding: binding64(&w.x25519_binding, "member")?,
            name: w.name.clone(),
            joined_epoch: w.joined_epoch,
        })
    }

    /// Checks that the peer id derives from the Ed25519 key and the X25519 key is bound to it.
    pub fn verify_keys(&self) -> Result<(), MeshError> {
        let derived = identity::peer_id_bytes(&self.ed25519)
            .map_err(|_| MeshError::malformed("member", "not a valid Ed25519 key"))?;
        if derived != self.peer_id {
            return Err(MeshError::malformed(
                "member",
                "peer id does not derive from its key",
            ));
        }
        if !super::envelope::is_usable_x25519(&self.x25519) {
            return Err(MeshError::malformed(
                "member",
                "x25519 key is not a usable curve point",
            ));
        }
        if !identity::verify_x25519_binding(&self.ed25519, &self.x25519, &self.x25519_binding) {
            return Err(MeshError::BadSignature("x25519 key binding"));
        }
        Ok(())
    }
}

/// The name rule as a refused proposal (its error names the rule, never
/// echoes the text raw).
fn check_name(field: Field, text: &str) -> Result<(), MeshError> {
    names::check(field, text).map_err(|e| MeshError::InvalidProposal(e.to_string()))
}

impl Roster {
    /// Epoch 0 with one founding member, under the self-certifying mesh id
    /// that hashes this roster and `nonce` (§3a).
    pub fn genesis(
        nonce: [u8; 16],
        mesh_name: &str,
        founder: Member,
        quorum: QuorumRule,
    ) -> Roster {
        let mut roster = Roster {
            mesh_id: [0u8; 16],
            mesh_name: mesh_name.to_string(),
            epoch: 0,
            members: vec![founder],
            quorum,
            commit_hash: [0u8; 32],
            approved: Vec::new(),
            genesis_nonce: Some(nonce),
            commit_form: CommitForm::LATEST,
        };
        roster.mesh_id = roster.genesis_id();
        roster
    }

    /// The mesh id this roster commits to as a genesis: the first 16 bytes
    /// of the genesis hash over its encoding with the mesh id left empty.
    pub fn genesis_id(&self) -> [u8; 16] {
        let mut w = self.to_wire();
        w.mesh_id.clear();
        let hash = codec::hash(label::GENESIS, &codec::encode(&w));
        let mut id = [0u8; 16];
        id.copy_from_slice(&hash[..16]);
        id
    }

    /// A genesis whose mesh id is the hash of itself: epoch 0, no parent
    /// commit, a nonce, and `genesis_id() == mesh_id`. A legacy genesis
    /// (random id, no nonce) is not.
    pub fn self_certifies(&self) -> bool {
        self.epoch == 0
            && self.commit_hash == [0u8; 32]
            && self.genesis_nonce.is_some()
            && self.genesis_id() == self.mesh_id
    }

    pub fn to_wire(&self) -> wire::Roster {
        wire::Roster {
            mesh_id: self.mesh_id.to_vec(),
            mesh_name: self.mesh_name.clone(),
            epoch: self.epoch,
            members: self.members.iter().map(Member::to_wire).collect(),
            quorum: Some(self.quorum.to_wire()),
            commit_hash: self.commit_hash.to_vec(),
            approved: self.approved.iter().map(ApprovedInvite::to_wire).collect(),
            genesis_nonce: self.genesis_nonce.map(|n| n.to_vec()).unwrap_or_default(),
            commit_form: self.commit_form.to_wire(),
        }
    }

    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(&self.to_wire())
    }

    /// The roster hash: it commits to every field.
    pub fn hash(&self) -> [u8; 32] {
        codec::hash(label::ROSTER, &self.encode())
    }

    /// Decodes an untrusted roster: shape, order and quorum rule (not the key bindings).
    pub fn decode(bytes: &[u8]) -> Result<Roster, MeshError> {
        let w: wire::Roster = codec::decode_canonical(bytes, "roster")?;
        let members = w
            .members
            .iter()
            .map(Member::from_wire)
            .collect::<Result<Vec<_>, _>>()?;
        if members.is_empty() {
            return Err(MeshError::malformed("roster", "no members"));
        }
        if members.windows(2).any(|p| p[0].peer_id >= p[1].peer_id) {
            return Err(MeshError::malformed(
                "roster",
                "members not sorted or repeated",
            ));
        }
        let quorum = QuorumRule::from_wire(
            w.quorum
                .as_ref()
                .ok_or_else(|| MeshError::malformed("roster", "no quorum rule"))?,
        )?;
        let approved = w
            .approved
            .iter()
            .map(ApprovedInvite::from_wire)
            .collect::<Result<Vec<_>, _>>()?;
        if approved
            .windows(2)
            .any(|p| p[0].invite_id >= p[1].invite_id)
        {
            return Err(MeshError::malformed(
                "roster",
                "approved invites not sorted or repeated",
            ));
        }
        // Every roster is followed by epoch + 1: one at the limit would
        // make that overflow (a chainless welcome's roster is untrusted).
        if w.epoch == u64::MAX {
            return Err(MeshError::malformed("roster", "epoch at its limit"));
        }
        let genesis_nonce = match w.genesis_nonce.as_slice() {
            [] => None,
            _ if w.epoch != 0 => {
                return Err(MeshError::malformed(
                    "roster",
                    "a genesis nonce after epoch 0",
                ));
            }
            n => Some(bytes16(n, "roster genesis nonce")?),
        };
        Ok(Roster {
            genesis_nonce,
            commit_form: CommitForm::from_wire(w.commit_form, "roster")?,
            mesh_id: bytes16(&w.mesh_id, "roster mesh id")?,
            mesh_name: w.mesh_name,
            epoch: w.epoch,
            members,
            quorum,
            commit_hash: bytes32(&w.commit_hash, "roster commit hash")?,
            approved,
        })
    }

    /// Index of a member by peer id.
    pub fn position(&self, peer_id: &[u8]) -> Option<usize> {
        self.members
            .binary_search_by(|m| m.peer_id.as_slice().cmp(peer_id))
            .ok()
    }

    pub fn member(&self, peer_id: &[u8]) -> Option<&Member> {
        self.position(peer_id).map(|i| &self.members[i])
    }

    /// The member with this peer id, if its Ed25519 key is `ed25519`.
    pub fn member_with_key(&self, peer_id: &[u8], ed25519: &[u8; 32]) -> Option<&Member> {
        self.member(peer_id).filter(|m| &m.ed25519 == ed25519)
    }

    /// The approval of invite `id`, when this roster lists one.
    pub fn approval(&self, id: &[u8; 16]) -> Option<&ApprovedInvite> {
        self.approved
            .binary_search_by(|a| a.invite_id.cmp(id))
            .ok()
            .map(|i| &self.approved[i])
    }

    /// Yes votes needed for a quorum of this roster.
    pub fn quorum_needed(&self) -> usize {
        self.quorum.needed(self.members.len())
    }

    /// The smallest number of no votes that makes a quorum unreachable: with
    /// that many members against, the others are fewer than a quorum.
    pub fn rejection_needed(&self) -> usize {
        self.members.len().saturating_sub(self.quorum_needed()) + 1
    }

    /// Checks that `change` can apply to this roster.
    pub fn check_change(&self, change: &Change) -> Result<(), MeshError> {
        match change {
            Change::Add(m) => {
                if self.member(&m.peer_id).is_some() {
                    return Err(MeshError::InvalidProposal("already a member".into()));
                }
                // A joiner's name reaches every member's output: the one
                // name rule decides it here, for every member alike.
                check_name(Field::DisplayName, &m.name)?;
            }
            Change::Kick(peer) => {
                if self.member(peer).is_none() {
                    return Err(MeshError::InvalidProposal("kick of a non-member".into()));
                }
                if self.members.len() == 1 {
                    return Err(MeshError::InvalidProposal(
                        "cannot remove the last member".into(),
                    ));
                }
            }
            Change::Rotate => {}
            Change::Quorum(rule) => {
                rule.validate()?;
            }
            Change::Approve(a) => {
                if self.approval(&a.invite_id).is_some() {
                    return Err(MeshError::InvalidProposal("invite already approved".into()));
                }
                if self.member(&a.inviter).is_none() {
                    return Err(MeshError::InviteVoid);
                }
                if !a.name.is_empty() {
                    check_name(Field::DisplayName, &a.name)?;
                }
            }
            Change::RevokeApproval(id) => {
                if self.approval(id).is_none() {
                    return Err(MeshError::InvalidProposal(
                        "no approval of that invite to revoke".into(),
                    ));
                }
            }
            Change::UpdateKey(u) => {
                let Some(m) = self.member(&u.member) else {
                    return Err(MeshError::InvalidProposal(
                        "key update of a non-member".into(),
                    ));
                };
                if m.x25519 == u.x25519 {
                    return Err(MeshError::InvalidProposal(
                        "key update to the member's current key".into(),
                    ));
                }
                let mut updated = m.clone();
                updated.x25519 = u.x25519;
                updated.x25519_binding = u.x25519_binding;
                updated.verify_keys()?;
            }
            Change::CommitForm(form) => {
                if *form <= self.commit_form {
                    return Err(MeshError::InvalidProposal(
                        "the mesh is at that commit form or a later one".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The roster of the next epoch after `change`, made by `commit_hash`
    /// for a proposal created at `created_ms` that used invite `invite_id`
    /// (an add). Approvals end when used (an add with their invite), when
    /// expired at `created_ms`, or when their inviter is gone (§8a).
    pub fn next(
        &self,
        change: &Change,
        commit_hash: [u8; 32],
        created_ms: i64,
        invite_id: Option<[u8; 16]>,
    ) -> Roster {
        let mut next = self.clone();
        // Below u64::MAX for every decoded roster (see `decode`).
        next.epoch = self.epoch.saturating_add(1);
        next.commit_hash = commit_hash;
        next.genesis_nonce = None;
        match change {
            Change::Add(m) => {
                let mut m = m.clone();
                m.joined_epoch = next.epoch;
                let at = next
                    .members
                    .binary_search_by(|x| x.peer_id.cmp(&m.peer_id))
                    .unwrap_or_else(|i| i);
                next.members.insert(at, m);
            }
            Change::Kick(peer) => next.members.retain(|m| &m.peer_id != peer),
            Change::Rotate => {}
            Change::Quorum(rule) => next.quorum = *rule,
            Change::Approve(a) => {
                let mut a = a.clone();
                a.approved_epoch = next.epoch;
                let at = next
                    .approved
                    .binary_search_by(|x| x.invite_id.cmp(&a.invite_id))
                    .unwrap_or_else(|i| i);
                next.approved.insert(at, a);
            }
            Change::RevokeApproval(id) => next.approved.retain(|a| &a.invite_id != id),
            Change::UpdateKey(u) => {
                if let Some(i) = next.position(&u.member) {
                    next.members[i].x25519 = u.x25519;
                    next.members[i].x25519_binding = u.x25519_binding;
                }
            }
            Change::CommitForm(form) => next.commit_form = *form,
        }
        let members = next.members.clone();
        next.approved.retain(|a| {
            Some(a.invite_id) != invite_id
                && a.expires_ms > created_ms
                && members.iter().any(|m| m.peer_id == a.inviter)
        });
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_genesis_certifies_its_id_and_a_roster_at_the_epoch_limit_does_not_decode() {
        let id = crate::identity::Identity::generate(&mut rand::rng());
        let founder = Member::new(id.public(), "founder", 0);
        let genesis = Roster::genesis([3; 16], "m", founder, QuorumRule::MAJORITY);
        assert!(genesis.self_certifies());
        let decoded = Roster::decode(&genesis.encode()).unwrap();
        assert_eq!(decoded, genesis);
        let mut other = genesis.clone();
        other.mesh_name = "n".into();
        assert!(!other.self_certifies(), "the id commits to the name");
        let mut later = genesis.clone();
        later.genesis_nonce = None;
        later.epoch = u64::MAX;
        assert!(Roster::decode(&later.encode()).is_err());
        later.epoch = 1;
        later.genesis_nonce = Some([3; 16]);
        assert!(
            Roster::decode(&later.encode()).is_err(),
            "a nonce after epoch 0"
        );
    }

    #[test]
    fn majority_needs_more_than_half() {
        let q = QuorumRule::MAJORITY;
        assert_eq!(q.needed(1), 1);
        assert_eq!(q.needed(2), 2);
        assert_eq!(q.needed(3), 2);
        assert_eq!(q.needed(4), 3);
        assert_eq!(q.needed(1000), 501);
        let two_thirds = QuorumRule {
            numerator: 2,
            denominator: 3,
        };
        assert_eq!(two_thirds.needed(3), 3);
        assert_eq!(two_thirds.needed(6), 5);
    }

    #[test]
    fn quorum_rule_cannot_fall_to_half() {
        assert!(
            QuorumRule {
                numerator: 1,
                denominator: 3
            }
            .validate()
            .is_err()
        );
        assert!(
            QuorumRule {
                numerator: 1,
                denominator: 2
            }
            .validate()
            .is_ok()
        );
        assert!(
            QuorumRule {
                numerator: 2,
                denominator: 2
            }
            .validate()
            .is_err()
        );
        assert!(
            QuorumRule {
                numerator: 0,
                denominator: 0
            }
            .validate()
            .is_err()
        );
    }
}
