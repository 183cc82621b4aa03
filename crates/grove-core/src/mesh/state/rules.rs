//! The commit rules: what a proposal may change, the quorum it needs, how
//! a commit is built and checked against its parent roster, and fork choice.

use super::*;

/// A proposal's change, the joiner's peer id and the invite id (for an add).
pub type ParsedChange = (Change, Option<Vec<u8>>, Option<Vec<u8>>);

/// The change a proposal carries, without checks against a roster.
pub fn proposal_change(body: &wire::Proposal) -> Result<ParsedChange, MeshError> {
    let change = body
        .change
        .as_ref()
        .ok_or_else(|| MeshError::malformed("proposal", "no change"))?;
    Ok(match change {
        wire::proposal::Change::Add(req) => {
            let (join, _) = parse_join_request(req)?;
            let joiner = join.member.peer_id.clone();
            (
                Change::Add(join.member),
                Some(joiner),
                Some(join.invite.invite_id.to_vec()),
            )
        }
        wire::proposal::Change::Kick(peer) => (Change::Kick(peer.clone()), None, None),
        wire::proposal::Change::Rotate(_) => (Change::Rotate, None, None),
        wire::proposal::Change::Quorum(q) => {
            (Change::Quorum(QuorumRule::from_wire(q)?), None, None)
        }
        wire::proposal::Change::Approve(a) => (Change::Approve(approval_of(a)?.0), None, None),
        wire::proposal::Change::RevokeApproval(id) => (
            Change::RevokeApproval(bytes16(id, "revoked approval id")?),
            None,
            None,
        ),
        wire::proposal::Change::UpdateKey(u) => {
            (Change::UpdateKey(KeyUpdate::from_wire(u)?), None, None)
        }
        wire::proposal::Change::CommitForm(n) => (
            Change::CommitForm(CommitForm::from_wire(*n, "proposal")?),
            None,
            None,
        ),
    })
}

/// True when `body` is an add that `roster` pre-approved (§8a): the
/// roster lists an approval of exactly the invite the join request carries
/// (its hash), the name matches when one was set, the proposal was made
/// before the approval expired, and its proposer is the inviter. Such an
/// add passes on its proposer's yes alone.
pub fn approved_add(roster: &Roster, body: &wire::Proposal) -> bool {
    let Some(wire::proposal::Change::Add(req)) = &body.change else {
        return false;
    };
    let Ok((join, req)) = parse_join_request(req) else {
        return false;
    };
    let Some(signed_invite) = &req.invite else {
        return false;
    };
    roster.approval(&join.invite.invite_id).is_some_and(|a| {
        a.invite_hash == invite_hash(signed_invite)
            && (a.name.is_empty() || a.name == join.member.name)
            && body.created_ms < a.expires_ms
            && a.inviter == body.proposer
            && join.invite.inviter == body.proposer
    })
}

/// True when `body` passes on its proposer's yes alone: a pre-approved
/// add (§8a), or a member's update of its own key (§8b), which changes
/// nothing about who is a member and is signed by the one member it
/// changes.
pub fn proposer_alone(roster: &Roster, body: &wire::Proposal) -> bool {
    matches!(&body.change, Some(wire::proposal::Change::UpdateKey(_))) || approved_add(roster, body)
}

/// Yes votes a proposal needs at `roster`: its quorum, or one (the
/// proposer's) for a pre-approved add or a key update.
pub(super) fn votes_needed(roster: &Roster, body: &wire::Proposal) -> usize {
    if proposer_alone(roster, body) {
        1
    } else {
        roster.quorum_needed()
    }
}

pub(super) type CheckedChange = (Change, Option<Vec<u8>>, Option<[u8; 16]>);

