//! Per-member envelopes of an epoch secret, and epoch gossip keys.
//!
//! Envelope: a fresh X25519 key per commit, DH with the member's X25519 key,
//! HKDF-SHA256 (salt = ephemeral public || recipient public), then
//! ChaCha20-Poly1305 with a zero nonce (each key is used exactly once). The
//! mesh id, new epoch, roster hash and recipient peer id are the HKDF info and
//! the AEAD associated data. Gossip: XChaCha20-Poly1305 under a key derived
//! from the epoch secret, random 24-byte nonce, AD = mesh id + epoch + topic.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, XChaCha20Poly1305, XNonce};
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::montgomery::MontgomeryPoint;
use hkdf::Hkdf;
use rand::CryptoRng;
use sha2::Sha256;
use zeroize::Zeroizing;

use super::secret::EpochSecret;

const ENVELOPE_LABEL: &[u8] = b"grove-mesh/v1/envelope\0";
const GOSSIP_KEY_LABEL: &[u8] = b"grove-mesh/v1/gossip-key\0";
const GOSSIP_AD_LABEL: &[u8] = b"grove-mesh/v1/gossip\0";

/// Length of one envelope's ciphertext (32-byte secret + 16-byte tag).
pub const ENVELOPE_LEN: usize = 48;

/// The hash a protocol 1.3 commit signs in place of an envelope (§7):
/// `SHA-256("grove-mesh/v1/envelope-hash\0" || len(peer id) (u16 BE) ||
/// peer id || ciphertext)`.
pub fn envelope_hash(recipient: &[u8], ciphertext: &[u8]) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(2 + recipient.len() + ciphertext.len());
    bytes.extend_from_slice(&(recipient.len().min(u16::MAX as usize) as u16).to_be_bytes());
    bytes.extend_from_slice(recipient);
    bytes.extend_from_slice(ciphertext);
    super::codec::hash(super::codec::label::ENVELOPE, &bytes)
}

/// Why an envelope or gossip payload did not open or seal.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("does not open (wrong key, recipient, epoch, data or altered bytes)")]
    DoesNotOpen,
    #[error("key agreement with a low-order key")]
    WeakKey,
    #[error("payload too large to seal")]
    TooLarge,
}

/// What an envelope is bound to (HKDF info and AEAD associated data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeContext<'a> {
    pub mesh_id: &'a [u8; 16],
    pub new_epoch: u64,
    pub roster_hash: &'a [u8; 32],
    pub recipient: &'a [u8],
}

impl EnvelopeContext<'_> {
    /// `label || mesh id || epoch (u64 BE) || roster hash || len(peer) (u16 BE) || peer`.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(ENVELOPE_LABEL.len() + 16 + 8 + 32 + 2 + self.recipient.len());
        out.extend_from_slice(ENVELOPE_LABEL);
        out.extend_from_slice(self.mesh_id);
        out.extend_from_slice(&self.new_epoch.to_be_bytes());
        out.extend_from_slice(self.roster_hash);
        out.extend_from_slice(&(self.recipient.len().min(u16::MAX as usize) as u16).to_be_bytes());
        out.extend_from_slice(self.recipient);
        out
    }
}

/// The sender's half of one commit's envelopes: one ephemeral key for all recipients.
pub struct EnvelopeSender {
    ephemeral: x25519_dalek::StaticSecret,
    ephemeral_public: [u8; 32],
}

impl EnvelopeSender {
    pub fn new<R: CryptoRng + ?Sized>(rng: &mut R) -> EnvelopeSender {
        let ephemeral = x25519_dalek::StaticSecret::random_from_rng(rng);
        let ephemeral_public = x25519_dalek::PublicKey::from(&ephemeral).to_bytes();
        EnvelopeSender {
            ephemeral,
            ephemeral_public,
        }
    }

    pub fn ephemeral_public(&self) -> [u8; 32] {
        self.ephemeral_public
    }

    /// Wraps `secret` for one recipient.
    pub fn wrap(
        &self,
        recipient_x25519: &[u8; 32],
        ctx: &EnvelopeContext<'_>,
        secret: &[u8; 32],
    ) -> Result<Vec<u8>, SealError> {
        let shared = self
            .ephemeral
            .diffie_hellman(&x25519_dalek::PublicKey::from(*recipient_x25519));
        if !shared.was_contributory() {
            return Err(SealError::WeakKey);
        }
        self.wrap_with_shared(shared.as_bytes(), recipient_x25519, ctx, secret)
    }

