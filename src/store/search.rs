//! BM25 search over a shard's current chunks, scoped to one book or all.
//!
//! Both scopes match one FTS5 index, the collection index (`fts_all`,
//! every current chunk; a book's chunks are a contiguous rowid range of
//! it), and rank like one index holding every searched chunk, with BM25
//! over the searched chunks alone. A book-scoped search (what a moot
//! retrieves with) counts its statistics in the book's range; a search
//! over every book runs in two rounds ([`Shard::query_stats`], then
//! [`Shard::search_ranked`] with the stats summed over every holder),
//! described in `rank` and docs/search.md. The collection's statistics
//! come from each version's token count (`books.tokens`) and the shard's
//! `terms` table (how many current chunks hold each indexed term). All of
//! it changes in the same transaction as the books (its upkeep: `index`).

use rusqlite::params;

use super::index::{COLLECTION_INDEX, MAX_TERM_BYTES};
use super::rank::{self, QueryStats, quote, terms};
use super::shard::{BookRecord, Shard};
use super::{StoreError, fts5};
use crate::db::{Problem, StorageError};
use crate::merkle::Hash;

/// The rowids a search matches: one book's range, or every row.
#[derive(Debug, Clone, Copy)]
struct Rows {
    first: i64,
    last: i64,
}

impl Rows {
    const ALL: Rows = Rows {
        first: i64::MIN,
        last: i64::MAX,
    };