/// Checks a proposal body against its roster (the signature is already verified).
pub(super) fn check_proposal_body(
    roster: &Roster,
    roster_hash: &[u8; 32],
    body: &wire::Proposal,
    signer: &[u8; 32],
) -> Result<CheckedChange, MeshError> {
    if body.roster_hash != roster_hash {
        return Err(MeshError::InvalidProposal("wrong roster hash".into()));
    }
    if roster.member_with_key(&body.proposer, signer).is_none() {
        return Err(MeshError::NotMember("proposal"));
    }
    let change = body
        .change
        .as_ref()
        .ok_or_else(|| MeshError::malformed("proposal", "no change"))?;
    let (change, joiner, invite_id) = match change {
        wire::proposal::Change::Add(req) => {
            let (join, _) = verify_join_request(req, roster)?;
            if body.created_ms >= join.invite.expires_ms {
                return Err(MeshError::InviteExpired);
            }
            let joiner = join.member.peer_id.clone();
            (
                Change::Add(join.member),
                Some(joiner),
                Some(join.invite.invite_id),
            )
        }
        wire::proposal::Change::Rotate(nonce) => {
            if nonce.len() != 16 {
                return Err(MeshError::malformed(
                    "proposal",
                    "rotate nonce is not 16 bytes",
                ));
            }
            (Change::Rotate, None, None)
        }
        wire::proposal::Change::Approve(a) => {
            let (approval, inv) = approval_of(a)?;
            if inv.mesh_id != roster.mesh_id {
                return Err(MeshError::WrongMesh("approved invite"));
            }
            if roster
                .member_with_key(&inv.inviter, &inv.inviter_key)
                .is_none()
            {
                return Err(MeshError::InviteVoid);
            }
            if body.created_ms >= inv.expires_ms {
                return Err(MeshError::InviteExpired);
            }
            (Change::Approve(approval), None, None)
        }
        wire::proposal::Change::UpdateKey(u) => {
            let update = KeyUpdate::from_wire(u)?;
            if update.member != body.proposer {
                return Err(MeshError::InvalidProposal(
                    "a key update must be proposed and signed by the member it updates".into(),
                ));
            }
            (Change::UpdateKey(update), None, None)
        }
        // Changes whose shape is all there is to check here: read as
        // everywhere else.
        wire::proposal::Change::Kick(_)
        | wire::proposal::Change::Quorum(_)
        | wire::proposal::Change::RevokeApproval(_)
        | wire::proposal::Change::CommitForm(_) => (proposal_change(body)?.0, None, None),
    };
    roster.check_change(&change)?;
    Ok((change, joiner, invite_id))
}

/// The invite an add proposal uses.
pub(super) fn add_invite_id(body: &wire::Proposal) -> Option<[u8; 16]> {
    proposal_change(body)
        .ok()
        .and_then(|(_, _, id)| id)
        .and_then(|id| <[u8; 16]>::try_from(id).ok())
}

/// Builds and signs a commit: next roster, one envelope per next member.
#[allow(clippy::too_many_arguments)]
pub fn build_commit(
    id: &Identity,
    roster: &Roster,
    roster_hash: &[u8; 32],
    proposal: wire::Signed,
    votes: Vec<wire::Signed>,
    change: &Change,
    secret: &EpochSecret,
    sender: &EnvelopeSender,
) -> Result<wire::Signed, MeshError> {
    let core = wire::CommitCore {
        mesh_id: roster.mesh_id.to_vec(),
        new_epoch: roster.epoch.saturating_add(1),
        prev_roster_hash: roster_hash.to_vec(),
        proposal: Some(proposal),
        votes,
        committer: id.peer_id(),
        ephemeral_x25519: sender.ephemeral_public().to_vec(),
    };
    let body: wire::Proposal = core
        .proposal
        .as_ref()
        .map(|p| codec::decode_canonical(&p.body, "proposal"))
        .transpose()?
        .unwrap_or_default();
    let invite_id = add_invite_id(&body);
    let core_bytes = codec::encode(&core);
    let commit_hash = codec::hash(label::COMMIT, &core_bytes);
    let next = roster.next(change, commit_hash, body.created_ms, invite_id);
    let next_bytes = next.encode();
    let next_hash = codec::hash(label::ROSTER, &next_bytes);
    let envelopes = wrap_all(&next, &next_hash, secret, sender)?;
    Ok(sign_commit(
        id,
        core_bytes,
        next_bytes,
        envelopes,
        roster.commit_form,
    ))
}

