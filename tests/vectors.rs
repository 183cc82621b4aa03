//! books.md vectors: every chunk, leaf, root, proof, the shard root and the
//! refused proof, reproduced exactly from `spec/vectors.json` (`tests/data`).

use base64::Engine;
use grove::merkle::{self, Hash, ShardEntry};
use grove::text;
use serde_json::Value;

use crate::support::{hash_hex, proof_steps};

fn vectors() -> Value {
    let path = crate::support::data_file("spec/vectors.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn book_vectors_reproduce_exactly() {
    let v = vectors();
    let books = v["books"].as_array().unwrap();
    assert!(books.len() >= 12);
    for b in books {
        let name = b["name"].as_str().unwrap();
        let input = base64::engine::general_purpose::STANDARD
            .decode(b["input_base64"].as_str().unwrap())
            .unwrap();
        let parsed = text::parse(&text::decode(&input));
        let m = &b["meta"];
        assert_eq!(
            parsed.meta.title,
            m["title"].as_str().unwrap(),
            "{name}: title"
        );
        assert_eq!(
            parsed.meta.author,
            m["author"].as_str().unwrap(),
            "{name}: author"
        );
        assert_eq!(
            parsed.meta.language,
            m["language"].as_str().unwrap(),
            "{name}: language"
        );
        assert_eq!(parsed.meta.ebook, m["ebook"].as_u64(), "{name}: ebook");
        let chunks = text::chunk_paragraphs(&parsed.paragraphs, usize::MAX).unwrap();
        let want: Vec<&str> = b["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(got, want, "{name}: chunks");
        let leaves: Vec<Hash> = chunks
            .iter()
            .map(|c| merkle::leaf_hash(c.text.as_bytes()))
            .collect();
        let want_leaves: Vec<Hash> = b["leaves"]
            .as_array()
            .unwrap()
            .iter()
            .map(hash_hex)
            .collect();
        assert_eq!(leaves, want_leaves, "{name}: leaves");
        let root = merkle::root(&leaves).unwrap();
        assert_eq!(root, hash_hex(&b["root"]), "{name}: root");
        assert_eq!(
            leaves.len() as u64,
            b["count"].as_u64().unwrap(),
            "{name}: count"
        );
        let levels = merkle::levels(leaves.clone()).unwrap();
        for (i, want_proof) in b["proofs"].as_array().unwrap().iter().enumerate() {
            let proof = merkle::proof(&levels, i as u64).unwrap();
            assert_eq!(proof, proof_steps(want_proof), "{name}: proof {i}");
            merkle::verify(&leaves[i], i as u64, leaves.len() as u64, &proof, &root)
                .unwrap_or_else(|e| panic!("{name}: proof {i} refused: {e}"));
        }
    }
}

#[test]
fn shard_vector_reproduces() {
    let v = vectors();
    let entries: Vec<ShardEntry> = v["shard"]["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| ShardEntry {
            key: b["key"].as_str().unwrap().to_string(),
            root: hash_hex(&b["root"]),
            count: b["count"].as_u64().unwrap(),
        })
        .collect();
    assert_eq!(
        merkle::shard_root(&entries).unwrap(),
        hash_hex(&v["shard"]["root"])
    );
}

#[test]
fn refused_proof_is_refused() {
    let v = vectors();
    let r = &v["refused_proof"];
    let result = merkle::verify(
        &hash_hex(&r["leaf"]),
        r["index"].as_u64().unwrap(),
        r["count"].as_u64().unwrap(),
        &proof_steps(&r["proof"]),
        &hash_hex(&r["root"]),
    );
    assert!(
        result.is_err(),
        "the CVE-2012-2459-shaped proof must be refused"
    );
}
