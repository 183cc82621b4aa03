//! Full-text index upkeep: the one collection index (`fts_all`, every
//! current chunk of the shard, rowid = chunk id; a book's chunks are a
//! contiguous rowid range, so a book-scoped search is a range of it) and
//! the statistics searches rank with (each version's token count and chunk
//! lengths, and each term's chunk count, `term_counts`), changed in the
//! transaction that changes the books. Queries over them are `search`.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use super::{fts5, term_counts};

/// The FTS5 table holding every current chunk of the shard (rowid =
/// chunks.id): book-scoped searches match a rowid range of it, searches
/// across books all of it.
pub(crate) const COLLECTION_INDEX: &str = "fts_all";

/// FTS5 keeps at most this many bytes of a term.
pub(crate) const MAX_TERM_BYTES: usize = 32768;

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

/// A version's rowid range in the collection index: (first, last).
fn rows_of(conn: &Connection, book_id: i64) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(
        "SELECT first_chunk, first_chunk + chunk_count - 1 FROM books WHERE id = ?1",
        [book_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// A version's terms, each with the number of its chunks holding it, as
/// FTS5 indexes them (its own tokenizer, terms cut at [`MAX_TERM_BYTES`]),
/// counted chunk by chunk as they are stored.
#[derive(Default)]
pub(crate) struct Vocabulary {
    /// Term -> (chunks holding it, the last chunk counted).
    terms: HashMap<TermKey, (i64, u64), foldhash::fast::RandomState>,
    chunks: u64,
}

/// The terms of a run of chunks as their inserts handed them over, for
/// counting on another thread: the terms' bytes end to end, where each
/// term ends, and after how many terms each chunk ends.
#[derive(Default)]
pub(crate) struct TermBatch {
    bytes: Vec<u8>,
    term_ends: Vec<u32>,
    chunk_ends: Vec<u32>,
}

impl TermBatch {
    /// One term of the current chunk.
    pub(crate) fn term(&mut self, term: &[u8]) {
        self.bytes.extend_from_slice(term);
        self.term_ends.push(self.bytes.len() as u32);
    }

    /// Ends the current chunk.
    pub(crate) fn end_chunk(&mut self) {
        self.chunk_ends.push(self.term_ends.len() as u32);
    }

    /// Chunks ended so far.
    pub(crate) fn chunks(&self) -> usize {
        self.chunk_ends.len()
    }
}

/// A term as the vocabulary keys it: a short one (most terms) inline, so a
/// lookup, once per token of an ingest, compares bytes without following
/// a pointer.
enum TermKey {
    Inline { len: u8, bytes: [u8; INLINE_TERM] },
    Heap(Box<[u8]>),
}

const INLINE_TERM: usize = 22;

impl TermKey {
    fn new(term: &[u8]) -> TermKey {
        if term.len() <= INLINE_TERM {
            let mut bytes = [0; INLINE_TERM];
            bytes[..term.len()].copy_from_slice(term);
            TermKey::Inline {
                len: term.len() as u8,
                bytes,
            }
        } else {
            TermKey::Heap(term.into())
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            TermKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            TermKey::Heap(bytes) => bytes,
        }
    }
}

// Hash and equality are the bytes', as `Borrow<[u8]>` requires.
impl std::hash::Hash for TermKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl PartialEq for TermKey {
    fn eq(&self, other: &TermKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for TermKey {}

impl std::borrow::Borrow<[u8]> for TermKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Vocabulary {
    /// Starts counting the next chunk's terms.
    pub(crate) fn next_chunk(&mut self) {
        self.chunks += 1;
    }

    /// Counts one term of the current chunk: each term once per chunk.
    pub(crate) fn term(&mut self, term: &[u8]) {
        let chunk = self.chunks;
        let term = &term[..term.len().min(MAX_TERM_BYTES)];
        match self.terms.get_mut(term) {
            Some((held, last)) if *last != chunk => {
                *held += 1;
                *last = chunk;
            }
            Some(_) => {}
            None => {
                self.terms.insert(TermKey::new(term), (1, chunk));
            }
        }
    }

    /// Counts the terms of a run of chunks.
    pub(crate) fn add_batch(&mut self, batch: &TermBatch) {
        let (mut term, mut start) = (0, 0);
        for &chunk_end in &batch.chunk_ends {
            self.next_chunk();
            while term < chunk_end as usize {
                let end = batch.term_ends[term] as usize;
                self.term(&batch.bytes[start..end]);
                (term, start) = (term + 1, end);
            }
        }
    }

    /// Counts one chunk's terms by tokenizing it (a chunk whose insert did
    /// not hand its terms over, or one already stored).
    pub(crate) fn add(
        &mut self,
        tokenizer: &fts5::Tokenizer<'_>,
        text: &str,
    ) -> rusqlite::Result<()> {
        self.next_chunk();
        tokenizer.for_each_term(text, &mut |term| self.term(term))
    }

    /// Each term (as FTS5 keeps it: UTF-8, and where the byte limit cuts a
    /// character, its lossy end) with its chunk count.
    /// In term order, so the `terms` index is written front to back.
    fn counts(&self) -> Vec<(std::borrow::Cow<'_, str>, i64)> {
        let mut counts: Vec<_> = self
            .terms
            .iter()
            .map(|(term, (held, _))| (String::from_utf8_lossy(term.as_bytes()), *held))
            .collect();
        counts.sort_unstable();
        counts
    }

    /// A stored version's vocabulary, counted again from its chunks.
    fn of_stored(conn: &Connection, book_id: i64) -> rusqlite::Result<Vocabulary> {
        let tokenizer = fts5::Tokenizer::new(conn)?;
        let mut stmt =
            conn.prepare_cached("SELECT text FROM chunks WHERE book_id = ?1 ORDER BY idx")?;
        let mut rows = stmt.query([book_id])?;
        let mut vocabulary = Vocabulary::default();
        while let Some(r) = rows.next()? {
            vocabulary.add(&tokenizer, r.get_ref(0)?.as_str()?)?;
        }
        Ok(vocabulary)
    }
}

/// Adds a just-indexed version to the collection's statistics: its token
/// count, each chunk's, and each of its terms' chunk count (`vocabulary`,
/// counted as its chunks were stored).
pub(crate) fn count_index(
    conn: &Connection,
    book_id: i64,
    vocabulary: &Vocabulary,
) -> rusqlite::Result<()> {
    let lengths = chunk_lengths(conn, book_id)?;
    let tokens: i64 = lengths.iter().map(|&n| i64::from(n)).sum();
    conn.execute(
        "UPDATE books SET tokens = ?1, chunk_tokens = ?2 WHERE id = ?3",
        params![tokens, encode_lengths(&lengths), book_id],
    )?;
    term_counts::add(conn, &as_bytes(&vocabulary.counts()), 1)
}

/// A vocabulary's counts as [`term_counts::add`] takes them.
fn as_bytes<'a>(counts: &'a [(std::borrow::Cow<'_, str>, i64)]) -> Vec<(&'a [u8], i64)> {
    counts.iter().map(|(t, n)| (t.as_bytes(), *n)).collect()
}

/// Takes a current version out of search when it is superseded or removed
/// (its chunks stay in `chunks`): its rows out of the collection index and
/// its terms out of the statistics. Only current versions are in search,
/// and both callers (a new version, a removal) pass the current one.
pub(crate) fn drop_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    let (first, last) = rows_of(conn, book_id)?;
    let vocabulary = Vocabulary::of_stored(conn, book_id)?;
    term_counts::add(conn, &as_bytes(&vocabulary.counts()), -1)?;
    conn.execute(
        &format!("DELETE FROM {COLLECTION_INDEX} WHERE rowid BETWEEN ?1 AND ?2"),
        params![first, last],
    )?;
    Ok(())
}

/// Each chunk's length in tokens, in chunk order, as the collection index
/// counts them (its "docsize" table: one varint per row and column).
pub(crate) fn chunk_lengths(conn: &Connection, book_id: i64) -> rusqlite::Result<Vec<u32>> {
    let bad = || {
        rusqlite::Error::InvalidColumnType(0, "FTS5 docsize".into(), rusqlite::types::Type::Blob)
    };
    let (first, last) = rows_of(conn, book_id)?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT sz FROM {COLLECTION_INDEX}_docsize WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
    ))?;
    let mut rows = stmt.query(params![first, last])?;
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
    term_counts::create_table(conn)?;
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM books WHERE status = 'current' ORDER BY id")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids {
        count_index(conn, id, &Vocabulary::of_stored(conn, id)?)?;
    }
    Ok(())
}

/// Drops the per-book FTS5 tables (`fts_<books.id>`) shards kept beside the
/// collection index before it was their one index (schema step 3); the
/// collection index already holds every current chunk, and the statistics
/// stay as they are. Says so once, in the log.
pub(crate) fn drop_book_indexes(conn: &Connection) -> rusqlite::Result<()> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'
             AND name GLOB 'fts_[0-9]*' AND name NOT GLOB 'fts_*[^0-9]*'",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for table in &tables {
        conn.execute_batch(&format!("DROP TABLE \"{table}\""))?;
    }
    if !tables.is_empty() {
        tracing::info!(
            dropped = tables.len(),
            "shard migrated: one full-text index for every book (the per-book indexes were dropped)"
        );
    }
    Ok(())
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
