//! Shard schema and migrations (run by the SQLite kit, `crate::db`).

use crate::db::{DbKind, Schema, Step};

/// A shard: `application_id` "grov", so a stray SQLite file is not
/// mistaken for one; step i takes the file from user_version i to i + 1.
pub const SHARD: Schema = Schema {
    kind: DbKind::Shard,
    application_id: 0x6772_6f76,
    steps: STEPS,
    adopt_unmarked: false,
    connect: Some(super::fts5::register),
};

const STEPS: &[Step] = &[
    // 1: books, chunks, Merkle levels, full-text index, audit chain.
    Step::first(
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
    -- (Until schema 3 each current book version also had its own
    -- contentless FTS5 table, `fts_<books.id>`, rowid = chunks.id.)",
    ),
    // 2: what a search across books matches and ranks with (see search.rs):
    // each current version's token count and its chunks' (u32 little-endian
    // each), how many current chunks hold each indexed term, and (created by
    // `backfill_statistics`, which also fills the rest for existing books)
    // the collection index `fts_all`.
    Step {
        sql: "ALTER TABLE books ADD COLUMN tokens INTEGER;
    ALTER TABLE books ADD COLUMN chunk_tokens BLOB;
    CREATE TABLE terms (
        term   TEXT PRIMARY KEY,
        chunks INTEGER NOT NULL CHECK (chunks >= 0)
    ) WITHOUT ROWID;",
        audit: false,
        then: Some(super::index::backfill_statistics),
    },
    // 3: the collection index is every book's one index: book-scoped
    // searches match a book's rowid range of it, and the per-book tables
    // go.
    Step {
        sql: "",
        audit: false,
        then: Some(super::index::drop_book_indexes),
    },
    // 4: each term's chunk count moves from a row per term (`terms`) to
    // blocks of terms (`term_blocks`, made by term_counts.rs): an ingest
    // then writes about a thousand rows instead of one per distinct term.
    // (From schema 1, step 2 counts into `term_blocks` already and `terms`
    // is empty.)
    Step {
        sql: "",
        audit: false,
        then: Some(super::term_counts::move_from_terms_table),
    },
];
