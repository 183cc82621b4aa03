//! The ask cache's keys. An answer is found by its lookup key (the question
//! in the cache's mode, the model's profile, the ask's settings and books,
//! the verifier's policy and the record's, decoding's, chunking's and
//! hashing's versions) and served only while its answer key still holds:
//! the lookup key with the roots of the books its evidence came from. A
//! book re-ingested with a different root turns its cached answers stale.

use std::collections::BTreeMap;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ASK_FORMAT, AskRecord, AskSettings, Evidence, Policy};
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
    mesh: bool,
) -> Hash {
    let question = match mode {
        CacheMode::Strict => question.to_string(),
        CacheMode::Equivalent => norm(question),
    };
    let mut books = books.to_vec();
    books.sort();
    books.dedup();
    let mut fields = json!({
        "question": question,
        "mode": mode.as_str(),
        "model": model_profile,
        "settings": settings,
        "books": books,
        "policy": Policy::CURRENT.name,
        "format": ASK_FORMAT,
        "decoding": DECODING,
        "chunking": CHUNKING,
        "hashing": HASHING,
    });
    // A mesh ask searches other books than a local one (a local key reads
    // as it always did).
    if mesh {
        fields["scope"] = json!("mesh");
    }
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

/// What the cache holds for a lookup key, judged against the books now.
#[derive(Debug, Clone)]
pub enum Found {
    /// Nothing stored under the key.
    Nothing,
    /// An answer whose cited books still have the roots it was proven
    /// against: it may be served.
    Fresh(Box<AskRecord>),
    /// An answer whose answer key no longer holds: these books changed
    /// (empty when the stored row itself no longer matches its key).
    Stale(Vec<RootChange>),
}

/// A cited book whose root is not the one an answer was proven against
/// (also in the answer of `POST /v1/ask`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RootChange {
    pub book: String,
    /// The roots, hex: then, and now (`None`: no longer held).
    pub was: String,
    pub now: Option<String>,
}

/// The passage that stands for each cited book (its first): whoever judges
/// a cached answer looks up that book's root now, at its holder.
pub fn cited_books(record: &AskRecord) -> Vec<&Evidence> {
    let mut seen = std::collections::BTreeSet::new();
    record
        .evidence
        .iter()
        .filter(|e| e.proof.is_some() && seen.insert(e.book.as_str()))
        .collect()
}

/// The one freshness rule: an answer stored under `lookup` with
/// `stored_key` is served while the answer key over its cited books'
/// roots now (`now`, by book; `None`: no longer held) is the stored one.
pub fn judge(
    lookup: &Hash,
    stored: Option<(Hash, AskRecord)>,
    now: &BTreeMap<String, Option<String>>,
) -> Found {
    let Some((stored_key, record)) = stored else {
        return Found::Nothing;
    };
    let mut now_roots = BTreeMap::new();
    let mut changed = Vec::new();
    for (book, was) in cited_roots(&record) {
        let root = now.get(&book).cloned().flatten();
        now_roots.insert(book.clone(), root.clone().unwrap_or_default());
        if root.as_ref() != Some(&was) {
            changed.push(RootChange {
                book,
                was,
                now: root,
            });
        }
    }
    if answer_key(lookup, &now_roots) == stored_key {
        Found::Fresh(Box::new(record))
    } else {
        Found::Stale(changed)
    }
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
        let key = |q: &str, mode| lookup_key(q, mode, "embedded:m", &s, &[], false);
        assert_ne!(
            key("Who is Ishmael?", CacheMode::Strict),
            key("who is ishmael", CacheMode::Strict)
        );
        assert_eq!(
            key("Who is Ishmael?", CacheMode::Equivalent),
            key("who is ishmael", CacheMode::Equivalent)
        );
        let other_model = lookup_key("q", CacheMode::Strict, "embedded:n", &s, &[], false);
        assert_ne!(key("q", CacheMode::Strict), other_model);
        let books = |b: &[&str]| {
            let b: Vec<String> = b.iter().map(|s| s.to_string()).collect();
            lookup_key("q", CacheMode::Strict, "m", &s, &b, false)
        };
        assert_eq!(books(&["a", "b"]), books(&["b", "a"]));
        let mesh = lookup_key("q", CacheMode::Strict, "m", &s, &[], true);
        assert_ne!(books(&[]), mesh);
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
