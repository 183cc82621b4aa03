//! `ask.db`: answers to asks, by lookup key, each with the answer key it
//! was stored under (`grove_core::ask::cache`). One row per lookup key; a
//! new answer replaces the old in one statement.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use crate::db::{self, DbKind, Schema, Step, StorageError};
use crate::merkle::Hash;
use crate::state_dir::StateDir;
use crate::store::{Store, StoreError};
use grove_core::ask::AskRecord;
use grove_core::ask::cache::{answer_key, cited_roots};

/// `ask.db`: `application_id` "groa".
pub const ASK_SCHEMA: Schema = Schema {
    kind: DbKind::AskCache,
    application_id: 0x6772_6f61,
    steps: &[Step::first(
        "
CREATE TABLE answers (
    lookup BLOB PRIMARY KEY CHECK (length(lookup) = 32),
    answer_key BLOB NOT NULL CHECK (length(answer_key) = 32),
    record TEXT NOT NULL,
    stored_ms INTEGER NOT NULL
);
",
    )],
    adopt_unmarked: false,
};

/// A cached answer and the key it was stored under.
#[derive(Debug, Clone)]
struct Cached {
    answer_key: Hash,
    record: AskRecord,
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

/// A cited book whose root is not the one an answer was proven against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootChange {
    pub book: String,
    /// The roots, hex: then, and now (`None`: the node no longer holds it).
    pub was: String,
    pub now: Option<String>,
}

/// The open cache.
pub struct AskCache {
    conn: Connection,
}

impl AskCache {
    pub fn open(state_dir: &Path) -> Result<AskCache, StorageError> {
        let path = StateDir::new(state_dir).ask_db();
        Ok(AskCache {
            conn: db::open(&path, &ASK_SCHEMA, db::Access::ReadWrite)?,
        })
    }

    /// The answer stored under `lookup`, judged by the answer key over its
    /// cited books' current roots (the one freshness rule of the cache).
    pub fn find(&self, lookup: &Hash, store: &Store) -> Result<Found, StoreError> {
        let Some(cached) = self.get(lookup)? else {
            return Ok(Found::Nothing);
        };
        let mut now_roots = BTreeMap::new();
        let mut changed = Vec::new();
        for (book, was) in cited_roots(&cached.record) {
            let now = store.current_root(&book)?;
            now_roots.insert(book.clone(), now.clone().unwrap_or_default());
            if now.as_ref() != Some(&was) {
                changed.push(RootChange { book, was, now });
            }
        }
        Ok(if answer_key(lookup, &now_roots) == cached.answer_key {
            Found::Fresh(Box::new(cached.record))
        } else {
            Found::Stale(changed)
        })
    }

    /// The answer stored under `lookup`, if any. A row that no longer
    /// reads as a record (written by another version) counts as none.
    fn get(&self, lookup: &Hash) -> Result<Option<Cached>, StorageError> {
        let row: Option<(Vec<u8>, String)> = self
            .conn
            .query_row(
                "SELECT answer_key, record FROM answers WHERE lookup = ?1",
                params![&lookup[..]],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(StorageError::of(&self.conn, "read a cached answer"))?;
        Ok(row.and_then(|(key, record)| {
            Some(Cached {
                answer_key: key.try_into().ok()?,
                record: serde_json::from_str(&record).ok()?,
            })
        }))
    }

    /// Stores `record` under `lookup` and `answer_key`, replacing any
    /// answer stored under `lookup`.
    pub fn put(
        &self,
        lookup: &Hash,
        answer_key: &Hash,
        record: &AskRecord,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let json = serde_json::to_string(record)
            .map_err(std::io::Error::other)
            .map_err(StorageError::of(&self.conn, "encode an answer"))?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO answers (lookup, answer_key, record, stored_ms)
                 VALUES (?1, ?2, ?3, ?4)",
                params![&lookup[..], &answer_key[..], json, now_ms],
            )
            .map_err(StorageError::of(&self.conn, "store an answer"))?;
        Ok(())
    }
}
