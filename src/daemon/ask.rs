//! Asks on a running node (`POST /v1/ask`): the one sequence of
//! `api::ask` over the node's workers. Retrieval is this node's store, or
//! with `mesh` every member's books, each peer's passage proven against the
//! root its holder announced and the record anchored to the mesh (its
//! chain from the genesis, the holders' signed announcements); the model
//! worker writes the claim lines; `ask.db` has its own worker, its one
//! owner while the node runs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use libp2p::PeerId;

use super::due::Due;
use super::model::ModelWorker;
use super::rpc::Rpc;
use super::rpc::search::{Proven, mesh_hits};
use super::worker::Worker;
use crate::api::ApiError;
use crate::api::ask::{AskCall, AskParts, Retrieved, model_error};
use crate::api::books::SearchRequest;
use crate::ask::{
    AskRecord, AskSettings, Evidence, MeshAnchor, PassageProof, Retrieval, evidence_id,
};
use crate::merkle::Hash;
use crate::store::ask_cache::AskCache;
use crate::store::hit_order;
use crate::wire::mesh::Signed;

/// `ask.db`, opened on first use (a node nobody asks never makes it).
pub struct LazyCache {
    state_dir: PathBuf,
    cache: Option<AskCache>,
}

impl LazyCache {
    fn get(&mut self) -> Result<&mut AskCache, ApiError> {
        if self.cache.is_none() {
            let opened =
                AskCache::open(&self.state_dir).map_err(|e| ApiError::internal(e.to_string()))?;
            self.cache = Some(opened);
        }
        Ok(self.cache.as_mut().expect("opened above"))
    }
}

/// What an ask on the node needs; cheap to clone.
#[derive(Clone)]
pub struct Asker {
    pub rpc: Rpc,
    pub model: ModelWorker,
    pub due: Arc<Due>,
    cache: Worker<LazyCache>,
    /// The model's profile, for the cache key.
    profile: String,
}

/// `ask.db`'s worker: the database's one owner while the node runs.
pub type CacheWorker = Worker<LazyCache>;

/// Starts `ask.db`'s worker (the file is opened on the first ask).
pub fn spawn_cache(
    state_dir: PathBuf,
) -> std::io::Result<(CacheWorker, std::thread::JoinHandle<()>)> {
    let lazy = LazyCache {
        state_dir,
        cache: None,
    };
    Worker::spawn("ask-cache", 16, lazy, |_| {})
}

impl Asker {
    pub fn new(
        rpc: Rpc,
        model: ModelWorker,
        due: Arc<Due>,
        cache: CacheWorker,
        profile: String,
    ) -> Asker {
        Asker {
            rpc,
            model,
            due,
            cache,
            profile,
        }
    }

    /// One ask, on a blocking thread (the model's lines take seconds).
    /// Every answer is kept for the ask page (`/asks/ROOT`).
    pub async fn ask(&self, call: AskCall) -> Result<crate::api::ask::Answered, ApiError> {
        let parts = NodeAsk {
            asker: self.clone(),
            runtime: tokio::runtime::Handle::current(),
        };
        let answered = tokio::task::spawn_blocking(move || crate::api::ask::ask(&call, &parts))
            .await
            .map_err(|e| ApiError::internal(format!("the ask stopped: {e}")))??;
        let record = answered.record.clone();
        self.with_cache(move |c| {
            c.keep_answer(&record, crate::now_ms())
                .map_err(|e| ApiError::internal(e.to_string()))
        })
        .await?;
        Ok(answered)
    }

    /// Runs `f` on `ask.db`'s worker.
    pub async fn with_cache<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut AskCache) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        self.cache
            .call(move |lazy| lazy.get().and_then(f))
            .await
            .map_err(|_| ApiError::unavailable("the node is shutting down"))?
    }
}

/// The ask's parts on the node, called from a blocking thread.
struct NodeAsk {
    asker: Asker,
    runtime: tokio::runtime::Handle,
}

impl NodeAsk {
    fn cache<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut AskCache) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        self.runtime.block_on(self.asker.with_cache(f))
    }
}

impl AskParts for NodeAsk {
    fn profile(&self) -> String {
        self.asker.profile.clone()
    }

    fn cached(&self, lookup: &Hash) -> Result<Option<(Hash, AskRecord)>, ApiError> {
        let lookup = *lookup;
        self.cache(move |c| {
            c.get(&lookup)
                .map_err(|e| ApiError::internal(e.to_string()))
        })
    }

    fn now_roots(
        &self,
        cited: &[&Evidence],
        mesh: bool,
    ) -> Result<BTreeMap<String, Option<String>>, ApiError> {
        let me = self.asker.rpc.net.local_peer_id().to_string();
        let mut now = BTreeMap::new();
        let mut own = Vec::new();
        for e in cited {
            match &e.holder {
                // A peer's book: the root it announces for the key now.
                Some(holder) if mesh && *holder != me => {
                    let root = holder.parse::<PeerId>().ok().and_then(|p| {
                        let peers = self.asker.rpc.peers.lock();
                        peers
                            .current_root(&p, &e.book)
                            .map(|(root, _)| hex::encode(root))
                    });
                    now.insert(e.book.clone(), root);
                }
                _ => own.push(e.book.clone()),
            }
        }
        let roots = self.runtime.block_on(
            self.asker
                .rpc
                .store
                .call(move |b| b.store().current_roots(own)),
        )??;
        now.extend(roots);
        Ok(now)
    }

