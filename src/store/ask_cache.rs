//! `ask.db`: answers to asks, by lookup key, each with the answer key it
//! was stored under (`grove_core::ask::cache`). One row per lookup key; a
//! new answer replaces the old in one statement. Beside them, the answers
//! a running node gave, by run root (`kept`, the newest [`KEPT_ANSWERS`]),
//! which the ask page shows.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use crate::db::{self, DbKind, Schema, Step, StorageError};
use crate::merkle::Hash;
use crate::state_dir::StateDir;
use crate::store::{Store, StoreError};
use grove_core::ask::cache::{Found, cited_books, judge};
use grove_core::ask::{AskRecord, Label};

/// `ask.db`: `application_id` "groa".
pub const ASK_SCHEMA: Schema = Schema {
    kind: DbKind::AskCache,
    application_id: 0x6772_6f61,
    steps: &[
        Step::first(
            "
CREATE TABLE answers (
    lookup BLOB PRIMARY KEY CHECK (length(lookup) = 32),
    answer_key BLOB NOT NULL CHECK (length(answer_key) = 32),
    record TEXT NOT NULL,
    stored_ms INTEGER NOT NULL
);
",
        ),
        // The answers a running node gave, by run root, for the ask page.
        Step::sql(
            "
CREATE TABLE kept (
    run_root TEXT PRIMARY KEY,
    question TEXT NOT NULL,
    label TEXT NOT NULL,
    mesh INTEGER NOT NULL,
    record TEXT NOT NULL,
    stored_ms INTEGER NOT NULL
);
CREATE INDEX kept_by_time ON kept (stored_ms);
",
        ),
    ],
    adopt_unmarked: false,
    connect: None,
};

/// Answers kept for the ask page; older ones are dropped.
pub const KEPT_ANSWERS: usize = 200;

/// A kept answer, as the ask page lists it.
#[derive(Debug, Clone)]
pub struct KeptAnswer {
    pub run_root: String,
    pub question: String,
    pub label: Label,
    pub mesh: bool,
    pub stored_ms: i64,
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

    /// The answer stored under `lookup`, judged by the cache's one
    /// freshness rule (`ask::cache::judge`) against this node's own books.
    pub fn find(&self, lookup: &Hash, store: &mut Store) -> Result<Found, StoreError> {
        let stored = self.get(lookup)?;
        let cited = stored.iter().flat_map(|(_, r)| cited_books(r));
        let now = store.current_roots(cited.map(|e| e.book.clone()).collect::<Vec<_>>())?;
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

    /// Keeps `record` for the ask page (replacing the same run), dropping
    /// all but the newest [`KEPT_ANSWERS`], in one transaction.
    pub fn keep_answer(&mut self, record: &AskRecord, now_ms: i64) -> Result<(), StorageError> {
        let json = serde_json::to_string(record)
            .map_err(std::io::Error::other)
            .map_err(StorageError::of(&self.conn, "encode an answer"))?;
        let failed = StorageError::of(&self.conn, "keep an answer");
        let tx = self.conn.transaction().map_err(&failed)?;
        tx.execute(
            "INSERT OR REPLACE INTO kept (run_root, question, label, mesh, record, stored_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                record.run.root,
                record.question,
                record.verification.label.as_str(),
                record.mesh.is_some(),
                json,
                now_ms
            ],
        )
        .and_then(|_| {
            tx.execute(
                "DELETE FROM kept WHERE run_root NOT IN
                 (SELECT run_root FROM kept ORDER BY stored_ms DESC LIMIT ?1)",
                params![KEPT_ANSWERS as i64],
            )
        })
        .and_then(|_| tx.commit())
        .map_err(failed)
    }

    /// The kept answer whose run root is `run_root`.
    pub fn kept(&self, run_root: &str) -> Result<Option<AskRecord>, StorageError> {
        let row: Option<String> = self
            .conn
            .query_row(
                "SELECT record FROM kept WHERE run_root = ?1",
                params![run_root],
                |r| r.get(0),
            )
            .optional()
            .map_err(StorageError::of(&self.conn, "read a kept answer"))?;
        Ok(row.and_then(|r| serde_json::from_str(&r).ok()))
    }

    /// The newest `n` kept answers, newest first (a row whose label this
    /// grove does not know, written by another version, is left out, as
    /// rows that no longer read as records are).
    pub fn recent(&self, n: usize) -> Result<Vec<KeptAnswer>, StorageError> {
        let read = |conn: &Connection| -> rusqlite::Result<Vec<Option<KeptAnswer>>> {
            let mut stmt = conn.prepare(
                "SELECT run_root, question, label, mesh, stored_ms FROM kept
                 ORDER BY stored_ms DESC LIMIT ?1",
            )?;
            stmt.query_map(params![n as i64], |r| {
                let (run_root, question, label, mesh, stored_ms): (
                    String,
                    String,
                    String,
                    bool,
                    i64,
                ) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                Ok(Label::parse(&label).map(|label| KeptAnswer {
                    run_root,
                    question,
                    label,
                    mesh,
                    stored_ms,
                }))
            })?
            .collect()
        };
        let rows = read(&self.conn).map_err(StorageError::of(&self.conn, "list kept answers"))?;
        Ok(rows.into_iter().flatten().collect())
    }
}
