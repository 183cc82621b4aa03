//! A node's Ed25519/X25519 keys, its peer id, and signing (no key files:
//! the grove crate's `identity` reads and writes those).
//!
//! A node has one Ed25519 key (its libp2p PeerId derives from it) and one
//! X25519 key for commit envelopes. The X25519 key is bound to the Ed25519 key
//! by a signature that travels in the roster.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand::CryptoRng;
use zeroize::Zeroize;

/// Domain tag of the signature binding an X25519 key to an Ed25519 key.
pub const X25519_BINDING_TAG: &[u8] = b"grove-mesh/v1/x25519-binding\0";

/// Errors from checking key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a valid Ed25519 public key")]
    BadPublicKey,
}

/// A node's secret keys. Not `Clone` and not `Debug`; both keys wipe
/// themselves when dropped (the `zeroize` features of ed25519-dalek and
/// x25519-dalek, on by default).
pub struct Identity {
    signing: SigningKey,
    x25519: x25519_dalek::StaticSecret,
    /// A replacement X25519 key proposed in a key update (§8b) and not yet
    /// in effect: envelopes wrapped to it open from the epoch whose roster
    /// names it, and until then the current key stays.
    pending_x25519: Option<x25519_dalek::StaticSecret>,
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
            pending_x25519: None,
            peer_id,
        }
    }

    /// An identity from its two 32-byte secrets; the copies it was handed
    /// are wiped (the keys themselves wipe theirs when dropped).
    pub fn from_secrets(mut ed25519: [u8; 32], mut x25519: [u8; 32]) -> Identity {
        let id = Identity::from_keys(
            SigningKey::from_bytes(&ed25519),
            x25519_dalek::StaticSecret::from(x25519),
        );
        ed25519.zeroize();
        x25519.zeroize();
        id
    }

    /// Holds `secret` as the pending replacement X25519 key (the copy it
    /// was handed is wiped); returns its public key and binding.
    pub fn set_pending_x25519(&mut self, mut secret: [u8; 32]) -> ([u8; 32], [u8; 64]) {
        let pending = x25519_dalek::StaticSecret::from(secret);
        secret.zeroize();
        let x = x25519_dalek::PublicKey::from(&pending).to_bytes();
        self.pending_x25519 = Some(pending);
        (x, self.sign(X25519_BINDING_TAG, &x))
    }

    /// The pending replacement X25519 key's public half and its binding
    /// signature: the change of this node's key update.
    pub fn pending_x25519_public(&self) -> Option<([u8; 32], [u8; 64])> {
        let pending = self.pending_x25519.as_ref()?;
        let x = x25519_dalek::PublicKey::from(pending).to_bytes();
        Some((x, self.sign(X25519_BINDING_TAG, &x)))
    }

    /// Makes the pending X25519 key the current one; the old one is wiped
    /// as it drops. False (and nothing changes) when none is pending.
    pub fn promote_pending_x25519(&mut self) -> bool {
        match self.pending_x25519.take() {
            Some(next) => {
                self.x25519 = next;
                true
            }
            None => false,
        }
    }

    /// The X25519 secret (current or pending) whose public key is `public`.
    pub fn x25519_secret_for(&self, public: &[u8; 32]) -> Option<&x25519_dalek::StaticSecret> {
        std::iter::once(&self.x25519)
            .chain(self.pending_x25519.as_ref())
            .find(|s| &x25519_dalek::PublicKey::from(*s).to_bytes() == public)
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

/// Verifies an Ed25519 signature over `tag || body`: the one rule for every
/// signature grove checks (docs/mesh-protocol.md §1, "One verification
/// rule"). It is `verify_strict`: the key and `R` must not be of small order,
/// `R` must be canonically encoded (the recomputed `R` is compared byte for
/// byte), `s` must be reduced, and the equation is the cofactorless one. So
/// a signature is either valid for every node or for none, however it
/// reaches them (alone, or among the votes of a commit).
pub fn verify(public: &[u8; 32], tag: &[u8], body: &[u8], signature: &[u8]) -> bool {
    let Some(key) = verifying_key(public) else {
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

/// Most decompressed keys remembered (members' keys recur in every commit).
const KEY_CACHE_LIMIT: usize = 1 << 16;

/// A decompressed, non-weak Ed25519 key. Decompression costs a square root
/// (about 10 µs), so keys are memoized: a commit of a 1000-member mesh
/// carries about 500 votes by members whose keys were seen before.
fn verifying_key(bytes: &[u8; 32]) -> Option<VerifyingKey> {
    static CACHE: OnceLock<Mutex<HashMap<[u8; 32], VerifyingKey>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Ok(map) = cache.lock()
        && let Some(k) = map.get(bytes)
    {
        return Some(*k);
    }
    let key = VerifyingKey::from_bytes(bytes)
        .ok()
        .filter(|k| !k.is_weak())?;
    if let Ok(mut map) = cache.lock() {
        if map.len() >= KEY_CACHE_LIMIT {
            map.clear();
        }
        map.insert(*bytes, key);
    }
    Some(key)
}

/// Checks that the X25519 key is bound to the Ed25519 key.
pub fn verify_x25519_binding(ed25519: &[u8; 32], x25519: &[u8; 32], binding: &[u8]) -> bool {
    verify(ed25519, X25519_BINDING_TAG, x25519, binding)
}

/// A signature by `id` over `tag || body` whose `R` is the identity point (of
/// small order) and `s = k·a`: the cofactorless equation `[s]B = R + [k]A`
/// holds, so `verify` (and dalek's batch verification) accepts it, and
/// `verify_strict` refuses it. Only the key's holder can make one, but it
/// is a second signature of the same message, and a rule that takes it is
/// not the rule of a node that refuses it.
#[cfg(test)]
pub(crate) fn small_order_r_signature(id: &Identity, tag: &[u8], body: &[u8]) -> [u8; 64] {
    use curve25519_dalek::Scalar;
    use sha2::{Digest, Sha512};
    let r = curve25519_dalek::EdwardsPoint::default()
        .compress()
        .to_bytes();
    let mut h = Sha512::new();
    h.update(r);
    h.update(id.ed25519_public());
    h.update(tag);
    h.update(body);
    let k = Scalar::from_bytes_mod_order_wide(&h.finalize().into());
    let s = k * id.signing_key().to_scalar();
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&r);
    sig[32..].copy_from_slice(s.as_bytes());
    sig
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::Verifier;

    fn unhex<const N: usize>(s: &str) -> [u8; N] {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    /// Vector 0 of ed25519-speccheck (Chalkias, Garillot and Nikolaenko,
    /// "Taming the many EdDSAs", SSR 2020; `cases.json` of
    /// github.com/novifinancial/ed25519-speccheck): `A` and `R` of small
    /// order, `S = 0`. Cofactored and cofactorless verification both pass
    /// it; a signature that verifies for every message under a key nobody
    /// holds. The one rule refuses it.
    #[test]
    fn the_one_rule_refuses_speccheck_vector_0_that_plain_verify_accepts() {
        let msg: [u8; 32] =
            unhex("8c93255d71dcab10e8f379c26200f3c7bd5f09d9bc3068d3ef4edeb4853022b6");
        let key: [u8; 32] =
            unhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa");
        let sig: [u8; 64] = unhex(concat!(
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
            "0000000000000000000000000000000000000000000000000000000000000000"
        ));
        let plain = VerifyingKey::from_bytes(&key).unwrap();
        assert!(plain.verify(&msg, &Signature::from_bytes(&sig)).is_ok());
        assert!(!verify(&key, b"", &msg, &sig));
    }

    #[test]
    fn the_one_rule_refuses_a_small_order_r_that_plain_verify_accepts() {
        let id = Identity::from_secrets([3u8; 32], [4u8; 32]);
        let (tag, body) = (b"grove-mesh/v1/vote\0".as_slice(), b"a vote".as_slice());
        let forged = small_order_r_signature(&id, tag, body);
        let msg = [tag, body].concat();
        let plain = VerifyingKey::from_bytes(&id.ed25519_public()).unwrap();
        assert!(plain.verify(&msg, &Signature::from_bytes(&forged)).is_ok());
        assert!(!verify(&id.ed25519_public(), tag, body, &forged));
        assert!(verify(&id.ed25519_public(), tag, body, &id.sign(tag, body)));
    }

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