    fn of(book: &BookRecord) -> Rows {
        Rows {
            first: book.first_chunk,
            last: book.first_chunk + book.count as i64 - 1,
        }
    }
}

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
            SearchScope::Book(b) => {
                let stats = self.book_stats(b, &words, k)?;
                self.ranked_in(&words, &stats, k, Some(b))
            }
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
            .map_err(self.err("search"))?;
        stats.chunks = chunks as u64;
        stats.tokens = tokens as u64;
        if words.is_empty() || chunks == 0 {
            return Ok(stats);
        }
        let tokenizer = fts5::Tokenizer::new(self.conn()).map_err(self.err("search"))?;
        for (word, held) in words.iter().zip(stats.word_chunks.iter_mut()) {
            let tokens = tokenizer.tokens(word).map_err(self.err("search"))?;
            *held = match &tokens[..] {
                // FTS5 cuts terms at 32 KiB; a longer one is counted by matching.
                [term] if term.len() < MAX_TERM_BYTES => match std::str::from_utf8(term) {
                    Ok(term) => self.term_chunks(term)?,
                    Err(_) => self.count_matches(&quote(word), u64::MAX, Rows::ALL)?,
                },
                // A word FTS5 cuts in several terms (or none) is a phrase:
                // counted by matching it.
                _ => self.count_matches(&quote(word), u64::MAX, Rows::ALL)?,
            };
        }
        stats.all_words = self.all_words(&stats, k, Rows::ALL)?;
        Ok(stats)
    }

    /// What a book-scoped search ranks with: the book's own chunk and
    /// token counts, and its chunks holding each word (counted in its
    /// rowid range), as BM25 over that book alone has them.
    fn book_stats(
        &self,
        book: &BookRecord,
        words: &[String],
        k: usize,
    ) -> Result<QueryStats, StoreError> {
        let mut stats = QueryStats::empty(words.to_vec());
        let tokens: Option<i64> = self
            .conn()
            .prepare_cached("SELECT tokens FROM books WHERE id = ?1")
            .and_then(|mut s| s.query_row([book.id], |r| r.get(0)))
            .map_err(self.err("search"))?;
        stats.chunks = book.count;
        stats.tokens = tokens.unwrap_or(0) as u64;
        let rows = Rows::of(book);
        for (word, held) in words.iter().zip(stats.word_chunks.iter_mut()) {
            *held = self.count_matches(&quote(word), u64::MAX, rows)?;
        }
        stats.all_words = self.all_words(&stats, k, rows)?;
        Ok(stats)
    }

    /// Chunks in `rows` holding every word of `stats`, counted up to `k`.
    fn all_words(&self, stats: &QueryStats, k: usize, rows: Rows) -> Result<u64, StoreError> {
        let cap = k as u64;
        Ok(if stats.words.len() == 1 {
            stats.word_chunks[0].min(cap)
        } else if stats.word_chunks.contains(&0) {
            0
        } else {
            self.count_matches(&rank::all_words_query(&stats.words), cap, rows)?
        })
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
        self.ranked_in(&terms(query), stats, k, None)
    }

    /// The top `k` chunks for `words` scored with `stats`, of one book or
    /// (`None`) of every current book, best first in [`hit_order`].
    fn ranked_in(
        &self,
        words: &[String],
        stats: &QueryStats,
        k: usize,
        book: Option<&BookRecord>,
    ) -> Result<Vec<SearchHit>, StoreError> {
        stats.check_words(words)?;
        if words.is_empty() || k == 0 || stats.chunks == 0 {
            return Ok(Vec::new());
        }
        let ranking = stats.ranking(k);
        // Current books in key order: a book's place breaks ties.
        let books = self.book_rows(book.map(|b| b.id))?;
        let rows = book.map_or(Rows::ALL, Rows::of);
        let scorer = rank::Scorer::new(&ranking, books);
        let (weights, book_rows, lengths) = scorer.encode();
        let mut best: Vec<(f64, rank::Tie, i64)> = Vec::new();
        {
            let mut stmt = self
                .conn()
                .prepare_cached(&format!(
                    "SELECT id, score FROM (
                        SELECT rowid AS id, grove_rank({COLLECTION_INDEX}, ?2, ?3, ?4, ?5) AS score
                        FROM {COLLECTION_INDEX} WHERE {COLLECTION_INDEX} MATCH ?1
                        AND rowid BETWEEN ?6 AND ?7)
                     WHERE score IS NOT NULL"
                ))
                .map_err(self.err("search"))?;
            let mut rows = stmt
                .query(params![
                    ranking.fts_query,
                    weights,
                    book_rows,
                    lengths,
                    k as i64,
                    rows.first,
                    rows.last
                ])
                .map_err(self.err("search"))?;
            while let Some(r) = rows.next().map_err(self.err("search"))? {
                let id: i64 = r.get(0).map_err(self.err("search"))?;
                let score: f64 = r.get(1).map_err(self.err("search"))?;
                if let Some((tie, _)) = scorer.locate(id) {
                    best.push((score, tie, id));
                }
            }
        }
        best.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        best.truncate(k);
        best.into_iter()
            .map(|(score, _, id)| self.hit(id, score))
            .collect()
    }

    /// Every current book's rows for a scorer (or only book `only`'s), in
    /// key order (a book's place breaks ties).
    fn book_rows(&self, only: Option<i64>) -> Result<Vec<rank::BookRows>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT first_chunk, chunk_count, chunk_tokens, key FROM books
                 WHERE status = 'current' AND (?1 IS NULL OR id = ?1) ORDER BY key",
            )
            .map_err(self.err("search"))?;
        let mut rows = stmt.query([only]).map_err(self.err("search"))?;
        let mut books = Vec::new();
        while let Some(r) = rows.next().map_err(self.err("search"))? {
            let get = |i| r.get_ref(i).map_err(self.err("search"));
            let first = get(0)?.as_i64().map_err(|e| self.err("search")(e.into()))?;
            let count = get(1)?.as_i64().map_err(|e| self.err("search")(e.into()))?;
            let lengths = get(2)?
                .as_blob()
                .ok()
                .filter(|l| l.len() as i64 == 4 * count)
                .ok_or_else(|| {
                    let detail = format!(
                        "the chunk lengths of book `{}` are missing or do not match its {count} chunks",
                        get(3).ok().and_then(|k| k.as_str().ok()).unwrap_or("?")
                    );
                    StorageError::new(self.path(), "search", Problem::Damaged(detail))
                })?
                .to_vec();
            books.push(rank::BookRows {
                first,
                key_rank: books.len() as u64,
                lengths,
            });
        }
        Ok(books)
    }

    /// How many current chunks in `rows` match `fts_query`, counted up to `cap`.
    fn count_matches(&self, fts_query: &str, cap: u64, rows: Rows) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn()
            .prepare_cached(&format!(
                "SELECT count(*) FROM (SELECT 1 FROM {COLLECTION_INDEX}
                 WHERE {COLLECTION_INDEX} MATCH ?1 AND rowid BETWEEN ?3 AND ?4 LIMIT ?2)"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        fts_query,
                        i64::try_from(cap).unwrap_or(i64::MAX),
                        rows.first,
                        rows.last
                    ],
                    |r| r.get(0),
                )
            })
            .map_err(self.err("search"))?;
        Ok(n as u64)
    }

    /// Current chunks holding an indexed term.
    fn term_chunks(&self, term: &str) -> Result<u64, StoreError> {
        super::term_counts::chunks_holding(self.conn(), term).map_err(self.err("search"))
    }

    /// One chunk as a hit with `score`.
    fn hit(&self, chunk_id: i64, score: f64) -> Result<SearchHit, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT ?2, c.idx, c.label, c.leaf, c.text, b.key, b.version, b.title, b.author
                 FROM chunks c JOIN books b ON b.id = c.book_id WHERE c.id = ?1",
            )
            .and_then(|mut s| s.query_row(params![chunk_id, score], hit_from_row))
            .map_err(self.err("search"))
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
    use std::collections::BTreeMap;

    use rusqlite::Connection;

    use super::*;
    use crate::book::BookText;
    use crate::store::Store;

    /// A generated text of `paragraphs` paragraphs over a small vocabulary
    /// (no header: text without Gutenberg markers decodes as all body).
    fn generated_text(words: &[&str], paragraphs: usize) -> BookText {
        let mut text = String::new();
        for p in 0..paragraphs {
            let line: Vec<&str> = (0..30 + p % 17)
                .map(|i| words[(i * 7 + p * 3) % words.len()])
                .collect();
            text.push_str(&line.join(" "));
            text.push_str("\n\n");
        }
        BookText::decode(text.as_bytes(), 1 << 20).unwrap()
    }

    /// The shard's kept statistics, and the same counted afresh from one
    /// FTS5 index over its current chunks.
    fn statistics(shard: &Shard) -> (BTreeMap<String, i64>, BTreeMap<String, i64>, i64, i64) {
        let conn = shard.conn();
        let kept = super::super::term_counts::all(conn).unwrap();
        let fresh = Connection::open_in_memory().unwrap();
        fresh
            .execute_batch(&format!(
                "CREATE VIRTUAL TABLE f USING fts5 (text, tokenize = '{}');
                 CREATE VIRTUAL TABLE v USING fts5vocab (f, row);",
                fts5::TOKENIZE
            ))
            .unwrap();
        let mut rows = conn
            .prepare(
                "SELECT c.text FROM chunks c JOIN books b ON b.id = c.book_id WHERE b.status = 'current'",
            )
            .unwrap();
        let mut chunks = 0;
        for text in rows.query_map([], |r| r.get::<_, String>(0)).unwrap() {
            fresh
                .execute("INSERT INTO f (text) VALUES (?1)", [text.unwrap()])
                .unwrap();
            chunks += 1;
        }
        let counted = fresh
            .prepare("SELECT term, doc FROM v")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let tokens: i64 = fresh
            .query_row("SELECT sum(cnt) FROM v", [], |r| r.get(0))
            .unwrap();
        let kept_tokens: i64 = conn
            .query_row(
                "SELECT coalesce(sum(tokens), 0) FROM books WHERE status = 'current'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept_tokens, tokens, "token counts");
        (kept, counted, chunks, tokens)
    }

    #[test]
    fn statistics_follow_every_change_and_old_shards_gain_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::new(dir.path());
        let shard = store.open_or_create("main").unwrap();
        let add = |shard: &mut Shard, key: &str, text: &BookText| {
            shard
                .ingest(key, text, 1 << 16, "test", 0, &mut |_| {})
                .unwrap()
        };
        add(
            shard,
            "t/a",
            &generated_text(&["sea", "ship", "whale", "the"], 30),
        );
        add(
            shard,
            "t/b",
            &generated_text(&["pride", "ball", "the", "sea"], 20),
        );
        add(
            shard,
            "t/c",
            &generated_text(&["angler", "trout", "river"], 12),
        );
        let (kept, counted, ..) = statistics(shard);
        assert_eq!(kept, counted);
        // A new version and a removal take the old chunks out.
        add(
            shard,
            "t/b",
            &generated_text(&["pride", "dance", "letter"], 25),
        );
        shard.remove("t/c", 1).unwrap();
        let (kept, counted, chunks, _) = statistics(shard);
        assert_eq!(kept, counted);
        assert!(!kept.contains_key("trout") && !kept.contains_key("ball"));
        for b in shard.books(true).unwrap() {
            let report = shard.verify(&b).unwrap();
            assert!(
                report.problems.is_empty(),
                "{}: {:?}",
                b.key,
                report.problems
            );
        }
        let stats = shard.query_stats("the sea whale", 3).unwrap();
        assert_eq!(stats.chunks, chunks as u64);
        let before = shard.search("the sea whale", SearchScope::All, 5).unwrap();
        assert_eq!(before.len(), 5);

        // A shard from before the statistics (schema 1) gains them on open.
        shard
            .conn()
            .execute_batch(&format!(
                "DROP TABLE {COLLECTION_INDEX}; DROP TABLE term_blocks;
                 ALTER TABLE books DROP COLUMN tokens; ALTER TABLE books DROP COLUMN chunk_tokens;
                 PRAGMA user_version = 1;"
            ))
            .unwrap();
        // A new handle opens the file again (this one keeps it open).
        drop(store);
        let mut store = Store::new(dir.path());
        let shard = store.open("main").unwrap();
        let (kept, counted, ..) = statistics(shard);
        assert_eq!(kept, counted);
        assert_eq!(
            shard.search("the sea whale", SearchScope::All, 5).unwrap(),
            before
        );
    }

    /// Schema objects of a shard whose name matches `glob`.
    fn tables(shard: &Shard, glob: &str) -> i64 {
        shard
            .conn()
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name GLOB ?1",
                [glob],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Makes a shard's file what schema 2 kept: a per-book FTS5 table
    /// beside the collection index, and a row of `terms` per term; returns
    /// the term counts.
    fn as_schema_2(shard: &Shard) -> BTreeMap<String, i64> {
        for b in shard.books(false).unwrap() {
            shard
                .conn()
                .execute_batch(&format!(
                    "CREATE VIRTUAL TABLE fts_{} USING fts5 (text, content = '', tokenize = '{}');
                     INSERT INTO fts_{} (rowid, text) SELECT id, text FROM chunks WHERE book_id = {};",
                    b.id,
                    fts5::TOKENIZE,
                    b.id,
                    b.id
                ))
                .unwrap();
        }
        let counts = super::super::term_counts::all(shard.conn()).unwrap();
        shard
            .conn()
            .execute_batch(
                "CREATE TABLE terms (term TEXT PRIMARY KEY, chunks INTEGER NOT NULL CHECK (chunks >= 0)) WITHOUT ROWID;
                 DROP TABLE term_blocks; PRAGMA user_version = 2;",
            )
            .unwrap();
        for (term, chunks) in &counts {
            shard
                .conn()
                .execute("INSERT INTO terms VALUES (?1, ?2)", params![term, chunks])
                .unwrap();
        }
        counts
    }

    /// A shard of schema 2 kept a per-book FTS5 table beside the
    /// collection index and a row per term: opened, it drops the tables
    /// in one step, moves the counts into blocks in the next, and every
    /// search answers as before.
    #[test]
    fn a_shard_with_per_book_indexes_migrates_to_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::new(dir.path());
        let shard = store.open_or_create("main").unwrap();
        for (key, words, n) in [
            ("t/a", ["sea", "ship", "whale", "the"], 30),
            ("t/b", ["pride", "ball", "the", "sea"], 20),
        ] {
            shard
                .ingest(
                    key,
                    &generated_text(&words, n),
                    1 << 16,
                    "test",
                    0,
                    &mut |_| {},
                )
                .unwrap();
        }
        let before = shard.search("the sea whale", SearchScope::All, 5).unwrap();
        let book = shard.book("t/a", None).unwrap();
        let scoped = shard
            .search("sea whale", SearchScope::Book(&book), 4)
            .unwrap();
        assert_eq!(scoped.len(), 4);
        let counts = as_schema_2(shard);
        assert_eq!(
            tables(shard, "fts_[0-9]*"),
            2 * 5,
            "two tables and their shadow tables"
        );
        // A new handle opens the file again (this one keeps it open).
        drop(store);
        let mut store = Store::new(dir.path());
        let shard = store.open("main").unwrap();
        assert_eq!(
            tables(shard, "fts_[0-9]*"),
            0,
            "the per-book tables are dropped"
        );
        let version: i64 = shard
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 4);
        let (kept, counted, ..) = statistics(shard);
        assert_eq!(kept, counted, "each term's count moved to its block");
        assert_eq!(kept, counts);
        assert_eq!(
            tables(shard, "terms"),
            0,
            "the table of a row per term is dropped"
        );
        assert_eq!(
            shard
                .search("sea whale", SearchScope::Book(&book), 4)
                .unwrap(),
            scoped
        );
        assert_eq!(
            shard.search("the sea whale", SearchScope::All, 5).unwrap(),
            before
        );
    }
}
