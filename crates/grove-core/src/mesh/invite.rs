//! Signed invites and their copy-and-paste text form.
//!
//! Text form: `grove-invite1-` followed by lowercase RFC 4648 base32 (no
//! padding) of `signed invite bytes || checksum`, where the checksum is the
//! first 4 bytes of SHA-256("grove-invite-checksum\0" || bytes). Whitespace
//! and case are ignored when reading, so line-wrapped pastes still work.

use prost::Message;
use rand::CryptoRng;

use super::MeshError;
use super::codec::{self, bytes16, tag};
use crate::identity::{self, Identity};
use crate::wire::mesh as wire;

/// Prefix of an invite's text form.
pub const PREFIX: &str = "grove-invite1-";
const CHECKSUM_LABEL: &[u8] = b"grove-invite-checksum\0";
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Largest signed invite accepted (bootstrap addresses and note included).
pub const MAX_INVITE_BYTES: usize = 4096;

/// A verified invite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub mesh_id: [u8; 16],
    pub mesh_name: String,
    pub inviter: Vec<u8>,
    pub inviter_key: [u8; 32],
    pub bootstrap: Vec<String>,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub invite_id: [u8; 16],
    pub note: String,
}

/// What to put in a new invite.
pub struct InviteParams<'a> {
    pub mesh_id: [u8; 16],
    pub mesh_name: &'a str,
    pub bootstrap: Vec<String>,
    pub note: String,
    pub now_ms: i64,
    pub ttl_ms: i64,
}

/// Creates and signs an invite.
pub fn create<R: CryptoRng + ?Sized>(
    identity: &Identity,
    params: InviteParams<'_>,
    rng: &mut R,
) -> (Invite, wire::Signed) {
    let mut invite_id = [0u8; 16];
    rng.fill_bytes(&mut invite_id);
    let body = wire::Invite {
        mesh_id: params.mesh_id.to_vec(),
        mesh_name: params.mesh_name.to_string(),
        inviter: identity.peer_id(),
        bootstrap: params.bootstrap.clone(),
        created_ms: params.now_ms,
        expires_ms: params.now_ms.saturating_add(params.ttl_ms),
        invite_id: invite_id.to_vec(),
        note: params.note.clone(),
    };
    let signed = codec::sign(identity, tag::INVITE, &body);
    let invite = Invite {
        mesh_id: params.mesh_id,
        mesh_name: params.mesh_name.to_string(),
        inviter: identity.peer_id(),
        inviter_key: identity.ed25519_public(),
        bootstrap: params.bootstrap,
        created_ms: body.created_ms,
        expires_ms: body.expires_ms,
        invite_id,
        note: params.note,
    };
    (invite, signed)
}

/// Refuses a signed invite larger than [`MAX_INVITE_BYTES`].
pub fn check_size(signed: &wire::Signed) -> Result<(), MeshError> {
    let len = signed.encoded_len();
    if len > MAX_INVITE_BYTES {
        return Err(MeshError::InviteText(format!(
            "the invite is {len} bytes, over the {MAX_INVITE_BYTES} an invite may hold \
             (its addresses and note)"
        )));
    }
    Ok(())
}

/// Verifies an invite's signature and that the inviter's peer id matches its key.
pub fn verify(signed: &wire::Signed) -> Result<Invite, MeshError> {
    check_size(signed)?;
    let parsed = codec::parse_signed::<wire::Invite>(signed, tag::INVITE, "invite")?;
    let (body, key) = parsed
        .verify("invite")
        .map_err(|_| MeshError::InviteForged)?;
    let derived = identity::peer_id_bytes(&key).map_err(|_| MeshError::InviteForged)?;
    if derived != body.inviter {
        return Err(MeshError::InviteForged);
    }
    Ok(Invite {
        mesh_id: bytes16(&body.mesh_id, "invite mesh id")?,
        mesh_name: body.mesh_name,
        inviter: body.inviter,
        inviter_key: key,
        bootstrap: body.bootstrap,
        created_ms: body.created_ms,
        expires_ms: body.expires_ms,
        invite_id: bytes16(&body.invite_id, "invite id")?,
        note: body.note,
    })
}

/// Refuses an expired invite (`now_ms` is injected so tests control the clock).
pub fn check_not_expired(invite: &Invite, now_ms: i64) -> Result<(), MeshError> {
    if now_ms >= invite.expires_ms {
        Err(MeshError::InviteExpired)
    } else {
        Ok(())
    }
}

fn checksum(bytes: &[u8]) -> [u8; 4] {
    let h = codec::hash(CHECKSUM_LABEL, bytes);
    [h[0], h[1], h[2], h[3]]
}

/// The text form of a signed invite.
pub fn to_text(signed: &wire::Signed) -> String {
    let mut bytes = signed.encode_to_vec();
    let sum = checksum(&bytes);
    bytes.extend_from_slice(&sum);
    format!("{PREFIX}{}", base32_encode(&bytes))
}

