//! Signed turns of a cross-node moot: the speaker's payload (moot id, turn,
//! previous turn's hash, book root and count, passages with Merkle proofs,
//! the utterance as recorded) under an Ed25519 signature, and the pure check
//! a host or any later reader runs on it. Grading is re-checked by the host
//! engine and by `moot verify`, not here.

use crate::identity::{self, Identity};
use crate::merkle::{self, Hash, ProofStep};
use crate::mesh::codec;
use crate::moot::transcript::UtteranceRecord;
use crate::moot::{Passage, TaggedPassage, Utterance};
use crate::wire::mesh::Signed;
use crate::wire::moot as wire;

/// Domain tag of a turn signature.
pub const TURN_TAG: &[u8] = b"grove-moot/v1/turn\0";
/// Hash label of a turn (the chain link).
pub const TURN_HASH_LABEL: &[u8] = b"grove-moot/v1/turn-hash\0";
/// The previous hash of the first turn.
pub const GENESIS_PREV: [u8; 32] = [0u8; 32];

/// Why a signed turn was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error("bad signature or encoding: {0}")]
    Signature(String),
    #[error("signed by {got}, not by {want}, the member holding the book")]
    WrongSigner { got: String, want: String },
    #[error("{0}")]
    Mismatch(String),
    #[error("book root {root} ({count} chunks) is not one the speaker announced")]
    UnknownRoot { root: String, count: u64 },
    #[error("passage {node_id}: proof does not verify: {reason}")]
    Proof { node_id: String, reason: String },
    #[error("utterance: {0}")]
    Utterance(String),
}

/// The chain hash of a signed turn: SHA-256(label || payload bytes).
pub fn turn_hash(signed: &Signed) -> [u8; 32] {
    codec::hash(TURN_HASH_LABEL, &signed.body)
}

/// Signs a payload.
pub fn sign(identity: &Identity, payload: &wire::TurnPayload) -> Signed {
    codec::sign(identity, TURN_TAG, payload)
}

/// A passage with its proof, as carried in a turn.
pub fn proven(tag: &str, passage: &Passage, proof: &[ProofStep]) -> wire::ProvenPassage {
    wire::ProvenPassage {
        tag: tag.to_string(),
        label: passage.label.clone(),
        node_id: passage.node_id.clone(),
        index: passage.index,
        text: passage.content.clone(),
        proof: crate::wire::proof::to_wire(proof),
    }
}

/// Checks one carried passage's proof against `(root, count)` and returns
/// it as a passage.
pub fn check_passage(
    p: &wire::ProvenPassage,
    book: &str,
    root: &Hash,
    count: u64,
) -> Result<Passage, TurnError> {
    let fail = |reason: String| TurnError::Proof {
        node_id: p.node_id.clone(),
        reason,
    };
    if p.node_id != format!("{book}#{}", p.index) {
        return Err(fail("its node id is not of this book and index".into()));
    }
    let steps = crate::wire::proof::from_wire(&p.proof)
        .ok_or_else(|| fail("a sibling is not 32 bytes".into()))?;
    let leaf = merkle::leaf_hash(p.text.as_bytes());
    merkle::verify(&leaf, p.index, count, &steps, root).map_err(|e| fail(e.to_string()))?;
    Ok(Passage {
        node_id: p.node_id.clone(),
        label: p.label.clone(),
        index: p.index,
        leaf: hex::encode(leaf),
        content: p.text.clone(),
    })
}

/// What the checker expects of a turn.
pub struct Expect<'a> {
    pub moot_id: &'a [u8],
    pub turn: u32,
    pub prev_hash: &'a [u8; 32],
    pub book: &'a str,
    /// The speaker's Ed25519 key (from the roster).
    pub signer: &'a [u8; 32],
    /// (root, count) pairs the speaker announced for the book.
    pub roots: &'a [(Hash, u64)],
}

/// A turn that passed [`check`].
#[derive(Debug, Clone)]
pub struct CheckedTurn {
    pub payload: wire::TurnPayload,
    pub utterance: Utterance,
    pub hash: [u8; 32],
}

