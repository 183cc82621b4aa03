//! SQLite shards: books, chunks, Merkle levels, search and the audit chain.
//!
//! A [`Store`] is a state directory holding one SQLite file per shard under
//! `shards/`. A [`Shard`] owns its connection; every change is one
//! transaction that also appends to the shard's audit chain.

pub mod ask_cache;
pub mod audit;
mod evidence;
mod fts5;
mod index;
pub mod rank;
pub mod retriever;
mod schema;
mod search;
mod shard;

use std::path::{Path, PathBuf};

pub use rank::{Plan, QueryStats, StatsMismatch};
pub use search::{SearchHit, SearchScope, hit_order};
pub use shard::{BookRecord, BookStatus, IngestStatus, ProofRecord, Shard, VerifyReport};

use crate::db::{Cause, StorageError};
use crate::merkle::Hash;

/// The shard a book goes to when none is named.
pub const DEFAULT_SHARD: &str = "main";

/// Errors from the store: a failed disk or SQLite operation
/// ([`StorageError`], with the shard's advice), or a request the shards
/// cannot answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("{0}{advice}", advice = advice(.0))]
    Storage(#[from] StorageError),
    #[error("no book with key `{0}`")]
    NoSuchBook(String),
    #[error("this node holds no books; add one with `grove book add`")]
    NoBooks,
    #[error("book `{key}` has no version {version}")]
    NoSuchVersion { key: String, version: u32 },
    #[error("book `{key}` has {count} chunks; there is no chunk {index}")]
    NoSuchChunk { key: String, index: u64, count: u64 },
    #[error("book `{key}` already lives in shard `{shard}`; add it there with --shard {shard}")]
    KeyInOtherShard { key: String, shard: String },
    #[error("book `{0}` was removed; it has no current version")]
    Removed(String),
    #[error(transparent)]
    Chunks(#[from] crate::text::ChunkError),
    #[error("chunking stopped unexpectedly; nothing was stored")]
    ChunkerFailed,
    #[error("no shard named `{0}`")]
    NoSuchShard(String),
    #[error(transparent)]
    BadShardName(#[from] BadShardName),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    #[error(transparent)]
    Stats(#[from] StatsMismatch),
}

impl StoreError {
    /// What kind of storage failure this is, if it is one.
    pub fn cause(&self) -> Option<Cause> {
        match self {
            StoreError::Storage(e) => Some(e.cause()),
            StoreError::Audit(audit::AuditError::Storage(e)) => Some(e.cause()),
            _ => None,
        }
    }
}

/// What an operator does about a shard's storage failure.
fn advice(e: &StorageError) -> &'static str {
    match e.cause() {
        Cause::Damaged => {
            "; the shard file is corrupted or not a grove shard, and was left as it was. \
             Move it aside, or run `grove book verify` on its books"
        }
        Cause::Full => "; the disk is full, nothing was stored",
        Cause::NotWritable => {
            "; grove cannot write to the state directory (read-only, or not this user's)"
        }
        Cause::TooNew | Cause::NotPrivate | Cause::Other => "",
    }
}

/// The longest shard name, in bytes.
pub const MAX_SHARD_NAME_BYTES: usize = 64;

/// A shard name that cannot be used as one.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe_bad_shard_name(.0))]
pub struct BadShardName(pub String);

fn describe_bad_shard_name(name: &str) -> String {
    if name.len() > MAX_SHARD_NAME_BYTES {
        let start: String = name.chars().take(24).collect();
        format!(
            "invalid shard name `{start}…`: it is {} bytes, over the limit of {MAX_SHARD_NAME_BYTES}",
            name.len()
        )
    } else {
        format!(
            "invalid shard name `{name}`: use lowercase letters, digits and '-', starting with a letter or digit"
        )
    }
}

/// Checks a shard name: `^[a-z0-9][a-z0-9-]*$`, at most 64 bytes.
pub fn validate_shard_name(name: &str) -> Result<(), BadShardName> {
    let ok = name.len() <= MAX_SHARD_NAME_BYTES
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(BadShardName(name.to_string()))
    }
}

/// One shard's summary: its root (per books.md section 7) and current books.
#[derive(Debug, Clone)]
pub struct ShardSummary {
    pub name: String,
    pub root: Option<Hash>,
    pub books: Vec<BookRecord>,
}

/// The shards under one state directory.
#[derive(Debug, Clone)]
pub struct Store {
    /// The state directory.
    root: PathBuf,
    /// Its shards folder.
    dir: PathBuf,
}

impl Store {
    pub fn new(state_dir: &Path) -> Store {
        Store {
            root: state_dir.to_path_buf(),
            dir: crate::state_dir::StateDir::new(state_dir).shards(),
        }
    }

    pub fn shard_path(&self, name: &str) -> PathBuf {
        crate::state_dir::StateDir::new(&self.root).shard(name)
    }

    /// Names of existing shards, sorted.
    pub fn shard_names(&self) -> Result<Vec<String>, StorageError> {
        let io = StorageError::at(&self.dir, "list the shards in");
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(&io)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(stem) = crate::state_dir::shard_name(&name)
                && validate_shard_name(stem).is_ok()
            {
                names.push(stem.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Every database of the state directory that exists, with its kind:
    /// each shard, then the databases at the top (`mesh.db`, `node.db`,
    /// `ask.db`). What the integrity checks (at start, while a node runs,
    /// on demand) and the audit walk.
    pub fn databases(&self) -> Result<Vec<(PathBuf, crate::db::DbKind)>, StorageError> {
        let mut files: Vec<(PathBuf, crate::db::DbKind)> = self
            .shard_names()?
            .iter()
            .map(|n| (self.shard_path(n), crate::db::DbKind::Shard))
            .collect();
        let top = crate::state_dir::StateDir::new(&self.root).top_databases();
        files.extend(top.into_iter().filter(|(path, _)| path.is_file()));
        Ok(files)
    }

    /// Opens an existing shard.
    pub fn open(&self, name: &str) -> Result<Shard, StoreError> {
        validate_shard_name(name)?;
        let path = self.shard_path(name);
        if !path.is_file() {
            return Err(StoreError::NoSuchShard(name.to_string()));
        }
        Shard::open(name, &path)
    }

    /// Opens a shard, creating it (and the state directory) when missing.
    pub fn open_or_create(&self, name: &str) -> Result<Shard, StoreError> {
        validate_shard_name(name)?;
        crate::state_dir::StateDir::new(&self.root).make(crate::state_dir::Folder::Shards)?;
        Shard::open(name, &self.shard_path(name))
    }

    /// Opens every shard.
    pub fn open_all(&self) -> Result<Vec<Shard>, StoreError> {
        self.shard_names()?.iter().map(|n| self.open(n)).collect()
    }

    /// The shard holding `key` (any version), if any.
    pub fn find_book(&self, key: &str) -> Result<Option<Shard>, StoreError> {
        for shard in self.open_all()? {
            if shard.has_key(key)? {
                return Ok(Some(shard));
            }
        }
        Ok(None)
    }

    /// The shard holding `key`, or an error naming the key.
    pub fn shard_of(&self, key: &str) -> Result<Shard, StoreError> {
        self.find_book(key)?
            .ok_or_else(|| StoreError::NoSuchBook(key.to_string()))
    }

    /// Searches one book when `key` is given (with that book's own ranking),
    /// or every current book of every shard ranked as one collection; best
    /// first.
    pub fn search(
        &self,
        query: &str,
        key: Option<(&str, Option<u32>)>,
        k: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        if let Some((key, version)) = key {
            let shard = self.shard_of(key)?;
            let book = shard.book(key, version)?;
            return shard.search(query, SearchScope::Book(&book), k);
        }
        let stats = self.query_stats(query, k)?;
        self.search_ranked(query, &stats, k)
    }

    /// Round one of a search across books: what every current book of
    /// every shard knows about `query` for the top `k`, summed. A mesh-wide
    /// search sums this over every member.
    pub fn query_stats(&self, query: &str, k: usize) -> Result<QueryStats, StoreError> {
        let mut total = QueryStats::empty(rank::terms(query));
        for shard in self.open_all()? {
            total.merge(&shard.query_stats(query, k)?)?;
        }
        Ok(total)
    }

    /// Round two: the top `k` chunks of every current book, scored with the
    /// collection's `stats` (round one, summed over every holder), best
    /// first in [`hit_order`].
    pub fn search_ranked(
        &self,
        query: &str,
        stats: &QueryStats,
        k: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let mut hits = Vec::new();
        for shard in self.open_all()? {
            hits.extend(shard.search_ranked(query, stats, k)?);
            hits.sort_by(hit_order);
            hits.truncate(k);
        }
        Ok(hits)
    }
}
