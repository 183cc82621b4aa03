//! One shard: a SQLite file holding book versions, chunks, Merkle levels,
//! the full-text index and the audit chain.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};
use serde_json::json;

use super::schema;
use super::{StoreError, audit, index, rank};
use crate::book::BookText;
use crate::db::{self, Cause, Problem, StorageError};
use crate::merkle::{self, Hash, ProofStep, ShardEntry};
use crate::text::{self, ChunkError};

/// Where a book version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BookStatus {
    Current,
    Superseded,
    Removed,
}

impl BookStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BookStatus::Current => "current",
            BookStatus::Superseded => "superseded",
            BookStatus::Removed => "removed",
        }
    }

    fn parse(s: &str) -> rusqlite::Result<BookStatus> {
        match s {
            "current" => Ok(BookStatus::Current),
            "superseded" => Ok(BookStatus::Superseded),
            "removed" => Ok(BookStatus::Removed),
            other => Err(rusqlite::Error::InvalidColumnType(
                0,
                format!("book status `{other}`"),
                rusqlite::types::Type::Text,
            )),
        }
    }
}

/// What an ingest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestStatus {
    /// A key the shard did not hold.
    Added,
    /// Same key, same root and count: nothing changed.
    Unchanged,
    /// Same key, new content: the old version is kept, superseded.
    NewVersion,
}

impl IngestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            IngestStatus::Added => "added",
            IngestStatus::Unchanged => "unchanged",
            IngestStatus::NewVersion => "new-version",
        }
    }
}

/// One stored version of a book. Missing metadata is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct BookRecord {
    pub id: i64,
    pub shard: String,
    pub key: String,
    pub version: u32,
    pub status: BookStatus,
    pub title: Option<String>,
    pub author: Option<String>,
    pub language: Option<String>,
    pub ebook: Option<u64>,
    pub source: String,
    pub decoding: String,
    pub chunking: String,
    pub hashing: String,
    pub root: Hash,
    pub count: u64,
    pub bytes: u64,
    pub first_chunk: i64,
    pub added_ms: i64,
}

/// A chunk with its inclusion proof, served from stored levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofRecord {
    pub index: u64,
    pub label: String,
    pub leaf: Hash,
    pub text: String,
    pub proof: Vec<ProofStep>,
}

/// The outcome of `book verify`: every problem found (empty when sound).
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub chunks_checked: u64,
    pub problems: Vec<String>,
}

/// What the chunking thread sends: chunks in order, a batch at a time,
/// then its outcome.
enum Produced {
    Chunks(Vec<text::Chunk>),
    Done(Result<u64, ChunkError>),
}

/// Chunks per batch the chunking thread sends: one hand-over (and thread
/// wake-up) per batch rather than per chunk.
const CHUNK_BATCH: usize = 32;

/// Hashes per stored Merkle block (see the schema).
const PROOF_BLOCK: u64 = 16;

const BOOK_COLUMNS: &str = "id, key, version, status, title, author, language, ebook, source, \
    decoding, chunking, hashing, root, chunk_count, byte_count, first_chunk, added_ms";

fn hash_from(v: Vec<u8>) -> rusqlite::Result<Hash> {
    v.try_into().map_err(|_| {
        rusqlite::Error::InvalidColumnType(
            0,
            "hash of 32 bytes".into(),
            rusqlite::types::Type::Blob,
        )
    })
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// A shard opened for reading and writing.
pub struct Shard {
    name: String,
    path: PathBuf,
    conn: Connection,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish()
    }
}

impl Shard {
    /// Opens (creating when missing) the shard file, checks that it is a grove
    /// shard, and migrates it. On a read-only file system an existing shard
    /// opens read-only (reads work; writes fail with a clear error).
    pub fn open(name: &str, path: &Path) -> Result<Shard, StoreError> {
        let conn = match Self::open_as(path, db::Access::ReadWrite) {
            Ok(conn) => conn,
            // A WAL database on read-only media can only be opened as
            // immutable (SQLite cannot create its shared-memory file
            // there); nothing can change it while the media is read-only.
            Err(StoreError::Storage(e)) if e.cause() == Cause::NotWritable && path.is_file() => {
                Self::open_as(path, db::Access::Immutable)?
            }
            Err(e) => return Err(e),
        };
        Ok(Shard {
            name: name.to_string(),
            path: path.to_path_buf(),
            conn,
        })
    }

