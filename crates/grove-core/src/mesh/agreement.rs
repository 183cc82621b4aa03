//! A recipient's X25519 agreement output for one envelope, with a proof
//! that it is correct (docs/mesh-protocol.md §7b): what lets any member
//! tell an envelope the committer sealed wrongly from a key the recipient
//! lost.
//!
//! The recipient holds `x` with `X = x·G` (its roster key) and was sent the
//! committer's ephemeral `E`. It publishes `Z = x·E`, whose Montgomery
//! u-coordinate is the X25519 output `X25519(x, E)`, and a discrete-log
//! equality proof that `log_G X = log_E Z`: the `dleq` crate's audited
//! single-curve proof, over the prime-order subgroup of Edwards25519, with a
//! SHA-512 transcript bound to the envelope's context. A reader maps `X`
//! and `E` from their u-coordinates to Edwards form (sign 0, which names
//! one of `±P`; the prover proves for the scalar that gives that point),
//! checks the proof, derives the envelope key from `Z`'s u-coordinate and
//! finds the envelope does not open with it. Nothing else is revealed: `Z`
//! opens only this envelope, which opens to nothing.

use dalek4::edwards::{EdwardsPoint, SubgroupPoint};
use dalek4::montgomery::MontgomeryPoint;
use dalek4::scalar::{Scalar, clamp_integer};
use dleq::DLEqProof;
use flexible_transcript::{DigestTranscript, Transcript};
use group::cofactor::CofactorGroup;
use group::{Group, GroupEncoding};
use rand::CryptoRng;
use zeroize::Zeroizing;

use super::envelope::EnvelopeContext;

/// The transcript's name: a proof made for anything else does not verify here.
const TRANSCRIPT: &[u8] = b"grove-mesh/v1/agreement";

/// The length of an encoded proof (its challenge and response scalars).
pub const PROOF_LEN: usize = 64;

/// Why an agreement could not be proven or did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgreementError {
    #[error("{0} is not a point of the prime-order subgroup")]
    NotInSubgroup(&'static str),
    #[error("the secret key is not the key the roster names")]
    WrongKey,
    #[error("the proof is malformed or does not verify")]
    BadProof,
}

/// `Z`, the agreement output as an Edwards point, and the proof that it
/// shares its discrete log with the recipient's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// `Z = x·E`, compressed Edwards.
    pub point: [u8; 32],
    pub proof: [u8; PROOF_LEN],
}

/// The point of the prime-order subgroup whose Montgomery u-coordinate is
/// `u`, taken with sign 0.
fn subgroup_from_u(u: &[u8; 32], what: &'static str) -> Result<SubgroupPoint, AgreementError> {
    MontgomeryPoint(*u)
        .to_edwards(0)
        .and_then(|p| Option::<SubgroupPoint>::from(p.into_subgroup()))
        .filter(|p| !bool::from(p.is_identity()))
        .ok_or(AgreementError::NotInSubgroup(what))
}

fn subgroup_from_edwards(
    bytes: &[u8; 32],
    what: &'static str,
) -> Result<SubgroupPoint, AgreementError> {
    Option::<SubgroupPoint>::from(SubgroupPoint::from_bytes(bytes))
        .filter(|p| !bool::from(p.is_identity()))
        .ok_or(AgreementError::NotInSubgroup(what))
}

/// True when `u` (an X25519 public key) is a point of the prime-order
/// subgroup: every honest key is, and only such keys can be proven for.
pub fn in_subgroup(u: &[u8; 32]) -> bool {
    subgroup_from_u(u, "key").is_ok()
}

fn transcript(ctx: &EnvelopeContext<'_>) -> DigestTranscript<sha2_10::Sha512> {
    let mut t = DigestTranscript::<sha2_10::Sha512>::new(TRANSCRIPT);
    t.append_message(b"envelope", ctx.bytes());
    t
}

/// The recipient's agreement with `ephemeral` under `secret`, proven, for
/// the envelope of `ctx`.
pub fn prove<R: CryptoRng + ?Sized>(
    secret: &x25519_dalek::StaticSecret,
    ephemeral: &[u8; 32],
    ctx: &EnvelopeContext<'_>,
    rng: &mut R,
) -> Result<Agreement, AgreementError> {
    let public = x25519_dalek::PublicKey::from(secret).to_bytes();
    let key = subgroup_from_u(&public, "the recipient's key")?;
    let e = subgroup_from_u(ephemeral, "the ephemeral key")?;
    let clamped = Zeroizing::new(clamp_integer(secret.to_bytes()));
    let x = Zeroizing::new(Scalar::from_bytes_mod_order(*clamped));
    let g = SubgroupPoint::generator();
    // Sign 0 names `x·G` or `-x·G`: prove for the scalar that gives it.
    let s = if g * *x == key {
        x
    } else if g * -*x == key {
        Zeroizing::new(-*x)
    } else {
        return Err(AgreementError::WrongKey);
    };
    let z = e * *s;
    let proof = DLEqProof::prove(&mut Rng06(rng), &mut transcript(ctx), &[g, e], &s);
    let proof: [u8; PROOF_LEN] = proof
        .serialize()
        .try_into()
        .map_err(|_| AgreementError::BadProof)?;
    Ok(Agreement {
        point: z.to_bytes(),
        proof,
    })
}

