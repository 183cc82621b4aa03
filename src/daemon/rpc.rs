//! Answers to the request-response protocols. `join` is open to anyone
//! holding a valid invite; `sync` and `search` answer current roster
//! members only (checked per request against the peer's authenticated id).
//! Every answer is a `proto/node.proto` message; a refusal carries its reason.

use libp2p::PeerId;
use prost::Message;

use super::node::Node;
use crate::api::books::{BookApi, SearchRequest};
use crate::mesh::state::{Dest, parse_join_request};
use crate::wire::mesh as wire;
use crate::wire::mesh::mesh_message::Kind;
use crate::wire::node as node_wire;

/// Most hits a search request may ask for.
const MAX_SEARCH_K: u32 = 50;

/// The answer to one inbound request (never fails: refusals are answers).
pub async fn answer(node: &Node, peer: PeerId, protocol: &str, data: &[u8]) -> Vec<u8> {
    let stats = &node.shared().stats;
    let short = protocol
        .trim_start_matches("/grove/")
        .trim_end_matches("/1");
    let answer = match protocol {
        "/grove/join/1" => join(node, peer, data).await.encode_to_vec(),
        "/grove/sync/1" => sync(node, peer, data).await.encode_to_vec(),
        "/grove/search/1" => search(node, peer, data).await.encode_to_vec(),
        "/grove/turn/1" => super::turns::answer(node, Some(peer), data)
            .await
            .encode_to_vec(),
        _ => {
            stats.bump(&format!("requests.refused.{short}"));
            return Vec::new();
        }
    };
    stats.bump(&format!("requests.served.{short}"));
    answer
}

fn is_member(node: &Node, peer: PeerId) -> bool {
    node.view()
        .roster()
        .is_some_and(|r| r.member(&peer.to_bytes()).is_some())
}

fn refused_join(reason: impl Into<String>) -> node_wire::JoinAnswer {
    node_wire::JoinAnswer {
        kind: Some(node_wire::join_answer::Kind::Refused(reason.into())),
    }
}

/// The open add proposal for `peer`, if any.
fn pending_ticket(node: &Node, peer: &[u8]) -> Option<[u8; 32]> {
    node.view()
        .proposals
        .values()
        .find(|p| p.joiner.as_deref() == Some(peer))
        .map(|p| p.hash)
}

async fn join(node: &Node, peer: PeerId, data: &[u8]) -> node_wire::JoinAnswer {
    use node_wire::join_answer::Kind as Answer;
    let Ok(call) = node_wire::JoinCall::decode(data) else {
        return refused_join("malformed join call");
    };
    let peer_bytes = peer.to_bytes();
    match call.kind {
        Some(node_wire::join_call::Kind::Ticket(ticket)) => {
            let view = node.view();
            if let Some(t) = pending_ticket(node, &peer_bytes)
                && t.as_slice() == ticket.as_slice()
            {
                return node_wire::JoinAnswer {
                    kind: Some(Answer::Pending(ticket)),
                };
            }
            let welcome = view
                .roster()
                .and_then(|r| r.member(&peer_bytes))
                .and_then(|m| view.welcome_for(m));
            match welcome {
                Some(w) => node_wire::JoinAnswer {
                    kind: Some(Answer::Welcome(w)),
                },
                None => refused_join(
                    "the add was not voted through (expired, voted down or overtaken by another change); ask for a new invite",
                ),
            }
        }
        Some(node_wire::join_call::Kind::Request(signed)) => {
            let check = match parse_join_request(&signed) {
                Ok((check, _)) => check,
                Err(e) => return refused_join(e.to_string()),
            };
            if check.member.peer_id != peer_bytes {
                return refused_join("the join request is signed by another node than the caller");
            }
            if let Some(t) = pending_ticket(node, &peer_bytes) {
                return node_wire::JoinAnswer {
                    kind: Some(Answer::Pending(t.to_vec())),
                };
            }
            let message = wire::MeshMessage {
                kind: Some(Kind::JoinRequest(signed)),
            }
            .encode_to_vec();
            let result = node
                .step(move |s, id| s.receive(id, &message, crate::now_ms(), &mut rand::rng()))
                .await;
            match result {
                Ok(t) => {
                    let welcome = t.outbound.iter().find_map(|o| match &o.to {
                        Dest::Peer(p) if *p == peer_bytes => {
                            match wire::MeshMessage::decode(o.message.as_slice()).ok()?.kind? {
                                Kind::Welcome(w) => Some(w),
                                _ => None,
                            }
                        }
                        _ => None,
                    });
                    if let Some(w) = welcome {
                        return node_wire::JoinAnswer {
                            kind: Some(Answer::Welcome(w)),
                        };
                    }
                    match pending_ticket(node, &peer_bytes) {
                        Some(t) => node_wire::JoinAnswer {
                            kind: Some(Answer::Pending(t.to_vec())),
                        },
                        None => refused_join("the join request was not taken up"),
                    }
                }
                Err(e) => refused_join(e.to_string()),
            }
        }
        None => refused_join("empty join call"),
    }
}

fn refused_sync(reason: impl Into<String>) -> node_wire::SyncAnswer {
    node_wire::SyncAnswer {
        kind: Some(node_wire::sync_answer::Kind::Refused(reason.into())),
    }
}

async fn sync(node: &Node, peer: PeerId, data: &[u8]) -> node_wire::SyncAnswer {
    if !is_member(node, peer) {
        return refused_sync("sync is for members of the current roster");
    }
    let Ok(signed) = wire::Signed::decode(data) else {
        return refused_sync("malformed sync request");
    };
    let message = wire::MeshMessage {
        kind: Some(Kind::SyncRequest(signed)),
    }
    .encode_to_vec();
    let peer_bytes = peer.to_bytes();
    let result = node
        .shared()
        .mesh
        .call(move |core| {
            // Answering changes nothing: no transaction, nothing queued.
            core.state
                .receive(&core.id, &message, crate::now_ms(), &mut rand::rng())
                .map(|(_, t)| t)
        })
        .await;
    let t = match result {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return refused_sync(e.to_string()),
        Err(e) => return refused_sync(e.to_string()),
    };
    let response = t.outbound.into_iter().find_map(|o| match o.to {
        Dest::Peer(p) if p == peer_bytes => {
            match wire::MeshMessage::decode(o.message.as_slice()).ok()?.kind? {
                Kind::SyncResponse(s) => Some(s),
                _ => None,
            }
        }
        _ => None,
    });
    match response {
        Some(s) => node_wire::SyncAnswer {
            kind: Some(node_wire::sync_answer::Kind::Response(s)),
        },
        None => refused_sync("the sync request names another requester"),
    }
}

async fn search(node: &Node, peer: PeerId, data: &[u8]) -> node_wire::SearchAnswer {
    let refused = |reason: &str| node_wire::SearchAnswer {
        hits: Vec::new(),
        refused: reason.to_string(),
    };
    if !is_member(node, peer) {
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
    match node.shared().store.call(move |b| b.search(&request)).await {
        Ok(hits) => node_wire::SearchAnswer {
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
        },
        Err(e) => refused(&e.message),
    }
}
