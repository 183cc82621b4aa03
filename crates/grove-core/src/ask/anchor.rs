//! What ties a mesh ask's passages to a mesh: the membership chain from the
//! mesh's genesis, and the signed announcements in which the members that
//! hold the cited books vouched for their roots. With it, `grove ask verify
//! --expect-mesh ID` proves offline that every passage is of a book a
//! member of mesh `ID` announced, as `moot verify` does for a moot's turns.

use prost::Message;
use serde::{Deserialize, Serialize};

use super::AskRecord;
use crate::announce;
use crate::identity::peer_id_text;
use crate::mesh::roster::Roster;
use crate::mesh::state::{Anchor, VerifiedChain, verify_chain};
use crate::wire::mesh::Signed;

/// A mesh ask's anchor, as the record carries it (all hex).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshAnchor {
    pub mesh_id: String,
    /// The genesis roster, encoded; empty when the asking node has no
    /// chain to give (it joined before welcomes carried one).
    pub genesis: String,
    /// The signed commits after the genesis, in order.
    pub chain: Vec<String>,
    /// The signed announcements of the members whose books are cited.
    pub announcements: Vec<String>,
}

impl MeshAnchor {
    /// The anchor of `mesh_id` with its chain and announcements.
    pub fn new(
        mesh_id: &[u8],
        genesis: &[u8],
        chain: &[Signed],
        announcements: &[Signed],
    ) -> MeshAnchor {
        MeshAnchor {
            mesh_id: hex::encode(mesh_id),
            genesis: hex::encode(genesis),
            chain: chain
                .iter()
                .map(|c| hex::encode(c.encode_to_vec()))
                .collect(),
            announcements: announcements
                .iter()
                .map(|a| hex::encode(a.encode_to_vec()))
                .collect(),
        }
    }
}

/// What an anchor proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchored {
    pub mesh_id: String,
    /// Epochs the chain replayed through (the genesis is epoch 0).
    pub epochs: usize,
}

/// Checks `r`'s mesh anchor offline: the chain replays from a genesis that
/// hashes to the mesh id, every announcement is signed by a member of a
/// roster along it, and every passage's book root and chunk count is one
/// its holder announced. With `expect`, the mesh id must be that one.
pub fn check_anchor(r: &AskRecord, expect: Option<&str>) -> Result<Anchored, Vec<String>> {
    let Some(anchor) = &r.mesh else {
        return Err(vec![
            "the record carries no mesh anchor (a local ask): nothing ties its books to a mesh"
                .into(),
        ]);
    };
    let chain = replay(anchor).map_err(|e| vec![e])?;
    let mut problems = Vec::new();
    if let Some(expected) = expect
        && !anchor.mesh_id.eq_ignore_ascii_case(expected)
    {
        problems.push(format!(
            "the record is of mesh {}, not the expected {expected}",
            anchor.mesh_id
        ));
    }
    let rosters: Vec<&Roster> = (0..chain.epochs() as u64)
        .rev()
        .filter_map(|e| chain.at(e))
        .collect();
    let mut vouched = Vec::new();
    for (i, text) in anchor.announcements.iter().enumerate() {
        let signed = hex::decode(text)
            .ok()
            .and_then(|b| Signed::decode(b.as_slice()).ok());
        let Some(signed) = signed else {
            problems.push(format!("announcement {}: does not decode", i + 1));
            continue;
        };
        match rosters
            .iter()
            .find_map(|r| announce::verify(&signed, r).ok())
        {
            Some(a) => vouched.push(a),
            None => problems.push(format!(
                "announcement {}: no roster of the chain vouches for its signer",
                i + 1
            )),
        }
    }
    for e in &r.evidence {
        let at = format!("E{}", e.pointer);
        let (Some(holder), Some(proof)) = (&e.holder, &e.proof) else {
            problems.push(format!("{at}: no holder or no proof to anchor"));
            continue;
        };
        let announced = vouched.iter().any(|a| {
            peer_id_text(&a.peer_id) == *holder
                && a.shards.iter().flat_map(|s| s.books.iter()).any(|b| {
                    b.key == e.book
                        && b.count == proof.count
                        && hex::encode(&b.root).eq_ignore_ascii_case(&proof.root)
                })
        });
        if !announced {
            problems.push(format!(
                "{at}: its holder {holder} announced no root {} of {} in the record",
                short(&proof.root),
                e.book
            ));
        }
    }
    if problems.is_empty() {
        Ok(Anchored {
            mesh_id: anchor.mesh_id.clone(),
            epochs: chain.epochs(),
        })
    } else {
        Err(problems)
    }
}

/// The anchor's chain, replayed from a self-certifying genesis of its mesh.
fn replay(anchor: &MeshAnchor) -> Result<VerifiedChain, String> {
    if anchor.genesis.is_empty() {
        return Err(
            "the record carries no membership chain: its asker joined before chains were kept"
                .into(),
        );
    }
    let genesis = hex::decode(&anchor.genesis).map_err(|_| "the genesis is not hex")?;
    let commits = anchor
        .chain
        .iter()
        .map(|c| {
            hex::decode(c)
                .ok()
                .and_then(|b| Signed::decode(b.as_slice()).ok())
        })
        .collect::<Option<Vec<_>>>()
        .ok_or("a commit of the chain does not decode")?;
    let chain =
        verify_chain(&genesis, &commits).map_err(|e| format!("the membership chain: {e}"))?;
    if chain.anchor != Anchor::Genesis {
        return Err(
            "the chain's mesh id is a legacy random id, not a hash of its genesis: it pins nothing"
                .into(),
        );
    }
    if !hex::encode(chain.mesh_id()).eq_ignore_ascii_case(&anchor.mesh_id) {
        return Err(format!(
            "the membership chain is of mesh {}, not the record's {}",
            hex::encode(chain.mesh_id()),
            anchor.mesh_id
        ));
    }
    Ok(chain)
}

fn short(root: &str) -> String {
    root.chars().take(16).collect::<String>() + "…"
}
