//! Mesh membership: signed roster, epochs, envelopes, invites and votes.
//!
//! Pure cores: `codec` (signed canonical bytes and hashes), `roster`
//! (membership and quorum), `envelope` (per-member secret wraps and epoch
//! gossip keys), `invite` (signed invites and their text form), `names`
//! (the rule for display names, mesh names and invite notes, and the
//! escaping of peer text for printing), `secret` (the zeroizing type epoch
//! secrets live in) and `state` (the membership state
//! machine: input -> effects + messages to send).
//! Nothing here does IO: the grove crate's `mesh::store` persists every
//! transition in `<state_dir>/mesh.db`.
//! The protocol is written down in docs/mesh-protocol.md.

pub mod agreement;
pub mod codec;
pub mod envelope;
pub mod invite;
pub mod names;
pub mod roster;
pub mod secret;
pub mod state;

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
    #[error("envelope evidence does not hold: {0}")]
    InvalidEvidence(String),
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
    pub fn malformed(what: &'static str, reason: impl ToString) -> MeshError {
        MeshError::Malformed {
            what,
            reason: reason.to_string(),
        }
    }
}
