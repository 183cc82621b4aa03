//! The book service: the book operations behind `grove book …`, `shard
//! list` and `audit verify` on a state directory's store handle, answered
//! as the API's types ([`crate::api::books::BookApi`]). The CLI runs them
//! in its own process when no daemon runs; the daemon's store worker owns
//! the one `LocalBooks` of a running node. Both paths therefore give the
//! same answers and errors.

use std::path::{Path, PathBuf};

use crate::api::books::{AddRequest, BookApi, SearchRequest};
use crate::api::{ApiError, ErrorKind, dto};
use crate::book::{self, BookText, PrepareError};
use crate::config::Limits;
use crate::db::DbKind;
use crate::store::{DEFAULT_SHARD, Shard, Store, StoreError, audit};

/// The book operations on a state directory, in this process, on its
/// store handle.
#[derive(Debug)]
pub struct LocalBooks {
    state_dir: PathBuf,
    store: Store,
    limits: Limits,
    default_shard: Option<String>,
}

impl LocalBooks {
    pub fn new(state_dir: &Path, limits: Limits, default_shard: Option<String>) -> LocalBooks {
        LocalBooks {
            state_dir: state_dir.to_path_buf(),
            store: Store::new(state_dir),
            limits,
            default_shard,
        }
    }

    /// The shards behind these operations.
    pub fn store(&mut self) -> &mut Store {
        &mut self.store
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }
}

impl BookApi for LocalBooks {
    fn add(
        &mut self,
        req: &AddRequest,
        bytes: &[u8],
        progress: &mut dyn FnMut(u64),
    ) -> Result<dto::Added, ApiError> {
        if let Some(key) = &req.key {
            book::validate_key(key)?;
        }
        let shard_name = req
            .shard
            .clone()
            .or_else(|| self.default_shard.clone())
            .unwrap_or_else(|| DEFAULT_SHARD.to_string());
        crate::store::validate_shard_name(&shard_name).map_err(StoreError::from)?;
        let refused = |e: PrepareError| {
            ApiError::new(
                ErrorKind::BadRequest,
                format!("{}: not stored: {e}", req.source),
            )
        };
        let text = BookText::decode(bytes, self.limits.max_book_bytes).map_err(refused)?;
        if !req.force {
            text.judge().map_err(refused)?;
        }
        let key = match &req.key {
            Some(k) => k.clone(),
            None => book::default_key(&text.meta.title)?,
        };
        if let Some(other) = self.store.find_book(&key)?
            && other.name() != shard_name
        {
            return Err(StoreError::KeyInOtherShard {
                key,
                shard: other.name().to_string(),
            }
            .into());
        }
        let shard = self.store.open_or_create(&shard_name)?;
        let (status, record) = shard
            .ingest(
                &key,
                &text,
                self.limits.max_chunk_bytes,
                &req.source,
                crate::now_ms(),
                progress,
            )
            .map_err(|e| {
                let e = ApiError::from(e);
                ApiError::new(e.kind, format!("{}: not stored: {}", req.source, e.message))
            })?;
        Ok(dto::Added::new(status, &record))
    }

    fn list(&mut self, all: bool) -> Result<dto::BookList, ApiError> {
        let mut books = Vec::new();
        for shard in self.store.open_all()? {
            books.extend(shard.books(all)?);
        }
        books.sort_by(|a, b| (&a.key, a.version).cmp(&(&b.key, b.version)));
        Ok(dto::BookList {
            books: books.iter().map(dto::Book::from).collect(),
        })
    }

    fn show(&mut self, key: &str, version: Option<u32>) -> Result<dto::Book, ApiError> {
        Ok(dto::Book::from(
            &self.store.shard_of(key)?.book(key, version)?,
        ))
    }

    fn remove(&mut self, key: &str) -> Result<dto::Book, ApiError> {
        let shard = self.store.shard_of(key)?;
        Ok(dto::Book::from(&shard.remove(key, crate::now_ms())?))
    }

