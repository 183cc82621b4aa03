//! `/grove/search/1`, both sides: a member's search of this node's books,
//! and the mesh-wide search. Across books the mesh search runs in two
//! rounds (docs/search.md): every holder's statistics for the query, summed;
//! then every holder's hits ranked with the sums, so the merged list ranks
//! like one index over every member's books. Every remote hit carries its
//! Merkle proof and is shown only once checked against the root its holder
//! announced; a hit that fails is dropped and listed under `errors`.

use std::time::Duration;

use libp2p::PeerId;
use prost::Message;

use super::Rpc;
use crate::api::books::{MAX_SEARCH_K, SearchRequest};
use crate::api::{ApiError, dto};
use crate::ask::PassageProof;
use crate::daemon::store::StoreWorker;
use crate::merkle;
use crate::mesh::state::MeshState;
use crate::net::Protocol;
use crate::store::{QueryStats, SearchHit, StoreError, hit_order};
use crate::wire::node as node_wire;

/// How long the searcher waits for each round's answers.
const ROUND_TIMEOUT: Duration = Duration::from_secs(20);

pub(super) fn refused(reason: &str) -> node_wire::SearchAnswer {
    node_wire::SearchAnswer {
        refused: reason.to_string(),
        ..Default::default()
    }
}

fn stats_to_wire(s: &QueryStats) -> node_wire::QueryStats {
    node_wire::QueryStats {
        words: s.words.clone(),
        chunks: s.chunks,
        tokens: s.tokens,
        word_chunks: s.word_chunks.clone(),
        all_words: s.all_words,
    }
}

fn stats_from_wire(s: node_wire::QueryStats) -> Result<QueryStats, String> {
    if s.word_chunks.len() != s.words.len() {
        return Err("its statistics name a count per word for another number of words".into());
    }
    Ok(QueryStats {
        words: s.words,
        chunks: s.chunks,
        tokens: s.tokens,
        word_chunks: s.word_chunks,
        all_words: s.all_words,
    })
}

/// Hits as sent, each with its book version's chunk count and proof.
fn hits_to_wire(
    store: &mut crate::store::Store,
    hits: Vec<SearchHit>,
) -> Result<Vec<node_wire::SearchHit>, crate::store::StoreError> {
    hits.into_iter()
        .map(|h| {
            let shard = store.shard_of(&h.key)?;
            let book = shard.book(&h.key, Some(h.version))?;
            let proof = shard.proof(&book, h.index)?;
            Ok(node_wire::SearchHit {
                key: h.key,
                title: h.title.unwrap_or_default(),
                author: h.author.unwrap_or_default(),
                index: h.index,
                node_id: h.node_id,
                text: h.content,
                score: h.score,
                version: h.version,
                label: h.label,
                leaf: h.leaf.to_vec(),
                count: book.count,
                proof: crate::wire::proof::to_wire(&proof.proof),
            })
        })
        .collect()
}

/// Answers a member's search from this node's store: round 1 (its
/// statistics), round 2 (hits ranked with the collection's), or a search
/// ranked with its own statistics.
pub async fn answer(
    store: &StoreWorker,
    view: &MeshState,
    limits: &super::limits::Limits,
    peer: PeerId,
    data: &[u8],
) -> node_wire::SearchAnswer {
    if !super::is_member(view, peer) {
        return refused("search is for members of the current roster");
    }
    let Ok(call) = node_wire::SearchCall::decode(data) else {
        return refused("malformed search call");
    };
    if call.query.len() > limits.max_query_bytes {
        return refused(&format!(
            "a query of {} bytes is over this node's limit of {} (net.max_query_bytes)",
            call.query.len(),
            limits.max_query_bytes
        ));
    }
    let max_k = MAX_SEARCH_K as u32;
    if call.k == 0 || call.k > max_k {
        return refused(&format!("k must be between 1 and {max_k}"));
    }
    let k = call.k as usize;
    let key = (!call.key.is_empty()).then_some(call.key);
    let stats = match call.stats.map(stats_from_wire).transpose() {
        Ok(s) => s,
        Err(e) => return refused(&e),
    };
    let stats_only = call.stats_only;
    let query = call.query;
    let answered = store
        .call(move |b| {
            let store = b.store();
            if stats_only {
                return Ok((store.query_stats(&query, k)?, Vec::new()));
            }
            let hits = match (&key, &stats) {
                (None, Some(stats)) => store.search_ranked(&query, stats, k)?,
                _ => store.search(&query, key.as_deref().map(|k| (k, None)), k)?,
            };
            let hits = hits_to_wire(store, hits)?;
            Ok::<_, crate::store::StoreError>((QueryStats::empty(Vec::new()), hits))
        })
        .await;
    match answered {
        Ok(Ok((stats, hits))) => node_wire::SearchAnswer {
            hits,
            refused: String::new(),
            stats: stats_only.then(|| stats_to_wire(&stats)),
            max_k,
        },
        Ok(Err(e)) => refused(&e.to_string()),
        Err(e) => refused(&e.to_string()),
    }
}