/// Signs a commit in the form of its parent roster (§7): the envelopes in
/// the signed body, or their hashes in it and the envelopes beside.
pub(crate) fn sign_commit(
    id: &Identity,
    core: Vec<u8>,
    next_roster: Vec<u8>,
    envelopes: Vec<wire::Envelope>,
    form: CommitForm,
) -> wire::Signed {
    match form {
        CommitForm::Inline => codec::sign(
            id,
            tag::COMMIT,
            &wire::Commit {
                core,
                next_roster,
                envelopes,
                envelope_hashes: Vec::new(),
            },
        ),
        CommitForm::Hashed => {
            let envelope_hashes = envelopes
                .iter()
                .map(|e| envelope::envelope_hash(&e.recipient, &e.ciphertext).to_vec())
                .collect();
            let body = wire::Commit {
                core,
                next_roster,
                envelopes: Vec::new(),
                envelope_hashes,
            };
            let mut signed = codec::sign(id, tag::COMMIT, &body);
            signed.envelopes = envelopes.into_iter().map(|e| e.ciphertext).collect();
            signed
        }
    }
}

/// `signed` (a commit) with the envelope for `peer` withheld: what a node
/// stores and sends on of a form-1 commit, so that nothing it keeps opens
/// with its own long-term key (§7). A form-0 commit is returned as it is:
/// its signature covers every envelope.
pub fn withhold_envelope(signed: &wire::Signed, peer: &[u8]) -> Result<wire::Signed, MeshError> {
    let mut out = signed.clone();
    if out.envelopes.is_empty() {
        return Ok(out);
    }
    let body: wire::Commit = codec::decode_canonical(&signed.body, "commit")?;
    let next = Roster::decode(&body.next_roster)?;
    if let Some(i) = next.position(peer)
        && let Some(env) = out.envelopes.get_mut(i)
    {
        env.clear();
    }
    Ok(out)
}

/// A commit's envelopes with their recipients, in either form (a withheld
/// one has no ciphertext).
pub fn envelopes_of(commit: &wire::Signed) -> Result<Vec<wire::Envelope>, MeshError> {
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit")?;
    if body.envelope_hashes.is_empty() {
        return Ok(body.envelopes);
    }
    let next = Roster::decode(&body.next_roster)?;
    Ok(next
        .members
        .iter()
        .zip(&commit.envelopes)
        .map(|(m, ciphertext)| wire::Envelope {
            recipient: m.peer_id.clone(),
            ciphertext: ciphertext.clone(),
        })
        .collect())
}

/// `signed` with every envelope withheld: a form-1 commit as an export
/// carries it, which proves the roster and opens nothing.
pub fn withhold_all_envelopes(signed: &wire::Signed) -> wire::Signed {
    let mut out = signed.clone();
    for env in &mut out.envelopes {
        env.clear();
    }
    out
}