    fn proof(
        &mut self,
        key: &str,
        index: u64,
        version: Option<u32>,
    ) -> Result<dto::Proof, ApiError> {
        let shard = self.store.shard_of(key)?;
        let book = shard.book(key, version)?;
        Ok(dto::Proof::new(&book, &shard.proof(&book, index)?))
    }

    fn verify(&mut self, key: &str, version: Option<u32>) -> Result<dto::Verified, ApiError> {
        let shard = self.store.shard_of(key)?;
        let book = shard.book(key, version)?;
        let verified = |chunks_checked, problems: Vec<String>| dto::Verified {
            key: book.key.clone(),
            version: book.version,
            root: hex::encode(book.root),
            count: book.count,
            chunks_checked,
            ok: problems.is_empty(),
            problems,
        };
        // The shard's file first: damage in a page the book's rows do not
        // touch is still damage to the book's shard, and damage where they
        // lie would fail the reading below with less to say.
        if let Err(damaged) = crate::db::quick_check(shard.path(), DbKind::Shard) {
            return Ok(verified(0, vec![damaged.to_string()]));
        }
        let report = shard.verify(&book)?;
        Ok(verified(report.chunks_checked, report.problems))
    }

    fn search(&mut self, req: &SearchRequest) -> Result<dto::Hits, ApiError> {
        req.check()?;
        let hits = self.store.search(
            &req.query,
            req.key.as_deref().map(|k| (k, req.version)),
            req.k,
        )?;
        Ok(dto::Hits {
            hits: hits.iter().map(dto::Hit::from).collect(),
            errors: Vec::new(),
        })
    }

    fn shards(&mut self) -> Result<dto::ShardList, ApiError> {
        let mut shards = Vec::new();
        for shard in self.store.open_all()? {
            let books = shard.books(false)?;
            shards.push(dto::Shard {
                name: shard.name().to_string(),
                root: shard.root()?.map(hex::encode),
                books: books
                    .iter()
                    .map(|b| dto::ShardBook {
                        key: b.key.clone(),
                        root: hex::encode(b.root),
                        count: b.count,
                    })
                    .collect(),
            });
        }
        Ok(dto::ShardList { shards })
    }

    fn compact(&mut self, shard: Option<&str>) -> Result<dto::Compacted, ApiError> {
        let shards: Vec<&mut Shard> = match shard {
            Some(name) => vec![self.store.open(name)?],
            None => self.store.open_all()?.collect(),
        };
        let mut done = Vec::new();
        for shard in shards {
            let (bytes_before, bytes_after) = shard.compact()?;
            done.push(dto::ShardCompacted {
                name: shard.name().to_string(),
                bytes_before,
                bytes_after,
            });
        }
        Ok(dto::Compacted { shards: done })
    }

    /// Every database keeps its own chain: each shard, and the databases at
    /// the top of the state directory (mesh state).
    fn audit(&mut self) -> Result<dto::AuditReport, ApiError> {
        let files = self.store.databases().map_err(StoreError::from)?;
        let chains: Vec<dto::Chain> = files
            .into_iter()
            .map(|(path, kind)| audit_one(&path, kind))
            .collect();
        Ok(dto::AuditReport {
            ok: chains.iter().all(|c| c.ok),
            chains,
        })
    }
}

/// One database's audit chain and its integrity (`PRAGMA quick_check`,
/// unless it could be read only from its main file, the directory not
/// being writable here).
fn audit_one(path: &Path, kind: DbKind) -> dto::Chain {
    let file = path.display().to_string();
    let mut chain = match audit::verify_file(path) {
        Ok(r) => dto::Chain {
            file,
            events: r.events,
            head: r.head.map(hex::encode),
            ok: true,
            broken: false,
            immutable: r.immutable,
            error: None,
            damage: None,
        },
        Err(e) => dto::Chain {
            file,
            events: 0,
            head: None,
            ok: false,
            broken: matches!(e, audit::AuditError::Broken { .. }),
            immutable: false,
            error: Some(e.to_string()),
            damage: None,
        },
    };
    if !chain.immutable
        && let Err(damaged) = crate::db::quick_check(path, kind)
    {
        chain.ok = false;
        chain.damage = Some(damaged.to_string());
    }
    chain
}
