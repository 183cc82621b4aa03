//! Mesh membership: signed roster, epochs, envelopes, invites and votes.
//!
//! Pure cores: `codec` (signed canonical bytes and hashes), `roster`
//! (membership and quorum), `envelope` (per-member secret wraps and epoch
//! gossip keys), `invite` (signed invites and their text form), `names`
//! (the rule for display names, mesh names and invite notes, and the
//! escaping of peer text for printing) and `state` (the membership state
//! machine: input -> effects + messages to send).
//! IO at the edge: `store` persists every transition in `<state_dir>/mesh.db`.
//! `sim` is a seeded simulation of a whole mesh over the real state machine
//! (safety and liveness checks for tests and `grove-bench`).
//! The protocol is written down in docs/mesh-protocol.md.

pub mod codec;
pub mod envelope;
pub mod invite;
pub mod names;
pub mod roster;
pub mod sim;
pub mod state;
pub mod store;

use serde::Deserialize;

/// The longest an invite may stay open (`mesh.invite_ttl_secs`, `mesh invite --ttl`).
pub const MAX_INVITE_TTL_SECS: u64 = 365 * 24 * 3600;

/// Mesh configuration (`[mesh]` in grove.toml).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshSettings {
    /// How long a proposal stays open before its votes are released.
    pub proposal_ttl_secs: u64,
    /// Default lifetime of an invite.
    pub invite_ttl_secs: u64,
    /// How long the previous epoch's keys are kept after a change.
    pub key_grace_secs: u64,
    /// How long after a proposal's creation any member (not only the proposer)
    /// may build its commit once it has quorum.
    pub commit_backup_secs: u64,
}

impl Default for MeshSettings {
    fn default() -> Self {
        MeshSettings {
            proposal_ttl_secs: 24 * 3600,
            invite_ttl_secs: 24 * 3600,
            key_grace_secs: 600,
            commit_backup_secs: 60,
        }
    }
}

impl MeshSettings {
    /// Checks the values; on error returns the key (under `mesh.`) and why.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let week = 7 * 24 * 3600;
        if !(60..=week).contains(&self.proposal_ttl_secs) {
            return Err((
                "proposal_ttl_secs",
                "must be between 60 s and 7 days".into(),
            ));
        }
        if !(60..=MAX_INVITE_TTL_SECS).contains(&self.invite_ttl_secs) {
            return Err((
                "invite_ttl_secs",
                "must be between 60 s and 365 days".into(),
            ));
        }
        if self.key_grace_secs > 24 * 3600 {
            return Err(("key_grace_secs", "must be at most one day".into()));
        }
        if self.commit_backup_secs == 0 || self.commit_backup_secs >= self.proposal_ttl_secs {
            return Err((
                "commit_backup_secs",
                "must be positive and shorter than proposal_ttl_secs".into(),
            ));
        }
        Ok(())
    }

    /// The timing values the state machine uses, in milliseconds.
    pub fn timing(&self) -> state::Timing {
        let ms = |s: u64| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
        state::Timing {
            proposal_ttl_ms: ms(self.proposal_ttl_secs),
            invite_ttl_ms: ms(self.invite_ttl_secs),
            key_grace_ms: ms(self.key_grace_secs),
            commit_backup_ms: ms(self.commit_backup_secs),
        }
    }
}

/// Why a message or command was refused. A refusal never changes state.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MeshError {
    #[error("malformed {what}: {reason}")]
    Malformed { what: &'static str, reason: String },
    #[error("bad signature on {0}")]
    BadSignature(&'static str),
    #[error("{0} is for another mesh")]
    WrongMesh(&'static str),
    #[error("{what} is for epoch {got}, but this node is at epoch {current}")]
    StaleEpoch {
        what: &'static str,
        got: u64,
        current: u64,
    },
    #[error("{what} is for a roster this node does not have (epoch {epoch}); sync first")]
    UnknownRoster { what: &'static str, epoch: u64 },
    #[error("{0} is signed by someone who is not a member")]
    NotMember(&'static str),
    #[error("already have this {0}")]
    Duplicate(&'static str),
    #[error("equivocation: {voter} already voted differently at epoch {epoch}; evidence kept")]
    Equivocation { voter: String, epoch: u64 },
    #[error("the proposal has expired")]
    ProposalExpired,
    #[error("unknown proposal {0}")]
    UnknownProposal(String),
    #[error("invalid proposal: {0}")]
    InvalidProposal(String),
    #[error("invalid commit: {0}")]
    InvalidCommit(String),
    #[error("this node's envelope in the commit does not open")]
    EnvelopeDoesNotOpen,
    #[error("the invite has expired")]
    InviteExpired,
    #[error("the invite was already used")]
    InviteUsed,
    #[error("the invite was revoked")]
    InviteRevoked,
    #[error("the invite's signature is not valid (forged or altered)")]
    InviteForged,
    #[error("the invite text is corrupt (bad checksum); copy it again")]
    InviteChecksum,
    #[error("the invite's inviter is no longer a member, so it is void")]
    InviteVoid,
    #[error("bad invite text: {0}")]
    InviteText(String),
    #[error("unknown invite {0}")]
    UnknownInvite(String),
    #[error("no mesh here yet: run `grove mesh init --name NAME` or join one")]
    NoMesh,
    #[error("a mesh already exists here")]
    MeshExists,
    #[error("this node is not a member of the mesh (removed or not yet joined)")]
    NotAMember,
    #[error("this node is no longer a member of mesh {mesh} (removed at epoch {epoch})")]
    Removed { mesh: String, epoch: u64 },
    #[error("not synced since restart: this node casts no vote until it has synced with a member")]
    NotSynced,
    #[error(
        "this node already voted at epoch {epoch} on proposal {proposal}, which is still open: \
         its vote is bound until that proposal is committed, rejected or withdrawn by its \
         proposer, or expires in {expires_in_secs} s"
    )]
    AlreadyVoted {
        epoch: u64,
        proposal: String,
        expires_in_secs: i64,
    },
    #[error("only the proposer of {0} can withdraw it")]
    NotProposer(String),
    #[error(
        "a vote that releases an earlier one must carry its release; wait for the voter's full message"
    )]
    ReleaseMissing,
    #[error("invalid release of an earlier vote: {0}")]
    InvalidRelease(String),
    #[error("invalid quorum rule {numerator}/{denominator}: {reason}")]
    BadQuorum {
        numerator: u32,
        denominator: u32,
        reason: &'static str,
    },
    #[error(transparent)]
    Name(#[from] names::NameError),
    #[error("{0}")]
    Refused(String),
}

impl MeshError {
    pub(crate) fn malformed(what: &'static str, reason: impl ToString) -> MeshError {
        MeshError::Malformed {
            what,
            reason: reason.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_settings_are_valid_and_bad_ones_name_their_key() {
        assert_eq!(MeshSettings::default().validate(), Ok(()));
        let bad = MeshSettings {
            commit_backup_secs: 0,
            ..MeshSettings::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "commit_backup_secs");
        let bad = MeshSettings {
            proposal_ttl_secs: 1,
            ..MeshSettings::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "proposal_ttl_secs");
    }
}
