//! A mesh at one roster, as `grove-bench mesh` and the state machine's tests
//! use it: generated members, a rotate proposal, a quorum of yes votes, the
//! commit that carries them, a member's state before it, a commit with
//! one bad envelope, and the opening of one member's envelope in a commit.

use super::*;

/// The clock of the fixture's proposals (a commit is received after it).
pub const NOW_MS: i64 = 1_700_000_000_000;

/// `n` generated members at epoch 5, and member 0's rotate proposal on the
/// current roster.
pub struct Fixture {
    pub ids: Vec<Identity>,
    pub roster: Roster,
    pub roster_hash: [u8; 32],
    pub proposal: wire::Signed,
    pub proposal_hash: [u8; 32],
    /// The change the proposal makes.
    change: Change,
}

impl Fixture {
    pub fn new<R: CryptoRng + ?Sized>(n: usize, rng: &mut R) -> Fixture {
        let ids: Vec<Identity> = (0..n).map(|_| Identity::generate(rng)).collect();
        let mut members: Vec<Member> = ids
            .iter()
            .map(|id| Member::new(id.public(), "member", 0))
            .collect();
        members.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
        let roster = Roster {
            mesh_id: [7u8; 16],
            mesh_name: "fixture".into(),
            epoch: 5,
            members,
            quorum: QuorumRule::MAJORITY,
            commit_hash: [1u8; 32],
            approved: Vec::new(),
            genesis_nonce: None,
            commit_form: CommitForm::LATEST,
        };
        let mut fx = Fixture {
            ids,
            roster_hash: roster.hash(),
            roster,
            proposal: wire::Signed::default(),
            proposal_hash: [0u8; 32],
            change: Change::Rotate,
        };
        fx.propose_rotate();
        fx
    }

    /// Member 0 proposes a rotate on the current roster.
    fn propose_rotate(&mut self) {
        self.propose(
            wire::proposal::Change::Rotate(vec![3u8; 16]),
            Change::Rotate,
        );
    }

    /// Member 0 proposes `change` (`wire` on the wire) on the current roster.
    fn propose(&mut self, wire: wire::proposal::Change, change: Change) {
        let body = wire::Proposal {
            mesh_id: self.roster.mesh_id.to_vec(),
            epoch: self.roster.epoch,
            roster_hash: self.roster_hash.to_vec(),
            proposer: self.ids[0].peer_id(),
            created_ms: NOW_MS,
            expires_ms: NOW_MS + 3_600_000,
            change: Some(wire),
        };
        self.proposal = codec::sign(&self.ids[0], tag::PROPOSAL, &body);
        self.proposal_hash = codec::hash(label::PROPOSAL, &self.proposal.body);
        self.change = change;
    }

    /// The same members at a roster of commit form `form` (a mesh made
    /// before protocol 1.3 is at [`CommitForm::Inline`]), with a rotate
    /// proposal on it.
    pub fn at_form(&mut self, form: CommitForm) {
        self.roster.commit_form = form;
        self.roster_hash = self.roster.hash();
        self.propose_rotate();
    }

    /// Member 0 proposes moving the mesh to commit form `form` instead.
    pub fn propose_form(&mut self, form: CommitForm) {
        self.propose(
            wire::proposal::Change::CommitForm(form.to_wire()),
            Change::CommitForm(form),
        );
    }

    /// Moves on to the roster `commit` made, with a new rotate proposal on it.
    pub fn advance(&mut self, commit: &wire::Signed) -> Result<(), MeshError> {
        let body: wire::Commit = codec::decode_canonical(&commit.body, "commit")?;
        self.roster = Roster::decode(&body.next_roster)?;
        self.roster_hash = self.roster.hash();
        self.propose_rotate();
        Ok(())
    }

    /// Member `i`'s signed yes vote on the proposal.
    pub fn vote(&self, i: usize) -> wire::Signed {
        let id = &self.ids[i];
        codec::sign(
            id,
            tag::VOTE,
            &wire::Vote {
                mesh_id: self.roster.mesh_id.to_vec(),
                epoch: self.roster.epoch,
                roster_hash: self.roster_hash.to_vec(),
                proposal_hash: self.proposal_hash.to_vec(),
                yes: true,
                voter: id.peer_id(),
                proposal_created_ms: NOW_MS,
                proposal_expires_ms: NOW_MS + 3_600_000,
                seq: 0,
                releases: Vec::new(),
            },
        )
    }

