//! The membership chain as an outside reader checks it: a genesis roster
//! and the signed commits after it, replayed offline with the rules every
//! member applies (docs/mesh-protocol.md §3a, §7), to the roster of every
//! epoch. Moot exports and welcomes carry one.

use prost::Message;

use super::*;

/// What the chain's mesh id is worth as an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The genesis hashes to the mesh id: pinning the id pins this genesis,
    /// and through the chain every roster after it.
    Genesis,
    /// A mesh made before self-certifying ids: its id is random, so a
    /// host could claim it for a genesis of its own making.
    Legacy,
}

/// A chain that replayed from its genesis.
#[derive(Debug, Clone)]
pub struct VerifiedChain {
    /// The roster of every epoch with the commit that made it,
    /// `nodes[e].roster.epoch == e`.
    pub(super) nodes: Vec<RosterNode>,
    pub anchor: Anchor,
}

impl VerifiedChain {
    pub fn mesh_id(&self) -> [u8; 16] {
        self.nodes[0].roster.mesh_id
    }

    /// The newest roster.
    pub fn tip(&self) -> &Roster {
        &self.nodes.last().expect("a chain has its genesis").roster
    }

    /// The roster of `epoch`, if the chain reaches it.
    pub fn at(&self, epoch: u64) -> Option<&Roster> {
        usize::try_from(epoch)
            .ok()
            .and_then(|e| self.nodes.get(e))
            .map(|n| &n.roster)
    }

    /// How many epochs the chain holds: 0 to the tip (at least the genesis).
    pub fn epochs(&self) -> usize {
        self.nodes.len()
    }
}

/// Why a chain does not replay, naming the epoch where it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("the genesis roster: {0}")]
    Genesis(String),
    #[error("the commit to epoch {epoch} does not chain: {reason}")]
    Commit { epoch: u64, reason: String },
}

/// Replays `commits` (commit `i` makes epoch `i + 1`) from the encoded
/// genesis roster: each commit is checked as a member checks it (the
/// committer's, proposer's and voters' signatures and keys, the quorum of
/// its parent, the parent hash, the next roster it must yield, one envelope
/// per member), and the genesis members' key bindings are checked (later
/// members' come with their signed join requests).
pub fn verify_chain(genesis: &[u8], commits: &[wire::Signed]) -> Result<VerifiedChain, ChainError> {
    let bad_genesis = |e: MeshError| ChainError::Genesis(e.to_string());
    let first = Roster::decode(genesis).map_err(bad_genesis)?;
    if first.epoch != 0 || first.commit_hash != [0u8; 32] {
        return Err(ChainError::Genesis(format!(
            "it is epoch {}, not a genesis",
            first.epoch
        )));
    }
    for m in &first.members {
        m.verify_keys().map_err(bad_genesis)?;
    }
    let anchor = if first.self_certifies() {
        Anchor::Genesis
    } else if first.genesis_nonce.is_some() {
        return Err(ChainError::Genesis(format!(
            "it does not hash to its mesh id {}",
            h(&first.mesh_id)
        )));
    } else {
        Anchor::Legacy
    };
    let mut nodes = vec![RosterNode {
        hash: first.hash(),
        roster: first,
        parent: None,
        commit: None,
        proposal_hash: None,
    }];
    for signed in commits {
        let prev = nodes.last().expect("the genesis is in");
        let epoch = prev.roster.epoch.saturating_add(1);
        let next = next_node(&prev.roster, &prev.hash, signed).map_err(|e| ChainError::Commit {
            epoch,
            reason: e.to_string(),
        })?;
        nodes.push(next);
    }
    Ok(VerifiedChain { nodes, anchor })
}

/// The roster node a signed commit makes from `prev`, checked in full.
fn next_node(
    prev: &Roster,
    prev_hash: &[u8; 32],
    signed: &wire::Signed,
) -> Result<RosterNode, MeshError> {
    let parsed = codec::parse_signed::<wire::Commit>(signed, tag::COMMIT, "commit")?;
    let core: wire::CommitCore = codec::decode_canonical(&parsed.msg.core, "commit core")?;
    if bytes32(&core.prev_roster_hash, "commit parent")? != *prev_hash {
        return Err(MeshError::InvalidCommit(
            "its parent is not the roster before it".into(),
        ));
    }
    let checked = check_commit_against(None, prev, prev_hash, &parsed, &core, &BTreeMap::new())?;
    Ok(checked.node)
}

/// The chain from the genesis to `tip` as this node holds it: the genesis
/// roster's bytes and the signed commits after it, oldest first. `None`
/// when this node does not hold the chain back to epoch 0 (it joined
/// before welcomes carried the chain). Every envelope a commit carries
/// beside its body is withheld: the chain proves rosters and opens no
/// epoch, whoever reads it later with whatever key (§7).
pub fn chain_to(
    rosters: &BTreeMap<[u8; 32], Arc<RosterNode>>,
    tip: &[u8; 32],
) -> Option<(Vec<u8>, Vec<wire::Signed>)> {
    let mut commits = Vec::new();
    let mut at = rosters.get(tip)?;
    while let Some(parent) = at.parent {
        let signed = wire::Signed::decode(at.commit.as_deref()?).ok()?;
        commits.push(withhold_all_envelopes(&signed));
        at = rosters.get(&parent)?;
    }
    if at.roster.epoch != 0 {
        return None;
    }
    commits.reverse();
    Some((at.roster.encode(), commits))
}

/// The most a welcome's chain may take: the welcome travels in one join
/// response, whose frame is at most `net.max_message_bytes` (256 KiB by
/// default). Until checkpoints bound the chain, a welcome of a mesh whose
/// chain is longer goes without it, and its joiner trusts the roster it is
/// added to on its inviter's word (docs/mesh-protocol.md §3a).
pub const WELCOME_CHAIN_MAX_BYTES: usize = 192 * 1024;

/// The welcome of `commit` onto `prev_roster` (encoded), with the chain
/// that proves it (the genesis and the commits to it) while that stays
/// under [`WELCOME_CHAIN_MAX_BYTES`].
pub(super) fn welcome(
    commit: wire::Signed,
    prev_roster: Vec<u8>,
    chain: Option<(Vec<u8>, Vec<wire::Signed>)>,
) -> wire::Welcome {
    let (genesis, chain) = chain
        .filter(|(genesis, commits)| {
            genesis.len() + commits.iter().map(Message::encoded_len).sum::<usize>()
                <= WELCOME_CHAIN_MAX_BYTES
        })
        .unwrap_or_default();
    wire::Welcome {
        commit: Some(commit),
        prev_roster,
        genesis,
        chain,
    }
}

impl MeshState {
    /// This node's chain from the genesis to its tip (see [`chain_to`]).
    pub fn chain_from_genesis(&self) -> Option<(Vec<u8>, Vec<wire::Signed>)> {
        chain_to(&self.rosters, &self.tip)
    }
}
