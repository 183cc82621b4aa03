//! Gossip keys: sealing and opening gossip and mesh messages under the
//! current epoch's secret.

use zeroize::Zeroizing;

use super::*;

impl MeshState {
    /// The gossip key of the current epoch.
    pub fn gossip_key(&self) -> Option<(u64, Zeroizing<[u8; 32]>)> {
        let mesh_id = self.mesh.as_ref()?.mesh_id;
        let s = self.secrets.get(&self.tip)?;
        Some((
            s.epoch,
            envelope::gossip_key(&mesh_id, s.epoch, s.secret.expose()),
        ))
    }

    /// Seals a gossip payload under the current epoch key.
    pub fn seal_gossip<R: CryptoRng + ?Sized>(
        &self,
        topic: &str,
        payload: &[u8],
        rng: &mut R,
    ) -> Result<wire::Gossip, MeshError> {
        let mesh_id = self.mesh_id()?;
        let (epoch, key) = self.gossip_key().ok_or(MeshError::NotAMember)?;
        let (nonce, ciphertext) = envelope::seal_gossip(&key, &mesh_id, epoch, topic, payload, rng)
            .map_err(|e| MeshError::Refused(e.to_string()))?;
        Ok(wire::Gossip {
            mesh_id: mesh_id.to_vec(),
            epoch,
            topic: topic.to_string(),
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Seals an encoded `MeshMessage` for gossip under the key of the epoch
    /// it belongs to: a proposal or vote under its own roster's key, a commit
    /// under its parent roster's key (the members who must apply it hold
    /// only that one), anything else under the current key. Falls back to the
    /// current key when the older one is already erased.
    pub fn seal_mesh_message<R: CryptoRng + ?Sized>(
        &self,
        topic: &str,
        message: &[u8],
        rng: &mut R,
    ) -> Result<wire::Gossip, MeshError> {
        let bound = bound_roster(message).filter(|h| self.secrets.contains_key(h));
        let Some(roster_hash) = bound else {
            return self.seal_gossip(topic, message, rng);
        };
        let mesh_id = self.mesh_id()?;
        let s = &self.secrets[&roster_hash];
        let key = envelope::gossip_key(&mesh_id, s.epoch, s.secret.expose());
        let (nonce, ciphertext) =
            envelope::seal_gossip(&key, &mesh_id, s.epoch, topic, message, rng)
                .map_err(|e| MeshError::Refused(e.to_string()))?;
        Ok(wire::Gossip {
            mesh_id: mesh_id.to_vec(),
            epoch: s.epoch,
            topic: topic.to_string(),
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Opens a gossip payload with any epoch key this node still holds
    /// (the current one, or one still inside its grace window).
    pub fn open_gossip(&self, g: &wire::Gossip) -> Result<Vec<u8>, MeshError> {
        let mesh_id = self.mesh_id()?;
        if g.mesh_id != mesh_id {
            return Err(MeshError::WrongMesh("gossip"));
        }
        for s in self.secrets.values().filter(|s| s.epoch == g.epoch) {
            let key = envelope::gossip_key(&mesh_id, s.epoch, s.secret.expose());
            if let Ok(plain) =
                envelope::open_gossip(&key, &mesh_id, g.epoch, &g.topic, &g.nonce, &g.ciphertext)
            {
                return Ok(plain);
            }
        }
        Err(MeshError::Refused(format!(
            "no key of epoch {} opens this gossip",
            g.epoch
        )))
    }
}

/// The roster a signed commit was built on.
fn commit_parent(s: &wire::Signed) -> Option<Vec<u8>> {
    use prost::Message;
    let commit = wire::Commit::decode(s.body.as_slice()).ok()?;
    Some(
        wire::CommitCore::decode(commit.core.as_slice())
            .ok()?
            .prev_roster_hash,
    )
}

/// The roster an encoded `MeshMessage` is bound to, when it names one.
pub(super) fn bound_roster(message: &[u8]) -> Option<[u8; 32]> {
    use prost::Message;
    let msg = wire::MeshMessage::decode(message).ok()?;
    let roster = match msg.kind? {
        Kind::Proposal(s) => wire::Proposal::decode(s.body.as_slice()).ok()?.roster_hash,
        Kind::Vote(s) => wire::Vote::decode(s.body.as_slice()).ok()?.roster_hash,
        Kind::ReleasedVote(rv) => {
            wire::Vote::decode(rv.vote?.body.as_slice())
                .ok()?
                .roster_hash
        }
        Kind::Withdrawal(s) => {
            wire::Withdrawal::decode(s.body.as_slice())
                .ok()?
                .roster_hash
        }
        Kind::Commit(s) => commit_parent(&s)?,
        // Sent by a member that holds no key of the commit's epoch (§7b).
        Kind::EnvelopeEvidence(s) => commit_parent(
            &wire::EnvelopeEvidence::decode(s.body.as_slice())
                .ok()?
                .commit?,
        )?,
        _ => return None,
    };
    roster.try_into().ok()
}
