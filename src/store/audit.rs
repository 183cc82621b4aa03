//! Append-only, hash-chained audit log kept inside each SQLite database file.
//!
//! Every state change appends one event in the same transaction as the change,
//! so the chain and the data can never disagree. An event's hash is
//! `SHA-256(previous hash || canonical bytes)`, where the canonical bytes are
//! `seq (u64 BE) || at_ms (i64 BE) || len(kind) (u32 BE) || kind || len(body) (u32 BE) || body`
//! and `body` is the exact UTF-8 JSON text stored with the event. The first
//! event's previous hash is 32 zero bytes.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::db::{Problem, StorageError};

/// SQL that creates the audit table: the SQLite kit runs it in every
/// database's first migration step (`db::Step::first`).
pub use crate::db::AUDIT_SCHEMA as SCHEMA;

/// Why an audit chain did not check: its database could not be read, or
/// a link is broken.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("audit chain broken at event {seq}: {reason}")]
    Broken { seq: i64, reason: String },
}

/// Canonical bytes of one event, the input to its hash (after the previous hash).
pub fn canonical_bytes(seq: i64, at_ms: i64, kind: &str, body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + kind.len() + body.len());
    out.extend_from_slice(&(seq as u64).to_be_bytes());
    out.extend_from_slice(&at_ms.to_be_bytes());
    out.extend_from_slice(&(kind.len() as u32).to_be_bytes());
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body.as_bytes());
    out
}

fn event_hash(prev: &[u8; 32], canonical: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(canonical);
    h.finalize().into()
}

/// Appends one event. Call it inside the transaction that makes the change it
/// records (a `rusqlite::Transaction` derefs to `Connection`).
pub fn append(
    conn: &Connection,
    at_ms: i64,
    kind: &str,
    body: &serde_json::Value,
) -> Result<[u8; 32], StorageError> {
    let err = StorageError::of(conn, "append to the audit chain of");
    let body = body.to_string();
    let last: Option<(i64, Vec<u8>)> = conn
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(&err)?;
    let (seq, prev) = match last {
        Some((seq, hash)) => {
            let prev: [u8; 32] = hash.try_into().map_err(|_| {
                let short = format!("the hash of audit event {seq} is not 32 bytes");
                let op = "append to the audit chain of";
                StorageError::new(&crate::db::conn_path(conn), op, Problem::Damaged(short))
            })?;
            (seq + 1, prev)
        }
        None => (1, [0u8; 32]),
    };
    let hash = event_hash(&prev, &canonical_bytes(seq, at_ms, kind, &body));
    conn.execute(
        "INSERT INTO audit (seq, at_ms, kind, body, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![seq, at_ms, kind, body, &prev[..], &hash[..]],
    )
    .map_err(&err)?;
    Ok(hash)
}

/// Outcome of walking one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    pub events: u64,
    pub head: Option<[u8; 32]>,
    /// Read as immutable (the main file alone; see `verify_file`).
    pub immutable: bool,
}

/// Walks the whole chain from the first event and returns the first broken
/// link as an error: a gap in sequence numbers, a `prev` that does not match
/// the previous hash, or a hash that does not match the event's bytes.
pub fn verify(conn: &Connection) -> Result<ChainReport, AuditError> {
    let err = StorageError::of(conn, "read the audit chain of");
    let mut stmt = conn
        .prepare("SELECT seq, at_ms, kind, body, prev, hash FROM audit ORDER BY seq")
        .map_err(&err)?;
    let mut rows = stmt.query([]).map_err(&err)?;
    let mut expected_prev = [0u8; 32];
    let mut expected_seq = 1i64;
    let mut events = 0u64;
    while let Some(row) = rows.next().map_err(&err)? {
        let event = |row: &rusqlite::Row<'_>| -> rusqlite::Result<_> {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        };
        let (seq, at_ms, kind, body, prev, hash): (i64, i64, String, String, Vec<u8>, Vec<u8>) =
            event(row).map_err(&err)?;
        let broken = |reason: String| AuditError::Broken { seq, reason };
        if seq != expected_seq {
            return Err(broken(format!("expected event {expected_seq} next")));
        }
        if prev != expected_prev {
            return Err(broken(
                "previous-hash link does not match the event before it".into(),
            ));
        }
        let computed = event_hash(&expected_prev, &canonical_bytes(seq, at_ms, &kind, &body));
        if hash != computed {
            return Err(broken("event hash does not match its contents".into()));
        }
        expected_prev = computed;
        expected_seq += 1;
        events += 1;
    }
    Ok(ChainReport {
        events,
        head: (events > 0).then_some(expected_prev),
        immutable: false,
    })
}

/// Opens a database file read-only and walks its chain; never writes.
///
/// A WAL database whose directory the caller cannot write (an operator
/// checking the service's state) cannot be opened read-only the usual way:
/// SQLite would have to create its shared-memory file. It is then read as
/// immutable, the main file alone, and the report says so (`immutable`):
/// events still in a live writer's WAL are not seen, but what is seen is a
/// prefix of the chain, so an intact chain never reads as broken.
pub fn verify_file(path: &std::path::Path) -> Result<ChainReport, AuditError> {
    let opened = crate::db::open_read_only(path)?;
    Ok(ChainReport {
        immutable: opened.immutable,
        ..verify(&opened.conn)?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(SCHEMA).unwrap();
        c
    }

    #[test]
    fn chain_verifies_and_names_first_tampered_event() {
        let c = db();
        for i in 0..5 {
            append(&c, 1000 + i, "test", &serde_json::json!({ "i": i })).unwrap();
        }
        assert_eq!(verify(&c).unwrap().events, 5);
        c.execute("UPDATE audit SET body = '{\"i\":9}' WHERE seq = 3", [])
            .unwrap();
        match verify(&c) {
            Err(AuditError::Broken { seq, .. }) => assert_eq!(seq, 3),
            other => panic!("expected a broken link at 3, got {other:?}"),
        }
    }

    #[test]
    fn deleted_event_is_a_gap() {
        let c = db();
        for i in 0..3 {
            append(&c, i, "test", &serde_json::json!(null)).unwrap();
        }
        c.execute("DELETE FROM audit WHERE seq = 2", []).unwrap();
        assert!(matches!(verify(&c), Err(AuditError::Broken { seq: 3, .. })));
    }
}
