//! Signed canonical bytes, domain tags and hashes shared by all mesh messages.
//!
//! A signed message is `Signed { body, signer, signature }` where `body` is
//! the exact prost encoding of the inner message and the signature covers
//! `tag || body`. Every body must be canonical: decoding and re-encoding it
//! gives the same bytes, so no two byte strings mean the same message.

use prost::Message;
use sha2::{Digest, Sha256};

use super::MeshError;
use crate::identity::{self, Identity};
use crate::wire::mesh::Signed;

/// Signature domain tags (one per message kind, so no signature can be replayed as another kind).
pub mod tag {
    pub const PROPOSAL: &[u8] = b"grove-mesh/v1/proposal\0";
    pub const VOTE: &[u8] = b"grove-mesh/v1/vote\0";
    pub const COMMIT: &[u8] = b"grove-mesh/v1/commit\0";
    pub const INVITE: &[u8] = b"grove-mesh/v1/invite\0";
    pub const JOIN: &[u8] = b"grove-mesh/v1/join\0";
    pub const REVOCATION: &[u8] = b"grove-mesh/v1/revocation\0";
    pub const SYNC_REQUEST: &[u8] = b"grove-mesh/v1/sync-request\0";
    pub const SYNC_RESPONSE: &[u8] = b"grove-mesh/v1/sync-response\0";
    pub const WITHDRAWAL: &[u8] = b"grove-mesh/v1/withdrawal\0";
    pub const ENVELOPE_EVIDENCE: &[u8] = b"grove-mesh/v1/envelope-evidence\0";
}

/// Hash domain labels.
pub mod label {
    pub const ROSTER: &[u8] = b"grove-mesh/v1/roster-hash\0";
    pub const COMMIT: &[u8] = b"grove-mesh/v1/commit-hash\0";
    pub const PROPOSAL: &[u8] = b"grove-mesh/v1/proposal-hash\0";
    pub const MESSAGE: &[u8] = b"grove-mesh/v1/message-hash\0";
    pub const VOTE: &[u8] = b"grove-mesh/v1/vote-hash\0";
    pub const INVITE: &[u8] = b"grove-mesh/v1/invite-hash\0";
    pub const GENESIS: &[u8] = b"grove-mesh/v1/genesis\0";
    pub const ENVELOPE: &[u8] = b"grove-mesh/v1/envelope-hash\0";
}

/// SHA-256 of `label || bytes`.
pub fn hash(label: &[u8], bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label);
    h.update(bytes);
    h.finalize().into()
}

/// Encodes a message (prost encoding is deterministic for our schemas: no maps).
pub fn encode<M: Message>(msg: &M) -> Vec<u8> {
    msg.encode_to_vec()
}

/// Decodes `bytes` and refuses any encoding other than the canonical one.
pub fn decode_canonical<M: Message + Default>(
    bytes: &[u8],
    what: &'static str,
) -> Result<M, MeshError> {
    let msg = M::decode(bytes).map_err(|e| MeshError::malformed(what, e))?;
    if msg.encode_to_vec() != bytes {
        return Err(MeshError::malformed(what, "not in canonical encoding"));
    }
    Ok(msg)
}

/// Signs the encoding of `msg` under `tag`.
pub fn sign<M: Message>(identity: &Identity, tag: &[u8], msg: &M) -> Signed {
    let body = msg.encode_to_vec();
    let signature = identity.sign(tag, &body).to_vec();
    Signed {
        body,
        signer: identity.ed25519_public().to_vec(),
        signature,
        envelopes: Vec::new(),
    }
}

/// Exactly 32 bytes, or a malformed error naming `what`.
pub fn bytes32(bytes: &[u8], what: &'static str) -> Result<[u8; 32], MeshError> {
    bytes
        .try_into()
        .map_err(|_| MeshError::malformed(what, format!("expected 32 bytes, got {}", bytes.len())))
}

/// Exactly 16 bytes, or a malformed error naming `what`.
pub fn bytes16(bytes: &[u8], what: &'static str) -> Result<[u8; 16], MeshError> {
    bytes
        .try_into()
        .map_err(|_| MeshError::malformed(what, format!("expected 16 bytes, got {}", bytes.len())))
}

