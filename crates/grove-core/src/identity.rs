//! A node's Ed25519/X25519 keys, its peer id, and signing (no key files:
//! the grove crate's `identity` reads and writes those).
//!
//! A node has one Ed25519 key (its libp2p PeerId derives from it) and one
//! X25519 key for commit envelopes. The X25519 key is bound to the Ed25519 key
//! by a signature that travels in the roster.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand::CryptoRng;

/// Domain tag of the signature binding an X25519 key to an Ed25519 key.
pub const X25519_BINDING_TAG: &[u8] = b"grove-mesh/v1/x25519-binding\0";

/// Errors from checking key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a valid Ed25519 public key")]
    BadPublicKey,
}

/// A node's secret keys.
pub struct Identity {
    signing: SigningKey,
    x25519: x25519_dalek::StaticSecret,
    /// Derived once: deriving decompresses the public key (a square root).
    peer_id: Vec<u8>,
}

/// The public half of an identity, as it appears in a roster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicIdentity {
    /// libp2p PeerId bytes (identity multihash of the protobuf public key).
    pub peer_id: Vec<u8>,
    pub ed25519: [u8; 32],
    pub x25519: [u8; 32],
    /// Ed25519 signature over `X25519_BINDING_TAG || x25519`.
    pub x25519_binding: [u8; 64],
}

impl Identity {
    /// A fresh identity from `rng`.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Identity {
        let signing = SigningKey::generate(rng);
        let x25519 = x25519_dalek::StaticSecret::random_from_rng(rng);
        Identity::from_keys(signing, x25519)
    }

    fn from_keys(signing: SigningKey, x25519: x25519_dalek::StaticSecret) -> Identity {
        let peer_id = peer_id_bytes(&signing.verifying_key().to_bytes()).unwrap_or_default();
        Identity {
            signing,
            x25519,
            peer_id,
        }
    }

    /// An identity from its two 32-byte secrets.
    pub fn from_secrets(ed25519: [u8; 32], x25519: [u8; 32]) -> Identity {
        Identity::from_keys(
            SigningKey::from_bytes(&ed25519),
            x25519_dalek::StaticSecret::from(x25519),
        )
    }

    /// The Ed25519 signing key.
    pub fn signing_key(&self) -> &SigningKey {
        &self.signing
    }

    /// The X25519 secret used to open envelopes.
    pub fn x25519_secret(&self) -> &x25519_dalek::StaticSecret {
        &self.x25519
    }

    pub fn ed25519_public(&self) -> [u8; 32] {
        self.signing.verifying_key().to_bytes()
    }

    pub fn x25519_public(&self) -> [u8; 32] {
        x25519_dalek::PublicKey::from(&self.x25519).to_bytes()
    }

    /// libp2p PeerId bytes of this node.
    pub fn peer_id(&self) -> Vec<u8> {
        self.peer_id.clone()
    }

    /// Signs `tag || body`.
    pub fn sign(&self, tag: &[u8], body: &[u8]) -> [u8; 64] {
        let mut msg = Vec::with_capacity(tag.len() + body.len());
        msg.extend_from_slice(tag);
        msg.extend_from_slice(body);
        self.signing.sign(&msg).to_bytes()
    }

    /// The public identity with its X25519 binding signature.
    pub fn public(&self) -> PublicIdentity {
        let x = self.x25519_public();
        PublicIdentity {
            peer_id: self.peer_id(),
            ed25519: self.ed25519_public(),
            x25519: x,
            x25519_binding: self.sign(X25519_BINDING_TAG, &x),
        }
    }
}

/// libp2p PeerId bytes for an Ed25519 public key: the identity multihash of
/// the protobuf-encoded public key, per the libp2p peer-id spec (keys of
/// 42 bytes or fewer are not hashed). Written out so the core needs no
/// libp2p; the grove crate's tests compare it with libp2p's.
pub fn peer_id_bytes(ed25519: &[u8; 32]) -> Result<Vec<u8>, KeyError> {
    VerifyingKey::from_bytes(ed25519).map_err(|_| KeyError::BadPublicKey)?;
    // PublicKey { Type = 1 (Ed25519): 0x08 0x01, Data = 32 bytes: 0x12 0x20 .. }
    let mut protobuf = vec![0x08, 0x01, 0x12, 0x20];
    protobuf.extend_from_slice(ed25519);
    // Multihash: code 0x00 (identity), length, digest.
    let mut peer_id = vec![0x00, protobuf.len() as u8];
    peer_id.extend_from_slice(&protobuf);
    Ok(peer_id)
}

/// Base58 text form of peer id bytes (as libp2p prints it); hex for bytes
/// that are not a peer id.
pub fn peer_id_text(peer_id: &[u8]) -> String {
    if is_peer_id(peer_id) {
        bs58::encode(peer_id).into_string()
    } else {
        hex::encode(peer_id)
    }
}

/// Whether `bytes` is a multihash libp2p accepts as a peer id: an identity
/// multihash of at most 42 bytes, or a SHA-256 one (code 0x12, 32 bytes).
fn is_peer_id(bytes: &[u8]) -> bool {
    match bytes {
        [0x00, len, rest @ ..] => usize::from(*len) == rest.len() && rest.len() <= 42,
        [0x12, 32, rest @ ..] => rest.len() == 32,
        _ => false,
    }
}

/// Verifies an Ed25519 signature over `tag || body` (strict: no malleable encodings).
pub fn verify(public: &[u8; 32], tag: &[u8], body: &[u8], signature: &[u8]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(signature) else {
        return false;
    };
    let mut msg = Vec::with_capacity(tag.len() + body.len());
    msg.extend_from_slice(tag);
    msg.extend_from_slice(body);
    key.verify_strict(&msg, &sig).is_ok()
}

/// Checks that the X25519 key is bound to the Ed25519 key.
pub fn verify_x25519_binding(ed25519: &[u8; 32], x25519: &[u8; 32], binding: &[u8]) -> bool {
    verify(ed25519, X25519_BINDING_TAG, x25519, binding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_verifies_and_peer_ids_print_in_base58() {
        let id = Identity::from_secrets([7u8; 32], [9u8; 32]);
        assert!(peer_id_text(&id.peer_id()).starts_with("12D3KooW"));
        assert_eq!(peer_id_text(&[1, 2]), "0102");
        let p = id.public();
        assert!(verify_x25519_binding(
            &p.ed25519,
            &p.x25519,
            &p.x25519_binding
        ));
        assert!(!verify_x25519_binding(
            &p.ed25519,
            &[1u8; 32],
            &p.x25519_binding
        ));
    }
}