/// Checks a remote hit against the root its holder announced for that
/// book version, and turns it into a hit with its proof.
fn proven_hit(rpc: &Rpc, peer: PeerId, h: node_wire::SearchHit) -> Result<Proven, String> {
    let announced = rpc.peers.lock().announced_root(&peer, &h.key, h.version);
    let Some((root, count)) = announced else {
        return Err(format!(
            "it has not announced {} version {}",
            h.key, h.version
        ));
    };
    if h.count != count {
        return Err(format!(
            "it names {} chunks of {} where it announced {count}",
            h.count, h.key
        ));
    }
    if h.node_id != format!("{}#{}", h.key, h.index) {
        return Err("its node id is not of its book and index".to_string());
    }
    let leaf = merkle::leaf_hash(h.text.as_bytes());
    if h.leaf.as_slice() != leaf.as_slice() {
        return Err("its text does not hash to its leaf".to_string());
    }
    let steps = crate::wire::proof::from_wire(&h.proof)
        .ok_or_else(|| "a proof sibling is not 32 bytes".to_string())?;
    merkle::verify(&leaf, h.index, count, &steps, &root)
        .map_err(|e| format!("its proof fails against the announced root: {e}"))?;
    let proof = Some(PassageProof::new(&root, count, &steps));
    let hit = SearchHit {
        key: h.key,
        version: h.version,
        title: (!h.title.is_empty()).then_some(h.title),
        author: (!h.author.is_empty()).then_some(h.author),
        node_id: h.node_id,
        label: h.label,
        index: h.index,
        score: h.score,
        content: h.text,
        leaf,
    };
    Ok(Proven { hit, peer, proof })
}

/// A hit of a mesh search, with the member that holds it and, for a peer's,
/// the proof it was checked with (this node's own hits have none here:
/// its store proves them).
pub struct Proven {
    pub hit: SearchHit,
    pub peer: PeerId,
    pub proof: Option<PassageProof>,
}

/// Sends `call` to every peer in `targets` at once; each answer, or why
/// there is none.
async fn ask_all(
    rpc: &Rpc,
    targets: &[PeerId],
    call: &node_wire::SearchCall,
) -> Vec<(PeerId, Result<node_wire::SearchAnswer, String>)> {
    let bytes = call.encode_to_vec();
    let asks = targets.iter().map(|&peer| {
        let bytes = bytes.clone();
        async move {
            let asked = async {
                let _ = rpc.peers.ensure_connected(&rpc.net, peer).await;
                rpc.net.request(peer, Protocol::Search, bytes).await
            };
            let answer = match tokio::time::timeout(ROUND_TIMEOUT, asked).await {
                Err(_) => Err(format!("no answer within {} s", ROUND_TIMEOUT.as_secs())),
                // The member is named by the caller; the reason alone here.
                Ok(Err(crate::net::NetError::Request { reason, .. })) => Err(reason),
                Ok(Err(e)) => Err(e.to_string()),
                Ok(Ok(bytes)) => node_wire::SearchAnswer::decode(bytes.as_slice())
                    .map_err(|_| "malformed answer".to_string())
                    .and_then(|a| {
                        if a.refused.is_empty() {
                            Ok(a)
                        } else {
                            Err(format!("refused: {}", a.refused))
                        }
                    }),
            };
            (peer, answer)
        }
    });
    futures::future::join_all(asks).await
}

/// Searches this node's books and every other member's. Across books the
/// two rounds make the merged ranking that of one index over every
/// member's books; a book-scoped search ranks within the book on each
/// holder. Members that do not answer (or whose hits fail their proof) are
/// listed under `errors`; the others' hits are shown.
pub async fn mesh_search(rpc: &Rpc, request: SearchRequest) -> Result<dto::Hits, ApiError> {
    let (hits, errors) = mesh_hits(rpc, request).await?;
    Ok(dto::Hits {
        hits: hits
            .iter()
            .map(|p| dto::Hit {
                peer_id: Some(p.peer.to_string()),
                ..dto::Hit::from(&p.hit)
            })
            .collect(),
        errors,
    })
}