    fn retrieve(&self, question: &str, call: &AskCall) -> Result<Retrieved, ApiError> {
        let k = call.k as usize;
        if !call.mesh {
            let (q, books) = (question.to_string(), call.books.clone());
            let evidence = self.runtime.block_on(
                self.asker
                    .rpc
                    .store
                    .call(move |b| b.store().evidence(&q, &books, k)),
            )??;
            return Ok(Retrieved {
                retrieval: Retrieval {
                    books: call.books.clone(),
                    evidence,
                    mesh: None,
                },
                errors: Vec::new(),
            });
        }
        self.runtime
            .block_on(mesh_retrieval(&self.asker, question, &call.books, k))
    }

    fn answer(
        &self,
        question: &str,
        retrieval: Retrieval,
        settings: &AskSettings,
    ) -> Result<AskRecord, ApiError> {
        let (question, settings) = (question.to_string(), settings.clone());
        self.asker
            .model
            .call_blocking(move |m| crate::ask::answer(m, &question, retrieval, &settings))
            .map_err(model_error)?
            .map_err(model_error)
    }

    fn keep(&self, lookup: &Hash, answer_key: &Hash, record: &AskRecord) -> Result<(), ApiError> {
        let (lookup, key, record) = (*lookup, *answer_key, record.clone());
        self.cache(move |c| {
            c.put(&lookup, &key, &record, crate::now_ms())
                .map_err(|e| ApiError::internal(e.to_string()))
        })
    }
}

/// A mesh ask's passages: one mesh search across books, or one per book
/// asked; merged by rank, the same passage held twice kept once; then
/// anchored to the mesh.
async fn mesh_retrieval(
    asker: &Asker,
    question: &str,
    books: &[String],
    k: usize,
) -> Result<Retrieved, ApiError> {
    let rpc = &asker.rpc;
    let keys: Vec<Option<String>> = if books.is_empty() {
        vec![None]
    } else {
        books.iter().cloned().map(Some).collect()
    };
    let mut hits: Vec<Proven> = Vec::new();
    let mut errors = Vec::new();
    for key in keys {
        let request = SearchRequest {
            query: question.to_string(),
            key,
            version: None,
            k,
        };
        let (found, missing) = mesh_hits(rpc, request).await?;
        hits.extend(found);
        for e in missing {
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    hits.sort_by(|a, b| hit_order(&a.hit, &b.hit));
    let evidence = mesh_evidence(asker, hits, k).await?;
    let anchor = mesh_anchor(asker, &evidence).await?;
    Ok(Retrieved {
        retrieval: Retrieval {
            books: books.to_vec(),
            evidence,
            mesh: Some(anchor),
        },
        errors,
    })
}

/// Ranked hits as evidence, the first `k` distinct passages: a peer's with
/// the proof it was checked with, this node's proven by its store.
async fn mesh_evidence(
    asker: &Asker,
    hits: Vec<Proven>,
    k: usize,
) -> Result<Vec<Evidence>, ApiError> {
    let me = asker.rpc.net.local_peer_id();
    let own: Vec<_> = hits
        .iter()
        .filter(|p| p.peer == me)
        .map(|p| p.hit.clone())
        .collect();
    let mut own = asker
        .rpc
        .store
        .call(move |b| b.store().evidence_of(own))
        .await??
        .into_iter();
    let mut evidence: Vec<Evidence> = Vec::new();
    for p in hits {
        let mut e = match p.proof {
            None => own
                .next()
                .ok_or_else(|| ApiError::internal("an own hit went missing"))?,
            Some(proof) => Evidence {
                pointer: 0,
                id: evidence_id(&root_of(&proof)?, &p.hit.leaf),
                book: p.hit.key,
                title: p.hit.title.unwrap_or_default(),
                index: p.hit.index,
                label: p.hit.label,
                text: p.hit.content,
                proven: true,
                proof: Some(proof),
                holder: None,
            },
        };
        e.holder = Some(p.peer.to_string());
        if evidence.len() < k && !evidence.iter().any(|x| x.id == e.id) {
            e.pointer = evidence.len() as u32 + 1;
            evidence.push(e);
        }
    }
    Ok(evidence)
}

fn root_of(proof: &PassageProof) -> Result<Hash, ApiError> {
    proof
        .root_hash()
        .ok_or_else(|| ApiError::internal("a proof root is not 32 bytes"))
}

/// The mesh's chain from its genesis and the signed announcements of every
/// holder cited: this node's own must list its cited books as they are now.
async fn mesh_anchor(asker: &Asker, evidence: &[Evidence]) -> Result<MeshAnchor, ApiError> {
    let rpc = &asker.rpc;
    let view = rpc.mesh.view();
    let roster = view
        .roster()
        .ok_or_else(|| ApiError::not_found("no mesh: a mesh ask asks its members"))?;
    let me = rpc.net.local_peer_id().to_string();
    let mut announcements: Vec<Signed> = Vec::new();
    let mut add = |a: Signed| {
        if !announcements.contains(&a) {
            announcements.push(a);
        }
    };
    for e in evidence {
        let (Some(holder), Some(proof)) = (&e.holder, &e.proof) else {
            continue;
        };
        if *holder == me {
            let root = root_of(proof)?;
            let signed = rpc
                .peers
                .own_announcement(&asker.due, &e.book, &root, proof.count)
                .await
                .ok_or_else(|| {
                    ApiError::conflict(format!(
                        "this node has not announced {} as it is now yet; try again in a second",
                        e.book
                    ))
                })?;
            add(signed);
        } else if let Ok(peer) = holder.parse::<PeerId>() {
            let signed = rpc
                .peers
                .lock()
                .announcements
                .get(&peer.to_bytes())
                .map(|k| k.signed.clone());
            if let Some(signed) = signed {
                add(signed);
            }
        }
    }
    let (genesis, chain) = view.chain_from_genesis().unwrap_or_default();
    Ok(MeshAnchor::new(
        &roster.mesh_id,
        &genesis,
        &chain,
        &announcements,
    ))
}
