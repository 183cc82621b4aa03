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
use grove_core::ask::cache::{Found, cited_books, judge};

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

    /// The answer stored under `lookup`, judged by the cache's one
    /// freshness rule (`ask::cache::judge`) against this node's own books.
    pub fn find(&self, lookup: &Hash, store: &Store) -> Result<Found, StoreError> {
        let stored = self.get(lookup)?;
        let mut now = BTreeMap::new();
        if let Some((_, record)) = &stored {
            for e in cited_books(record) {
                now.insert(e.book.clone(), store.current_root(&e.book)?);
            }
        }
        Ok(judge(lookup, stored, &now))
    }

    /// The answer stored under `lookup`, if any. A row that no longer
    /// reads as a record (written by another version) counts as none.
    pub fn get(&self, lookup: &Hash) -> Result<Option<(Hash, AskRecord)>, StorageError> {
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
            Some((key.try_into().ok()?, serde_json::from_str(&record).ok()?))
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