/// Reads the text form back (checks prefix, alphabet and checksum, not the signature).
pub fn from_text(text: &str) -> Result<wire::Signed, MeshError> {
    let cleaned: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    let rest = cleaned
        .strip_prefix(PREFIX)
        .ok_or_else(|| MeshError::InviteText(format!("it must start with `{PREFIX}`")))?;
    if let Some(bad) = rest
        .chars()
        .find(|c| !c.is_ascii() || !ALPHABET.contains(&(*c as u8)))
    {
        return Err(MeshError::InviteText(format!(
            "it contains characters that are not base32 (a-z, 2-7), such as {}",
            super::names::Escaped(&format!("`{bad}`"))
        )));
    }
    // The longest text an invite has: anything longer was not printed by
    // `grove mesh invite` (checked before decoding, so a huge paste costs nothing).
    let max_chars = (MAX_INVITE_BYTES + 4).div_ceil(5) * 8;
    if rest.len() > max_chars {
        return Err(MeshError::InviteText(format!(
            "it is {} characters long, more than an invite can be ({max_chars}); \
             paste one invite only",
            rest.len()
        )));
    }
    // Base32 of whole bytes never leaves a partial character: a text that
    // does was cut.
    let bytes = base32_decode(rest).ok_or_else(cut_short)?;
    if bytes.len() < 5 {
        return Err(cut_short());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 4);
    if checksum(body) != sum {
        // A cut text ends inside its signed data (the checksum then is
        // part of a field); a text whose data is whole has a bad checksum.
        return Err(if ends_on_field(body) {
            MeshError::InviteChecksum
        } else {
            cut_short()
        });
    }
    codec::decode_canonical::<wire::Signed>(body, "invite")
}

fn cut_short() -> MeshError {
    MeshError::InviteText(
        "it is cut short (the text ends in the middle of the invite); copy all of it".into(),
    )
}

/// True when `bytes` is a sequence of whole protobuf fields, each ending
/// inside `bytes` (what a signed invite is, before its checksum).
fn ends_on_field(mut bytes: &[u8]) -> bool {
    fn varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    while !bytes.is_empty() {
        let Some(key) = varint(&mut bytes) else {
            return false;
        };
        let skip = match key & 7 {
            0 => varint(&mut bytes).map(|_| 0),
            1 => Some(8),
            2 => varint(&mut bytes).and_then(|n| usize::try_from(n).ok()),
            5 => Some(4),
            _ => None,
        };
        match skip {
            Some(n) if n <= bytes.len() => bytes = &bytes[n..],
            _ => return false,
        }
    }
    true
}

/// Lowercase RFC 4648 base32 without padding.
pub fn base32_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let mut buffer: u32 = 0;
    let mut bits = 0u32;
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
        buffer &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// Decodes [`base32_encode`] output; `None` on a character outside the alphabet
/// or non-zero trailing bits.
pub fn base32_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let mut buffer: u32 = 0;
    let mut bits = 0u32;
    for c in text.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        buffer = (buffer << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero padding shorter than one character.
    if bits >= 5 || buffer != 0 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_round_trips() {
        for len in 0..40 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(base32_decode(&base32_encode(&data)).unwrap(), data);
        }
        assert_eq!(base32_encode(b"foobar"), "mzxw6ytboi");
    }

    fn sample_text() -> String {
        let id = Identity::generate(&mut rand::rng());
        let (_, signed) = create(
            &id,
            InviteParams {
                mesh_id: [7; 16],
                mesh_name: "m",
                bootstrap: vec!["/ip4/127.0.0.1/tcp/4001".into()],
                note: "for carol".into(),
                now_ms: 0,
                ttl_ms: 60_000,
            },
            &mut rand::rng(),
        );
        to_text(&signed)
    }

    #[test]
    fn a_cut_invite_is_reported_as_cut_and_a_corrupt_one_as_corrupt() {
        let text = sample_text();
        assert!(from_text(&text).is_ok());
        for cut in 1..=12 {
            let err = from_text(&text[..text.len() - cut]).unwrap_err();
            assert!(err.to_string().contains("cut short"), "cut {cut}: {err}");
        }
        // One character changed in the middle of the data: a bad checksum.
        let mut altered: Vec<char> = text.chars().collect();
        let at = PREFIX.len() + 10;
        altered[at] = if altered[at] == 'a' { 'b' } else { 'a' };
        let altered: String = altered.into_iter().collect();
        assert!(matches!(
            from_text(&altered),
            Err(MeshError::InviteChecksum) | Err(MeshError::Malformed { .. })
        ));
        let huge = format!("{text}{}", "a".repeat(100_000));
        let err = from_text(&huge).unwrap_err().to_string();
        assert!(err.contains("more than an invite can be"), "{err}");
        let err = from_text(&format!("{text}!")).unwrap_err().to_string();
        assert!(err.contains("not base32"), "{err}");
    }
}
