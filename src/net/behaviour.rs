//! The composed libp2p behaviour: identify, gossipsub tuned for small
//! private meshes, one framed request-response behaviour per [`Protocol`],
//! connection limits and a block list.

use std::time::Duration;

use libp2p::swarm::NetworkBehaviour;
use libp2p::{
    StreamProtocol, allow_block_list, connection_limits, gossipsub, identify, identity,
    request_response,
};
use sha2::{Digest, Sha256};

use super::codec::FrameCodec;
use super::protocol::{self, Protocol};
use super::{NetConfig, NetError};

pub type Rpc = request_response::Behaviour<FrameCodec>;

/// Each request-response protocol is its own behaviour, so an outbound
/// request names its protocol and an inbound one says which it came on.
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
    /// The behaviour serving `protocol`.
    pub fn rpc(&mut self, protocol: Protocol) -> &mut Rpc {
        match protocol {
            Protocol::Join => &mut self.join,
            Protocol::Sync => &mut self.sync,
            Protocol::Search => &mut self.search,
            Protocol::Turn => &mut self.turn,
        }
    }
}

/// A gossip message's id is the hash of its content, so a re-published or
/// duplicated payload is recognised whoever relays it.
fn content_id(message: &gossipsub::Message) -> gossipsub::MessageId {
    let digest = Sha256::digest(&message.data);
    gossipsub::MessageId::from(hex::encode(&digest[..20]))
}

pub fn build(keypair: &identity::Keypair, config: &NetConfig) -> Result<Behaviour, NetError> {
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
        .map_err(|e| NetError::Transport(format!("gossipsub config: {e}")))?;
    let gossipsub = gossipsub::Behaviour::new(
        gossipsub::MessageAuthenticity::Signed(keypair.clone()),
        gossip_config,
    )
    .map_err(|e| NetError::Transport(format!("gossipsub: {e}")))?;
    let rpc = |protocol: Protocol| {
        request_response::Behaviour::with_codec(
            FrameCodec {
                max_bytes: protocol.max_bytes(config),
            },
            [(
                StreamProtocol::new(protocol.name()),
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default().with_request_timeout(protocol.timeout(config)),
        )
    };
    Ok(Behaviour {
        limits: connection_limits::Behaviour::new(limits),
        blocked: allow_block_list::Behaviour::default(),
        identify: identify::Behaviour::new(identify::Config::new(
            protocol::IDENTIFY.into(),
            keypair.public(),
        )),
        gossipsub,
        join: rpc(Protocol::Join),
        sync: rpc(Protocol::Sync),
        search: rpc(Protocol::Search),
        turn: rpc(Protocol::Turn),
    })
}