/// The hits of a mesh search, best first, each with its holder and proof;
/// and why members are missing from them.
pub async fn mesh_hits(
    rpc: &Rpc,
    request: SearchRequest,
) -> Result<(Vec<Proven>, Vec<String>), ApiError> {
    crate::daemon::mesh::refuse_if_removed(&rpc.mesh.view())?;
    request.check()?;
    let me = rpc.net.local_peer_id();
    let k = request.k;
    let targets = other_members(rpc, me);
    let mut errors = Vec::new();
    let mut call = node_wire::SearchCall {
        query: request.query.clone(),
        k: k as u32,
        key: request.key.clone().unwrap_or_default(),
        stats_only: false,
        stats: None,
    };
    let query = request.query.clone();
    let key = request.key.clone();
    let version = request.version;
    let (asked, local) = if key.is_none() {
        stats_round(rpc, &targets, &mut call, &query, k, &mut errors).await?
    } else {
        let local_query = query.clone();
        let hits = rpc
            .store
            .call(move |b| {
                let scope = key.as_deref().map(|k| (k, version));
                match b.store().search(&local_query, scope, k) {
                    // A book only other members hold: none of its hits here.
                    Err(StoreError::NoSuchBook(_) | StoreError::Removed(_)) => Ok(Vec::new()),
                    searched => searched,
                }
            })
            .await??;
        (targets, hits)
    };
    let mut hits: Vec<Proven> = local
        .into_iter()
        .map(|hit| Proven {
            hit,
            peer: me,
            proof: None,
        })
        .collect();
    // Round 2 (or the one round of a book-scoped search).
    for (peer, answer) in ask_all(rpc, &asked, &call).await {
        match answer {
            Ok(a) => keep_proven(rpc, peer, a.hits, &mut hits, &mut errors),
            Err(e) => errors.push(format!("{}: {e}", member_label(rpc, peer))),
        }
    }
    hits.sort_by(|a, b| hit_order(&a.hit, &b.hit));
    hits.truncate(k);
    Ok((hits, errors))
}

/// A member as search errors name it: its roster name and peer id.
fn member_label(rpc: &Rpc, peer: PeerId) -> String {
    let view = rpc.mesh.view();
    match view.roster().and_then(|r| r.member(&peer.to_bytes())) {
        Some(m) => format!("{} ({peer})", m.name),
        None => peer.to_string(),
    }
}

/// Every roster member but this node.
fn other_members(rpc: &Rpc, me: PeerId) -> Vec<PeerId> {
    rpc.mesh
        .view()
        .roster()
        .map(|r| {
            r.members
                .iter()
                .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
                .filter(|p| *p != me)
                .collect()
        })
        .unwrap_or_default()
}

/// Round 1, across books: every holder's statistics, summed, then this
/// node's hits ranked with the sums. Leaves `call` asking for hits ranked
/// with them; returns the members that answered (who are asked in round 2)
/// and this node's hits.
async fn stats_round(
    rpc: &Rpc,
    targets: &[PeerId],
    call: &mut node_wire::SearchCall,
    query: &str,
    k: usize,
    errors: &mut Vec<String>,
) -> Result<(Vec<PeerId>, Vec<SearchHit>), ApiError> {
    call.stats_only = true;
    let local_query = query.to_string();
    let mine = rpc
        .store
        .call(move |b| b.store().query_stats(&local_query, k))
        .await??;
    let mut total = mine;
    let mut answered = Vec::new();
    for (peer, answer) in ask_all(rpc, targets, call).await {
        let merged = answer.and_then(|a| {
            let stats = a.stats.ok_or("its answer carries no statistics")?;
            let stats = stats_from_wire(stats)?;
            total.merge(&stats).map_err(|e| e.to_string())
        });
        match merged {
            Ok(()) => answered.push(peer),
            Err(e) => errors.push(format!(
                "{}: no statistics for the ranking: {e}",
                member_label(rpc, peer)
            )),
        }
    }
    call.stats_only = false;
    call.stats = Some(stats_to_wire(&total));
    let local_query = query.to_string();
    let hits = rpc
        .store
        .call(move |b| b.store().search_ranked(&local_query, &total, k))
        .await??;
    Ok((answered, hits))
}

/// Adds `peer`'s hits whose proofs check to `hits`; the others are listed
/// in `errors` once per reason, with how many hits met it and the first of
/// them.
fn keep_proven(
    rpc: &Rpc,
    peer: PeerId,
    answered: Vec<node_wire::SearchHit>,
    hits: &mut Vec<Proven>,
    errors: &mut Vec<String>,
) {
    let mut dropped: Vec<(String, usize, String)> = Vec::new();
    for h in answered {
        let node_id = h.node_id.clone();
        match proven_hit(rpc, peer, h) {
            Ok(proven) => hits.push(proven),
            Err(reason) => match dropped.iter_mut().find(|d| d.0 == reason) {
                Some(d) => d.1 += 1,
                None => dropped.push((reason, 1, node_id)),
            },
        }
    }
    for (reason, n, first) in dropped {
        errors.push(format!(
            "{}: {n} hit(s) dropped (first {first}): {reason}",
            member_label(rpc, peer)
        ));
    }
}
