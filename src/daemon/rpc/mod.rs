//! The request-response protocols, both sides, one file each: `join` is
//! open to anyone holding a valid invite; `sync`, `search` and `turn` answer
//! current roster members only (checked per request against the peer id
//! the Noise handshake authenticated; the network's members-only gate
//! refuses non-members' streams before that). Every answer is a `proto/`
//! message; a refusal is an answer carrying its reason, never a failure.
//! `limits` decides, before any work, whether a request is taken at all.

pub mod join;
pub mod limits;
pub mod relay_pass;
pub mod search;
pub mod sync;
pub mod turn;

use std::sync::Arc;

use libp2p::PeerId;
use prost::Message;

use super::outbox::MeshLink;
use super::peers::Peers;
use super::stats::Stats;
use super::store::StoreWorker;
use crate::mesh::state::MeshState;
use crate::net::{Network, Protocol};

/// What answering (and asking) needs; cheap to clone.
#[derive(Clone)]
pub struct Rpc {
    pub mesh: MeshLink,
    pub net: Network,
    pub peers: Peers,
    pub store: StoreWorker,
    pub speaker: turn::Speaking,
    pub stats: Arc<Stats>,
    pub limits: limits::Limits,
    /// Whom this node's relay serves (`net.relay.serve`).
    pub relay_serve: crate::net::RelayServe,
}

/// True when `peer` is a member of the current roster.
pub fn is_member(view: &MeshState, peer: PeerId) -> bool {
    view.roster()
        .is_some_and(|r| r.member(&peer.to_bytes()).is_some())
}

/// A refusal on `protocol`, in that protocol's answer type.
pub fn refusal(protocol: Protocol, reason: &str) -> Vec<u8> {
    match protocol {
        Protocol::Join => join::refused(reason).encode_to_vec(),
        Protocol::Sync => sync::refused(reason).encode_to_vec(),
        Protocol::Search => search::refused(reason).encode_to_vec(),
        Protocol::Turn => turn::refused(reason).encode_to_vec(),
        Protocol::RelayPass => relay_pass::refused(reason).encode_to_vec(),
    }
}

/// The answer to one inbound request, counted as served or refused.
pub async fn answer(rpc: &Rpc, peer: PeerId, protocol: Protocol, data: &[u8]) -> Vec<u8> {
    let (answer, refused) = match protocol {
        Protocol::RelayPass => {
            let anyone = rpc.relay_serve == crate::net::RelayServe::Anyone;
            let a = relay_pass::answer(&rpc.net, &rpc.mesh.view(), anyone, peer, data).await;
            let refused = matches!(
                a.kind,
                Some(crate::wire::node::relay_pass_answer::Kind::Refused(_))
            );
            (a.encode_to_vec(), refused)
        }
        Protocol::Join => {
            let a = join::answer(&rpc.mesh, peer, data).await;
            let refused = matches!(a.kind, Some(join::Answer::Refused(_)));
            (a.encode_to_vec(), refused)
        }
        Protocol::Sync => {
            let a = sync::answer(&rpc.mesh, peer, data).await;
            let refused = matches!(
                a.kind,
                Some(crate::wire::node::sync_answer::Kind::Refused(_))
            );
            (a.encode_to_vec(), refused)
        }
        Protocol::Search => {
            let started = std::time::Instant::now();
            let a = search::answer(&rpc.store, &rpc.mesh.view(), &rpc.limits, peer, data).await;
            let took = started.elapsed();
            super::stats::observe(&rpc.stats.search_seconds, "scope", "peer", took);
            let refused = !a.refused.is_empty();
            (a.encode_to_vec(), refused)
        }
        Protocol::Turn => {
            let a = match rpc.limits.check_turn_quota(peer) {
                Ok(()) => {
                    let started = std::time::Instant::now();
                    let a = turn::answer(&rpc.speaker, Some(peer), data).await;
                    rpc.limits.charge_turn(peer, started.elapsed());
                    a
                }
                Err(refusal) => {
                    rpc.stats.bump("requests.refused.turn.turn-quota");
                    turn::refused(refusal.to_string())
                }
            };
            let refused = matches!(
                a.kind,
                Some(crate::wire::moot::turn_answer::Kind::Refused(_))
            );
            (a.encode_to_vec(), refused)
        }
    };
    let outcome = if refused { "refused" } else { "served" };
    rpc.stats
        .bump(&format!("requests.{outcome}.{}", protocol.short()));
    answer
}
