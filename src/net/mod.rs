//! The network edge: a libp2p swarm (TCP + Noise + Yamux) owned by one
//! event loop task. The rest of the node talks to it through a [`Network`]
//! handle (bounded command channel, each command with its own reply) and
//! receives [`Event`]s; network failures arrive as events, never panics.
//! Payloads are opaque bytes here: signing, sealing and `proto/` encoding
//! belong to the layers above.

mod admission;
mod behaviour;
mod candidates;
pub mod codec;
mod connectivity;
mod event_loop;
mod gate;
pub mod protocol;
mod punch;
pub mod reach;
pub mod relay;
mod transport;

use std::time::Duration;

pub use admission::AdmissionCounts;
pub use connectivity::{Addresses, ConnectivityReport, LinkReport, RelayUse};
use libp2p::{Multiaddr, PeerId, identity};
use prometheus_client::registry::Registry;
pub use protocol::{DropReason, Protocol};
pub use punch::WhyRelayed;
pub use reach::Mapping;
pub use reach::{Reachability, ReachabilityMode};
pub use relay::{RelayLimits, RelayServe};
use tokio::sync::{mpsc, oneshot, watch};
pub use transport::refuse_port_in_use;

/// Network settings, already validated.
#[derive(Debug, Clone)]
pub struct NetConfig {
    pub listen: Vec<Multiaddr>,
    pub max_message_bytes: usize,
    pub max_connections: u32,
    pub request_timeout: Duration,
    /// Timeout of `/grove/turn/1` requests (a model runs inside them).
    pub turn_timeout: Duration,
    pub idle_timeout: Duration,
    pub admission: AdmissionLimits,
    /// A request must arrive in full within this time.
    pub request_read: Duration,
    /// Most concurrent streams per connection and protocol.
    pub max_inbound_streams: usize,
    /// Bytes of requests being read at once, over all peers.
    pub inflight_request_bytes: usize,
    /// `net.reachability`: judged, or the operator's word.
    pub reachability: ReachabilityMode,
    /// `net.external_addresses`.
    pub external: Vec<Multiaddr>,
    /// Relays that are not members (`net.relays`), each ending in `/p2p/<id>`.
    pub relays: Vec<Multiaddr>,
    pub relay: RelayLimits,
    /// `net.hole_punching`: DCUtR on members' relayed connections.
    pub hole_punching: bool,
    /// `net.quic`: QUIC beside TCP, on the same port numbers.
    pub quic: bool,
}

/// What peers that are not roster members may hold: connections (in all
/// and per IP address), handshakes under way, and the time a connection
/// may stay without a join request.
#[derive(Debug, Clone)]
pub struct AdmissionLimits {
    pub max_strangers: usize,
    pub max_strangers_per_ip: usize,
    pub max_pending: usize,
    pub max_pending_per_ip: usize,
    pub join_window: Duration,
}

/// Failures the network reports to callers.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: String, reason: String },
    #[error("transport: {0}")]
    Transport(String),
    #[error("dial {addr}: {reason}")]
    Dial { addr: String, reason: String },
    #[error("publish: {0}")]
    Publish(String),
    #[error("request to {peer}: {reason}")]
    Request { peer: PeerId, reason: String },
    #[error("the network task has stopped")]
    Stopped,
}

/// How gossip validation ended, reported back to gossipsub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Reject,
    Ignore,
}

/// What the network tells the node.
#[derive(Debug)]
pub enum Event {
    Listening(Multiaddr),
    /// The addresses others can reach this node at changed (a relay
    /// reservation came or went, a listener address appeared).
    AddressesChanged,
    /// This node's judged reachability changed (`public`, `private`,
    /// `unknown`), and why.
    ReachabilityChanged {
        reachability: &'static str,
        why: String,
    },
    PeerConnected(PeerId),
    PeerDisconnected(PeerId),
    /// A gossip message awaiting its [`Verdict`] (report it with
    /// [`Network::report`]).
    Gossip {
        id: String,
        /// The peer that forwarded it (report the verdict against it).
        source: PeerId,
        /// The peer that published it (gossipsub-signed).
        author: Option<PeerId>,
        topic: String,
        data: Vec<u8>,
    },
    /// A request to answer with [`Network::respond`] using `id`.
    Request {
        id: u64,
        peer: PeerId,
        protocol: Protocol,
        data: Vec<u8>,
    },
    /// Something was dropped (oversized, malformed, failed stream…), for
    /// counters; `detail` is the underlying error, for the log.
    Dropped {
        peer: Option<PeerId>,
        reason: DropReason,
        detail: String,
    },
}

