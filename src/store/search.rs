//! BM25 search over a shard's current chunks, scoped to one book or all.
//!
//! A book-scoped search (what a moot retrieves with) reads that book's own
//! FTS5 index and ranks with FTS5's `bm25()` over the book. A search over
//! every book ranks like one index holding every searched chunk: its two
//! rounds ([`Shard::query_stats`], then [`Shard::search_ranked`] with the
//! summed stats) are described in `rank` and docs/search.md. The
//! collection's statistics come from each version's token count
//! (`books.tokens`) and the shard's `terms` table (how many current chunks
//! hold each indexed term), both kept in step with every change.

use rusqlite::{Connection, params};

use super::rank::{self, QueryStats};
use super::shard::{BookRecord, Shard};
use super::{StoreError, fts5};
use crate::merkle::Hash;

pub(crate) use rank::{quote, terms};

/// What a search looks through.
#[derive(Debug, Clone, Copy)]
pub enum SearchScope<'a> {
    /// Every current book of the shard, ranked as one collection.
    All,
    /// One book version (what a moot retrieves with).
    Book(&'a BookRecord),
}

/// One hit, best first. `score` is BM25 negated as FTS5's `rank` is:
/// higher is better.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub key: String,
    pub version: u32,
    pub title: Option<String>,
    pub author: Option<String>,
    /// Stable across re-ingests of the same content: `KEY#INDEX`.
    pub node_id: String,
    pub label: String,
    pub index: u64,
    pub score: f64,
    pub content: String,
    pub leaf: Hash,
}

/// The order of hits from several holders: best score first, then book key
/// and chunk index, so equal scores come out the same everywhere.
pub fn hit_order(a: &SearchHit, b: &SearchHit) -> std::cmp::Ordering {
    rank::order((a.score, &a.key, a.index), (b.score, &b.key, b.index))
}

/// The FTS5 table holding one book version's chunks.
pub(crate) fn index_table(book_id: i64) -> String {
    format!("fts_{book_id}")
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
/// token count and each of its terms' chunk count.
pub(crate) fn count_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    // FTS5 keeps new rows and its totals in memory until the transaction
    // commits; `flush` writes them now, where the totals can be read.
    let table = index_table(book_id);
    conn.execute_batch(&format!("INSERT INTO {table} ({table}) VALUES ('flush')"))?;
    conn.execute(
        "UPDATE books SET tokens = ?1 WHERE id = ?2",
        params![index_tokens(conn, book_id)?, book_id],
    )?;
    with_vocabulary(conn, book_id, |vocab| {
        conn.execute_batch(&format!(
            "INSERT INTO terms (term, chunks) SELECT term, doc FROM {vocab} WHERE true
             ON CONFLICT (term) DO UPDATE SET chunks = chunks + excluded.chunks"
        ))
    })
}