/// Checks a signed turn: signature by the expected key, moot, turn, chain
/// link and book; a root the speaker announced; every passage's proof; and
/// that the recorded utterance shows exactly the proven passages.
pub fn check(signed: &Signed, expect: &Expect<'_>) -> Result<CheckedTurn, TurnError> {
    let (payload, signer) = codec::open_signed::<wire::TurnPayload>(signed, TURN_TAG, "turn")
        .map_err(|e| TurnError::Signature(e.to_string()))?;
    if &signer != expect.signer {
        return Err(TurnError::WrongSigner {
            got: identity::peer_id_bytes(&signer)
                .map(|p| identity::peer_id_text(&p))
                .unwrap_or_else(|_| hex::encode(signer)),
            want: identity::peer_id_bytes(expect.signer)
                .map(|p| identity::peer_id_text(&p))
                .unwrap_or_default(),
        });
    }
    let mismatch = |what: &str| Err(TurnError::Mismatch(what.to_string()));
    if payload.moot_id != expect.moot_id {
        return mismatch("the turn is for another moot");
    }
    if payload.turn != expect.turn {
        return Err(TurnError::Mismatch(format!(
            "the turn says it is turn {}, expected {}",
            payload.turn, expect.turn
        )));
    }
    if payload.prev_hash != expect.prev_hash {
        return mismatch("the previous-turn hash does not chain");
    }
    if payload.book != expect.book {
        return mismatch("the turn is from another book");
    }
    if identity::peer_id_bytes(&signer).ok().as_deref() != Some(payload.speaker.as_slice()) {
        return mismatch("the speaker field is not the signer");
    }
    let root: Hash = payload
        .book_root
        .as_slice()
        .try_into()
        .map_err(|_| TurnError::Mismatch("the book root is not 32 bytes".into()))?;
    if !expect
        .roots
        .iter()
        .any(|(r, c)| *r == root && *c == payload.book_count)
    {
        return Err(TurnError::UnknownRoot {
            root: hex::encode(root),
            count: payload.book_count,
        });
    }
    let mut proven = Vec::new();
    for p in &payload.passages {
        proven.push(TaggedPassage {
            tag: p.tag.clone(),
            passage: check_passage(p, expect.book, &root, payload.book_count)?,
        });
    }
    let record: UtteranceRecord = serde_json::from_str(&payload.utterance)
        .map_err(|e| TurnError::Utterance(e.to_string()))?;
    let utterance =
        Utterance::try_from(&record).map_err(|e| TurnError::Utterance(e.to_string()))?;
    if utterance.turn != expect.turn || utterance.speaker != expect.book {
        return Err(TurnError::Utterance("it names another turn or book".into()));
    }
    if utterance.retrieved != proven {
        return Err(TurnError::Utterance(
            "its passages are not the proven ones".into(),
        ));
    }
    Ok(CheckedTurn {
        hash: turn_hash(signed),
        payload,
        utterance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grounding::Grounding;
    use crate::moot::{Move, Passage, TaggedPassage, Utterance};

    const BOOK: &str = "fiction/sea";

    /// A 5-chunk book: its chunks, levels and root.
    fn book() -> (Vec<String>, Vec<Vec<Hash>>, Hash) {
        let chunks: Vec<String> = (0..5)
            .map(|i| format!("Chunk {i} of the sea book, words enough."))
            .collect();
        let leaves: Vec<Hash> = chunks
            .iter()
            .map(|c| merkle::leaf_hash(c.as_bytes()))
            .collect();
        let levels = merkle::levels(leaves).unwrap();
        let root = levels[levels.len() - 1][0];
        (chunks, levels, root)
    }

    fn passage(chunks: &[String], i: u64) -> Passage {
        Passage {
            node_id: format!("{BOOK}#{i}"),
            label: format!("chunk:{i:04}"),
            index: i,
            leaf: hex::encode(merkle::leaf_hash(chunks[i as usize].as_bytes())),
            content: chunks[i as usize].clone(),
        }
    }

    fn utterance(passages: &[Passage]) -> Utterance {
        Utterance {
            turn: 1,
            speaker: BOOK.into(),
            title: "Sea".into(),
            text: "I speak [s1].".into(),
            cited: Default::default(),
            grounding: Grounding::default(),
            grounded: false,
            attempts: 2,
            query: "sea".into(),
            retrieved: passages
                .iter()
                .enumerate()
                .map(|(i, p)| TaggedPassage {
                    tag: format!("s{}", i + 1),
                    passage: p.clone(),
                })
                .collect(),
            raw_text: "I speak [s1].".into(),
            snaps: Vec::new(),
            intent: Move::Open,
            guided: false,
            decision: None,
            figures: None,
            reading: None,
        }
    }

    fn payload(
        id: &Identity,
        proven: Vec<wire::ProvenPassage>,
        u: &Utterance,
        root: Hash,
    ) -> wire::TurnPayload {
        wire::TurnPayload {
            moot_id: vec![1; 16],
            turn: 1,
            prev_hash: GENESIS_PREV.to_vec(),
            speaker: id.peer_id(),
            book: BOOK.into(),
            book_root: root.to_vec(),
            book_count: 5,
            passages: proven,
            utterance: serde_json::to_string(&UtteranceRecord::from(u)).unwrap(),
            time_ms: 1,
            epoch: Some(0),
        }
    }

    fn expect<'a>(key: &'a [u8; 32], roots: &'a [(Hash, u64)]) -> Expect<'a> {
        Expect {
            moot_id: &[1; 16],
            turn: 1,
            prev_hash: &GENESIS_PREV,
            book: BOOK,
            signer: key,
            roots,
        }
    }

    /// Each passage as `sN` with its proof in `levels`.
    fn proven_all(passages: &[Passage], levels: &[Vec<Hash>]) -> Vec<wire::ProvenPassage> {
        passages
            .iter()
            .enumerate()
            .map(|(i, p)| {
                proven(
                    &format!("s{}", i + 1),
                    p,
                    &merkle::proof(levels, p.index).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn an_honest_turn_checks_and_lies_do_not() {
        let id = Identity::generate(&mut rand::rng());
        let other = Identity::generate(&mut rand::rng());
        let (chunks, levels, root) = book();
        let passages = vec![passage(&chunks, 1), passage(&chunks, 3)];
        let proven = proven_all(&passages, &levels);
        let u = utterance(&passages);
        let key = id.ed25519_public();
        let roots = [(root, 5)];
        let good = sign(&id, &payload(&id, proven.clone(), &u, root));
        let checked = check(&good, &expect(&key, &roots)).unwrap();
        assert_eq!(checked.utterance.retrieved, u.retrieved);

        // Signed by a member who does not hold the book.
        let by_other = sign(&other, &payload(&other, proven.clone(), &u, root));
        assert!(matches!(
            check(&by_other, &expect(&key, &roots)),
            Err(TurnError::WrongSigner { .. })
        ));

        // A wrong proof (a sibling changed), signed honestly by the speaker.
        let mut bad = proven.clone();
        bad[0].proof[0].sibling[0] ^= 1;
        let lie = sign(&id, &payload(&id, bad, &u, root));
        assert!(matches!(
            check(&lie, &expect(&key, &roots)),
            Err(TurnError::Proof { .. })
        ));

        // A passage text that is not the book's.
        let mut bad = proven.clone();
        bad[1].text.push('!');
        let lie = sign(&id, &payload(&id, bad, &u, root));
        assert!(matches!(
            check(&lie, &expect(&key, &roots)),
            Err(TurnError::Proof { .. })
        ));

        // A root the speaker never announced.
        let lie = sign(&id, &payload(&id, proven.clone(), &u, [9; 32]));
        assert!(matches!(
            check(&lie, &expect(&key, &roots)),
            Err(TurnError::UnknownRoot { .. })
        ));

        // Passages shown in the utterance that are not the proven ones.
        let other_passages = vec![passage(&chunks, 1), passage(&chunks, 4)];
        let lie = sign(
            &id,
            &payload(&id, proven.clone(), &utterance(&other_passages), root),
        );
        assert!(matches!(
            check(&lie, &expect(&key, &roots)),
            Err(TurnError::Utterance(_))
        ));

        // Out of the chain: another previous hash, or another turn number.
        let prev = [7u8; 32];
        let mut e = expect(&key, &roots);
        e.prev_hash = &prev;
        assert!(matches!(check(&good, &e), Err(TurnError::Mismatch(_))));
        let mut e = expect(&key, &roots);
        e.turn = 2;
        assert!(matches!(check(&good, &e), Err(TurnError::Mismatch(_))));

        // Any changed byte of the payload breaks the signature.
        let mut tampered = good.clone();
        let at = tampered.body.len() / 2;
        tampered.body[at] ^= 1;
        assert!(check(&tampered, &expect(&key, &roots)).is_err());
    }
}
