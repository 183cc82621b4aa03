//! Received messages: the clock tick, the one entry point for a peer's
//! message, proposals, votes, revocations and the commit they lead to.

use super::*;

impl MeshState {
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
            tx_rekey_if_stranded(&mut tx, id, now_ms, rng);
        }
        Ok(tx.done())
    }

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
            Kind::EnvelopeEvidence(s) => tx_receive_envelope_evidence(&mut tx, id, &s, now_ms)?,
            Kind::Welcome(_) => {}
        }
        Ok(tx.done())
    }

    /// Checks a signed proposal against the current roster.
    pub(super) fn check_proposal(
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
    pub(super) fn receive_vote(
        &self,
        tx: &mut Tx,
        signed: &wire::Signed,
        release: Option<&wire::VoteRelease>,
        now_ms: i64,
    ) -> Result<[u8; 32], MeshError> {
        let roster = self.roster().ok_or(MeshError::NoMesh)?;
        let (body, signer) = codec::open_signed::<wire::Vote>(signed, tag::VOTE, "vote")?;
        let (roster_hash, facts) = self.check_vote(roster, &body, &signer, &signed.body)?;
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
                self.check_release_evident(prev, prev_facts.as_ref(), &facts, named)?;
                None
            }
            (None, None) => None,
        };
        if let (Some(prev), Some(pf)) = (prev, &prev_facts) {
            let second = if votes_conflict(pf, &facts) {
                Some(encoded.clone())
            } else {
                checked
                    .as_ref()
                    .filter(|c| votes_conflict(pf, &c.previous))
                    .map(|c| c.previous_signed.clone())
            };
            if let Some(second) = second {
                self.tx_equivocation(tx, &body, prev, second, now_ms)?;
                return Ok(facts.proposal);
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
        tx_record_vote(tx, &body, roster_hash, &facts, encoded, release, now_ms)?;
        Ok(facts.proposal)
    }

    /// A vote's own checks: bound to the current tip, by a member with that
    /// key, with a sound proposal lifetime and the proposal's times (when
    /// this node holds the proposal). Returns the roster hash it binds and
    /// its facts.
    fn check_vote(
        &self,
        roster: &Roster,
        body: &wire::Vote,
        signer: &[u8; 32],
        signed_body: &[u8],
    ) -> Result<([u8; 32], VoteFacts), MeshError> {
        let roster_hash = self.check_tip_binding(
            roster,
            "vote",
            "vote roster hash",
            &body.mesh_id,
            body.epoch,
            &body.roster_hash,
        )?;
        if roster.member_with_key(&body.voter, signer).is_none() {
            return Err(MeshError::NotMember("vote"));
        }
        if body.proposal_expires_ms <= body.proposal_created_ms {
            return Err(MeshError::malformed("vote", "proposal lifetime"));
        }
        let facts = VoteFacts::of(body, signed_body)?;
        if let Some(p) = self.proposals.get(&facts.proposal)
            && (p.created_ms != body.proposal_created_ms
                || p.expires_ms != body.proposal_expires_ms)
        {
            return Err(MeshError::malformed(
                "vote",
                "proposal times do not match the proposal",
            ));
        }
        Ok((roster_hash, facts))
    }

    /// A vote sent without its release (a plain re-send) counts only when
    /// this node holds the vote it releases and sees why that one is free,
    /// or already holds a later one (compared by the caller).
    fn check_release_evident(
        &self,
        prev: Option<&VoteRec>,
        prev_facts: Option<&VoteFacts>,
        facts: &VoteFacts,
        named: [u8; 32],
    ) -> Result<(), MeshError> {
        let evident = match (prev, prev_facts) {
            (Some(p), Some(pf)) => {
                pf.seq >= facts.seq
                    || (pf.seq + 1 == facts.seq
                        && pf.hash == named
                        && (facts.created_ms >= pf.expires_ms
                            || self.closed.contains_key(&p.proposal_hash)))
            }
            _ => false,
        };
        if evident {
            Ok(())
        } else {
            Err(MeshError::ReleaseMissing)
        }
    }

    /// Two conflicting votes of one member: the evidence is kept (once) and
    /// the transition says who equivocated.
    fn tx_equivocation(
        &self,
        tx: &mut Tx,
        body: &wire::Vote,
        prev: &VoteRec,
        second: Vec<u8>,
        now_ms: i64,
    ) -> Result<(), MeshError> {
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
        Ok(())
    }
}

