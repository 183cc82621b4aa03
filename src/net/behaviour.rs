//! The composed libp2p behaviour: admission control first (it refuses or
//! closes connections before any other behaviour handles them), connection
//! limits, a block list, identify, ping (round-trip times), the circuit
//! relay's server and client, hole punching (DCUtR, members only, and the
//! bookkeeping around it), then gossipsub tuned for small private
//! meshes and one framed request-response behaviour per [`Protocol`] —
//! each but join and relay-pass behind the members-only gate.

use std::time::Duration;

use libp2p::swarm::NetworkBehaviour;
use libp2p::swarm::behaviour::toggle::Toggle;
use libp2p::{
    StreamProtocol, allow_block_list, connection_limits, dcutr, gossipsub, identify, identity,
    ping, relay, request_response,
};
use sha2::{Digest, Sha256};

use super::admission::Admission;
use super::candidates::RawCandidates;
use super::codec::{FrameCodec, ReadBudget};
use super::gate::{Gate, MembersOnly};
use super::protocol::{self, Protocol};
use super::punch::Punching;
use super::relay::{DirectOnly, RelayAccess, server_config};
use super::{NetConfig, NetError};

pub type Rpc = request_response::Behaviour<FrameCodec>;

/// Each request-response protocol is its own behaviour, so an outbound
/// request names its protocol and an inbound one says which it came on.
/// Field order matters: the derive asks each in turn, and the first to
/// refuse a connection keeps the later ones from seeing it.
#[derive(NetworkBehaviour)]
pub struct Behaviour {
    pub admission: Admission,
    pub limits: connection_limits::Behaviour,
    pub blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    pub identify: identify::Behaviour,
    pub ping: ping::Behaviour,
    pub relay: DirectOnly,
    pub relay_client: relay::client::Behaviour,
    /// DCUtR on members' relayed connections (off with
    /// `net.hole_punching = false`), its candidates the raw observations.
    pub dcutr: Toggle<MembersOnly<RawCandidates<dcutr::Behaviour>>>,
    pub punching: Punching,
    pub gossipsub: MembersOnly<gossipsub::Behaviour>,
    pub join: Rpc,
    pub relay_pass: Rpc,
    pub sync: MembersOnly<Rpc>,
    pub search: MembersOnly<Rpc>,
    pub turn: MembersOnly<Rpc>,
}

impl Behaviour {
    /// The behaviour serving `protocol`.
    pub fn rpc(&mut self, protocol: Protocol) -> &mut Rpc {
        match protocol {
            Protocol::Join => &mut self.join,
            Protocol::RelayPass => &mut self.relay_pass,
            Protocol::Sync => self.sync.inner(),
            Protocol::Search => self.search.inner(),
            Protocol::Turn => self.turn.inner(),
        }
    }

    pub fn gossip(&mut self) -> &mut gossipsub::Behaviour {
        self.gossipsub.inner()
    }
}

/// A gossip message's id is the hash of its content, so a re-published or
/// duplicated payload is recognised whoever relays it.
fn content_id(message: &gossipsub::Message) -> gossipsub::MessageId {
    let digest = Sha256::digest(&message.data);
    gossipsub::MessageId::from(hex::encode(&digest[..20]))
}

/// Gossipsub tuned for small private meshes, its messages signed and
/// validated by the node before they are forwarded.
fn gossipsub(
    keypair: &identity::Keypair,
    config: &NetConfig,
) -> Result<gossipsub::Behaviour, NetError> {
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
    gossipsub::Behaviour::new(
        gossipsub::MessageAuthenticity::Signed(keypair.clone()),
        gossip_config,
    )
    .map_err(|e| NetError::Transport(format!("gossipsub: {e}")))
}

pub fn build(
    keypair: &identity::Keypair,
    config: &NetConfig,
    gate: &Gate,
    access: &RelayAccess,
    relay_client: relay::client::Behaviour,
) -> Result<Behaviour, NetError> {
    // Members' slots plus the strangers' (admission keeps strangers to
    // theirs, so members always find room).
    let total = config
        .max_connections
        .saturating_add(config.admission.max_strangers as u32);
    let limits = connection_limits::ConnectionLimits::default()
        .with_max_established(Some(total))
        // A relayed connection, a second one that retries a hole punch, and
        // the direct one the punch makes.
        .with_max_established_per_peer(Some(3));
    let gossipsub = gossipsub(keypair, config)?;
    let budget = ReadBudget::new(config.inflight_request_bytes);
    let rpc = |protocol: Protocol| {
        request_response::Behaviour::with_codec(
            FrameCodec {
                max_request: protocol.max_request_bytes(config),
                max_response: protocol.max_response_bytes(config),
                read_deadline: config.request_read,
                budget: budget.clone(),
            },
            [(
                StreamProtocol::new(protocol.name()),
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default()
                .with_request_timeout(protocol.timeout(config))
                .with_max_concurrent_streams(config.max_inbound_streams),
        )
    };
    let gated = |protocol: Protocol| MembersOnly::new(rpc(protocol), gate.clone());
    let local = keypair.public().to_peer_id();
    Ok(Behaviour {
        admission: Admission::new(config.admission.clone(), gate.clone()),
        limits: connection_limits::Behaviour::new(limits),
        blocked: allow_block_list::Behaviour::default(),
        // Pushed updates tell peers at once when this node starts (or
        // stops) serving as a relay, or gains a relayed address.
        identify: identify::Behaviour::new(
            identify::Config::new(protocol::IDENTIFY.into(), keypair.public())
                .with_push_listen_addr_updates(true),
        ),
        ping: ping::Behaviour::new(ping::Config::new()),
        relay: {
            let mut server = relay::Behaviour::new(local, server_config(&config.relay, access));
            // Off until this node judges itself public (libp2p would turn it
            // on for any confirmed address, a relayed one of its own too).
            server.set_status(Some(relay::Status::Disable));
            DirectOnly::new(server)
        },
        relay_client,
        dcutr: Toggle::from(config.hole_punching.then(|| {
            MembersOnly::new(
                RawCandidates::new(dcutr::Behaviour::new(local)),
                gate.clone(),
            )
        })),
        punching: Punching::new(config.hole_punching),
        gossipsub: MembersOnly::new(gossipsub, gate.clone()),
        join: rpc(Protocol::Join),
        relay_pass: rpc(Protocol::RelayPass),
        sync: gated(Protocol::Sync),
        search: gated(Protocol::Search),
        turn: gated(Protocol::Turn),
    })
}
