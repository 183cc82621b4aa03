//! A stored book as a moot participant: its tree (title, author, genre) and
//! its own book-scoped search as the moot's retriever.

use super::{BookRecord, SearchScope, Shard, Store, StoreError};
use crate::moot::verify::{ChunkLookup, LookupError};
use crate::moot::{Passage, RetrieveError, Retriever, Tree};

/// One current book version and the shard it lives in, borrowed from the
/// store that keeps it open.
pub struct BookRetriever<'s> {
    shard: &'s Shard,
    book: BookRecord,
    /// The best score of the last search ([`Retriever::search`]), `Some(None)`
    /// when it matched nothing; `None` before any search.
    last_best: Option<Option<f64>>,
}

impl<'s> BookRetriever<'s> {
    /// The current version of `key`.
    pub fn open(store: &'s mut Store, key: &str) -> Result<BookRetriever<'s>, StoreError> {
        let [retriever] = store.retrievers([key])?;
        Ok(retriever)
    }

    /// The current version of `key` in `shard`.
    pub(super) fn new(shard: &'s Shard, key: &str) -> Result<BookRetriever<'s>, StoreError> {
        let book = shard.book(key, None)?;
        Ok(BookRetriever {
            shard,
            book,
            last_best: None,
        })
    }

    pub fn book(&self) -> &BookRecord {
        &self.book
    }

    /// Chunk `index` of the book as a passage.
    pub fn passage(&self, index: u64) -> Result<Passage, StoreError> {
        let (label, leaf, content) = self.shard.chunk(&self.book, index)?;
        Ok(Passage {
            node_id: format!("{}#{index}", self.book.key),
            label,
            index,
            leaf: hex::encode(leaf),
            content,
        })
    }

    /// The inclusion proof of chunk `index` against the book's root.
    pub fn proof(&self, index: u64) -> Result<Vec<crate::merkle::ProofStep>, StoreError> {
        Ok(self.shard.proof(&self.book, index)?.proof)
    }

    /// The best score the book's own search gives `query` among its top
    /// `k` (as `book search` reports it: higher is better), or `None` when
    /// no chunk matches any of its words.
    pub fn best_score(&self, query: &str, k: usize) -> Result<Option<f64>, StoreError> {
        let hits = self
            .shard
            .search(query, SearchScope::Book(&self.book), k.max(1))?;
        Ok(hits.iter().map(|h| h.score).reduce(f64::max))
    }

    /// The best score of the last search through [`Retriever::search`] (as
    /// [`BookRetriever::best_score`] would give it for that query: the top
    /// hit's), or `None` when there was none: a turn's policy reads the
    /// turn's own search instead of searching again.
    pub fn best_of_last_search(&self) -> Option<Option<f64>> {
        self.last_best
    }

    /// The book as a tree. Missing metadata stays empty: an untitled book is
    /// addressed by its key, and one with no author speaks as itself.
    pub fn tree(&self) -> Tree {
        Tree::new(
            &self.book.key,
            self.book.title.as_deref().unwrap_or(""),
            self.book.author.as_deref().unwrap_or(""),
        )
    }
}

impl Retriever for BookRetriever<'_> {
    /// The book's own search; when no word of the query is in the book (an
    /// opening on a title whose words the text never uses, a line in
    /// another vocabulary), the book speaks from its first `k` chunks
    /// rather than falling silent.
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, RetrieveError> {
        let err = |e: StoreError| RetrieveError::Search(format!("{}: {e}", self.book.key));
        let hits = self
            .shard
            .search(query, SearchScope::Book(&self.book), k)
            .map_err(err)?;
        self.last_best = Some(hits.iter().map(|h| h.score).reduce(f64::max));
        if hits.is_empty() {
            return (0..self.book.count.min(k as u64))
                .map(|i| self.passage(i).map_err(err))
                .collect();
        }
        Ok(hits
            .into_iter()
            .map(|h| Passage {
                node_id: h.node_id,
                label: h.label,
                index: h.index,
                leaf: hex::encode(h.leaf),
                content: h.content,
            })
            .collect())
    }
}

/// The local store as `moot verify`'s check of passages against stored chunks.
impl ChunkLookup for Store {
    fn chunk_text(&mut self, key: &str, index: u64) -> Result<Option<String>, LookupError> {
        let Some(shard) = self.find_book(key)? else {
            return Ok(None);
        };
        let book = match shard.book(key, None) {
            Ok(book) => book,
            Err(StoreError::Removed(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match shard.chunk(&book, index) {
            Ok((_, _, text)) => Ok(Some(text)),
            Err(StoreError::NoSuchChunk { .. }) => Ok(Some(String::new())),
            Err(e) => Err(e.into()),
        }
    }
}