enum Command {
    Dial(Multiaddr, oneshot::Sender<Result<(), NetError>>),
    Listeners(oneshot::Sender<Vec<Multiaddr>>),
    Subscribe(String, oneshot::Sender<Result<(), NetError>>),
    Publish(String, Vec<u8>, oneshot::Sender<Result<(), NetError>>),
    Report(String, PeerId, Verdict),
    Request(
        PeerId,
        Protocol,
        Vec<u8>,
        oneshot::Sender<Result<Vec<u8>, NetError>>,
    ),
    Respond(u64, Vec<u8>),
    SetPeers {
        members: Vec<PeerId>,
        blocked: Vec<PeerId>,
    },
    Connected(oneshot::Sender<Vec<PeerId>>),
    Admission(oneshot::Sender<AdmissionCounts>),
    Connectivity(oneshot::Sender<ConnectivityReport>),
    /// Lets `peer` (a stranger holding an open invite) open circuits
    /// through this node's relay to `inviter`, until `until`.
    GrantRelayPass {
        peer: PeerId,
        inviter: PeerId,
        until: std::time::Instant,
    },
    /// Dial `peer` at the addresses (none: wait for it to dial in); the
    /// reply comes once connected, or when this dial fails.
    Connect(
        PeerId,
        Vec<Multiaddr>,
        oneshot::Sender<Result<(), NetError>>,
    ),
}

/// A handle to the network task; cheap to clone.
#[derive(Clone)]
pub struct Network {
    commands: mpsc::Sender<Command>,
    local: PeerId,
    addresses: watch::Receiver<Addresses>,
}

impl Network {
    /// Builds the swarm, starts listening and spawns the event loop on the
    /// current tokio runtime.
    pub async fn start(
        keypair: identity::Keypair,
        config: NetConfig,
    ) -> Result<(Network, mpsc::Receiver<Event>), NetError> {
        Network::start_with_metrics(keypair, config, &mut Registry::default()).await
    }

    /// [`start`](Self::start), with libp2p's own metrics (swarm, identify,
    /// ping, relay, gossipsub) registered in `registry` under `libp2p_`.
    pub async fn start_with_metrics(
        keypair: identity::Keypair,
        config: NetConfig,
        registry: &mut Registry,
    ) -> Result<(Network, mpsc::Receiver<Event>), NetError> {
        let local = keypair.public().to_peer_id();
        let (commands, command_rx) = mpsc::channel(256);
        let (events_tx, events) = mpsc::channel(1024);
        let metrics = libp2p_metrics::Metrics::new(registry);
        let addresses = event_loop::spawn(keypair, config, command_rx, events_tx, metrics).await?;
        Ok((
            Network {
                commands,
                local,
                addresses,
            },
            events,
        ))
    }

    pub fn local_peer_id(&self) -> PeerId {
        self.local
    }

    /// False once the network task has ended (it panicked or was stopped).
    pub fn is_alive(&self) -> bool {
        !self.commands.is_closed()
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(make(tx))
            .await
            .map_err(|_| NetError::Stopped)?;
        rx.await.map_err(|_| NetError::Stopped)
    }

    pub async fn dial(&self, addr: Multiaddr) -> Result<(), NetError> {
        self.ask(|tx| Command::Dial(addr, tx)).await?
    }

    /// The addresses actually bound (after `/tcp/0` picked a port).
    pub async fn listeners(&self) -> Result<Vec<Multiaddr>, NetError> {
        self.ask(Command::Listeners).await
    }

    pub async fn subscribe(&self, topic: &str) -> Result<(), NetError> {
        let topic = topic.to_string();
        self.ask(|tx| Command::Subscribe(topic, tx)).await?
    }

