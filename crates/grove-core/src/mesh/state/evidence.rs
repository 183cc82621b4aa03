//! Evidence of envelopes that do not open (docs/mesh-protocol.md §7b): the
//! recipient signs its X25519 agreement output for the envelope with a
//! proof that it is correct (`mesh::agreement`), and any member holding the
//! commit's parent roster checks that the committer's envelope, not the
//! recipient's key, is at fault.

use rand::SeedableRng;
use rand::rngs::StdRng;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::*;

/// This node's signed evidence that its envelope in the commit that made
/// `node` does not open; `None` when it holds no key the roster names for
/// it (then the fault may be its own, and there is nothing to prove).
fn sign_evidence(id: &Identity, node: &RosterNode) -> Option<wire::Signed> {
    let commit: wire::Signed = codec::decode_canonical(node.commit.as_ref()?, "commit").ok()?;
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit").ok()?;
    let core: wire::CommitCore = codec::decode_canonical(&body.core, "commit core").ok()?;
    let me = id.peer_id();
    let i = node.roster.position(&me)?;
    let key = id.x25519_secret_for(&node.roster.members[i].x25519)?;
    let ephemeral = bytes32(&core.ephemeral_x25519, "commit ephemeral key").ok()?;
    let ciphertext = envelopes_of(&commit).ok()?.into_iter().nth(i)?.ciphertext;
    let ctx = EnvelopeContext {
        mesh_id: &node.roster.mesh_id,
        new_epoch: node.roster.epoch,
        roster_hash: &node.hash,
        recipient: &me,
    };
    // The proof's nonce comes from a generator seeded by this node's key
    // and the envelope, as deterministic signatures derive theirs, so that
    // applying a commit needs no randomness.
    let mut seed = Sha256::new();
    seed.update(b"grove-mesh/v1/agreement-nonce\0");
    seed.update(Zeroizing::new(key.to_bytes()).as_slice());
    seed.update(ctx.bytes());
    seed.update(ephemeral);
    seed.update(&ciphertext);
    let mut rng = StdRng::from_seed(seed.finalize().into());
    let proven = agreement::prove(key, &ephemeral, &ctx, &mut rng).ok()?;
    let evidence = wire::EnvelopeEvidence {
        mesh_id: node.roster.mesh_id.to_vec(),
        commit: Some(commit),
        accuser: me,
        agreement: proven.point.to_vec(),
        proof: proven.proof.to_vec(),
    };
    Some(codec::sign(id, tag::ENVELOPE_EVIDENCE, &evidence))
}

/// Checks signed envelope evidence against the rosters of `s`: the commit
/// is one this node holds, checked in full against its parent; the accuser
/// is a member of the roster it made, with the key that signed; its
/// envelope is in the accuser's copy; the agreement is proven for the key
/// the roster names; and the envelope does not open with it.
pub fn check_envelope_evidence(
    s: &MeshState,
    signed: &wire::Signed,
    now_ms: i64,
) -> Result<ProvenBadEnvelope, MeshError> {
    let what = "envelope evidence";
    let (body, signer) =
        codec::open_signed::<wire::EnvelopeEvidence>(signed, tag::ENVELOPE_EVIDENCE, what)?;
    if body.mesh_id != s.mesh_id()? {
        return Err(MeshError::WrongMesh(what));
    }
    let commit = body
        .commit
        .as_ref()
        .ok_or_else(|| MeshError::malformed(what, "no commit"))?;
    let commit = codec::parse_signed::<wire::Commit>(commit, tag::COMMIT, "commit")?;
    let core: wire::CommitCore = codec::decode_canonical(&commit.msg.core, "commit core")?;
    let next_hash = codec::hash(label::ROSTER, &commit.msg.next_roster);
    let node = s.rosters.get(&next_hash).ok_or(MeshError::UnknownRoster {
        what,
        epoch: core.new_epoch,
    })?;
    let prev_hash = node
        .parent
        .ok_or_else(|| MeshError::InvalidEvidence("the commit's parent is not held here".into()))?;
    let prev = s.rosters.get(&prev_hash).ok_or(MeshError::UnknownRoster {
        what,
        epoch: core.new_epoch,
    })?;
    check_commit_against(None, &prev.roster, &prev_hash, &commit, &core, &s.votes)?;
    let next = &node.roster;
    let accuser = next
        .member_with_key(&body.accuser, &signer)
        .ok_or(MeshError::NotMember(what))?;
    let i = next
        .position(&body.accuser)
        .ok_or(MeshError::NotMember(what))?;
    let envelopes = commit_envelopes(
        prev.roster.commit_form,
        next,
        &commit.msg,
        &commit.envelopes,
    )?;
    let ciphertext = envelopes[i]
        .ok_or_else(|| MeshError::InvalidEvidence("the accuser's envelope is withheld".into()))?;
    let ephemeral = bytes32(&core.ephemeral_x25519, "commit ephemeral key")?;
    let ctx = EnvelopeContext {
        mesh_id: &next.mesh_id,
        new_epoch: next.epoch,
        roster_hash: &next_hash,
        recipient: &body.accuser,
    };
    let proven = agreement::Agreement {
        point: bytes32(&body.agreement, "evidence agreement")?,
        proof: body
            .proof
            .as_slice()
            .try_into()
            .map_err(|_| MeshError::malformed(what, "the proof is not 64 bytes"))?,
    };
    let shared = agreement::verify(&accuser.x25519, &ephemeral, &ctx, &proven)
        .map_err(|e| MeshError::InvalidEvidence(e.to_string()))?;
    if envelope::open_with_shared(&shared, &ephemeral, &accuser.x25519, &ctx, ciphertext).is_ok() {
        return Err(MeshError::InvalidEvidence(
            "the envelope opens with the proven agreement: the accuser's key is at fault".into(),
        ));
    }
    Ok(ProvenBadEnvelope {
        epoch: next.epoch,
        roster_hash: next_hash,
        commit_hash: next.commit_hash,
        committer: core.committer,
        accuser: body.accuser.clone(),
        signed: codec::encode(signed),
        at_ms: now_ms,
    })
}