/// Checks that `agreement` is the X25519 output of the key `recipient`
/// with `ephemeral`, for the envelope of `ctx`; returns that output.
pub fn verify(
    recipient: &[u8; 32],
    ephemeral: &[u8; 32],
    ctx: &EnvelopeContext<'_>,
    agreement: &Agreement,
) -> Result<[u8; 32], AgreementError> {
    let key = subgroup_from_u(recipient, "the recipient's key")?;
    let e = subgroup_from_u(ephemeral, "the ephemeral key")?;
    let z = subgroup_from_edwards(&agreement.point, "the agreement")?;
    let proof = DLEqProof::<SubgroupPoint>::read(&mut &agreement.proof[..])
        .map_err(|_| AgreementError::BadProof)?;
    proof
        .verify(
            &mut transcript(ctx),
            &[SubgroupPoint::generator(), e],
            &[key, z],
        )
        .map_err(|_| AgreementError::BadProof)?;
    // `Z`'s u-coordinate: the X25519 output it stands for.
    Ok(EdwardsPoint::from(z).to_montgomery().to_bytes())
}

/// Our `rand` generator as the `rand_core` 0.6 generator `dleq` takes.
struct Rng06<'a, R: ?Sized>(&'a mut R);

impl<R: CryptoRng + ?Sized> rand_core_06::RngCore for Rng06<'_, R> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core_06::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

impl<R: CryptoRng + ?Sized> rand_core_06::CryptoRng for Rng06<'_, R> {}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn ctx<'a>(mesh: &'a [u8; 16], roster: &'a [u8; 32], peer: &'a [u8]) -> EnvelopeContext<'a> {
        EnvelopeContext {
            mesh_id: mesh,
            new_epoch: 7,
            roster_hash: roster,
            recipient: peer,
        }
    }

    #[test]
    fn a_proven_agreement_is_the_x25519_output_and_verifies_for_its_envelope_only() {
        let mut rng = StdRng::seed_from_u64(1);
        let (mesh, roster, peer) = ([1u8; 16], [2u8; 32], b"peer".to_vec());
        let ctx = ctx(&mesh, &roster, &peer);
        // Many keys: about half of them take the negated scalar.
        for _ in 0..16 {
            let secret = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
            let public = x25519_dalek::PublicKey::from(&secret).to_bytes();
            let eph = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
            let eph_public = x25519_dalek::PublicKey::from(&eph).to_bytes();
            let expected = secret
                .diffie_hellman(&x25519_dalek::PublicKey::from(eph_public))
                .to_bytes();
            let a = prove(&secret, &eph_public, &ctx, &mut rng).unwrap();
            assert_eq!(verify(&public, &eph_public, &ctx, &a), Ok(expected));
            // Another envelope's context, another key, another ephemeral.
            let other_roster = [3u8; 32];
            let other = EnvelopeContext {
                roster_hash: &other_roster,
                ..ctx.clone()
            };
            assert_eq!(
                verify(&public, &eph_public, &other, &a),
                Err(AgreementError::BadProof)
            );
            let stranger = x25519_dalek::PublicKey::from(
                &x25519_dalek::StaticSecret::random_from_rng(&mut rng),
            )
            .to_bytes();
            assert_eq!(
                verify(&stranger, &eph_public, &ctx, &a),
                Err(AgreementError::BadProof)
            );
            assert_eq!(
                verify(&public, &stranger, &ctx, &a),
                Err(AgreementError::BadProof)
            );
        }
    }

    #[test]
    fn a_claimed_output_that_is_not_the_agreement_does_not_verify() {
        let mut rng = StdRng::seed_from_u64(2);
        let (mesh, roster, peer) = ([1u8; 16], [2u8; 32], b"peer".to_vec());
        let ctx = ctx(&mesh, &roster, &peer);
        let secret = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
        let public = x25519_dalek::PublicKey::from(&secret).to_bytes();
        let eph =
            x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::random_from_rng(&mut rng))
                .to_bytes();
        let honest = prove(&secret, &eph, &ctx, &mut rng).unwrap();
        // A different point with the same proof, the proof altered, a
        // point off the subgroup, garbage.
        let mut other_point = honest.clone();
        other_point.point = (SubgroupPoint::generator() * Scalar::from(5u8)).to_bytes();
        assert_eq!(
            verify(&public, &eph, &ctx, &other_point),
            Err(AgreementError::BadProof)
        );
        for i in [0, 31, 32, 63] {
            let mut altered = honest.clone();
            altered.proof[i] ^= 1;
            assert!(verify(&public, &eph, &ctx, &altered).is_err(), "byte {i}");
        }
        let mut garbage = honest.clone();
        garbage.point = [0xffu8; 32];
        assert!(matches!(
            verify(&public, &eph, &ctx, &garbage),
            Err(AgreementError::NotInSubgroup(_))
        ));
        // A low-order ephemeral is no ephemeral an honest committer makes.
        let mut low = [0u8; 32];
        low[0] = 1;
        assert!(!in_subgroup(&low));
        assert!(matches!(
            prove(&secret, &low, &ctx, &mut rng),
            Err(AgreementError::NotInSubgroup(_))
        ));
    }
}
