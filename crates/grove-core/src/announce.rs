//! Shard-root announcements: a member's signed statement of the shards and
//! book roots it holds and where it can be dialled. Pure: signing, checking
//! against a roster, and the keep-the-latest rule; the daemon seals, sends
//! and stores them.

use std::collections::BTreeMap;

use crate::identity::{self, Identity};
use crate::mesh::MeshError;
use crate::mesh::codec;
use crate::mesh::roster::Roster;
use crate::wire::mesh::Signed;
use crate::wire::node::Announcement;

/// Domain tag of the announcement signature.
pub const TAG: &[u8] = b"grove-node/v1/announcement\0";
/// Most shards one announcement may list.
pub const MAX_SHARDS: usize = 256;
/// Most books one announcement may list, over all shards.
pub const MAX_BOOKS: usize = 20_000;
/// Most addresses one announcement may list.
pub const MAX_ADDRESSES: usize = 16;

/// Why an announcement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnounceError {
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error("announcement for another mesh")]
    WrongMesh,
    #[error("announcement signed by a key that is not its peer's")]
    WrongSigner,
    #[error("announcement from a peer that is not a member")]
    NotMember,
    #[error("announcement sequence {got} is not above the latest ({latest})")]
    Stale { got: u64, latest: u64 },
    #[error("malformed announcement: {0}")]
    Malformed(String),
}

/// Signs an announcement with the node's key.
pub fn sign(identity: &Identity, announcement: &Announcement) -> Signed {
    codec::sign(identity, TAG, announcement)
}

/// Checks a signed announcement: canonical encoding, signature, signer is
/// the announced peer and a member of `roster`, and sane sizes.
pub fn verify(signed: &Signed, roster: &Roster) -> Result<Announcement, AnnounceError> {
    let (body, signer) = codec::open_signed::<Announcement>(signed, TAG, "announcement")?;
    if body.mesh_id != roster.mesh_id {
        return Err(AnnounceError::WrongMesh);
    }
    let derived = identity::peer_id_bytes(&signer).map_err(|_| AnnounceError::WrongSigner)?;
    if derived != body.peer_id {
        return Err(AnnounceError::WrongSigner);
    }
    if roster.member_with_key(&body.peer_id, &signer).is_none() {
        return Err(AnnounceError::NotMember);
    }
    let malformed = |why: &str| Err(AnnounceError::Malformed(why.to_string()));
    if body.shards.len() > MAX_SHARDS {
        return malformed("too many shards");
    }
    if body.shards.iter().map(|s| s.books.len()).sum::<usize>() > MAX_BOOKS {
        return malformed("too many books");
    }
    if body.addresses.len() > MAX_ADDRESSES {
        return malformed("too many addresses");
    }
    for shard in &body.shards {
        if !(shard.root.is_empty() || shard.root.len() == 32) {
            return malformed("shard root is not 32 bytes");
        }
        if shard
            .books
            .iter()
            .any(|b| b.root.len() != 32 || b.count == 0)
        {
            return malformed("book root is not 32 bytes or has no chunks");
        }
    }
    Ok(body)
}

/// The latest accepted sequence number per peer: an announcement is new
/// only when its sequence number is above the latest one seen.
#[derive(Debug, Default, Clone)]
pub struct Latest {
    seq: BTreeMap<Vec<u8>, u64>,
}

impl Latest {
    /// Records `seq` for `peer` when it is newer; refuses it otherwise.
    pub fn offer(&mut self, peer: &[u8], seq: u64) -> Result<(), AnnounceError> {
        match self.seq.get(peer) {
            Some(&latest) if seq <= latest => Err(AnnounceError::Stale { got: seq, latest }),
            _ => {
                self.seq.insert(peer.to_vec(), seq);
                Ok(())
            }
        }
    }

    /// The latest sequence number of `peer`.
    pub fn get(&self, peer: &[u8]) -> Option<u64> {
        self.seq.get(peer).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::roster::QuorumRule;
    use crate::wire::node::{BookRoot, ShardRoot};

    fn setup() -> (Identity, Identity, Roster) {
        let mut rng = rand::rng();
        let a = Identity::generate(&mut rng);
        let outsider = Identity::generate(&mut rng);
        let member = crate::mesh::roster::Member::new(a.public(), "a", 0);
        let roster = Roster::genesis(
            [7u8; 16],
            "m",
            member,
            QuorumRule {
                numerator: 1,
                denominator: 2,
            },
        );
        (a, outsider, roster)
    }

    fn announcement(id: &Identity, mesh_id: &[u8], seq: u64) -> Announcement {
        Announcement {
            mesh_id: mesh_id.to_vec(),
            peer_id: id.peer_id(),
            seq,
            time_ms: 1,
            shards: vec![ShardRoot {
                name: "default".into(),
                root: vec![1; 32],
                books: vec![BookRoot {
                    key: "k".into(),
                    title: "t".into(),
                    author: "a".into(),
                    root: vec![2; 32],
                    count: 3,
                    version: 1,
                }],
            }],
            addresses: vec!["/ip4/127.0.0.1/tcp/1".into()],
            name: "a".into(),
        }
    }

    #[test]
    fn a_members_announcement_verifies_and_others_do_not() {
        let (a, outsider, roster) = setup();
        let good = sign(&a, &announcement(&a, &roster.mesh_id, 1));
        assert_eq!(verify(&good, &roster).unwrap().seq, 1);

        let stranger = sign(&outsider, &announcement(&outsider, &roster.mesh_id, 1));
        assert_eq!(verify(&stranger, &roster), Err(AnnounceError::NotMember));

        // Claiming to be `a` with another key.
        let forged = sign(&outsider, &announcement(&a, &roster.mesh_id, 1));
        assert_eq!(verify(&forged, &roster), Err(AnnounceError::WrongSigner));

        let other_mesh = sign(&a, &announcement(&a, &[9u8; 16], 1));
        assert_eq!(verify(&other_mesh, &roster), Err(AnnounceError::WrongMesh));

        let mut tampered = good.clone();
        tampered.body[10] ^= 1;
        assert!(verify(&tampered, &roster).is_err());

        let mut bad_root = announcement(&a, &roster.mesh_id, 2);
        bad_root.shards[0].books[0].root = vec![1; 31];
        assert!(matches!(
            verify(&sign(&a, &bad_root), &roster),
            Err(AnnounceError::Malformed(_))
        ));
    }

    #[test]
    fn only_a_higher_sequence_number_is_new() {
        let mut latest = Latest::default();
        assert_eq!(latest.offer(b"p", 5), Ok(()));
        assert_eq!(
            latest.offer(b"p", 5),
            Err(AnnounceError::Stale { got: 5, latest: 5 })
        );
        assert!(latest.offer(b"p", 4).is_err());
        assert_eq!(latest.offer(b"q", 1), Ok(()));
        assert_eq!(latest.offer(b"p", 6), Ok(()));
        assert_eq!(latest.get(b"p"), Some(6));
    }
}
