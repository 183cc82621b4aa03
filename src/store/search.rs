//! BM25 search over a shard's current chunks, scoped to one book or all.
//!
//! Query text is user input, so it is never handed to FTS5 as syntax: it is
//! cut into words and each word is quoted, so quotes, parentheses, `NEAR`,
//! `*`, `^` and column filters are plain words.

use rusqlite::{Connection, params};

use super::StoreError;
use super::shard::{BookRecord, Shard};
use crate::merkle::Hash;

/// How many of the query's words the fallback keeps (the rarest).
const FALLBACK_TERMS: usize = 3;
/// How many of the longest words are counted to find the rarest.
const COUNTED_TERMS: usize = 8;

/// What a search looks through.
#[derive(Debug, Clone, Copy)]
pub enum SearchScope<'a> {
    /// Every current book of the shard.
    All,
    /// One book version (what a moot retrieves with).
    Book(&'a BookRecord),
}

/// One hit, best first. `score` is FTS5's bm25 negated: higher is better.
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

/// The words of a query: maximal runs of letters and digits, lowercased,
/// first occurrence kept.
pub(crate) fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// One word as an FTS5 string literal (a word never holds `"`, but doubling
/// keeps the literal closed whatever it holds).
pub(crate) fn quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// The FTS5 table holding one book version's chunks.
pub(crate) fn index_table(book_id: i64) -> String {
    format!("fts_{book_id}")
}

/// Creates a book version's search index (inside the ingest transaction).
pub(crate) fn create_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE {} USING fts5 (text, content = '', tokenize = 'porter unicode61 remove_diacritics 2')",
        index_table(book_id)
    ))
}

/// Drops a version's search index when it is superseded or removed (its
/// chunks stay in `chunks`).
pub(crate) fn drop_index(conn: &Connection, book_id: i64) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("DROP TABLE IF EXISTS {}", index_table(book_id)))
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
                let mut hits = Vec::new();
                for book in self.books(false)? {
                    hits.extend(self.search_book(book.id, &words, k)?);
                }
                hits.sort_by(|a, b| b.score.total_cmp(&a.score));
                hits.truncate(k);
                Ok(hits)
            }
        }
    }

    fn search_book(
        &self,
        book_id: i64,
        words: &[String],
        k: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let table = index_table(book_id);
        let all_words = words
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" AND ");
        let hits = self.ranked(&table, &all_words, k)?;
        if hits.len() >= k || words.len() == 1 {
            return Ok(hits);
        }
        let rare = self.rarest(&table, words)?;
        if rare.is_empty() {
            return Ok(hits);
        }
        let mut any = rare
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" OR ");
        any.push_str(&format!(" OR ({all_words})"));
        self.ranked(&table, &any, k)
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
            .query_map(params![fts_query, k as i64], |r| {
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
                        rusqlite::Error::InvalidColumnType(
                            3,
                            "leaf".into(),
                            rusqlite::types::Type::Blob,
                        )
                    })?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Up to three words with the fewest matching chunks (never zero).
    fn rarest(&self, table: &str, words: &[String]) -> Result<Vec<String>, StoreError> {
        let mut longest: Vec<&String> = words.iter().collect();
        longest.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
        longest.truncate(COUNTED_TERMS);
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT count(*) FROM {table} WHERE {table} MATCH ?1"
            ))
            .map_err(|e| self.err(e))?;
        let mut counted = Vec::new();
        for word in longest {
            let n: i64 = stmt
                .query_row(params![quote(word)], |r| r.get(0))
                .map_err(|e| self.err(e))?;
            if n > 0 {
                counted.push((n, word.clone()));
            }
        }
        counted.sort();
        Ok(counted
            .into_iter()
            .take(FALLBACK_TERMS)
            .map(|(_, w)| w)
            .collect())
    }
}