    pub async fn publish(&self, topic: &str, data: Vec<u8>) -> Result<(), NetError> {
        let topic = topic.to_string();
        self.ask(|tx| Command::Publish(topic, data, tx)).await?
    }

    pub async fn report(
        &self,
        message_id: String,
        source: PeerId,
        verdict: Verdict,
    ) -> Result<(), NetError> {
        self.commands
            .send(Command::Report(message_id, source, verdict))
            .await
            .map_err(|_| NetError::Stopped)
    }

    pub async fn request(
        &self,
        peer: PeerId,
        protocol: Protocol,
        data: Vec<u8>,
    ) -> Result<Vec<u8>, NetError> {
        self.ask(|tx| Command::Request(peer, protocol, data, tx))
            .await?
    }

    pub async fn respond(&self, id: u64, data: Vec<u8>) -> Result<(), NetError> {
        self.commands
            .send(Command::Respond(id, data))
            .await
            .map_err(|_| NetError::Stopped)
    }

    /// Sets the roster: its members are the only peers the members-only
    /// protocols (gossipsub, sync, search, turn) admit, and gossipsub's
    /// explicit peers; `blocked` are refused at the connection level
    /// (replacing the previous block list). Called at every epoch.
    pub async fn set_peers(
        &self,
        members: Vec<PeerId>,
        blocked: Vec<PeerId>,
    ) -> Result<(), NetError> {
        self.commands
            .send(Command::SetPeers { members, blocked })
            .await
            .map_err(|_| NetError::Stopped)
    }

    /// How many connections admission refused or closed, by cause.
    pub async fn admission_counts(&self) -> Result<AdmissionCounts, NetError> {
        self.ask(Command::Admission).await
    }

    /// The addresses others can reach this node at: its listen addresses
    /// (each interface's) and those through relays it holds a reservation on.
    pub fn addresses(&self) -> Addresses {
        self.addresses.borrow().clone()
    }

    /// Reachability, relays, links and round-trip times, for the doctor.
    pub async fn connectivity(&self) -> Result<ConnectivityReport, NetError> {
        self.ask(Command::Connectivity).await
    }

    pub async fn grant_relay_pass(
        &self,
        peer: PeerId,
        inviter: PeerId,
        until: std::time::Instant,
    ) -> Result<(), NetError> {
        self.commands
            .send(Command::GrantRelayPass {
                peer,
                inviter,
                until,
            })
            .await
            .map_err(|_| NetError::Stopped)
    }

    pub async fn connected(&self) -> Result<Vec<PeerId>, NetError> {
        self.ask(Command::Connected).await
    }

    /// Dials `peer` at `addrs` (unless connected) and waits until a
    /// connection is up, the dial fails (every address refused or
    /// unreachable), or `timeout` passes. With no addresses it waits for
    /// the peer to connect.
    pub async fn connect(
        &self,
        peer: PeerId,
        addrs: &[Multiaddr],
        timeout: Duration,
    ) -> Result<(), NetError> {
        let settled = self.ask(|tx| Command::Connect(peer, addrs.to_vec(), tx));
        match tokio::time::timeout(timeout, settled).await {
            Ok(answer) => answer?,
            Err(_) => Err(NetError::Dial {
                addr: address_list(addrs),
                reason: format!("no connection to {peer} within {timeout:?}"),
            }),
        }
    }
}

/// Addresses as error messages show them.
pub(crate) fn address_list(addrs: &[Multiaddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `addr` ending in `/p2p/<peer>` (added when missing).
pub fn with_peer_id(addr: &Multiaddr, peer: PeerId) -> Multiaddr {
    match addr.iter().last() {
        Some(libp2p::multiaddr::Protocol::P2p(_)) => addr.clone(),
        _ => addr.clone().with(libp2p::multiaddr::Protocol::P2p(peer)),
    }
}

/// An error with every cause under it (libp2p's transport errors keep the
/// OS error, "Address family not supported by protocol", in the chain, and
/// their own text is often empty).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        let text = text.trim().trim_matches(':').trim();
        if !text.is_empty() && !parts.iter().any(|p: &String| p.contains(text)) {
            parts.push(text.to_string());
        }
        next = err.source();
    }
    if parts.is_empty() {
        "unknown error".into()
    } else {
        parts.join(": ")
    }
}