    /// The X25519 shared secrets with many recipients at once. The result is
    /// byte-identical to X25519 (RFC 7748), but computed in Edwards form,
    /// which uses the SIMD backend, with one batched inversion back to
    /// Montgomery form; about 1.5 times faster per recipient than the ladder.
    pub fn shared_secrets(
        &self,
        recipients: &[[u8; 32]],
    ) -> Vec<Result<Zeroizing<[u8; 32]>, SealError>> {
        let scalar = Zeroizing::new(self.ephemeral.to_bytes());
        let mut points = Vec::with_capacity(recipients.len());
        let mut ok = Vec::with_capacity(recipients.len());
        for r in recipients {
            match edwards_form(r) {
                Some(p) => {
                    points.push(p.mul_clamped(*scalar));
                    ok.push(true);
                }
                None => {
                    // Not on the curve (a twist point): refused, as no honest key is one.
                    points.push(EdwardsPoint::default());
                    ok.push(false);
                }
            }
        }
        EdwardsPoint::to_montgomery_batch(&points)
            .into_iter()
            .zip(ok)
            .map(|(m, on_curve)| {
                let bytes = Zeroizing::new(m.to_bytes());
                if !on_curve || *bytes == [0u8; 32] {
                    Err(SealError::WeakKey)
                } else {
                    Ok(bytes)
                }
            })
            .collect()
    }

    /// Wraps `secret` for one recipient given the shared secret with it.
    pub fn wrap_with_shared(
        &self,
        shared: &[u8; 32],
        recipient_x25519: &[u8; 32],
        ctx: &EnvelopeContext<'_>,
        secret: &[u8; 32],
    ) -> Result<Vec<u8>, SealError> {
        let info = ctx.bytes();
        let key = envelope_key(shared, &self.ephemeral_public, recipient_x25519, &info);
        ChaCha20Poly1305::new(&(*key).into())
            .encrypt(
                &Nonce::default(),
                Payload {
                    msg: secret,
                    aad: &info,
                },
            )
            .map_err(|_| SealError::TooLarge)
    }
}

/// True when an X25519 public key is a point of the curve (not of its twist)
/// and not of small order: the keys envelopes can be sent to.
pub fn is_usable_x25519(key: &[u8; 32]) -> bool {
    match MontgomeryPoint(*key).to_edwards(0) {
        Some(p) => !p.is_small_order(),
        None => false,
    }
}

/// Most converted keys remembered.
const EDWARDS_CACHE_LIMIT: usize = 1 << 16;

/// The Edwards form of an X25519 public key (either sign: the u-coordinate
/// of a multiple does not depend on it), or None for a twist point.
/// Conversion costs a square root, so members' keys are memoized.
fn edwards_form(key: &[u8; 32]) -> Option<EdwardsPoint> {
    static CACHE: OnceLock<Mutex<HashMap<[u8; 32], Option<EdwardsPoint>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Ok(map) = cache.lock()
        && let Some(p) = map.get(key)
    {
        return *p;
    }
    let point = MontgomeryPoint(*key).to_edwards(0);
    if let Ok(mut map) = cache.lock() {
        if map.len() >= EDWARDS_CACHE_LIMIT {
            map.clear();
        }
        map.insert(*key, point);
    }
    point
}

/// Opens an envelope addressed to the holder of `recipient_secret`.
pub fn open_envelope(
    recipient_secret: &x25519_dalek::StaticSecret,
    ephemeral_public: &[u8; 32],
    ctx: &EnvelopeContext<'_>,
    ciphertext: &[u8],
) -> Result<EpochSecret, SealError> {
    let shared = recipient_secret.diffie_hellman(&x25519_dalek::PublicKey::from(*ephemeral_public));
    if !shared.was_contributory() {
        return Err(SealError::WeakKey);
    }
    let recipient_public = x25519_dalek::PublicKey::from(recipient_secret).to_bytes();
    open_with_shared(
        shared.as_bytes(),
        ephemeral_public,
        &recipient_public,
        ctx,
        ciphertext,
    )
}

