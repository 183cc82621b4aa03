//! The evidence of an ask: the passages of this node's books that best match
//! a question, each with its pointer and content address.

use std::collections::HashMap;

use super::search::hit_order;
use super::{BookRecord, SearchHit, SearchScope, Store, StoreError};
use grove_core::ask::{Evidence, PassageProof, evidence_id};

impl Store {
    /// The top `k` passages for `question`, best first, pointers `E1..`:
    /// in each of `books` by its own search, or across every current book
    /// ranked as one collection when `books` is empty. Every key in
    /// `books` must name a current book; with no books at all on the node,
    /// [`StoreError::NoBooks`].
    pub fn evidence(
        &mut self,
        question: &str,
        books: &[String],
        k: usize,
    ) -> Result<Vec<Evidence>, StoreError> {
        let mut books_of: HashMap<String, (String, BookRecord)> = HashMap::new();
        let mut hits: Vec<SearchHit> = Vec::new();
        if books.is_empty() {
            hits = self.search(question, None, k)?;
            // Only an empty answer asks whether there was anything to search.
            if hits.is_empty() && !self.holds_books()? {
                return Err(StoreError::NoBooks);
            }
        } else {
            for key in books {
                let shard = self.shard_of(key)?;
                let book = shard.book(key, None)?;
                hits.extend(shard.search(question, SearchScope::Book(&book), k)?);
                books_of.insert(key.clone(), (shard.name().to_string(), book));
            }
            hits.sort_by(hit_order);
            hits.truncate(k);
        }
        self.proven(hits, books_of)
    }

    /// `hits` (this node's) as evidence, pointers `E1..` in order, each
    /// with its proof against its book version's root.
    pub fn evidence_of(&mut self, hits: Vec<SearchHit>) -> Result<Vec<Evidence>, StoreError> {
        self.proven(hits, HashMap::new())
    }

    /// [`Store::evidence_of`], `books_of` holding the books already read,
    /// with their shards' names.
    fn proven(
        &mut self,
        hits: Vec<SearchHit>,
        mut books_of: HashMap<String, (String, BookRecord)>,
    ) -> Result<Vec<Evidence>, StoreError> {
        let mut evidence = Vec::with_capacity(hits.len());
        for (i, hit) in hits.into_iter().enumerate() {
            let open = books_of
                .get(&hit.key)
                .is_some_and(|(_, book)| book.version == hit.version);
            if !open {
                let shard = self.shard_of(&hit.key)?;
                let book = shard.book(&hit.key, Some(hit.version))?;
                books_of.insert(hit.key.clone(), (shard.name().to_string(), book));
            }
            let (shard, book) = &books_of[&hit.key];
            let proof = self.open(shard)?.proof(book, hit.index)?;
            evidence.push(Evidence {
                pointer: i as u32 + 1,
                id: evidence_id(&book.root, &hit.leaf),
                book: hit.key,
                title: book.title.clone().unwrap_or_default(),
                index: hit.index,
                label: hit.label,
                text: hit.content,
                // The node's own shard: its rows are what the root commits.
                proven: true,
                proof: Some(PassageProof::new(&book.root, book.count, &proof.proof)),
                holder: None,
            });
        }
        Ok(evidence)
    }

    /// Whether any shard holds a current book.
    fn holds_books(&mut self) -> Result<bool, StoreError> {
        for shard in self.open_all()? {
            if !shard.books(false)?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Each of `books`' current root, hex (`None`: no longer held): what a
    /// cached answer's cited books are judged by (`ask::cache::judge`).
    pub fn current_roots(
        &mut self,
        books: impl IntoIterator<Item = String>,
    ) -> Result<std::collections::BTreeMap<String, Option<String>>, StoreError> {
        books
            .into_iter()
            .map(|book| {
                let root = self.current_root(&book)?;
                Ok((book, root))
            })
            .collect()
    }

    /// The root of `key`'s current version, hex; `None` when the node no
    /// longer holds it (removed, or never added).
    pub fn current_root(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        let book = match self.shard_of(key).and_then(|shard| shard.book(key, None)) {
            Ok(book) => book,
            Err(StoreError::NoSuchBook(_) | StoreError::Removed(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(hex::encode(book.root)))
    }
}