    /// A quorum of yes votes, by members 0, 1, ... in turn.
    pub fn votes(&self) -> Vec<wire::Signed> {
        (0..self.roster.quorum_needed())
            .map(|i| self.vote(i))
            .collect()
    }

    /// Member 0's commit of the proposal with `votes`, carrying `secret`.
    pub fn commit(
        &self,
        votes: Vec<wire::Signed>,
        secret: &EpochSecret,
        sender: &EnvelopeSender,
    ) -> Result<wire::Signed, MeshError> {
        build_commit(
            &self.ids[0],
            &self.roster,
            &self.roster_hash,
            self.proposal.clone(),
            votes,
            &self.change,
            secret,
            sender,
        )
    }

    /// Member `i`'s state at the current roster (known without its
    /// parent), holding `secret` as the epoch's.
    pub fn state_of(&self, i: usize, secret: EpochSecret) -> MeshState {
        let mut s = MeshState::empty(self.ids[i].public(), Timing::default());
        s.mesh = Some(MeshInfo {
            mesh_id: self.roster.mesh_id,
            name: self.roster.mesh_name.clone(),
        });
        s.rosters.insert(
            self.roster_hash,
            Arc::new(RosterNode {
                roster: self.roster.clone(),
                hash: self.roster_hash,
                parent: None,
                commit: None,
                proposal_hash: None,
            }),
        );
        s.tip = self.roster_hash;
        s.secrets.insert(
            self.roster_hash,
            SecretEntry {
                roster_hash: self.roster_hash,
                epoch: self.roster.epoch,
                secret: Arc::new(secret),
                erase_at_ms: None,
            },
        );
        s
    }
}

/// `commit` with its envelope for `peer` altered and signed again by its
/// committer: a valid commit whose envelope for `peer` does not open.
pub fn with_bad_envelope(
    committer: &Identity,
    commit: &wire::Signed,
    peer: &[u8],
) -> Result<wire::Signed, MeshError> {
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit")?;
    let form = if body.envelope_hashes.is_empty() {
        CommitForm::Inline
    } else {
        CommitForm::Hashed
    };
    let mut envelopes = envelopes_of(commit)?;
    let envelope = envelopes
        .iter_mut()
        .find(|e| e.recipient == peer)
        .ok_or(MeshError::NotMember("envelope recipient"))?;
    if let Some(b) = envelope.ciphertext.first_mut() {
        *b ^= 1;
    }
    Ok(sign_commit(
        committer,
        body.core,
        body.next_roster,
        envelopes,
        form,
    ))
}

/// The secret in `commit`'s envelope for `peer`, opened with `key` (as an
/// outsider holding that key would): how tests show which keys open which
/// epochs.
pub fn open_envelope_of(
    commit: &wire::Signed,
    peer: &[u8],
    key: &x25519_dalek::StaticSecret,
) -> Result<EpochSecret, MeshError> {
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit")?;
    let core: wire::CommitCore = codec::decode_canonical(&body.core, "commit core")?;
    let next = Roster::decode(&body.next_roster)?;
    let next_hash = codec::hash(label::ROSTER, &body.next_roster);
    let env = envelopes_of(commit)?
        .into_iter()
        .find(|e| e.recipient == peer)
        .ok_or(MeshError::NotMember("envelope recipient"))?;
    let ctx = EnvelopeContext {
        mesh_id: &next.mesh_id,
        new_epoch: next.epoch,
        roster_hash: &next_hash,
        recipient: peer,
    };
    let ephemeral = bytes32(&core.ephemeral_x25519, "commit ephemeral key")?;
    envelope::open_envelope(key, &ephemeral, &ctx, &env.ciphertext)
        .map_err(|e| MeshError::InvalidCommit(format!("envelope: {e}")))
}