/// Opens an envelope for `recipient_public` given the X25519 output
/// `shared` (the recipient's own, or one it proved: `mesh::agreement`).
pub fn open_with_shared(
    shared: &[u8; 32],
    ephemeral_public: &[u8; 32],
    recipient_public: &[u8; 32],
    ctx: &EnvelopeContext<'_>,
    ciphertext: &[u8],
) -> Result<EpochSecret, SealError> {
    if ciphertext.len() != ENVELOPE_LEN {
        return Err(SealError::DoesNotOpen);
    }
    if *shared == [0u8; 32] {
        return Err(SealError::WeakKey);
    }
    let info = ctx.bytes();
    let key = envelope_key(shared, ephemeral_public, recipient_public, &info);
    let plain = ChaCha20Poly1305::new(&(*key).into())
        .decrypt(
            &Nonce::default(),
            Payload {
                msg: ciphertext,
                aad: &info,
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| SealError::DoesNotOpen)?;
    EpochSecret::from_slice(&plain).ok_or(SealError::DoesNotOpen)
}

fn envelope_key(
    shared: &[u8; 32],
    ephemeral: &[u8; 32],
    recipient: &[u8; 32],
    info: &[u8],
) -> Zeroizing<[u8; 32]> {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(ephemeral);
    salt[32..].copy_from_slice(recipient);
    let mut key = Zeroizing::new([0u8; 32]);
    // 32 bytes is always a valid HKDF-SHA256 output length.
    let _ = Hkdf::<Sha256>::new(Some(&salt), shared).expand(info, &mut key[..]);
    key
}

/// The gossip key of one epoch, derived from its secret.
pub fn gossip_key(mesh_id: &[u8; 16], epoch: u64, secret: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    let mut info = Vec::with_capacity(GOSSIP_KEY_LABEL.len() + 8);
    info.extend_from_slice(GOSSIP_KEY_LABEL);
    info.extend_from_slice(&epoch.to_be_bytes());
    let mut key = Zeroizing::new([0u8; 32]);
    let _ = Hkdf::<Sha256>::new(Some(mesh_id), secret).expand(&info, &mut key[..]);
    key
}

fn gossip_ad(mesh_id: &[u8; 16], epoch: u64, topic: &str) -> Vec<u8> {
    let mut ad = Vec::with_capacity(GOSSIP_AD_LABEL.len() + 16 + 8 + 2 + topic.len());
    ad.extend_from_slice(GOSSIP_AD_LABEL);
    ad.extend_from_slice(mesh_id);
    ad.extend_from_slice(&epoch.to_be_bytes());
    ad.extend_from_slice(&(topic.len().min(u16::MAX as usize) as u16).to_be_bytes());
    ad.extend_from_slice(topic.as_bytes());
    ad
}

/// Seals a gossip payload; returns (nonce, ciphertext).
pub fn seal_gossip<R: CryptoRng + ?Sized>(
    key: &[u8; 32],
    mesh_id: &[u8; 16],
    epoch: u64,
    topic: &str,
    payload: &[u8],
    rng: &mut R,
) -> Result<([u8; 24], Vec<u8>), SealError> {
    let mut nonce = [0u8; 24];
    rng.fill_bytes(&mut nonce);
    let ad = gossip_ad(mesh_id, epoch, topic);
    let ct = XChaCha20Poly1305::new(&(*key).into())
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: payload,
                aad: &ad,
            },
        )
        .map_err(|_| SealError::TooLarge)?;
    Ok((nonce, ct))
}

/// Opens a gossip payload sealed by [`seal_gossip`].
pub fn open_gossip(
    key: &[u8; 32],
    mesh_id: &[u8; 16],
    epoch: u64,
    topic: &str,
    nonce: &[u8],
    ciphertext: &[u8],
) -> Result<Vec<u8>, SealError> {
    let nonce: [u8; 24] = nonce.try_into().map_err(|_| SealError::DoesNotOpen)?;
    let ad = gossip_ad(mesh_id, epoch, topic);
    XChaCha20Poly1305::new(&(*key).into())
        .decrypt(
            &XNonce::from(nonce),
            Payload {
                msg: ciphertext,
                aad: &ad,
            },
        )
        .map_err(|_| SealError::DoesNotOpen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trip_and_wrong_recipient() {
        let mut rng = rand::rng();
        let alice = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
        let bob = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
        let alice_pub = x25519_dalek::PublicKey::from(&alice).to_bytes();
        let sender = EnvelopeSender::new(&mut rng);
        let ctx = EnvelopeContext {
            mesh_id: &[1; 16],
            new_epoch: 3,
            roster_hash: &[2; 32],
            recipient: b"alice",
        };
        let ct = sender.wrap(&alice_pub, &ctx, &[9; 32]).unwrap();
        assert_eq!(ct.len(), ENVELOPE_LEN);
        let eph = sender.ephemeral_public();
        assert_eq!(
            open_envelope(&alice, &eph, &ctx, &ct).unwrap(),
            EpochSecret::from([9; 32])
        );
        assert_eq!(
            open_envelope(&bob, &eph, &ctx, &ct),
            Err(SealError::DoesNotOpen)
        );
    }

    #[test]
    fn batched_shared_secrets_equal_x25519() {
        let mut rng = rand::rng();
        let sender = EnvelopeSender::new(&mut rng);
        let keys: Vec<[u8; 32]> = (0..50)
            .map(|_| {
                let s = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
                x25519_dalek::PublicKey::from(&s).to_bytes()
            })
            .collect();
        let batched = sender.shared_secrets(&keys);
        for (k, b) in keys.iter().zip(batched) {
            let direct = sender
                .ephemeral
                .diffie_hellman(&x25519_dalek::PublicKey::from(*k))
                .to_bytes();
            assert_eq!(*b.unwrap(), direct);
            assert!(is_usable_x25519(k));
        }
        // A low-order point is refused.
        let low_order = [0u8; 32];
        assert!(sender.shared_secrets(&[low_order])[0].is_err());
        assert!(!is_usable_x25519(&low_order));
    }
}
