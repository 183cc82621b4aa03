//! `/grove/sync/1`: a member asks for the commits it lacks. Answering
//! changes nothing (no transaction, nothing queued); asking records only
//! the state's note of the pending request, and the response is applied
//! like any received mesh message.

use libp2p::PeerId;
use prost::Message;

use super::Rpc;
use crate::daemon::outbox::MeshLink;
use crate::mesh::MeshError;
use crate::mesh::state::Dest;
use crate::net::Protocol;
use crate::wire::mesh as wire;
use crate::wire::mesh::mesh_message::Kind;
use crate::wire::node as node_wire;

/// How many members a sync request goes to.
const FANOUT: usize = 3;

pub(super) fn refused(reason: impl Into<String>) -> node_wire::SyncAnswer {
    node_wire::SyncAnswer {
        kind: Some(node_wire::sync_answer::Kind::Refused(reason.into())),
    }
}

/// Answers a member's sync request from the current state.
pub async fn answer(mesh: &MeshLink, peer: PeerId, data: &[u8]) -> node_wire::SyncAnswer {
    if !super::is_member(&mesh.view(), peer) {
        return refused("sync is for members of the current roster");
    }
    let Ok(signed) = wire::Signed::decode(data) else {
        return refused("malformed sync request");
    };
    let message = wire::MeshMessage {
        kind: Some(Kind::SyncRequest(signed)),
    }
    .encode_to_vec();
    let peer_bytes = peer.to_bytes();
    let result = mesh
        .worker
        .call(move |core| {
            core.state
                .receive(&core.id, &message, crate::now_ms(), &mut rand::rng())
                .map(|(_, t)| t)
        })
        .await;
    let t = match result {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return refused(e.to_string()),
        Err(e) => return refused(e.to_string()),
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
        None => refused("the sync request names another requester"),
    }
}

/// The connected members a sync request goes to: those named first (they
/// may be ahead of this node) in their order, then the others in random
/// order, at most [`FANOUT`]. Random, not roster order: members are sorted
/// by peer id, and the one member that holds a commit must not be the one
/// no request ever reaches.
pub fn targets<R: rand::Rng + ?Sized>(
    connected: &[PeerId],
    first: &[PeerId],
    rng: &mut R,
) -> Vec<PeerId> {
    use rand::seq::IndexedRandom;
    let mut chosen: Vec<PeerId> = Vec::with_capacity(FANOUT);
    for p in first {
        if chosen.len() < FANOUT && connected.contains(p) && !chosen.contains(p) {
            chosen.push(*p);
        }
    }
    let rest: Vec<PeerId> = connected
        .iter()
        .filter(|p| !chosen.contains(p))
        .copied()
        .collect();
    chosen.extend(rest.sample(rng, FANOUT - chosen.len()).copied());
    chosen
}

/// Asks `members` ([`targets`]) for the commits this node lacks; each
/// response is applied as it comes.
pub async fn ask(rpc: &Rpc, members: Vec<PeerId>) {
    let request = rpc
        .mesh
        .worker
        .call(|core| {
            // The request is sent here, not queued: only the state's note
            // of the pending request is kept.
            let (state, t) = core.state.sync_request(&core.id, crate::now_ms())?;
            core.state = state;
            Ok::<_, MeshError>(t.outbound)
        })
        .await;
    let Ok(Ok(outbound)) = request else {
        return;
    };
    let Some(signed) = outbound.iter().find_map(|o| {
        match wire::MeshMessage::decode(o.message.as_slice()).ok()?.kind? {
            Kind::SyncRequest(s) => Some(s),
            _ => None,
        }
    }) else {
        return;
    };
    let bytes = signed.encode_to_vec();
    for peer in members {
        let rpc = rpc.clone();
        let bytes = bytes.clone();
        tokio::spawn(async move {
            let Ok(answer) = rpc.net.request(peer, Protocol::Sync, bytes).await else {
                rpc.stats.bump("sync.failed");
                return;
            };
            let Ok(node_wire::SyncAnswer {
                kind: Some(node_wire::sync_answer::Kind::Response(response)),
            }) = node_wire::SyncAnswer::decode(answer.as_slice())
            else {
                rpc.stats.bump("sync.refused");
                return;
            };
            let message = wire::MeshMessage {
                kind: Some(Kind::SyncResponse(response)),
            }
            .encode_to_vec();
            match rpc.mesh.receive(message).await {
                Ok(_) => rpc.stats.bump("sync.applied"),
                Err(e) => {
                    tracing::debug!(error = %e, %peer, "sync response refused");
                    rpc.stats.bump("sync.refused");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_named_first_is_always_asked_and_no_member_is_never_asked() {
        let connected: Vec<PeerId> = (0..6).map(|_| PeerId::random()).collect();
        let mut sorted = connected.clone();
        sorted.sort();
        let last = *sorted.last().unwrap();
        let mut rng = rand::rng();
        for _ in 0..50 {
            let chosen = targets(&sorted, &[last], &mut rng);
            assert_eq!(chosen.len(), FANOUT);
            assert_eq!(chosen[0], last);
        }
        // Not connected: named in vain, the request goes to the others.
        let gone = PeerId::random();
        let chosen = targets(&sorted, &[gone], &mut rng);
        assert!(!chosen.contains(&gone) && chosen.len() == FANOUT);
        // With no one named, each connected member is asked some of the time
        // (roster order would leave the last ones out every time).
        let mut asked = std::collections::BTreeSet::new();
        for _ in 0..200 {
            asked.extend(targets(&sorted, &[], &mut rng));
        }
        assert_eq!(asked.len(), connected.len());
        assert!(targets(&[], &[last], &mut rng).is_empty());
    }
}
