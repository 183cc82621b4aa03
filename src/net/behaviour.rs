//! The composed libp2p behaviour: identify, gossipsub tuned for small
//! private meshes, framed request-response, connection limits and a block list.

use std::time::Duration;

use libp2p::swarm::NetworkBehaviour;
use libp2p::{
    StreamProtocol, allow_block_list, connection_limits, gossipsub, identify, identity,
    request_response,
};
use sha2::{Digest, Sha256};

use super::NetConfig;
use super::codec::FrameCodec;

/// Request-response protocols, each versioned, each its own behaviour (so
/// an outbound request names its protocol, and an inbound one says which).
pub const PROTOCOLS: &[&str] = &[
    "/grove/join/1",
    "/grove/sync/1",
    "/grove/search/1",
    "/grove/turn/1",
];

pub type Rpc = request_response::Behaviour<FrameCodec>;

#[derive(NetworkBehaviour)]
pub struct Behaviour {
    pub limits: connection_limits::Behaviour,
    pub blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    pub identify: identify::Behaviour,
    pub gossipsub: gossipsub::Behaviour,
    pub join: Rpc,
    pub sync: Rpc,
    pub search: Rpc,
    pub turn: Rpc,
}

impl Behaviour {
    /// The behaviour serving `protocol` (an entry of [`PROTOCOLS`]).
    pub fn rpc(&mut self, protocol: &str) -> Option<&mut Rpc> {
        match protocol {
            "/grove/join/1" => Some(&mut self.join),
            "/grove/sync/1" => Some(&mut self.sync),
            "/grove/search/1" => Some(&mut self.search),
            "/grove/turn/1" => Some(&mut self.turn),
            _ => None,
        }
    }
}

/// A gossip message's id is the hash of its content, so a re-published or
/// duplicated payload is recognised whoever relays it.
fn content_id(message: &gossipsub::Message) -> gossipsub::MessageId {
    let digest = Sha256::digest(&message.data);
    gossipsub::MessageId::from(hex::encode(&digest[..20]))
}

pub fn build(keypair: &identity::Keypair, config: &NetConfig) -> Result<Behaviour, String> {
    let limits = connection_limits::ConnectionLimits::default()
        .with_max_established(Some(config.max_connections))
        .with_max_established_per_peer(Some(2))
        .with_max_pending_incoming(Some(config.max_connections));
    let gossip_config = gossipsub::ConfigBuilder::default()
        // Small meshes (3 to 50 nodes): the defaults (D=6, D_lo=5) leave
        // meshes of under six peers below D_lo forever.
        .mesh_n(4)
        .mesh_n_low(2)
        .mesh_n_high(8)
        .mesh_outbound_min(1)
        .heartbeat_interval(Duration::from_millis(500))
        .max_transmit_size(config.max_message_bytes)
        .validation_mode(gossipsub::ValidationMode::Strict)
        .validate_messages()
        .message_id_fn(content_id)
        .build()
        .map_err(|e| format!("gossipsub config: {e}"))?;
    let gossipsub = gossipsub::Behaviour::new(
        gossipsub::MessageAuthenticity::Signed(keypair.clone()),
        gossip_config,
    )?;
    let rpc = |protocol: &'static str| {
        let timeout = if protocol == "/grove/turn/1" {
            config.turn_timeout
        } else {
            config.request_timeout
        };
        request_response::Behaviour::with_codec(
            FrameCodec {
                max_bytes: config.max_message_bytes,
            },
            [(
                StreamProtocol::new(protocol),
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default().with_request_timeout(timeout),
        )
    };
    Ok(Behaviour {
        limits: connection_limits::Behaviour::new(limits),
        blocked: allow_block_list::Behaviour::default(),
        identify: identify::Behaviour::new(identify::Config::new(
            "/grove/1".into(),
            keypair.public(),
        )),
        gossipsub,
        join: rpc(PROTOCOLS[0]),
        sync: rpc(PROTOCOLS[1]),
        search: rpc(PROTOCOLS[2]),
        turn: rpc(PROTOCOLS[3]),
    })
}
