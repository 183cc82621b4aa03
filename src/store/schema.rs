//! Shard schema and migrations, keyed on `PRAGMA user_version`.

use rusqlite::Connection;

/// `PRAGMA application_id` of a grove shard ("grov"), so a stray SQLite file
/// is not mistaken for one.
pub const APPLICATION_ID: i64 = 0x6772_6f76;

/// Schema steps; step i takes the database from user_version i to i + 1.
const MIGRATIONS: &[&str] = &[
    // 1: books, chunks, Merkle levels, full-text index, audit chain.
    "CREATE TABLE books (
        id          INTEGER PRIMARY KEY,
        key         TEXT NOT NULL,
        version     INTEGER NOT NULL CHECK (version >= 1),
        status      TEXT NOT NULL CHECK (status IN ('current', 'superseded', 'removed')),
        title       TEXT,
        author      TEXT,
        language    TEXT,
        ebook       INTEGER,
        source      TEXT NOT NULL,
        decoding    TEXT NOT NULL,
        chunking    TEXT NOT NULL,
        hashing     TEXT NOT NULL,
        root        BLOB NOT NULL CHECK (length(root) = 32),
        chunk_count INTEGER NOT NULL CHECK (chunk_count > 0),
        byte_count  INTEGER NOT NULL,
        -- Chunk rows of one version are contiguous: chunk i has id first_chunk + i,
        -- so a book-scoped search is a rowid range on the full-text index.
        first_chunk INTEGER NOT NULL,
        added_ms    INTEGER NOT NULL,
        UNIQUE (key, version)
    );
    CREATE UNIQUE INDEX books_one_current ON books (key) WHERE status = 'current';
    CREATE TABLE chunks (
        id      INTEGER PRIMARY KEY,
        book_id INTEGER NOT NULL REFERENCES books (id),
        idx     INTEGER NOT NULL,
        label   TEXT NOT NULL,
        leaf    BLOB NOT NULL CHECK (length(leaf) = 32),
        text    TEXT NOT NULL
    );
    -- Every tree level below the root, in blocks of 16 hashes (512 bytes, so a
    -- row stays on its b-tree page): a proof is one point read per level,
    -- without rehashing. The root lives in books.root.
    CREATE TABLE merkle_blocks (
        book_id INTEGER NOT NULL REFERENCES books (id),
        level   INTEGER NOT NULL,
        block   INTEGER NOT NULL,
        hashes  BLOB NOT NULL,
        PRIMARY KEY (book_id, level, block)
    ) WITHOUT ROWID;
    -- Each current book version has its own contentless FTS5 table,
    -- `fts_<books.id>`, rowid = chunks.id: a book-scoped search reads only
    -- that book's index. Superseding or removing a version drops its table.",
    // 2: what a search across books matches and ranks with (see search.rs):
    // each current version's token count and its chunks' (u32 little-endian
    // each), how many current chunks hold each indexed term, and (created by
    // `backfill_statistics`, which also fills the rest for existing books)
    // the collection index `fts_all`.
    "ALTER TABLE books ADD COLUMN tokens INTEGER;
    ALTER TABLE books ADD COLUMN chunk_tokens BLOB;
    CREATE TABLE terms (
        term   TEXT PRIMARY KEY,
        chunks INTEGER NOT NULL CHECK (chunks >= 0)
    ) WITHOUT ROWID;",
];

/// The schema version this build writes.
pub fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Errors while migrating.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("not a grove shard (application_id {0:#x})")]
    NotAShard(i64),
    #[error("written by a newer grove (schema {found}, this build knows up to {known})")]
    TooNew { found: i64, known: i64 },
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
}

/// Brings a shard to the latest schema, one transaction per step.
pub fn migrate(conn: &mut Connection) -> Result<(), SchemaError> {
    let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 && app == 0 {
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
        if tables > 0 {
            return Err(SchemaError::NotAShard(app));
        }
    } else if app != APPLICATION_ID {
        return Err(SchemaError::NotAShard(app));
    }
    if version > latest_version() {
        return Err(SchemaError::TooNew {
            found: version,
            known: latest_version(),
        });
    }
    for (step, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        if step == 0 {
            tx.execute_batch(super::audit::SCHEMA)?;
            tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))?;
        }
        if step == 1 {
            super::index::backfill_statistics(&tx)?;
        }
        tx.execute_batch(&format!("PRAGMA user_version = {}", step + 1))?;
        tx.commit()?;
    }
    Ok(())
}
