//! `/grove/search/1`, both sides: a member's search of this node's books,
//! and the mesh-wide search that asks every other member and merges the
//! hits by score, each naming the peer holding it.

use libp2p::PeerId;
use prost::Message;

use super::Rpc;
use crate::api::books::{BookApi, SearchRequest};
use crate::api::{ApiError, dto};
use crate::daemon::store::StoreWorker;
use crate::mesh::state::MeshState;
use crate::net::Protocol;
use crate::wire::node as node_wire;

/// Most hits a search request may ask for.
const MAX_SEARCH_K: u32 = 50;

fn refused(reason: &str) -> node_wire::SearchAnswer {
    node_wire::SearchAnswer {
        hits: Vec::new(),
        refused: reason.to_string(),
    }
}

/// Answers a member's search from this node's store.
pub async fn answer(
    store: &StoreWorker,
    view: &MeshState,
    peer: PeerId,
    data: &[u8],
) -> node_wire::SearchAnswer {
    if !super::is_member(view, peer) {
        return refused("search is for members of the current roster");
    }
    let Ok(call) = node_wire::SearchCall::decode(data) else {
        return refused("malformed search call");
    };
    let request = SearchRequest {
        query: call.query,
        key: (!call.key.is_empty()).then_some(call.key),
        version: None,
        k: call.k.clamp(1, MAX_SEARCH_K) as usize,
    };
    let hits = match store.call(move |b| b.search(&request)).await {
        Ok(Ok(hits)) => hits,
        Ok(Err(e)) => return refused(&e.message),
        Err(e) => return refused(&e.to_string()),
    };
    node_wire::SearchAnswer {
        hits: hits
            .hits
            .into_iter()
            .map(|h| node_wire::SearchHit {
                key: h.key,
                title: h.title.unwrap_or_default(),
                author: h.author.unwrap_or_default(),
                index: h.index,
                node_id: h.node_id,
                text: h.content,
                score: h.score,
                version: h.version,
                label: h.label,
                leaf: hex::decode(h.leaf).unwrap_or_default(),
            })
            .collect(),
        refused: String::new(),
    }
}

fn hit_from(h: node_wire::SearchHit, peer: PeerId) -> dto::Hit {
    dto::Hit {
        key: h.key,
        version: h.version,
        title: (!h.title.is_empty()).then_some(h.title),
        author: (!h.author.is_empty()).then_some(h.author),
        node_id: h.node_id,
        label: h.label,
        index: h.index,
        score: h.score,
        content: h.text,
        leaf: hex::encode(h.leaf),
        peer_id: Some(peer.to_string()),
    }
}

/// Searches this node's books and every other member's, merging the hits
/// by score; members that do not answer are listed under `errors`.
pub async fn mesh_search(rpc: &Rpc, request: SearchRequest) -> Result<dto::Hits, ApiError> {
    crate::daemon::mesh::refuse_if_removed(&rpc.mesh.view())?;
    let me = rpc.net.local_peer_id();
    let k = request.k;
    let local_request = request.clone();
    let mut local = rpc.store.call(move |b| b.search(&local_request)).await??;
    for h in &mut local.hits {
        h.peer_id = Some(me.to_string());
    }
    let mut hits = local.hits;
    let mut errors = Vec::new();
    let targets: Vec<PeerId> = rpc
        .mesh
        .view()
        .roster()
        .map(|r| {
            r.members
                .iter()
                .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
                .filter(|p| *p != me)
                .collect()
        })
        .unwrap_or_default();
    let call = node_wire::SearchCall {
        query: request.query.clone(),
        k: u32::try_from(k).unwrap_or(u32::MAX),
        key: request.key.clone().unwrap_or_default(),
    }
    .encode_to_vec();
    let asks = targets.into_iter().map(|peer| {
        let call = call.clone();
        async move {
            let _ = rpc.peers.ensure_connected(&rpc.net, peer).await;
            (peer, rpc.net.request(peer, Protocol::Search, call).await)
        }
    });
    for (peer, answer) in futures::future::join_all(asks).await {
        let answer = match answer {
            Ok(bytes) => node_wire::SearchAnswer::decode(bytes.as_slice())
                .map_err(|_| "malformed answer".to_string()),
            Err(e) => Err(e.to_string()),
        };
        match answer {
            Ok(a) if a.refused.is_empty() => {
                hits.extend(a.hits.into_iter().map(|h| hit_from(h, peer)))
            }
            Ok(a) => errors.push(format!("{peer}: refused: {}", a.refused)),
            Err(e) => errors.push(format!("{peer}: {e}")),
        }
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    hits.truncate(k);
    Ok(dto::Hits { hits, errors })
}
