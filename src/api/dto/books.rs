//! JSON shapes of the book, shard, search and audit commands (examples in
//! docs/cli-json.md). Hashes are lowercase hex; missing metadata is `null`.

use serde::{Deserialize, Serialize};

use crate::store::{BookRecord, IngestStatus, ProofRecord, SearchHit};

/// One book version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Book {
    pub key: String,
    pub version: u32,
    pub status: String,
    pub root: String,
    pub count: u64,
    pub title: Option<String>,
    pub author: Option<String>,
    pub language: Option<String>,
    pub ebook: Option<u64>,
    pub shard: String,
    pub source: String,
    pub bytes: u64,
    pub added_ms: i64,
    /// Spec version names the root was computed under.
    pub spec: Spec,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    pub decoding: String,
    pub chunking: String,
    pub hashing: String,
}

impl From<&BookRecord> for Book {
    fn from(b: &BookRecord) -> Book {
        Book {
            key: b.key.clone(),
            version: b.version,
            status: b.status.as_str().to_string(),
            root: hex::encode(b.root),
            count: b.count,
            title: b.title.clone(),
            author: b.author.clone(),
            language: b.language.clone(),
            ebook: b.ebook,
            shard: b.shard.clone(),
            source: b.source.clone(),
            bytes: b.bytes,
            added_ms: b.added_ms,
            spec: Spec {
                decoding: b.decoding.clone(),
                chunking: b.chunking.clone(),
                hashing: b.hashing.clone(),
            },
        }
    }
}

/// `book add`: the stored version and what the ingest did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Added {
    pub key: String,
    pub version: u32,
    pub root: String,
    pub count: u64,
    pub title: Option<String>,
    pub author: Option<String>,
    pub language: Option<String>,
    pub ebook: Option<u64>,
    pub shard: String,
    /// `added`, `unchanged` or `new-version`.
    pub status: String,
}

impl Added {
    pub fn new(status: IngestStatus, b: &BookRecord) -> Added {
        Added {
            key: b.key.clone(),
            version: b.version,
            root: hex::encode(b.root),
            count: b.count,
            title: b.title.clone(),
            author: b.author.clone(),
            language: b.language.clone(),
            ebook: b.ebook,
            shard: b.shard.clone(),
            status: status.as_str().to_string(),
        }
    }
}

/// `book list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BookList {
    pub books: Vec<Book>,
}

/// One step of an inclusion proof.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    pub sibling: String,
    pub is_left: bool,
}

/// `book proof`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proof {
    pub key: String,
    pub version: u32,
    pub index: u64,
    pub count: u64,
    pub root: String,
    pub leaf: String,
    pub label: String,
    pub text: String,
    pub proof: Vec<Step>,
}

impl Proof {
    pub fn new(book: &BookRecord, p: &ProofRecord) -> Proof {
        Proof {
            key: book.key.clone(),
            version: book.version,
            index: p.index,
            count: book.count,
            root: hex::encode(book.root),
            leaf: hex::encode(p.leaf),
            label: p.label.clone(),
            text: p.text.clone(),
            proof: p
                .proof
                .iter()
                .map(|s| Step {
                    sibling: hex::encode(s.sibling),
                    is_left: s.is_left,
                })
                .collect(),
        }
    }
}

/// One search hit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hit {
    pub key: String,
    pub version: u32,
    pub title: Option<String>,
    pub author: Option<String>,
    pub node_id: String,
    pub label: String,
    pub index: u64,
    pub score: f64,
    pub content: String,
    pub leaf: String,
    /// The member holding the book (mesh-wide search only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_id: Option<String>,
}

impl From<&SearchHit> for Hit {
    fn from(h: &SearchHit) -> Hit {
        Hit {
            key: h.key.clone(),
            version: h.version,
            title: h.title.clone(),
            author: h.author.clone(),
            node_id: h.node_id.clone(),
            label: h.label.clone(),
            index: h.index,
            score: h.score,
            content: h.content.clone(),
            leaf: hex::encode(h.leaf),
            peer_id: None,
        }
    }
}

/// The body of `POST /v1/books/search` (a query travels in the body, so
/// its length is the query limit's to judge, not the URI's).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchCall {
    #[serde(flatten)]
    pub request: crate::api::books::SearchRequest,
    /// Every member's books, not only this node's.
    #[serde(default)]
    pub mesh: bool,
}

/// `book search`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hits {
    pub hits: Vec<Hit>,
    /// Members that did not answer a mesh-wide search, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// `book verify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verified {
    pub key: String,
    pub version: u32,
    pub root: String,
    pub count: u64,
    pub chunks_checked: u64,
    pub ok: bool,
    pub problems: Vec<String>,
}

/// A book inside `shard list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardBook {
    pub key: String,
    pub root: String,
    pub count: u64,
}

/// One shard inside `shard list`; `root` is null for a shard with no books.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shard {
    pub name: String,
    pub root: Option<String>,
    pub books: Vec<ShardBook>,
}

/// `shard list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardList {
    pub shards: Vec<Shard>,
}

/// One audit chain in `audit verify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Chain {
    pub file: String,
    pub events: u64,
    pub head: Option<String>,
    pub ok: bool,
    /// True only when the chain was read and a link is wrong; a database
    /// that could not be read is not ok but not broken either.
    #[serde(default)]
    pub broken: bool,
    /// Read without locks from the main file alone (the directory is not
    /// writable here); events a running writer holds in its WAL are not seen.
    #[serde(default)]
    pub immutable: bool,
    pub error: Option<String>,
    /// What the integrity check (`PRAGMA quick_check`) found, with the
    /// way out; `None` when it found nothing (or could not run: read-only).
    #[serde(default)]
    pub damage: Option<String>,
}

/// `audit verify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditReport {
    pub ok: bool,
    pub chains: Vec<Chain>,
}

/// One shard in `shard compact`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardCompacted {
    pub name: String,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// `shard compact`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Compacted {
    pub shards: Vec<ShardCompacted>,
}