/// Stores an accepted vote; a no may reject its proposal.
fn tx_record_vote(
    tx: &mut Tx,
    body: &wire::Vote,
    roster_hash: [u8; 32],
    facts: &VoteFacts,
    signed: Vec<u8>,
    release: Option<&wire::VoteRelease>,
    now_ms: i64,
) -> Result<(), MeshError> {
    let proposal_hash = facts.proposal;
    tx.effect(Effect::PutVote(VoteRec {
        epoch: body.epoch,
        voter: body.voter.clone(),
        roster_hash,
        proposal_hash,
        yes: body.yes,
        proposal_created_ms: body.proposal_created_ms,
        proposal_expires_ms: body.proposal_expires_ms,
        signed,
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
    Ok(())
}

/// Builds the commit for `proposal_hash` when its yes votes reach quorum.
/// Only the proposer builds, unless `backup` (a later tick, by anyone).
pub(super) fn tx_try_commit<R: CryptoRng + ?Sized>(
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
    let approved = proposer_alone(&roster, &body);
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
    let secret = EpochSecret::random(rng);
    let sender = EnvelopeSender::new(rng);
    let signed = build_commit(
        id, &roster, &tx.s.tip, proposal, votes, &p.change, &secret, &sender,
    )?;
    // The chain that vouches for the joiner's roster, read before the
    // commit moves the tip.
    let prev_chain = p
        .joiner
        .as_ref()
        .and_then(|_| chain_to(&tx.s.rosters, &tx.s.tip));
    tx_apply_commit(tx, id, &signed, now_ms)?;
    // Sent on as stored: no one else needs the committer's own envelope.
    let signed = withhold_envelope(&signed, &id.peer_id())?;
    tx.send(Dest::All, Kind::Commit(signed.clone()));
    if let Some(joiner) = &p.joiner {
        tx.send(
            Dest::Peer(joiner.clone()),
            Kind::Welcome(chain::welcome(signed, roster.encode(), prev_chain)),
        );
    }
    Ok(())
}

pub(super) fn tx_receive_revocation(
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
pub(super) fn tx_end_revoked(tx: &mut Tx, id: &Identity, invite_id: [u8; 16], now_ms: i64) {
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
pub(super) fn revoked_proposal(s: &MeshState, p: &ProposalRec) -> bool {
    p.invite().is_some_and(|i| s.revoked.contains_key(&i))
}

/// A member whose roster names an X25519 key it no longer holds proposes
/// its current key again (§8b). This happens when the fork choice moves it
/// off the branch on which its key update had settled (two commits that
/// each pass on one yes, a key update and a pre-approved add, can grow a
/// branch beside a quorum's); every envelope wrapped to the old key is
/// then one it cannot open, until the update on this branch commits. One
/// such proposal at a time; one the rules refuse now (a vote of this
/// node still binding) is tried again on a later tick.
fn tx_rekey_if_stranded<R: CryptoRng + ?Sized>(
    tx: &mut Tx,
    id: &Identity,
    now_ms: i64,
    rng: &mut R,
) {
    let me = id.peer_id();
    let Some(named) = tx.s.roster().and_then(|r| r.member(&me)).map(|m| m.x25519) else {
        return;
    };
    if id.x25519_secret_for(&named).is_some()
        || tx
            .s
            .proposals
            .values()
            .any(|p| p.proposer == me && matches!(p.change, Change::UpdateKey(_)))
    {
        return;
    }
    let x25519 = id.x25519_public();
    let update = KeyUpdate {
        member: me,
        x25519,
        x25519_binding: id.sign(identity::X25519_BINDING_TAG, &x25519),
    };
    let mut trial = tx.clone();
    if tx_propose(
        &mut trial,
        id,
        ProposalChange::UpdateKey(update),
        now_ms,
        rng,
    )
    .is_ok()
    {
        trial.audit("mesh.key.rekey", json!({"epoch": trial.s.epoch()}));
        *tx = trial;
    }
}