    fn open_as(path: &Path, access: db::Access) -> Result<Connection, StoreError> {
        // The schema's connect step registers grove's FTS5 extensions.
        Ok(db::open(path, &schema::SHARD, access)?)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A failed SQLite call while doing `op` on this shard.
    pub(super) fn err(&self, op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StorageError::new(&self.path, op, e).into()
    }

    fn book_from_row(&self, r: &Row<'_>) -> rusqlite::Result<BookRecord> {
        Ok(BookRecord {
            id: r.get(0)?,
            shard: self.name.clone(),
            key: r.get(1)?,
            version: r.get(2)?,
            status: BookStatus::parse(&r.get::<_, String>(3)?)?,
            title: r.get(4)?,
            author: r.get(5)?,
            language: r.get(6)?,
            ebook: r.get::<_, Option<i64>>(7)?.map(|n| n as u64),
            source: r.get(8)?,
            decoding: r.get(9)?,
            chunking: r.get(10)?,
            hashing: r.get(11)?,
            root: hash_from(r.get(12)?)?,
            count: r.get::<_, i64>(13)? as u64,
            bytes: r.get::<_, i64>(14)? as u64,
            first_chunk: r.get(15)?,
            added_ms: r.get(16)?,
        })
    }

    /// Whether any version of `key` (current, superseded or removed) is here.
    pub fn has_key(&self, key: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row("SELECT 1 FROM books WHERE key = ?1 LIMIT 1", [key], |_| {
                Ok(())
            })
            .optional()
            .map(|o| o.is_some())
            .map_err(self.err("read"))
    }

    /// The current version of `key`, or the named version.
    pub fn book(&self, key: &str, version: Option<u32>) -> Result<BookRecord, StoreError> {
        let found = match version {
            Some(v) => self.conn.query_row(
                &format!("SELECT {BOOK_COLUMNS} FROM books WHERE key = ?1 AND version = ?2"),
                params![key, v],
                |r| self.book_from_row(r),
            ),
            None => self.conn.query_row(
                &format!("SELECT {BOOK_COLUMNS} FROM books WHERE key = ?1 AND status = 'current'"),
                [key],
                |r| self.book_from_row(r),
            ),
        }
        .optional()
        .map_err(self.err("read"))?;
        match (found, version) {
            (Some(b), _) => Ok(b),
            (None, Some(version)) if self.has_key(key)? => Err(StoreError::NoSuchVersion {
                key: key.to_string(),
                version,
            }),
            (None, None) if self.has_key(key)? => Err(StoreError::Removed(key.to_string())),
            (None, _) => Err(StoreError::NoSuchBook(key.to_string())),
        }
    }

    /// Current books in key order, or with `all` every version of every book.
    pub fn books(&self, all: bool) -> Result<Vec<BookRecord>, StoreError> {
        let filter = if all { "" } else { "WHERE status = 'current'" };
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {BOOK_COLUMNS} FROM books {filter} ORDER BY key, version"
            ))
            .map_err(self.err("read"))?;
        let rows = stmt
            .query_map([], |r| self.book_from_row(r))
            .map_err(self.err("read"))?;
        rows.collect::<Result<_, _>>().map_err(self.err("read"))
    }

    /// This shard's root over its current books (books.md section 7).
    pub fn root(&self) -> Result<Option<Hash>, StoreError> {
        let entries: Vec<ShardEntry> = self
            .books(false)?
            .into_iter()
            .map(|b| ShardEntry {
                key: b.key,
                root: b.root,
                count: b.count,
            })
            .collect();
        Ok(merkle::shard_root(&entries))
    }

    /// Stores one book under `key` in one transaction, chunking on a second
    /// thread while this one hashes and inserts, so reading and indexing
    /// overlap. Any failure, including a chunk over `max_chunk_bytes` found
    /// midway, rolls everything back. `progress` is told how many chunks are
    /// stored so far.
    pub fn ingest(
        &mut self,
        key: &str,
        book: &BookText,
        max_chunk_bytes: u64,
        source: &str,
        now_ms: i64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(IngestStatus, BookRecord), StoreError> {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Produced>(8);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // A closed channel means the store side already failed; the
                // rest of the book is then chunked for nothing, which is harmless.
                let mut batch = Vec::with_capacity(CHUNK_BATCH);
                let result = book.chunk(max_chunk_bytes, &mut |c| {
                    batch.push(c);
                    if batch.len() == CHUNK_BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(CHUNK_BATCH));
                        let _ = sender.send(Produced::Chunks(full));
                    }
                });
                if !batch.is_empty() {
                    let _ = sender.send(Produced::Chunks(batch));
                }
                let _ = sender.send(Produced::Done(result));
            });
            self.store_stream(key, book, source, now_ms, receiver, progress)
        })
    }

    fn store_stream(
        &mut self,
        key: &str,
        book: &BookText,
        source: &str,
        now_ms: i64,
        chunks: std::sync::mpsc::Receiver<Produced>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(IngestStatus, BookRecord), StoreError> {
        let current = match self.book(key, None) {
            Ok(b) => Some(b),
            Err(StoreError::NoSuchBook(_) | StoreError::Removed(_)) => None,
            Err(e) => return Err(e),
        };
        let path = self.path.clone();
        let err = StorageError::at(&path, "write");
        let tx = self.conn.transaction().map_err(&err)?;
        // The old version steps aside first (one current row per key); if the
        // content turns out unchanged, the rollback puts it back.
        if let Some(cur) = &current {
            tx.execute(
                "UPDATE books SET status = 'superseded' WHERE id = ?1",
                [cur.id],
            )
            .map_err(&err)?;
            index::drop_index(&tx, cur.id).map_err(&err)?;
        }
        let new = insert_version(&tx, key, book, source, now_ms).map_err(&err)?;
        let (leaves, vocabulary) = store_chunks(&tx, &path, &new, &chunks, progress)?;
        let count = leaves.len() as u64;
        let levels = merkle::levels(leaves).ok_or(StoreError::Chunks(ChunkError::Empty))?;
        let root = levels[levels.len() - 1][0];
        if let Some(cur) = current
            .as_ref()
            .filter(|c| c.root == root && c.count == count)
        {
            // Same content: drop the transaction, which rolls everything back.
            drop(tx);
            return Ok((IngestStatus::Unchanged, cur.clone()));
        }
        store_tree(&tx, new.book_id, &levels, &vocabulary).map_err(&err)?;
        let status = if current.is_some() {
            IngestStatus::NewVersion
        } else {
            IngestStatus::Added
        };
        audit::append(
            &tx,
            now_ms,
            if current.is_some() {
                "book.new-version"
            } else {
                "book.add"
            },
            &json!({
                "key": key,
                "version": new.version,
                "root": hex::encode(root),
                "count": count,
                "source": source,
                "superseded_version": current.as_ref().map(|c| c.version),
            }),
        )?;
        tx.commit().map_err(&err)?;
        if current.is_some() {
            // The superseded version's search index was dropped.
            self.reclaim();
        }
        progress(count);
        Ok((status, self.book(key, Some(new.version))?))
    }

    /// Tombstones the current version of `key`: it leaves search and listings,
    /// and its rows and history stay.
    pub fn remove(&mut self, key: &str, now_ms: i64) -> Result<BookRecord, StoreError> {
        let book = self.book(key, None)?;
        let err = StorageError::at(&self.path, "write");
        let tx = self.conn.transaction().map_err(&err)?;
        tx.execute(
            "UPDATE books SET status = 'removed' WHERE id = ?1",
            [book.id],
        )
        .map_err(&err)?;
        index::drop_index(&tx, book.id).map_err(&err)?;
        audit::append(
            &tx,
            now_ms,
            "book.remove",
            &json!({ "key": key, "version": book.version, "root": hex::encode(book.root) }),
        )?;
        tx.commit().map_err(&err)?;
        self.reclaim();
        self.book(key, Some(book.version))
    }

    /// Returns the pages a dropped search index left free to the file
    /// system (shards created with incremental auto-vacuum; older ones need
    /// `compact`). After the commit: a failure here loses nothing, the
    /// pages stay free for the next ingest.
    fn reclaim(&self) {
        // The pragma frees one page per step: step it to the end.
        let freed = self
            .conn
            .prepare("PRAGMA incremental_vacuum")
            .and_then(|mut stmt| {
                let mut rows = stmt.query([])?;
                while rows.next()?.is_some() {}
                Ok(())
            });
        if let Err(e) = freed {
            tracing::warn!(shard = %self.name, error = %e, "freeing unused pages failed");
        }
    }

    /// The shard's size in bytes (pages in use and free).
    pub fn size_bytes(&self) -> Result<u64, StoreError> {
        let err = self.err("read the size of");
        let pages: i64 = self
            .conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .map_err(&err)?;
        let page: i64 = self
            .conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(&err)?;
        Ok(u64::try_from(pages * page).unwrap_or(0))
    }

    /// Rewrites the shard without its free pages (`VACUUM`), switching it to
    /// incremental auto-vacuum so later removals reclaim space themselves;
    /// returns its size before and after. Rows are untouched.
    pub fn compact(&mut self) -> Result<(u64, u64), StoreError> {
        let before = self.size_bytes()?;
        let err = self.err("compact");
        self.conn
            .execute_batch(
                "PRAGMA auto_vacuum = INCREMENTAL; VACUUM; PRAGMA wal_checkpoint(TRUNCATE);",
            )
            .map_err(&err)?;
        Ok((before, self.size_bytes()?))
    }

    /// One chunk's label, leaf and text.
    pub fn chunk(
        &self,
        book: &BookRecord,
        index: u64,
    ) -> Result<(String, Hash, String), StoreError> {
        if index >= book.count {
            return Err(StoreError::NoSuchChunk {
                key: book.key.clone(),
                index,
                count: book.count,
            });
        }
        self.conn
            .prepare_cached("SELECT label, leaf, text FROM chunks WHERE id = ?1 AND book_id = ?2")
            .and_then(|mut s| {
                s.query_row(params![book.first_chunk + index as i64, book.id], |r| {
                    Ok((r.get(0)?, hash_from(r.get(1)?)?, r.get(2)?))
                })
            })
            .map_err(self.err("read"))
    }

    /// Chunk `index` of `book` with its inclusion proof: one point read of a
    /// stored block per level (no rehashing).
    pub fn proof(&self, book: &BookRecord, index: u64) -> Result<ProofRecord, StoreError> {
        let (label, leaf, text) = self.chunk(book, index)?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT hashes FROM merkle_blocks WHERE book_id = ?1 AND level = ?2 AND block = ?3",
            )
            .map_err(self.err("read"))?;
        let height = merkle::height(book.count);
        let mut proof = Vec::with_capacity(height);
        let (mut j, mut width) = (index, book.count);
        for level in 0..height {
            // The pair partner, or the node itself when it is the odd last one.
            let partner = if j ^ 1 < width { j ^ 1 } else { j };
            let block_no = partner / PROOF_BLOCK;
            let block: Vec<u8> = stmt
                .query_row(params![book.id, level as i64, block_no as i64], |r| {
                    r.get(0)
                })
                .map_err(self.err("read"))?;
            let at = (partner % PROOF_BLOCK) as usize * 32;
            let sibling = block
                .get(at..at + 32)
                .and_then(|h| Hash::try_from(h).ok())
                .ok_or_else(|| {
                    let short =
                        format!("Merkle block {level}/{block_no} of `{}` is short", book.key);
                    StorageError::new(&self.path, "read", Problem::Damaged(short))
                })?;
            proof.push(ProofStep {
                sibling,
                is_left: j % 2 == 1,
            });
            j /= 2;
            width = width.div_ceil(2);
        }
        Ok(ProofRecord {
            index,
            label,
            leaf,
            text,
            proof,
        })
    }

    /// Recomputes every leaf and the root from the stored text and checks the
    /// stored root, the stored Merkle levels and the search index agree.
    pub fn verify(&self, book: &BookRecord) -> Result<VerifyReport, StoreError> {
        let mut report = VerifyReport::default();
        let leaves = self.verify_chunks(book, &mut report)?;
        report.chunks_checked = leaves.len() as u64;
        if leaves.len() as u64 != book.count {
            report.problems.push(format!(
                "{} chunks stored, the book records {}",
                leaves.len(),
                book.count
            ));
        }
        match merkle::levels(leaves) {
            None => report.problems.push("the book has no chunks".into()),
            Some(levels) => self.verify_levels(book, &levels, &mut report)?,
        }
        self.verify_index(book, &mut report)?;
        Ok(report)
    }

    /// Each stored chunk's place, label and leaf against its text; returns
    /// the leaves recomputed from the text, in order.
    fn verify_chunks(
        &self,
        book: &BookRecord,
        report: &mut VerifyReport,
    ) -> Result<Vec<Hash>, StoreError> {
        let mut leaves = Vec::with_capacity(book.count as usize);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, idx, label, leaf, text FROM chunks WHERE book_id = ?1 ORDER BY idx",
            )
            .map_err(self.err("verify"))?;
        let mut rows = stmt.query([book.id]).map_err(self.err("verify"))?;
        while let Some(r) = rows.next().map_err(self.err("verify"))? {
            let (id, idx, label, leaf, text): (i64, i64, String, Vec<u8>, String) = (
                r.get(0).map_err(self.err("verify"))?,
                r.get(1).map_err(self.err("verify"))?,
                r.get(2).map_err(self.err("verify"))?,
                r.get(3).map_err(self.err("verify"))?,
                r.get(4).map_err(self.err("verify"))?,
            );
            let i = leaves.len() as i64;
            if idx != i || id != book.first_chunk + i {
                report
                    .problems
                    .push(format!("chunk row {id} has index {idx}, expected {i}"));
            }
            if label != text::label(i as u64) {
                report
                    .problems
                    .push(format!("chunk {i} has label `{label}`"));
            }
            let computed = merkle::leaf_hash(text.as_bytes());
            if leaf != computed {
                report.problems.push(format!(
                    "chunk {i}: stored leaf hash does not match its text"
                ));
            }
            leaves.push(computed);
        }
        Ok(leaves)
    }

    /// The stored root and Merkle blocks against the levels recomputed from
    /// the text.
    fn verify_levels(
        &self,
        book: &BookRecord,
        levels: &[Vec<Hash>],
        report: &mut VerifyReport,
    ) -> Result<(), StoreError> {
        let root = levels[levels.len() - 1][0];
        if root != book.root {
            report.problems.push(format!(
                "root recomputed from the text is {}, the stored root is {}",
                hex::encode(root),
                hex::encode(book.root)
            ));
        }
        // Stored blocks, concatenated per level, against the recomputed levels.
        let mut stored: Vec<Vec<u8>> = vec![Vec::new(); levels.len() - 1];
        let mut stmt = self
            .conn
            .prepare(
                "SELECT level, hashes FROM merkle_blocks WHERE book_id = ?1 ORDER BY level, block",
            )
            .map_err(self.err("verify"))?;
        let mut rows = stmt.query([book.id]).map_err(self.err("verify"))?;
        while let Some(r) = rows.next().map_err(self.err("verify"))? {
            let level: i64 = r.get(0).map_err(self.err("verify"))?;
            let hashes: Vec<u8> = r.get(1).map_err(self.err("verify"))?;
            match stored.get_mut(level as usize) {
                Some(l) => l.extend_from_slice(&hashes),
                None => report.problems.push(format!(
                    "a Merkle block is stored at level {level}, above the tree"
                )),
            }
        }
        for (level, (got, want)) in stored.iter().zip(levels).enumerate() {
            if *got != want.concat() {
                report.problems.push(format!(
                    "stored Merkle level {level} does not match the text"
                ));
            }
        }
        Ok(())
    }

    /// The collection index holds exactly a current version's chunks, each
    /// findable by its own words, and its recorded token count and chunk
    /// lengths are the index's; other versions are not in it.
    fn verify_index(&self, book: &BookRecord, report: &mut VerifyReport) -> Result<(), StoreError> {
        let collected: i64 = self
            .conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM {} WHERE rowid BETWEEN ?1 AND ?2",
                    index::COLLECTION_INDEX
                ),
                params![book.first_chunk, book.first_chunk + book.count as i64 - 1],
                |r| r.get(0),
            )
            .map_err(self.err("verify"))?;
        if book.status != BookStatus::Current {
            if collected != 0 {
                report.problems.push(format!(
                    "{collected} chunks of a {} version are still in the search index",
                    book.status.as_str()
                ));
            }
            return Ok(());
        }
        if collected != book.count as i64 {
            report.problems.push(format!(
                "the search index holds {collected} of the book's {} chunks",
                book.count
            ));
            return Ok(());
        }
        self.verify_recorded_counts(book, report)?;
        self.verify_findable(book, report)
    }

    /// The token count and chunk lengths the book's row records are its
    /// index's.
    fn verify_recorded_counts(
        &self,
        book: &BookRecord,
        report: &mut VerifyReport,
    ) -> Result<(), StoreError> {
        let recorded: Option<i64> = self
            .conn
            .query_row("SELECT tokens FROM books WHERE id = ?1", [book.id], |r| {
                r.get(0)
            })
            .map_err(self.err("verify"))?;
        let counted = index::chunk_lengths(&self.conn, book.id).map_err(self.err("verify"))?;
        let tokens: i64 = counted.iter().map(|&n| i64::from(n)).sum();
        if recorded != Some(tokens) {
            report.problems.push(format!(
                "the book's recorded token count {recorded:?} is not its index's {tokens}"
            ));
        }
        let lengths: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT chunk_tokens FROM books WHERE id = ?1",
                [book.id],
                |r| r.get(0),
            )
            .map_err(self.err("verify"))?;
        if lengths != Some(index::encode_lengths(&counted)) {
            report
                .problems
                .push("the book's recorded chunk lengths are not its index's".into());
        }
        Ok(())
    }

    /// Every chunk is found by its longest word in the search index.
    fn verify_findable(
        &self,
        book: &BookRecord,
        report: &mut VerifyReport,
    ) -> Result<(), StoreError> {
        let mut text_stmt = self
            .conn
            .prepare("SELECT id, text FROM chunks WHERE book_id = ?1 ORDER BY idx")
            .map_err(self.err("verify"))?;
        let all = index::COLLECTION_INDEX;
        let mut all_stmt = self
            .conn
            .prepare(&format!(
                "SELECT count(*) FROM {all} WHERE {all} MATCH ?1 AND rowid = ?2"
            ))
            .map_err(self.err("verify"))?;
        let mut rows = text_stmt.query([book.id]).map_err(self.err("verify"))?;
        while let Some(r) = rows.next().map_err(self.err("verify"))? {
            let id: i64 = r.get(0).map_err(self.err("verify"))?;
            let text: String = r.get(1).map_err(self.err("verify"))?;
            // The chunk's longest word must find it; chunks of punctuation only are skipped.
            let Some(word) = rank::terms(&text).into_iter().max_by_key(|t| t.len()) else {
                continue;
            };
            let n: i64 = all_stmt
                .query_row(params![rank::quote(&word), id], |r| r.get(0))
                .map_err(self.err("verify"))?;
            if n != 1 {
                report.problems.push(format!(
                    "chunk {} is not found in the search index by its word `{word}`",
                    id - book.first_chunk
                ));
            }
        }
        Ok(())
    }

    /// Walks this shard's audit chain.
    pub fn audit_verify(&self) -> Result<audit::ChainReport, StoreError> {
        Ok(audit::verify(&self.conn)?)
    }

    pub(super) fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// Where a new version of a book is stored: its row, its version number and
