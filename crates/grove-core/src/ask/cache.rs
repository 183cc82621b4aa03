//! The ask cache's keys. An answer is found by its lookup key (the question
//! in the cache's mode, the model's profile, the ask's settings and books,
//! the verifier's policy and the record's, decoding's, chunking's and
//! hashing's versions) and served only while its answer key still holds:
//! the lookup key with the roots of the books its evidence came from. A
//! book re-ingested with a different root turns its cached answers stale.

use std::collections::BTreeMap;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ASK_FORMAT, AskRecord, AskSettings, Policy};
use crate::grounding::norm;
use crate::merkle::{HASHING, Hash};
use crate::text::{CHUNKING, DECODING};

/// How a question is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// The exact question (as checked: white space collapsed).
    Strict,
    /// The question normalised: case, punctuation and spacing aside
    /// (`norm`), so "Who is Ishmael?" and "who is ishmael" meet.
    Equivalent,
}

impl CacheMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheMode::Strict => "strict",
            CacheMode::Equivalent => "equivalent",
        }
    }
}

/// The key an answer is looked up by.
pub fn lookup_key(
    question: &str,
    mode: CacheMode,
    model_profile: &str,
    settings: &AskSettings,
    books: &[String],
) -> Hash {
    let question = match mode {
        CacheMode::Strict => question.to_string(),
        CacheMode::Equivalent => norm(question),
    };
    let mut books = books.to_vec();
    books.sort();
    books.dedup();
    let fields = json!({
        "question": question,
        "mode": mode.as_str(),
        "model": model_profile,
        "settings": settings,
        "books": books,
        "policy": Policy::V1.name,
        "format": ASK_FORMAT,
        "decoding": DECODING,
        "chunking": CHUNKING,
        "hashing": HASHING,
    });
    let mut h = Sha256::new();
    h.update(b"grove-ask-cache-v1\0");
    h.update(serde_json::to_vec(&fields).unwrap_or_default());
    h.finalize().into()
}

/// The books an answer's evidence came from, with the roots (hex) it was
/// proven against.
pub fn cited_roots(record: &AskRecord) -> BTreeMap<String, String> {
    record
        .evidence
        .iter()
        .filter_map(|e| e.proof.as_ref().map(|p| (e.book.clone(), p.root.clone())))
        .collect()
}

/// The key an answer is served under: its lookup key and its books' roots.
pub fn answer_key(lookup: &Hash, roots: &BTreeMap<String, String>) -> Hash {
    let mut h = Sha256::new();
    h.update(b"grove-ask-answer-v1\0");
    h.update(lookup);
    h.update(serde_json::to_vec(roots).unwrap_or_default());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_match_questions_as_they_say() {
        let s = AskSettings::default();
        let key = |q: &str, mode| lookup_key(q, mode, "embedded:m", &s, &[]);
        assert_ne!(
            key("Who is Ishmael?", CacheMode::Strict),
            key("who is ishmael", CacheMode::Strict)
        );
        assert_eq!(
            key("Who is Ishmael?", CacheMode::Equivalent),
            key("who is ishmael", CacheMode::Equivalent)
        );
        let other_model = lookup_key("q", CacheMode::Strict, "embedded:n", &s, &[]);
        assert_ne!(key("q", CacheMode::Strict), other_model);
        let books = |b: &[&str]| {
            let b: Vec<String> = b.iter().map(|s| s.to_string()).collect();
            lookup_key("q", CacheMode::Strict, "m", &s, &b)
        };
        assert_eq!(books(&["a", "b"]), books(&["b", "a"]));
    }

    #[test]
    fn a_new_root_is_a_new_answer_key() {
        let lookup = [7u8; 32];
        let mut roots = BTreeMap::from([("books/a".to_string(), "aa".to_string())]);
        let before = answer_key(&lookup, &roots);
        roots.insert("books/a".into(), "bb".into());
        assert_ne!(before, answer_key(&lookup, &roots));
    }
}
