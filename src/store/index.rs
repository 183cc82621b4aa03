//! Full-text index upkeep: the per-book FTS5 tables, the collection index
//! (`fts_all`) and the statistics a search across books ranks with (each
//! version's token count and the `terms` table), created, counted and dropped
//! in the transaction that changes the books. Queries over them are `search`.

use rusqlite::{Connection, params};

use super::fts5;

/// The FTS5 table holding one book version's chunks.
pub(crate) fn index_table(book_id: i64) -> String {
    format!("fts_{book_id}")
}

/// The FTS5 table holding every current chunk of the shard (rowid =
/// chunks.id), which a search across books matches in one pass.
pub(crate) const COLLECTION_INDEX: &str = "fts_all";

/// Creates the collection index and fills it with every current chunk
/// (schema step 2; a fresh shard starts it empty).
fn create_collection_index(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE {COLLECTION_INDEX} USING fts5 (text, content = '', contentless_delete = 1, tokenize = '{}');
         INSERT INTO {COLLECTION_INDEX} (rowid, text)
            SELECT c.id, c.text FROM chunks c JOIN books b ON b.id = c.book_id
            WHERE b.status = 'current' ORDER BY c.id;",
        fts5::TOKENIZE
    ))
}

/// Creates a book version's search index (inside the ingest transaction).
pub(crate) fn create_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE {} USING fts5 (text, content = '', tokenize = '{}')",
        index_table(book_id),
        fts5::TOKENIZE
    ))
}

/// Adds a just-filled index to the collection's statistics: the version's
/// token count, each chunk's, and each of its terms' chunk count.
pub(crate) fn count_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    // FTS5 keeps new rows and its totals in memory until the transaction
    // commits; `flush` writes them now, where the totals can be read.
    let table = index_table(book_id);
    conn.execute_batch(&format!("INSERT INTO {table} ({table}) VALUES ('flush')"))?;
    conn.execute(
        "UPDATE books SET tokens = ?1, chunk_tokens = ?2 WHERE id = ?3",
        params![
            index_tokens(conn, book_id)?,
            encode_lengths(&chunk_lengths(conn, book_id)?),
            book_id
        ],
    )?;
    with_vocabulary(conn, book_id, |vocab| {
        conn.execute_batch(&format!(
            "INSERT INTO terms (term, chunks) SELECT term, doc FROM {vocab} WHERE true
             ON CONFLICT (term) DO UPDATE SET chunks = chunks + excluded.chunks"
        ))
    })
}

/// Drops a version's search index when it is superseded or removed (its
/// chunks stay in `chunks`), taking its chunks out of the collection index
/// and its terms out of the statistics.
pub(crate) fn drop_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    if index_exists(conn, book_id)? {
        with_vocabulary(conn, book_id, |vocab| {
            conn.execute_batch(&format!(
                "UPDATE terms SET chunks = terms.chunks - v.doc FROM {vocab} AS v WHERE terms.term = v.term;
                 DELETE FROM terms WHERE chunks <= 0"
            ))
        })?;
        conn.execute(
            &format!(
                "DELETE FROM {COLLECTION_INDEX} WHERE rowid IN (SELECT id FROM chunks WHERE book_id = ?1)"
            ),
            [book_id],
        )?;
    }
    conn.execute_batch(&format!("DROP TABLE IF EXISTS {}", index_table(book_id)))
}

/// Runs `f` with a temporary `fts5vocab` table (one row per term: the
/// chunks holding it) over a version's index.
fn with_vocabulary(
    conn: &Connection,
    book_id: i64,
    f: impl FnOnce(&str) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let vocab = "temp.grove_vocabulary";
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS {vocab};
         CREATE VIRTUAL TABLE {vocab} USING fts5vocab (main, {}, row)",
        index_table(book_id)
    ))?;
    let result = f(vocab);
    conn.execute_batch(&format!("DROP TABLE IF EXISTS {vocab}"))?;
    result
}

/// The tokens in a version's index, as FTS5 keeps the total for `bm25()`:
/// the "averages" record (row 1 of its data table) is a varint row count
/// then a varint token count per column.
pub(crate) fn index_tokens(conn: &Connection, book_id: i64) -> rusqlite::Result<i64> {
    let record: Vec<u8> = conn.query_row(
        &format!(
            "SELECT block FROM {}_data WHERE id = 1",
            index_table(book_id)
        ),
        [],
        |r| r.get(0),
    )?;
    let bad = || {
        rusqlite::Error::InvalidColumnType(0, "FTS5 averages".into(), rusqlite::types::Type::Blob)
    };
    let (_, used) = varint(&record).ok_or_else(bad)?;
    let (tokens, _) = varint(record.get(used..).ok_or_else(bad)?).ok_or_else(bad)?;
    i64::try_from(tokens).map_err(|_| bad())
}

/// Each chunk's length in tokens, in chunk order, as the version's index
/// counts them (its "docsize" table: one varint per row and column).
pub(crate) fn chunk_lengths(conn: &Connection, book_id: i64) -> rusqlite::Result<Vec<u32>> {
    let bad = || {
        rusqlite::Error::InvalidColumnType(0, "FTS5 docsize".into(), rusqlite::types::Type::Blob)
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT sz FROM {}_docsize ORDER BY id",
        index_table(book_id)
    ))?;
    let mut rows = stmt.query([])?;
    let mut lengths = Vec::new();
    while let Some(r) = rows.next()? {
        let sz: Vec<u8> = r.get(0)?;
        let (n, _) = varint(&sz).ok_or_else(bad)?;
        lengths.push(u32::try_from(n).map_err(|_| bad())?);
    }
    Ok(lengths)
}

/// Chunk lengths as `books.chunk_tokens` keeps them: u32 little-endian.
pub(crate) fn encode_lengths(lengths: &[u32]) -> Vec<u8> {
    lengths.iter().flat_map(|n| n.to_le_bytes()).collect()
}

/// An SQLite varint: big-endian 7-bit groups, the ninth byte whole.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((value << 8) | u64::from(byte), 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Fills what a search across books needs in a shard written before it
/// was kept (schema step 2): the collection index, and every current
/// version's token count and terms.
pub(crate) fn backfill_statistics(conn: &Connection) -> rusqlite::Result<()> {
    create_collection_index(conn)?;
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM books WHERE status = 'current' ORDER BY id")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids {
        count_index(conn, id)?;
    }
    Ok(())
}

pub(crate) fn index_exists(conn: &Connection, book_id: i64) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
        [index_table(book_id)],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_as_sqlite_writes_them() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x81]), None);
    }
}