/// the id of its first chunk (its chunk ids run on from there).
struct NewVersion {
    book_id: i64,
    version: u32,
    first_chunk: i64,
}

/// Inserts the row of `key`'s next version, with its (empty) search index.
/// Root and count are filled in by `store_tree` once every chunk is stored.
fn insert_version(
    tx: &Transaction<'_>,
    key: &str,
    book: &BookText,
    source: &str,
    now_ms: i64,
) -> rusqlite::Result<NewVersion> {
    let version: u32 = tx.query_row(
        "SELECT coalesce(max(version), 0) + 1 FROM books WHERE key = ?1",
        [key],
        |r| r.get(0),
    )?;
    let first_chunk: i64 =
        tx.query_row("SELECT coalesce(max(id), 0) + 1 FROM chunks", [], |r| {
            r.get(0)
        })?;
    let meta = &book.meta;
    tx.execute(
        "INSERT INTO books (key, version, status, title, author, language, ebook, source,
            decoding, chunking, hashing, root, chunk_count, byte_count, first_chunk, added_ms)
         VALUES (?1, ?2, 'current', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, zeroblob(32), 1, ?11, ?12, ?13)",
        params![
            key,
            version,
            non_empty(&meta.title),
            non_empty(&meta.author),
            non_empty(&meta.language),
            meta.ebook.map(|n| n as i64),
            source,
            text::DECODING,
            text::CHUNKING,
            merkle::HASHING,
            book.bytes as i64,
            first_chunk,
            now_ms,
        ],
    )?;
    let book_id = tx.last_insert_rowid();
    Ok(NewVersion {
        book_id,
        version,
        first_chunk,
    })
}

