//! Epoch secrets: zeroized when dropped, `<redacted>` in `Debug`, never `Clone`.
//!
//! The one type an epoch secret lives in, from the envelope it was opened
//! from (or the rng that made it) to the store row it is persisted in. The
//! state shares each one through an `Arc` (`SecretEntry::secret`), so a
//! transaction's working copy of the state copies a pointer, not the bytes,
//! and the bytes are wiped when the last holder lets go (erasure drops the
//! state's; the store's transaction drops the effect's).

use std::fmt;

use rand::CryptoRng;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// A 32-byte epoch secret.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct EpochSecret([u8; 32]);

impl EpochSecret {
    /// A fresh secret from `rng`, made in place.
    pub fn random<R: CryptoRng + ?Sized>(rng: &mut R) -> EpochSecret {
        let mut s = EpochSecret([0u8; 32]);
        rng.fill_bytes(&mut s.0);
        s
    }

    /// The secret of exactly 32 bytes (an opened envelope, a store row), or
    /// None.
    pub fn from_slice(bytes: &[u8]) -> Option<EpochSecret> {
        let mut s = EpochSecret([0u8; 32]);
        if bytes.len() != s.0.len() {
            return None;
        }
        s.0.copy_from_slice(bytes);
        Some(s)
    }

    /// The secret bytes, borrowed (to wrap, derive a key from, or persist).
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }
}

impl From<[u8; 32]> for EpochSecret {
    /// Takes the bytes and wipes the caller's copy.
    fn from(mut bytes: [u8; 32]) -> EpochSecret {
        let s = EpochSecret(bytes);
        bytes.zeroize();
        s
    }
}

impl fmt::Debug for EpochSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EpochSecret(<redacted>)")
    }
}

/// In constant time (no early exit on the first differing byte).
impl PartialEq for EpochSecret {
    fn eq(&self, other: &EpochSecret) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl Eq for EpochSecret {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_byte_and_equality_compares_all() {
        let s = EpochSecret::from([0xabu8; 32]);
        let shown = format!("{s:?}");
        assert_eq!(shown, "EpochSecret(<redacted>)");
        assert!(!shown.contains("ab") && !shown.contains("171"));
        let mut other = [0xabu8; 32];
        other[31] = 0;
        assert_ne!(s, EpochSecret::from(other));
        assert_eq!(s, EpochSecret::from_slice(&[0xab; 32]).unwrap());
        assert!(EpochSecret::from_slice(&[0xab; 31]).is_none());
    }
}
