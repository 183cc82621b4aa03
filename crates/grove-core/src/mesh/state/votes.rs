//! Votes and closure: casting and checking votes, conflicting votes as
//! evidence, withdrawals, rejections and the release of a closed vote.

use super::*;

pub(super) fn tx_cast_vote(
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
    let (seq, releases, release) = own_release(tx, &p, &me, proposal_hash, yes, now_ms)?;
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

/// A vote's seq, the hash of the vote it releases, and the release.
type OwnRelease = (u32, Option<[u8; 32]>, Option<wire::VoteRelease>);

/// What this node's vote on `p` releases. A later vote at the same epoch
/// names the one it releases and carries why that one is free (§5), so
/// every node can check it alike: returns its seq, the released vote's hash
/// and the release. Refuses while the earlier vote still binds.
fn own_release(
    tx: &Tx,
    p: &ProposalRec,
    me: &[u8],
    proposal_hash: [u8; 32],
    yes: bool,
    now_ms: i64,
) -> Result<OwnRelease, MeshError> {
    let prev =
        tx.s.votes
            .get(&(p.epoch, me.to_vec()))
            .filter(|v| v.roster_hash == p.roster_hash);
    let Some(prev) = prev else {
        return Ok((0, None, None));
    };
    if prev.proposal_hash == proposal_hash {
        if prev.yes == yes {
            return Err(MeshError::Duplicate("vote"));
        }
        return Err(already_voted(prev, now_ms));
    }
    let mut proof = match tx.s.closed.get(&prev.proposal_hash) {
        Some(c) => codec::decode_canonical::<wire::VoteRelease>(&c.proof, "stored closure")?,
        None if p.created_ms >= prev.proposal_expires_ms => wire::VoteRelease::default(),
        None => return Err(already_voted(prev, now_ms)),
    };
    let prev_signed = codec::decode_canonical::<wire::Signed>(&prev.signed, "stored vote")?;
    let releases = codec::hash(label::VOTE, &prev_signed.body);
    proof.previous = Some(prev_signed);
    Ok((prev.seq + 1, Some(releases), Some(proof)))
}

/// The refusal for a vote or proposal while `v` still binds this node.
pub(super) fn already_voted(v: &VoteRec, now_ms: i64) -> MeshError {
    let left_ms = v.proposal_expires_ms.saturating_sub(now_ms).max(0);
    MeshError::AlreadyVoted {
        epoch: v.epoch,
        proposal: h(&v.proposal_hash),
        expires_in_secs: left_ms.saturating_add(999) / 1000,
    }
}

/// The facts of one signed vote that the release and conflict rules use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VoteFacts {
    pub(super) hash: [u8; 32],
    pub(super) proposal: [u8; 32],
    pub(super) seq: u32,
    pub(super) releases: Option<[u8; 32]>,
    pub(super) created_ms: i64,
    pub(super) expires_ms: i64,
}

impl VoteFacts {
    pub(super) fn of(body: &wire::Vote, signed_body: &[u8]) -> Result<VoteFacts, MeshError> {
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

    pub(super) fn of_rec(v: &VoteRec) -> Result<VoteFacts, MeshError> {
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
pub(super) fn votes_conflict(a: &VoteFacts, b: &VoteFacts) -> bool {
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
pub(super) fn check_withdrawal_body(
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
pub(super) fn check_closure(
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
        checks.push(SigCheck::of(v));
    }
    let needed = roster.rejection_needed();
    if voters.len() < needed {
        return Err(MeshError::InvalidRelease(format!(
            "{} no votes; {needed} reject this roster's proposals",
            voters.len()
        )));
    }
    codec::verify_all(&checks, "no votes")?;
    Ok(CloseReason::Rejected)
}

/// What a carried release showed: the released vote and, when it was
/// released by a closure rather than expiry, that closure.
pub(super) struct CheckedRelease {
    pub(super) previous: VoteFacts,
    pub(super) previous_signed: Vec<u8>,
    pub(super) closure: Option<(CloseReason, wire::VoteRelease)>,
}

/// Checks the release carried with vote `body` (signed by `signer`): the
/// released vote is this voter's vote number seq - 1 at the same roster,
/// named by the vote, on another proposal, and is free by expiry or by the
/// closure of its proposal.
pub(super) fn check_release(
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
pub(super) fn tx_close(
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
pub(super) fn tx_check_rejection(
    tx: &mut Tx,
    proposal_hash: [u8; 32],
    now_ms: i64,
) -> Result<(), MeshError> {
    let Some(p) = tx.s.proposals.get(&proposal_hash).cloned() else {
        return Ok(());
    };
    let Some(roster) = tx.s.roster().cloned() else {
        return Ok(());
    };
    if p.roster_hash != tx.s.tip {
        return Ok(());
    }
    // A pre-approved add or a key update needs no quorum, so no votes
    // cannot reject it.
    let body: wire::Proposal =
        codec::decode_canonical::<wire::Signed>(&p.signed, "stored proposal")
            .and_then(|s| codec::decode_canonical(&s.body, "stored proposal"))?;
    if proposer_alone(&roster, &body) {
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
    /// The messages this node re-sends while they matter: its own open
    /// proposals, its votes at the current roster (each whole, a later vote
    /// with its release), its withdrawals, and its evidence of bad
    /// envelopes sealed by a committer still in the roster.
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
        // Its evidence of bad envelopes (§7b), while their committer is
        // still a member: a member that was away when it was first sent
        // gets it, to judge a kick of that committer.
        let roster = self.roster();
        for p in self.proven_bad.values().filter(|p| {
            &p.accuser == me && roster.is_some_and(|r| r.member(&p.committer).is_some())
        }) {
            if let Ok(signed) = codec::decode_canonical::<wire::Signed>(&p.signed, "evidence") {
                out.push(codec::encode(&wire::MeshMessage {
                    kind: Some(Kind::EnvelopeEvidence(signed)),
                }));
            }
        }
        out
    }
}

pub(super) fn tx_receive_withdrawal(
    tx: &mut Tx,
    signed: &wire::Signed,
    now_ms: i64,
) -> Result<(), MeshError> {
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
    let p = withdrawable(tx, proposal_hash)?;
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

/// The open proposal a withdrawal names: refused when it is already closed
/// or unknown here.
pub(super) fn withdrawable(
    tx: &Tx,
    proposal_hash: [u8; 32],
) -> Result<Arc<ProposalRec>, MeshError> {
    if tx.s.closed.contains_key(&proposal_hash) {
        return Err(MeshError::Duplicate("withdrawal"));
    }
    tx.s.proposals
        .get(&proposal_hash)
        .cloned()
        .ok_or_else(|| MeshError::UnknownProposal(h(&proposal_hash)))
}