/// Wraps the secret for every member, split over the available cores.
pub(super) fn wrap_all(
    next: &Roster,
    next_hash: &[u8; 32],
    secret: &EpochSecret,
    sender: &EnvelopeSender,
) -> Result<Vec<wire::Envelope>, MeshError> {
    let wrap_part = |part: &[Member]| -> Result<Vec<wire::Envelope>, MeshError> {
        let keys: Vec<[u8; 32]> = part.iter().map(|m| m.x25519).collect();
        let shared = sender.shared_secrets(&keys);
        part.iter()
            .zip(shared)
            .map(|(m, shared)| {
                let ctx = EnvelopeContext {
                    mesh_id: &next.mesh_id,
                    new_epoch: next.epoch,
                    roster_hash: next_hash,
                    recipient: &m.peer_id,
                };
                let ciphertext = shared
                    .and_then(|s| sender.wrap_with_shared(&s, &m.x25519, &ctx, secret.expose()))
                    .map_err(|e| MeshError::InvalidCommit(format!("envelope for a member: {e}")))?;
                Ok(wire::Envelope {
                    recipient: m.peer_id.clone(),
                    ciphertext,
                })
            })
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if next.members.len() < 32 || threads < 2 {
        return wrap_part(&next.members);
    }
    let chunk = next.members.len().div_ceil(threads);
    let results: Vec<Result<Vec<wire::Envelope>, MeshError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = next
            .members
            .chunks(chunk)
            .map(|part| scope.spawn(move || wrap_part(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(MeshError::InvalidCommit("envelope worker failed".into()))
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(next.members.len());
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

/// A verified commit, ready to apply.
pub(super) struct CheckedCommit {
    pub(super) node: RosterNode,
    pub(super) proposal_hash: [u8; 32],
    pub(super) invite_id: Option<[u8; 16]>,
    /// This node's envelope: its secret for the new epoch, when it is a
    /// member of it and the envelope opened.
    pub(super) mine: OwnEnvelope,
    /// The committer's peer id.
    pub(super) committer: Vec<u8>,
    pub(super) joiner: Option<Vec<u8>>,
}

/// Checks a commit against its parent roster, in the order of
/// docs/mesh-protocol.md §7: its lineage, the proposal, the votes, every
/// signature (each by the one rule), the next roster, and the envelopes
/// (this node's own is opened; one that does not open leaves the commit
/// valid, `OwnEnvelope::DoesNotOpen`).
pub(crate) fn check_commit_against(
    me: Option<&Identity>,
    prev: &Roster,
    prev_hash: &[u8; 32],
    parsed: &codec::Unverified<wire::Commit>,
    core: &wire::CommitCore,
    verified_votes: &BTreeMap<(u64, Vec<u8>), VoteRec>,
) -> Result<CheckedCommit, MeshError> {
    let commit = &parsed.msg;
    check_lineage(prev, parsed, core)?;
    let proposal = CommittedProposal::check(prev, prev_hash, core)?;
    let mut checks = vec![SigCheck::of(parsed), SigCheck::of(&proposal.parsed)];
    check_commit_votes(
        prev,
        prev_hash,
        &proposal,
        core,
        verified_votes,
        &mut checks,
    )?;
    codec::verify_all(&checks, "commit")?;
    let commit_hash = codec::hash(label::COMMIT, &commit.core);
    let next = prev.next(
        &proposal.change,
        commit_hash,
        proposal.parsed.msg.created_ms,
        proposal.invite_id,
    );
    let next_bytes = check_next_roster(&next, commit)?;
    let next_hash = codec::hash(label::ROSTER, &next_bytes);
    let envelopes = commit_envelopes(prev.commit_form, &next, commit, &parsed.envelopes)?;
    let (mine, position) = open_own(me, &next, &next_hash, core, &envelopes)?;
    // Kept without this node's own envelope once it opened; one that does
    // not open is kept, as the evidence it is (it opens nothing).
    let mut kept = parsed.envelopes.clone();
    if let (OwnEnvelope::Opened(_), Some(i)) = (&mine, position)
        && let Some(env) = kept.get_mut(i)
    {
        env.clear();
    }
    let signed_commit = wire::Signed {
        body: parsed.body.clone(),
        signer: parsed.signer.to_vec(),
        signature: parsed.signature.to_vec(),
        envelopes: kept,
    };
    Ok(CheckedCommit {
        node: RosterNode {
            roster: next,
            hash: next_hash,
            parent: Some(*prev_hash),
            commit: Some(codec::encode(&signed_commit)),
            proposal_hash: Some(proposal.hash),
        },
        proposal_hash: proposal.hash,
        invite_id: proposal.invite_id,
        mine,
        committer: core.committer.clone(),
        joiner: proposal.joiner,
    })
}

/// The commit follows its parent: the same mesh, the next epoch, a
/// committer who is a member of the parent roster with that key, and an
/// ephemeral key of the prime-order subgroup.
fn check_lineage(
    prev: &Roster,
    parsed: &codec::Unverified<wire::Commit>,
    core: &wire::CommitCore,
) -> Result<(), MeshError> {
    if core.mesh_id != prev.mesh_id {
        return Err(MeshError::WrongMesh("commit"));
    }
    if prev.epoch.checked_add(1) != Some(core.new_epoch) {
        return Err(MeshError::InvalidCommit("epoch is not parent + 1".into()));
    }
    if prev
        .member_with_key(&core.committer, &parsed.signer)
        .is_none()
    {
        return Err(MeshError::NotMember("commit"));
    }
    // Every honest ephemeral key is of the prime-order subgroup; only for
    // such a key can a recipient prove its agreement (§7b).
    let ephemeral = bytes32(&core.ephemeral_x25519, "commit ephemeral key")?;
    if !agreement::in_subgroup(&ephemeral) {
        return Err(MeshError::InvalidCommit(
            "the ephemeral key is not of the prime-order subgroup".into(),
        ));
    }
    Ok(())
}

/// The proposal a commit carries, checked against the parent roster.
struct CommittedProposal {
    parsed: codec::Unverified<wire::Proposal>,
    hash: [u8; 32],
    change: Change,
    joiner: Option<Vec<u8>>,
    invite_id: Option<[u8; 16]>,
}

impl CommittedProposal {
    /// The proposal is for the parent's epoch, its lifetime is sound, and
    /// its change passes the checks that depend on the parent roster and
    /// the signed data alone (§4, §8).
    fn check(
        prev: &Roster,
        prev_hash: &[u8; 32],
        core: &wire::CommitCore,
    ) -> Result<CommittedProposal, MeshError> {
        let signed = core
            .proposal
            .as_ref()
            .ok_or_else(|| MeshError::malformed("commit", "no proposal"))?;
        let parsed = codec::parse_signed::<wire::Proposal>(signed, tag::PROPOSAL, "proposal")?;
        let hash = codec::hash(label::PROPOSAL, &signed.body);
        if parsed.msg.mesh_id != prev.mesh_id || parsed.msg.epoch != prev.epoch {
            return Err(MeshError::InvalidCommit(
                "proposal is for another epoch".into(),
            ));
        }
        if parsed.msg.expires_ms <= parsed.msg.created_ms {
            return Err(MeshError::InvalidCommit("proposal lifetime".into()));
        }
        let (change, joiner, invite_id) =
            check_proposal_body(prev, prev_hash, &parsed.msg, &parsed.signer)?;
        Ok(CommittedProposal {
            parsed,
            hash,
            change,
            joiner,
            invite_id,
        })
    }
}

/// The votes are yes votes on exactly this proposal (its hash and copied
/// times), from distinct members, at least the parent's quorum; a
/// pre-approved add carries its proposer's yes. Adds to `checks` the
/// signatures still to verify: a vote this node already verified when it
/// arrived (the same signed bytes) needs no second verification.
fn check_commit_votes<'a>(
    prev: &Roster,
    prev_hash: &[u8; 32],
    proposal: &CommittedProposal,
    core: &'a wire::CommitCore,
    verified_votes: &BTreeMap<(u64, Vec<u8>), VoteRec>,
    checks: &mut Vec<SigCheck<'a>>,
) -> Result<(), MeshError> {
    let body = &proposal.parsed.msg;
    let mut seen: BTreeSet<Vec<u8>> = BTreeSet::new();
    for v in &core.votes {
        let parsed = codec::parse_signed::<wire::Vote>(v, tag::VOTE, "vote")?;
        let b = &parsed.msg;
        if b.mesh_id != prev.mesh_id
            || b.epoch != prev.epoch
            || b.roster_hash != prev_hash
            || b.proposal_hash != proposal.hash
            || !b.yes
            || b.proposal_created_ms != body.created_ms
            || b.proposal_expires_ms != body.expires_ms
        {
            return Err(MeshError::InvalidCommit(
                "a vote is not a yes on this proposal".into(),
            ));
        }
        if prev.member_with_key(&b.voter, &parsed.signer).is_none() {
            return Err(MeshError::NotMember("vote in commit"));
        }
        if !seen.insert(b.voter.clone()) {
            return Err(MeshError::InvalidCommit("two votes by one member".into()));
        }
        let already = verified_votes
            .get(&(b.epoch, b.voter.clone()))
            .is_some_and(|known| {
                known.proposal_hash == proposal.hash && known.signed == codec::encode(v)
            });
        if !already {
            checks.push(SigCheck {
                signer: parsed.signer,
                tag: parsed.tag,
                body: &v.body,
                signature: parsed.signature,
            });
        }
    }
    let needed = votes_needed(prev, body);
    if seen.len() < needed {
        return Err(MeshError::InvalidCommit(format!(
            "{} yes votes, quorum is {needed}",
            seen.len()
        )));
    }
    // A pre-approved add passes on its proposer's (the inviter's) yes, a
    // key update on its member's.
    if proposer_alone(prev, body) && !seen.contains(body.proposer.as_slice()) {
        return Err(MeshError::InvalidCommit(
            "a proposal that passes on its proposer's yes needs that yes".into(),
        ));
    }
    Ok(())
}

/// `next_roster` is byte-identical to the roster this node derives itself;
/// returns those bytes.
fn check_next_roster(next: &Roster, commit: &wire::Commit) -> Result<Vec<u8>, MeshError> {
    let next_bytes = next.encode();
    if next_bytes != commit.next_roster {
        return Err(MeshError::InvalidCommit(
            "next roster does not follow from the proposal".into(),
        ));
    }
    Ok(next_bytes)
}

/// A commit's envelopes, one per next member in roster order, as the form
/// of its parent roster carries them (§7): in the signed body, every one
/// 48 bytes with its member's peer id; or as signed hashes, each envelope
/// beside the body either 48 bytes that hash to its member's entry or
/// empty, withheld (`None`).
pub(super) fn commit_envelopes<'a>(
    form: CommitForm,
    next: &Roster,
    commit: &'a wire::Commit,
    attached: &'a [Vec<u8>],
) -> Result<Vec<Option<&'a [u8]>>, MeshError> {
    let wrong = |why: &str| Err(MeshError::InvalidCommit(why.into()));
    match form {
        CommitForm::Inline => {
            if !commit.envelope_hashes.is_empty() || !attached.is_empty() {
                return wrong("envelope hashes in a commit of form 0");
            }
            if commit.envelopes.len() != next.members.len() {
                return wrong("not one envelope per member");
            }
            let mut out = Vec::with_capacity(next.members.len());
            for (env, m) in commit.envelopes.iter().zip(&next.members) {
                if env.recipient != m.peer_id || env.ciphertext.len() != ENVELOPE_LEN {
                    return wrong("envelopes do not match the roster");
                }
                out.push(Some(env.ciphertext.as_slice()));
            }
            Ok(out)
        }
        CommitForm::Hashed => {
            if !commit.envelopes.is_empty() {
                return wrong("signed envelopes in a commit of form 1");
            }
            if commit.envelope_hashes.len() != next.members.len()
                || attached.len() != next.members.len()
            {
                return wrong("not one envelope per member");
            }
            let mut out = Vec::with_capacity(next.members.len());
            for ((hash, env), m) in commit
                .envelope_hashes
                .iter()
                .zip(attached)
                .zip(&next.members)
            {
                if hash.len() != 32 {
                    return wrong("an envelope hash is not 32 bytes");
                }
                if env.is_empty() {
                    out.push(None);
                    continue;
                }
                if env.len() != ENVELOPE_LEN
                    || envelope::envelope_hash(&m.peer_id, env).as_slice() != hash.as_slice()
                {
                    return wrong("an envelope does not match its signed hash");
                }
                out.push(Some(env.as_slice()));
            }
            Ok(out)
        }
    }
}

/// When this node (`me`; `None` for an outside reader of the chain) is in
/// the next roster: its position there, and its own envelope opened with
/// the key the roster names for it. A withheld own envelope refuses the
/// commit: no honest member withholds another's, so a copy from another
/// member carries it.
fn open_own(
    me: Option<&Identity>,
    next: &Roster,
    next_hash: &[u8; 32],
    core: &wire::CommitCore,
    envelopes: &[Option<&[u8]>],
) -> Result<(OwnEnvelope, Option<usize>), MeshError> {
    let ephemeral = bytes32(&core.ephemeral_x25519, "commit ephemeral key")?;
    let Some(id) = me else {
        return Ok((OwnEnvelope::Absent, None));
    };
    let peer = id.peer_id();
    let Some(i) = next.position(&peer) else {
        return Ok((OwnEnvelope::Absent, None));
    };
    let Some(ciphertext) = envelopes.get(i).copied().flatten() else {
        return Err(MeshError::InvalidCommit(
            "this node's envelope is withheld".into(),
        ));
    };
    let ctx = EnvelopeContext {
        mesh_id: &next.mesh_id,
        new_epoch: next.epoch,
        roster_hash: next_hash,
        recipient: &peer,
    };
    // The key the next roster names for this node: after a key update,
    // the new one (held pending until then).
    let Some(secret) = id.x25519_secret_for(&next.members[i].x25519) else {
        return Ok((OwnEnvelope::DoesNotOpen, Some(i)));
    };
    let mine = match envelope::open_envelope(secret, &ephemeral, &ctx, ciphertext) {
        Ok(s) => OwnEnvelope::Opened(s),
        Err(_) => OwnEnvelope::DoesNotOpen,
    };
    Ok((mine, Some(i)))
}

/// This node's envelope in a commit.
pub(super) enum OwnEnvelope {
    /// The commit has none for it (it is not in the next roster, or the
    /// check is for no one, as a chain replay is).
    Absent,
    Opened(EpochSecret),
    /// It is in the next roster and its envelope does not open: the commit
    /// is valid for everyone else, and this node follows it without the
    /// secret (`BadEnvelope`).
    DoesNotOpen,
}

/// The fork-choice rule: the highest epoch wins; between rosters of one
/// epoch, compare the two branches where they split and take the one whose
/// commit hash there is lowest. Every node with the same rosters picks the same tip.
pub fn fork_choice(rosters: &BTreeMap<[u8; 32], Arc<RosterNode>>) -> [u8; 32] {
    let Some(max_epoch) = rosters.values().map(|n| n.roster.epoch).max() else {
        return [0u8; 32];
    };
    let mut best: Option<[u8; 32]> = None;
    for n in rosters.values().filter(|n| n.roster.epoch == max_epoch) {
        best = Some(match best {
            None => n.hash,
            Some(b) => {
                if prefer(rosters, n.hash, b) {
                    n.hash
                } else {
                    b
                }
            }
        });
    }
    best.unwrap_or([0u8; 32])
}

/// True when roster `a` is preferred to `b` (same epoch): at their split,
/// `a`'s branch has the lower commit hash.
pub(super) fn prefer(
    rosters: &BTreeMap<[u8; 32], Arc<RosterNode>>,
    a: [u8; 32],
    b: [u8; 32],
) -> bool {
    let (mut x, mut y) = (a, b);
    loop {
        let (Some(nx), Some(ny)) = (rosters.get(&x), rosters.get(&y)) else {
            return x < y;
        };
        if nx.parent == ny.parent || nx.parent.is_none() || ny.parent.is_none() {
            return (nx.roster.commit_hash, nx.hash) < (ny.roster.commit_hash, ny.hash);
        }
        match (nx.parent, ny.parent) {
            (Some(px), Some(py)) => {
                x = px;
                y = py;
            }
            _ => return x < y,
        }
    }
}
