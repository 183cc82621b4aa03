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
mod term_counts;

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
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
    #[error("chunking or term counting stopped unexpectedly; nothing was stored")]
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

/// The shards under one state directory, each opened once and kept open
/// for the handle's life: the store worker owns the daemon's one handle, a
/// command run without a daemon owns its own.
pub struct Store {
    /// The state directory.
    root: PathBuf,
    /// Its shards folder.
    dir: PathBuf,
    /// The shards opened so far, by name.
    open: BTreeMap<String, Shard>,
    /// How many times a shard file was opened.
    opens: usize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("open", &self.open.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Store {
    pub fn new(state_dir: &Path) -> Store {
        Store {
            root: state_dir.to_path_buf(),
            dir: crate::state_dir::StateDir::new(state_dir).shards(),
            open: BTreeMap::new(),
            opens: 0,
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

    /// How many times this handle has opened a shard file: once per shard
    /// for the handle's life, however many operations read it.
    pub fn opens(&self) -> usize {
        self.opens
    }

    /// An existing shard, opened on first use.
    pub fn open(&mut self, name: &str) -> Result<&mut Shard, StoreError> {
        self.open_as(name, false)
    }

    /// A shard, created (with the state directory) when missing.
    pub fn open_or_create(&mut self, name: &str) -> Result<&mut Shard, StoreError> {
        self.open_as(name, true)
    }

    /// The shard `name`, opened (and with `create`, made) on first use.
    fn open_as(&mut self, name: &str, create: bool) -> Result<&mut Shard, StoreError> {
        validate_shard_name(name)?;
        let path = self.shard_path(name);
        let slot = match self.open.entry(name.to_string()) {
            Entry::Occupied(open) => return Ok(open.into_mut()),
            Entry::Vacant(slot) => slot,
        };
        if create {
            crate::state_dir::StateDir::new(&self.root).make(crate::state_dir::Folder::Shards)?;
        } else if !path.is_file() {
            return Err(StoreError::NoSuchShard(name.to_string()));
        }
        let shard = Shard::open(name, &path)?;
        self.opens += 1;
        Ok(slot.insert(shard))
    }

    /// Every shard there is now, in name order: the ones already open, and
    /// any shard file new since (a shard moved aside is let go).
    pub fn open_all(&mut self) -> Result<impl Iterator<Item = &mut Shard>, StoreError> {
        self.open_every()?;
        Ok(self.open.values_mut())
    }

    /// Opens every shard there is now that is not open yet, and lets go of
    /// any whose file is gone.
    fn open_every(&mut self) -> Result<(), StoreError> {
        let names = self.shard_names()?;
        self.open.retain(|name, _| names.contains(name));
        for name in &names {
            self.open(name)?;
        }
        Ok(())
    }

    /// The shard holding `key` (any version), if any.
    pub fn find_book(&mut self, key: &str) -> Result<Option<&mut Shard>, StoreError> {
        self.open_every()?;
        let name = match self.holding(key)? {
            Some(shard) => shard.name().to_string(),
            None => return Ok(None),
        };
        Ok(self.open.get_mut(&name))
    }

    /// The shard holding `key`, or an error naming the key.
    pub fn shard_of(&mut self, key: &str) -> Result<&mut Shard, StoreError> {
        self.find_book(key)?
            .ok_or_else(|| StoreError::NoSuchBook(key.to_string()))
    }

    /// The shard holding `key` among those already open.
    fn holding(&self, key: &str) -> Result<Option<&Shard>, StoreError> {
        for shard in self.open.values() {
            if shard.has_key(key)? {
                return Ok(Some(shard));
            }
        }
        Ok(None)
    }

    /// A retriever for the current version of each of `keys`, all reading
    /// this handle's shards at once (a local moot's two books).
    pub fn retrievers<const N: usize>(
        &mut self,
        keys: [&str; N],
    ) -> Result<[retriever::BookRetriever<'_>; N], StoreError> {
        self.open_every()?;
        let store: &Store = self;
        let mut found = Vec::with_capacity(N);
        for key in keys {
            let shard = store
                .holding(key)?
                .ok_or_else(|| StoreError::NoSuchBook(key.to_string()))?;
            found.push(retriever::BookRetriever::new(shard, key)?);
        }
        Ok(found
            .try_into()
            .unwrap_or_else(|_| unreachable!("one retriever per key")))
    }

    /// Searches one book when `key` is given (with that book's own ranking),
    /// or every current book of every shard ranked as one collection; best
    /// first.
    pub fn search(
        &mut self,
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
    pub fn query_stats(&mut self, query: &str, k: usize) -> Result<QueryStats, StoreError> {
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
        &mut self,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::BookText;

    fn add(store: &mut Store, shard: &str, key: &str, text: &str) {
        let text = BookText::decode(text.as_bytes(), 1 << 20).unwrap();
        store
            .open_or_create(shard)
            .unwrap()
            .ingest(key, &text, 4096, "test", 1, &mut |_| {})
            .unwrap();
    }

    /// A handle opens each shard once, whatever it is asked and how often:
    /// adds, lookups by key, searches across books and within one,
    /// evidence, retrievers and chunk lookups.
    #[test]
    fn a_handle_opens_each_shard_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::new(dir.path());
        add(
            &mut store,
            "main",
            "t/sea",
            "The whale swam in the grey sea.\n\nThe sea was cold.",
        );
        add(
            &mut store,
            "other",
            "t/land",
            "The horse ran over the green hill.\n\nThe hill was steep.",
        );
        add(
            &mut store,
            "main",
            "t/river",
            "The river ran to the sea past the mill.",
        );
        for _ in 0..3 {
            assert!(!store.search("sea", None, 5).unwrap().is_empty());
            assert!(
                !store
                    .search("hill", Some(("t/land", None)), 5)
                    .unwrap()
                    .is_empty()
            );
            assert_eq!(store.shard_of("t/land").unwrap().name(), "other");
            assert!(store.find_book("t/none").unwrap().is_none());
            assert!(!store.evidence("sea", &[], 3).unwrap().is_empty());
            assert!(store.current_root("t/river").unwrap().is_some());
            let [a, b] = store.retrievers(["t/sea", "t/land"]).unwrap();
            assert_eq!(
                (a.book().key.as_str(), b.book().key.as_str()),
                ("t/sea", "t/land")
            );
            use crate::moot::verify::ChunkLookup;
            assert!(store.chunk_text("t/sea", 0).unwrap().is_some());
        }
        assert_eq!(store.opens(), 2, "two shards, each opened once");
        // A shard made by another handle is found on the next walk.
        add(
            &mut Store::new(dir.path()),
            "third",
            "t/air",
            "The bird flew high in the air.",
        );
        assert_eq!(store.shard_of("t/air").unwrap().name(), "third");
        assert_eq!(store.opens(), 3);
    }
}
