//! The evidence of an ask: the passages of this node's books that best match
//! a question, each with its pointer and content address.

use std::collections::HashMap;

use super::search::hit_order;
use super::{SearchHit, Store, StoreError};
use crate::merkle::Hash;
use grove_core::ask::{Evidence, evidence_id};

impl Store {
    /// The top `k` passages for `question`, best first, pointers `E1..`:
    /// in each of `books` by its own search, or across every current book
    /// ranked as one collection when `books` is empty. Every key in
    /// `books` must name a current book; with no books at all on the node,
    /// [`StoreError::NoBooks`].
    pub fn evidence(
        &self,
        question: &str,
        books: &[String],
        k: usize,
    ) -> Result<Vec<Evidence>, StoreError> {
        let mut roots: HashMap<String, (Hash, String)> = HashMap::new();
        let mut hits: Vec<SearchHit> = Vec::new();
        if books.is_empty() {
            let any = self
                .open_all()?
                .iter()
                .map(|s| s.books(false).map(|b| !b.is_empty()))
                .collect::<Result<Vec<bool>, _>>()?;
            if !any.contains(&true) {
                return Err(StoreError::NoBooks);
            }
            hits = self.search(question, None, k)?;
        } else {
            for key in books {
                let book = self.shard_of(key)?.book(key, None)?;
                roots.insert(key.clone(), (book.root, book.title.unwrap_or_default()));
                hits.extend(self.search(question, Some((key, None)), k)?);
            }
            hits.sort_by(hit_order);
            hits.truncate(k);
        }
        let mut evidence = Vec::with_capacity(hits.len());
        for (i, hit) in hits.into_iter().enumerate() {
            if !roots.contains_key(&hit.key) {
                let book = self.shard_of(&hit.key)?.book(&hit.key, Some(hit.version))?;
                roots.insert(hit.key.clone(), (book.root, book.title.unwrap_or_default()));
            }
            let (root, title) = &roots[&hit.key];
            evidence.push(Evidence {
                pointer: i as u32 + 1,
                id: evidence_id(root, &hit.leaf),
                book: hit.key,
                title: title.clone(),
                label: hit.label,
                text: hit.content,
                // The node's own shard: its rows are what the root commits.
                proven: true,
            });
        }
        Ok(evidence)
    }
}