/// A signed body whose shape is checked but whose signature is not yet
/// verified (so a commit checks its votes, the cheap checks, before it
/// verifies the signatures).
pub struct Unverified<M> {
    pub msg: M,
    pub signer: [u8; 32],
    pub tag: &'static [u8],
    pub body: Vec<u8>,
    pub signature: [u8; 64],
    /// What the body binds by hash and the signature leaves out: a
    /// protocol 1.3 commit's envelopes (empty for every other kind).
    pub envelopes: Vec<Vec<u8>>,
}

/// Checks the shape of a signed message and decodes its body canonically.
pub fn parse_signed<M: Message + Default>(
    signed: &Signed,
    tag: &'static [u8],
    what: &'static str,
) -> Result<Unverified<M>, MeshError> {
    let signer = bytes32(&signed.signer, what)?;
    let signature: [u8; 64] = signed
        .signature
        .as_slice()
        .try_into()
        .map_err(|_| MeshError::malformed(what, "signature is not 64 bytes"))?;
    if !signed.envelopes.is_empty() && tag != tag::COMMIT {
        return Err(MeshError::malformed(
            what,
            "envelopes beside a message that is not a commit",
        ));
    }
    let msg = decode_canonical::<M>(&signed.body, what)?;
    Ok(Unverified {
        msg,
        signer,
        tag,
        body: signed.body.clone(),
        signature,
        envelopes: signed.envelopes.clone(),
    })
}

impl<M> Unverified<M> {
    /// Verifies this one signature.
    pub fn verify(self, what: &'static str) -> Result<(M, [u8; 32]), MeshError> {
        if identity::verify(&self.signer, self.tag, &self.body, &self.signature) {
            Ok((self.msg, self.signer))
        } else {
            Err(MeshError::BadSignature(what))
        }
    }
}

/// Parses and verifies one signed message.
pub fn open_signed<M: Message + Default>(
    signed: &Signed,
    tag: &'static [u8],
    what: &'static str,
) -> Result<(M, [u8; 32]), MeshError> {
    parse_signed::<M>(signed, tag, what)?.verify(what)
}

/// One signature to verify among a message's.
pub struct SigCheck<'a> {
    pub signer: [u8; 32],
    pub tag: &'static [u8],
    pub body: &'a [u8],
    pub signature: [u8; 64],
}

impl<'a> SigCheck<'a> {
    /// The signature of a parsed message.
    pub fn of<M>(u: &'a Unverified<M>) -> SigCheck<'a> {
        SigCheck {
            signer: u.signer,
            tag: u.tag,
            body: &u.body,
            signature: u.signature,
        }
    }
}

/// Verifies every signature of a message (a commit's committer, proposal
/// and votes; a release's no votes), each by the one rule
/// ([`identity::verify`]). Any bad signature fails the message.
pub fn verify_all(checks: &[SigCheck<'_>], what: &'static str) -> Result<(), MeshError> {
    if checks
        .iter()
        .all(|c| identity::verify(&c.signer, c.tag, c.body, &c.signature))
    {
        Ok(())
    } else {
        Err(MeshError::BadSignature(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::small_order_r_signature;

    /// A commit's worth of signatures, one of which only the strict rule
    /// refuses, near the end.
    #[test]
    fn one_signature_the_rule_refuses_fails_the_whole_message() {
        let id = Identity::from_secrets([5u8; 32], [6u8; 32]);
        let bodies: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut checks: Vec<SigCheck<'_>> = bodies
            .iter()
            .map(|b| SigCheck {
                signer: id.ed25519_public(),
                tag: tag::VOTE,
                body: b,
                signature: id.sign(tag::VOTE, b),
            })
            .collect();
        assert_eq!(verify_all(&checks, "votes"), Ok(()));
        checks[97].signature = small_order_r_signature(&id, tag::VOTE, &bodies[97]);
        assert_eq!(
            verify_all(&checks, "votes"),
            Err(MeshError::BadSignature("votes"))
        );
    }
}
