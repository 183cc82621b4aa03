//! Local commands: found a mesh, issue and revoke invites, ask to join,
//! propose, vote and withdraw.

use super::*;

impl MeshState {
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
        let mut nonce = [0u8; 16];
        rng.fill_bytes(&mut nonce);
        let me = self.member_entry(id, member_name, 0);
        let roster = Roster::genesis(nonce, name, me, quorum);
        let mesh_id = roster.mesh_id;
        let hash = roster.hash();
        let secret = Arc::new(EpochSecret::random(rng));
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

    pub(super) fn member_entry(&self, id: &Identity, name: &str, joined_epoch: u64) -> Member {
        Member::new(id.public(), name, joined_epoch)
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

pub(super) fn tx_propose<R: CryptoRng + ?Sized>(
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
        ProposalChange::UpdateKey(u) => wire::proposal::Change::UpdateKey(u.to_wire()),
        ProposalChange::CommitForm(f) => wire::proposal::Change::CommitForm(f.to_wire()),
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
pub(super) fn tx_withdraw(
    tx: &mut Tx,
    id: &Identity,
    proposal_hash: [u8; 32],
    now_ms: i64,
) -> Result<(), MeshError> {
    let roster = tx.s.require_member()?.clone();
    let p = withdrawable(tx, proposal_hash)?;
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
