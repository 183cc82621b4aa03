//! The request-response protocols, both sides, one file each: `join` is
//! open to anyone holding a valid invite; `sync`, `search` and `turn` answer
//! current roster members only (checked per request against the peer id
//! the Noise handshake authenticated). Every answer is a `proto/` message;
//! a refusal is an answer carrying its reason, never a failure.

pub mod join;
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
}

/// True when `peer` is a member of the current roster.
pub fn is_member(view: &MeshState, peer: PeerId) -> bool {
    view.roster()
        .is_some_and(|r| r.member(&peer.to_bytes()).is_some())
}

/// The answer to one inbound request.
pub async fn answer(rpc: &Rpc, peer: PeerId, protocol: Protocol, data: &[u8]) -> Vec<u8> {
    let answer = match protocol {
        Protocol::Join => join::answer(&rpc.mesh, peer, data).await.encode_to_vec(),
        Protocol::Sync => sync::answer(&rpc.mesh, peer, data).await.encode_to_vec(),
        Protocol::Search => search::answer(&rpc.store, &rpc.mesh.view(), peer, data)
            .await
            .encode_to_vec(),
        Protocol::Turn => turn::answer(&rpc.speaker, Some(peer), data)
            .await
            .encode_to_vec(),
    };
    rpc.stats
        .bump(&format!("requests.served.{}", protocol.short()));
    answer
}
