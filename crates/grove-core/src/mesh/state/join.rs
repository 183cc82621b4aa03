//! Join and sync: join requests, the welcome, and a member's answer to a
//! node that is behind.

use super::*;

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

    pub(super) fn receive_join_request<R: CryptoRng + ?Sized>(
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
        let parent_hash = node.parent?;
        let parent = self.rosters.get(&parent_hash)?;
        let commit =
            codec::decode_canonical::<wire::Signed>(node.commit.as_ref()?, "stored commit").ok()?;
        Some(chain::welcome(
            commit,
            parent.roster.encode(),
            chain_to(&self.rosters, &parent_hash),
        ))
    }

    pub(super) fn answer_sync(
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
        let (side, nodes) = self.rosters_missing(&known);
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

    /// The rosters a requester that knows `known` lacks: the current chain
    /// above the newest roster it knows (oldest first), and before them, for
    /// a requester on a losing branch, that branch's rosters down to where
    /// it leaves this chain: a joiner welcomed on that branch holds no roster
    /// before the one it joined from, and links it to the fork point with
    /// them (§11).
    fn rosters_missing(
        &self,
        known: &BTreeSet<[u8; 32]>,
    ) -> (Vec<&Arc<RosterNode>>, Vec<&Arc<RosterNode>>) {
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
        let on_chain: BTreeSet<[u8; 32]> = chain.iter().copied().collect();
        let mut side = Vec::new();
        let mut seen = BTreeSet::new();
        for k in known {
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
        (side, nodes)
    }

    pub(super) fn receive_sync_response(
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
                Ok(checked) => tx_insert_checked(tx, id, checked, now_ms),
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
    pub(super) fn unlinked_roots(&self) -> Vec<Arc<RosterNode>> {
        self.rosters
            .values()
            .filter(|n| n.parent.is_none() && n.roster.epoch > 0)
            .cloned()
            .collect()
    }

    pub(super) fn receive_welcome(
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
        let (prev, checked, secret) = check_welcome(id, welcome, &pending)?;
        let prev_hash = prev.hash();
        let mut tx = self.tx();
        tx.effect(Effect::PutMesh(MeshInfo {
            mesh_id: prev.mesh_id,
            name: prev.mesh_name.clone(),
        }));
        match welcome_chain(welcome, &prev_hash, &pending)? {
            // The whole chain from the genesis: this node can vouch for
            // its mesh as the founder can (an export's chain, a welcome).
            Some(chain) => {
                for node in chain.nodes {
                    tx.effect(Effect::PutRoster(Arc::new(node)));
                }
            }
            None => tx.effect(Effect::PutRoster(Arc::new(RosterNode {
                roster: prev,
                hash: prev_hash,
                parent: None,
                commit: None,
                proposal_hash: None,
            }))),
        }
        let node = tx_put_checked(
            &mut tx,
            checked.node,
            checked.invite_id,
            checked.proposal_hash,
        );
        let hash = node.hash;
        let epoch = node.roster.epoch;
        tx.effect(Effect::SetTip(hash));
        tx.effect(Effect::PutSecret(SecretEntry {
            roster_hash: hash,
            epoch,
            secret: Arc::new(secret),
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
}

/// A welcome for this node's pending join: the roster it is added to (of
/// the invite's mesh, with the inviter in it), a commit on that roster that
/// checks in full and uses this node's invite, and this node's secret of
/// the new epoch.
fn check_welcome(
    id: &Identity,
    welcome: &wire::Welcome,
    pending: &PendingJoin,
) -> Result<(Roster, CheckedCommit, EpochSecret), MeshError> {
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
    let mut checked = check_commit_against(
        Some(id),
        &prev,
        &prev_hash,
        &parsed,
        &core,
        &BTreeMap::new(),
    )?;
    let secret = match std::mem::replace(&mut checked.mine, OwnEnvelope::Absent) {
        OwnEnvelope::Opened(s) => s,
        // A joiner without the secret of the epoch it joins at has nothing
        // to follow yet: refused, so it can ask again (§8).
        OwnEnvelope::DoesNotOpen => return Err(MeshError::EnvelopeDoesNotOpen),
        OwnEnvelope::Absent => return Err(MeshError::NotAMember),
    };
    if checked.invite_id != Some(pending.invite_id) {
        return Err(MeshError::InvalidCommit(
            "the commit does not use this node's invite".into(),
        ));
    }
    Ok((prev, checked, secret))
}

/// The chain a welcome carries, replayed: of the invite's mesh (its
/// genesis hashes to the invite's mesh id, or the mesh is legacy) and
/// ending at the roster the joiner is added to. `None` from an inviter that
/// does not hold the chain (it joined before welcomes carried one): the
/// joiner then trusts the welcome's roster on its inviter's word, as
/// before, and its exports verify as unanchored.
fn welcome_chain(
    welcome: &wire::Welcome,
    prev_hash: &[u8; 32],
    pending: &PendingJoin,
) -> Result<Option<VerifiedChain>, MeshError> {
    if welcome.genesis.is_empty() {
        return Ok(None);
    }
    let chain = verify_chain(&welcome.genesis, &welcome.chain)
        .map_err(|e| MeshError::InvalidCommit(format!("the welcome's chain: {e}")))?;
    if chain.mesh_id() != pending.mesh_id {
        return Err(MeshError::WrongMesh("welcome chain"));
    }
    if chain.nodes.last().map(|n| n.hash) != Some(*prev_hash) {
        return Err(MeshError::InvalidCommit(
            "the welcome's chain does not end at the roster it adds to".into(),
        ));
    }
    Ok(Some(chain))
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

/// The hash an approval pins its invite by (§8a).
pub fn invite_hash(signed_invite: &wire::Signed) -> [u8; 32] {
    codec::hash(label::INVITE, &codec::encode(signed_invite))
}

/// The approval an `approve` change asks for, and its verified invite.
pub(super) fn approval_of(a: &wire::InviteApproval) -> Result<(ApprovedInvite, Invite), MeshError> {
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