/// Records checked evidence once, with its audit event.
fn tx_put_proven(tx: &mut Tx, proven: ProvenBadEnvelope) {
    tx.audit(
        "mesh.envelope.proven",
        json!({"epoch": proven.epoch, "roster_hash": h(&proven.roster_hash),
               "committer": identity::peer_id_text(&proven.committer),
               "accuser": identity::peer_id_text(&proven.accuser)}),
    );
    tx.effect(Effect::PutProvenBadEnvelope(proven));
}

/// This node's envelope in the commit that made `node` did not open: it
/// proves so when it can, keeps the evidence and sends it to every member,
/// sealed under the parent epoch's key (which it holds, and they keep for
/// the grace window; it holds none of the new epoch's).
pub(super) fn tx_prove_own_bad_envelope(
    tx: &mut Tx,
    id: &Identity,
    node: &RosterNode,
    now_ms: i64,
) {
    let Some(signed) = sign_evidence(id, node) else {
        tx.audit(
            "mesh.envelope.unprovable",
            json!({"epoch": node.roster.epoch, "roster_hash": h(&node.hash)}),
        );
        return;
    };
    match check_envelope_evidence(&tx.s, &signed, now_ms) {
        Ok(proven) => {
            tx_put_proven(tx, proven);
            tx.send(Dest::All, Kind::EnvelopeEvidence(signed));
        }
        // Its own key opens the envelope with the proven agreement, or
        // the commit's parent is not held: nothing to show others.
        Err(e) => tx.audit(
            "mesh.envelope.unprovable",
            json!({"epoch": node.roster.epoch, "roster_hash": h(&node.hash), "why": e.to_string()}),
        ),
    }
}

/// Another member's evidence: checked, kept once. It carries the whole
/// commit (every other member's envelope in it), so a node that has not
/// seen the commit yet (the evidence overtook it) applies it first.
pub(super) fn tx_receive_envelope_evidence(
    tx: &mut Tx,
    id: &Identity,
    signed: &wire::Signed,
    now_ms: i64,
) -> Result<(), MeshError> {
    let body: wire::EnvelopeEvidence = codec::decode_canonical(&signed.body, "envelope evidence")?;
    if let Some(commit) = &body.commit {
        let commit_body: wire::Commit = codec::decode_canonical(&commit.body, "commit")?;
        if !tx
            .s
            .rosters
            .contains_key(&codec::hash(label::ROSTER, &commit_body.next_roster))
        {
            tx_apply_commit(tx, id, commit, now_ms)?;
        }
    }
    let proven = check_envelope_evidence(&tx.s, signed, now_ms)?;
    if tx
        .s
        .proven_bad
        .contains_key(&(proven.roster_hash, proven.accuser.clone()))
    {
        return Err(MeshError::Duplicate("envelope evidence"));
    }
    tx_put_proven(tx, proven);
    Ok(())
}