/// What each chunk of a new version makes: its row, its row of the
/// collection index, and its terms counted for the statistics.
struct ChunkWriter<'tx> {
    chunk: rusqlite::CachedStatement<'tx>,
    all: rusqlite::CachedStatement<'tx>,
    /// The terms the index's insert hands over (a shard connection's).
    indexed: Option<super::fts5::IndexedTerms<'tx>>,
    tokenizer: super::fts5::Tokenizer<'tx>,
    /// The terms of the chunks written since the last batch went to the
    /// counting thread.
    terms: index::TermBatch,
    counter: std::sync::mpsc::SyncSender<index::TermBatch>,
}

impl<'tx> ChunkWriter<'tx> {
    fn prepare(
        tx: &'tx Transaction<'_>,
        counter: std::sync::mpsc::SyncSender<index::TermBatch>,
    ) -> rusqlite::Result<Self> {
        let chunk = tx.prepare_cached(
            "INSERT INTO chunks (id, book_id, idx, label, leaf, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let all = tx.prepare_cached(&format!(
            "INSERT INTO {} (rowid, text) VALUES (?1, ?2)",
            index::COLLECTION_INDEX
        ))?;
        Ok(ChunkWriter {
            chunk,
            all,
            indexed: super::fts5::IndexedTerms::of(tx)?,
            tokenizer: super::fts5::Tokenizer::new(tx)?,
            terms: index::TermBatch::default(),
            counter,
        })
    }

    /// Stores one chunk of `new`; returns its leaf hash. Its terms are
    /// taken as the index's insert tokenizes it, so each chunk is
    /// tokenized once, and counted on the counting thread.
    fn write(&mut self, new: &NewVersion, chunk: &text::Chunk) -> rusqlite::Result<Hash> {
        let leaf = merkle::leaf_hash(chunk.text.as_bytes());
        let id = new.first_chunk + chunk.index as i64;
        self.chunk.execute(params![
            id,
            new.book_id,
            chunk.index as i64,
            text::label(chunk.index),
            &leaf[..],
            chunk.text
        ])?;
        let ChunkWriter {
            all,
            indexed,
            terms,
            ..
        } = self;
        let handed_over = match indexed {
            Some(indexed) => {
                let (inserted, handed_over) = indexed.during(&mut |term| terms.term(term), || {
                    all.execute(params![id, chunk.text])
                });
                inserted?;
                handed_over
            }
            None => {
                all.execute(params![id, chunk.text])?;
                false
            }
        };
        if !handed_over {
            // FTS5 did not tokenize through the pass-through: take the
            // chunk's terms here (the same tokenizer, so the same terms).
            let terms = &mut self.terms;
            self.tokenizer
                .for_each_term(&chunk.text, &mut |term| terms.term(term))?;
        }
        self.terms.end_chunk();
        Ok(leaf)
    }

    /// Sends the chunks' terms taken so far to the counting thread; false
    /// when it is gone.
    fn send_terms(&mut self) -> bool {
        let batch = std::mem::take(&mut self.terms);
        batch.chunks() == 0 || self.counter.send(batch).is_ok()
    }
}

