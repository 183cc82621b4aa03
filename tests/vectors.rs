//! books.md vectors: every chunk, leaf, root, proof, the shard root and the
//! refused proof, reproduced exactly from `spec/vectors.json` (`tests/data`),
//! the books through the production ingest into a real shard.

use base64::Engine;
use grove::book::BookText;
use grove::merkle::{self, ShardEntry};
use grove::store::Store;
use serde_json::Value;

use crate::support::{hash_hex, proof_steps};

fn vectors() -> Value {
    let path = crate::support::data_file("spec/vectors.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Every book vector goes the production way: decoded as `book add` decodes
/// it, stored by `Shard::ingest` into a real shard, and read back from the
/// store: its metadata, root and count, and each chunk's text, leaf and
/// proof (served from the stored Merkle blocks), compared with the spec.
#[test]
fn book_vectors_reproduce_exactly() {
    let v = vectors();
    let books = v["books"].as_array().unwrap();
    assert!(books.len() >= 12);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path());
    let shard = store.open_or_create("vectors").unwrap();
    for (n, b) in books.iter().enumerate() {
        let name = b["name"].as_str().unwrap();
        let input = base64::engine::general_purpose::STANDARD
            .decode(b["input_base64"].as_str().unwrap())
            .unwrap();
        let book = BookText::decode(&input, u64::MAX).unwrap();
        let key = format!("vectors/book-{n}");
        let (_, rec) = shard
            .ingest(&key, &book, u64::MAX, name, 0, &mut |_| {})
            .unwrap_or_else(|e| panic!("{name}: not stored: {e}"));
        let m = &b["meta"];
        for (got, field) in [
            (&rec.title, "title"),
            (&rec.author, "author"),
            (&rec.language, "language"),
        ] {
            let want = m[field].as_str().unwrap();
            assert_eq!(got.as_deref().unwrap_or(""), want, "{name}: {field}");
        }
        assert_eq!(rec.ebook, m["ebook"].as_u64(), "{name}: ebook");
        let count = b["count"].as_u64().unwrap();
        assert_eq!(rec.count, count, "{name}: count");
        let root = hash_hex(&b["root"]);
        assert_eq!(rec.root, root, "{name}: root");
        let chunks = b["chunks"].as_array().unwrap();
        let leaves = b["leaves"].as_array().unwrap();
        let proofs = b["proofs"].as_array().unwrap();
        assert_eq!(chunks.len() as u64, count, "{name}: chunks in the spec");
        assert!(!proofs.is_empty(), "{name}: the spec gives proofs");
        for i in 0..count {
            let stored = shard.proof(&rec, i).unwrap();
            let at = i as usize;
            assert_eq!(
                stored.text,
                chunks[at].as_str().unwrap(),
                "{name}: chunk {i}"
            );
            assert_eq!(stored.leaf, hash_hex(&leaves[at]), "{name}: leaf {i}");
            if let Some(want_proof) = proofs.get(at) {
                assert_eq!(stored.proof, proof_steps(want_proof), "{name}: proof {i}");
            }
            merkle::verify(&stored.leaf, i, count, &stored.proof, &root)
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