/// Drops a version's search index when it is superseded or removed (its
/// chunks stay in `chunks`), taking its terms out of the statistics.
pub(crate) fn drop_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    if index_exists(conn, book_id)? {
        with_vocabulary(conn, book_id, |vocab| {
            conn.execute_batch(&format!(
                "UPDATE terms SET chunks = terms.chunks - v.doc FROM {vocab} AS v WHERE terms.term = v.term;
                 DELETE FROM terms WHERE chunks <= 0"
            ))
        })?;
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
fn index_tokens(conn: &Connection, book_id: i64) -> rusqlite::Result<i64> {
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

/// Fills the statistics of a shard written before they were kept (schema
/// step 2): every current version's token count and terms.
pub(crate) fn backfill_statistics(conn: &Connection) -> rusqlite::Result<()> {
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

impl Shard {
    /// The top `k` chunks for `query` in one book or in every current book:
    /// every word first; when that finds fewer than `k`, the rarest few words
    /// (any of them), ranked together with the all-words match so chunks
    /// holding every word still come first.
    pub fn search(
        &self,
        query: &str,
        scope: SearchScope<'_>,
        k: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let words = terms(query);
        if words.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        match scope {
            // Only current versions have an index.
            SearchScope::Book(b) if b.status != super::BookStatus::Current => Ok(Vec::new()),
            SearchScope::Book(b) => self.search_book(b.id, &words, k),
            SearchScope::All => {
                let stats = self.query_stats(query, k)?;
                self.search_ranked(query, &stats, k)
            }
        }
    }

    /// Round one of a collection-wide search: what this shard's current
    /// books know about `query` (see [`QueryStats`]), for the top `k`.
    pub fn query_stats(&self, query: &str, k: usize) -> Result<QueryStats, StoreError> {
        let words = terms(query);
        let mut stats = QueryStats::empty(words.clone());
        let (chunks, tokens): (i64, i64) = self
            .conn()
            .prepare_cached(
                "SELECT coalesce(sum(chunk_count), 0), coalesce(sum(tokens), 0)
                 FROM books WHERE status = 'current'",
            )
            .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(|e| self.err(e))?;
        stats.chunks = chunks as u64;
        stats.tokens = tokens as u64;
        if words.is_empty() || chunks == 0 {
            return Ok(stats);
        }
        let books = self.books(false)?;
        self.fit_statement_cache(books.len());
        let tokenizer = fts5::Tokenizer::new(self.conn()).map_err(|e| self.err(e))?;
        for (word, held) in words.iter().zip(stats.word_chunks.iter_mut()) {
            let tokens = tokenizer.tokens(word).map_err(|e| self.err(e))?;
            *held = match &tokens[..] {
                [term] => match std::str::from_utf8(term) {
                    Ok(term) => self.term_chunks(term)?,
                    Err(_) => self.count_matches(&books, &quote(word), u64::MAX)?,
                },
                // A word FTS5 cuts in several terms (or none) is a phrase:
                // counted by matching it.
                _ => self.count_matches(&books, &quote(word), u64::MAX)?,
            };
        }
        let cap = k as u64;
        stats.all_words = if words.len() == 1 {
            stats.word_chunks[0].min(cap)
        } else if stats.word_chunks.contains(&0) {
            0
        } else {
            self.count_matches(&books, &rank::all_words_query(&words), cap)?
        };
        Ok(stats)
    }

    /// Round two: the top `k` chunks of this shard's current books for
    /// `query`, scored with the collection's `stats` (round one, summed
    /// over every holder), best first in [`hit_order`].
    pub fn search_ranked(
        &self,
        query: &str,
        stats: &QueryStats,
        k: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let words = terms(query);
        stats.check_words(&words)?;
        if words.is_empty() || k == 0 || stats.chunks == 0 {
            return Ok(Vec::new());
        }
        let ranking = stats.ranking(k);
        let weights = fts5::weights(&ranking);
        let books = self.books(false)?;
        self.fit_statement_cache(books.len());
        let mut best: Vec<(f64, &BookRecord, i64)> = Vec::new();
        for book in &books {
            let table = index_table(book.id);
            let mut stmt = self
                .conn()
                .prepare_cached(&format!(
                    "SELECT rowid, grove_bm25({table}, ?2) AS score FROM {table}
                     WHERE {table} MATCH ?1 ORDER BY score DESC, rowid LIMIT ?3"
                ))
                .map_err(|e| self.err(e))?;
            let mut rows = stmt
                .query(params![ranking.fts_query, weights, k as i64])
                .map_err(|e| self.err(e))?;
            while let Some(r) = rows.next().map_err(|e| self.err(e))? {
                let id: i64 = r.get(0).map_err(|e| self.err(e))?;
                let score: f64 = r.get(1).map_err(|e| self.err(e))?;
                best.push((score, book, id));
            }
            best.sort_by(|a, b| {
                rank::order(
                    (a.0, &a.1.key, (a.2 - a.1.first_chunk) as u64),
                    (b.0, &b.1.key, (b.2 - b.1.first_chunk) as u64),
                )
            });
            best.truncate(k);
        }
        best.into_iter()
            .map(|(score, _, id)| self.hit(id, score))
            .collect()
    }

    /// How many chunks of `books` match `fts_query`, counted up to `cap`.
    fn count_matches(
        &self,
        books: &[BookRecord],
        fts_query: &str,
        cap: u64,
    ) -> Result<u64, StoreError> {
        let mut total = 0u64;
        for book in books {
            if total >= cap {
                break;
            }
            let table = index_table(book.id);
            let n: i64 = self
                .conn()
                .prepare_cached(&format!(
                    "SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ?1 LIMIT ?2)"
                ))
                .and_then(|mut s| {
                    s.query_row(
                        params![fts_query, i64::try_from(cap - total).unwrap_or(i64::MAX)],
                        |r| r.get(0),
                    )
                })
                .map_err(|e| self.err(e))?;
            total += n as u64;
        }
        Ok(total.min(cap))
    }

    /// Current chunks holding an indexed term.
    fn term_chunks(&self, term: &str) -> Result<u64, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn()
            .prepare_cached("SELECT chunks FROM terms WHERE term = ?1")
            .and_then(|mut s| s.query_row([term], |r| r.get::<_, i64>(0)).optional())
            .map(|n| n.unwrap_or(0) as u64)
            .map_err(|e| self.err(e))
    }

    /// Room for one statement per book and round in the statement cache.
    fn fit_statement_cache(&self, books: usize) {
        self.conn()
            .set_prepared_statement_cache_capacity(32 + 2 * books);
    }

    fn search_book(
        &self,
        book_id: i64,
        words: &[String],
        k: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let table = index_table(book_id);
        let all_words = rank::all_words_query(words);
        let hits = self.ranked(&table, &all_words, k)?;
        if hits.len() >= k || words.len() == 1 {
            return Ok(hits);
        }
        let rare = self.rarest(&table, words)?;
        if rare.is_empty() {
            return Ok(hits);
        }
        self.ranked(&table, &rank::fallback_query(&rare, words), k)
    }

    fn ranked(&self, table: &str, fts_query: &str, k: usize) -> Result<Vec<SearchHit>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT h.score, c.idx, c.label, c.leaf, c.text, b.key, b.version, b.title, b.author
                 FROM (SELECT rowid AS id, -rank AS score FROM {table}
                       WHERE {table} MATCH ?1 ORDER BY rank LIMIT ?2) AS h
                 JOIN chunks c ON c.id = h.id
                 JOIN books b ON b.id = c.book_id
                 ORDER BY h.score DESC, h.id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![fts_query, k as i64], hit_from_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// One chunk as a hit with `score`.
    fn hit(&self, chunk_id: i64, score: f64) -> Result<SearchHit, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT ?2, c.idx, c.label, c.leaf, c.text, b.key, b.version, b.title, b.author
                 FROM chunks c JOIN books b ON b.id = c.book_id WHERE c.id = ?1",
            )
            .and_then(|mut s| s.query_row(params![chunk_id, score], hit_from_row))
            .map_err(|e| self.err(e))
    }

    /// Up to three words with the fewest matching chunks (never zero).
    fn rarest(&self, table: &str, words: &[String]) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT count(*) FROM {table} WHERE {table} MATCH ?1"
            ))
            .map_err(|e| self.err(e))?;
        let mut counted = Vec::new();
        for word in rank::counted_words(words) {
            let n: i64 = stmt
                .query_row(params![quote(word)], |r| r.get(0))
                .map_err(|e| self.err(e))?;
            counted.push((n as u64, word.clone()));
        }
        Ok(rank::rarest(counted))
    }
}

/// A hit from `score, idx, label, leaf, text, key, version, title, author`.
fn hit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SearchHit> {
    let key: String = r.get(5)?;
    let index = r.get::<_, i64>(1)? as u64;
    let leaf: Vec<u8> = r.get(3)?;
    Ok(SearchHit {
        node_id: format!("{key}#{index}"),
        key,
        version: r.get(6)?,
        title: r.get(7)?,
        author: r.get(8)?,
        label: r.get(2)?,
        index,
        score: r.get(0)?,
        content: r.get(4)?,
        leaf: leaf.try_into().map_err(|_| {
            rusqlite::Error::InvalidColumnType(3, "leaf".into(), rusqlite::types::Type::Blob)
        })?,
    })
}

#[cfg(test)]
mod tests {
    use super::varint;

    #[test]
    fn varints_decode_as_sqlite_writes_them() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x81]), None);
    }
}