/// Stores the chunks the chunking thread sends, in order, until its outcome;
/// returns their leaves and their terms, counted on a thread of their own
/// while the chunks are stored.
fn store_chunks(
    tx: &Transaction<'_>,
    path: &Path,
    new: &NewVersion,
    chunks: &std::sync::mpsc::Receiver<Produced>,
    progress: &mut dyn FnMut(u64),
) -> Result<(Vec<Hash>, index::Vocabulary), StoreError> {
    let err = StorageError::at(path, "write");
    std::thread::scope(|scope| {
        let (to_counter, batches) = std::sync::mpsc::sync_channel::<index::TermBatch>(4);
        let counter = scope.spawn(move || {
            let mut vocabulary = index::Vocabulary::default();
            for batch in batches {
                vocabulary.add_batch(&batch);
            }
            vocabulary
        });
        let mut writer = ChunkWriter::prepare(tx, to_counter).map_err(&err)?;
        let mut leaves = Vec::new();
        loop {
            match chunks.recv() {
                Ok(Produced::Chunks(batch)) => {
                    for chunk in &batch {
                        leaves.push(writer.write(new, chunk).map_err(&err)?);
                    }
                    if !writer.send_terms() {
                        return Err(StoreError::ChunkerFailed);
                    }
                    progress(leaves.len() as u64);
                }
                Ok(Produced::Done(Ok(_))) => break,
                Ok(Produced::Done(Err(e))) => return Err(StoreError::Chunks(e)),
                // The chunking thread ended without its outcome: it panicked.
                Err(_) => return Err(StoreError::ChunkerFailed),
            }
        }
        // Closing the channel ends the counting.
        drop(writer);
        let vocabulary = counter.join().map_err(|_| StoreError::ChunkerFailed)?;
        Ok((leaves, vocabulary))
    })
}

/// Records a new version's root and count, its index's counts and its
/// Merkle levels (every level but the root, which books.root holds).
fn store_tree(
    tx: &Transaction<'_>,
    book_id: i64,
    levels: &[Vec<Hash>],
    vocabulary: &index::Vocabulary,
) -> rusqlite::Result<()> {
    let root = levels[levels.len() - 1][0];
    let count = levels[0].len() as u64;
    tx.execute(
        "UPDATE books SET root = ?1, chunk_count = ?2 WHERE id = ?3",
        params![&root[..], count as i64, book_id],
    )?;
    index::count_index(tx, book_id, vocabulary)?;
    let mut block_stmt = tx.prepare_cached(
        "INSERT INTO merkle_blocks (book_id, level, block, hashes) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (level, hashes) in levels[..levels.len() - 1].iter().enumerate() {
        for (block, piece) in hashes.chunks(PROOF_BLOCK as usize).enumerate() {
            block_stmt.execute(params![book_id, level as i64, block as i64, piece.concat()])?;
        }
    }
    Ok(())
}
