//! How this node is reached and reaches others: its reachability (from
//! [`Reach`]), the relay slots it reserves when it is not public (and moves
//! when a relay goes away), each connection's kind (direct or relayed) and
//! round-trip time, and relay counters. Owned by the event loop, which feeds
//! it swarm events and calls [`Connectivity::tick`]; what it decides it does
//! through the swarm it is handed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libp2p::core::ConnectedPoint;
use libp2p::core::transport::ListenerId;
use libp2p::multiaddr::Protocol as Addr;
use libp2p::swarm::ConnectionId;
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::{Multiaddr, PeerId, Swarm, relay};

use super::behaviour::Behaviour;
use super::punch::{Punching, WhyRelayed};
use super::reach::Mapping;
use super::reach::{self, Judgement, Reach, Reachability};
use super::relay::{RelayAccess, RelayedBytes};

/// A relay that went away or refused is not asked again for this long.
const RELAY_BACKOFF: Duration = Duration::from_secs(30);

/// One relay this node uses (or is asking).
#[derive(Debug, Clone)]
pub struct RelayUse {
    pub relay: PeerId,
    /// The relay's own address, as dialled.
    pub address: Multiaddr,
    pub reserved: bool,
    pub since: Instant,
    pub renewed: Option<Instant>,
    /// This node's addresses through it.
    pub relayed: Vec<Multiaddr>,
}

/// One connection to a peer.
#[derive(Debug, Clone)]
struct Link {
    id: ConnectionId,
    remote: Multiaddr,
    relayed: bool,
}

/// What a relay server event asks of the event loop.
#[derive(Debug)]
pub enum RelayNote {
    /// A pass holder reached someone other than its inviter: disconnect it.
    Overreach(PeerId),
    /// A peer began (`true`) or ended a use of this node's relay.
    Uses(PeerId, bool),
}

/// A peer's best link as the doctor shows it.
#[derive(Debug, Clone)]
pub struct LinkReport {
    pub relayed: bool,
    pub address: Multiaddr,
    pub rtt: Option<Duration>,
    /// Whether a connection to the peer carries the members-only protocols
    /// (this node's gate admitted it as a member's).
    pub admitted: bool,
    /// The direct link came from a hole punch.
    pub punched: bool,
    /// Why the link is relayed (when it is).
    pub why_relayed: Option<WhyRelayed>,
}

/// What `grove node doctor` shows of the network.
#[derive(Debug, Clone)]
pub struct ConnectivityReport {
    pub judgement: Judgement,
    /// How this node's NAT maps its address, as its peers see it.
    pub mapping: Mapping,
    pub listen: Vec<Multiaddr>,
    pub observed: Vec<Multiaddr>,
    pub external: Vec<Multiaddr>,
    pub relays: Vec<RelayUse>,
    pub links: BTreeMap<PeerId, LinkReport>,
    pub counts: BTreeMap<&'static str, u64>,
}

/// The addresses others can reach this node at, for announcements and
/// invites.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    pub listen: Vec<Multiaddr>,
    pub relayed: Vec<Multiaddr>,
}

pub struct Connectivity {
    reach: Reach,
    judged: Reachability,
    /// Relays named in `net.relays`.
    configured: Vec<(PeerId, Multiaddr)>,
    /// This node's dials of configured relays still under way.
    relay_dials: HashMap<PeerId, ConnectionId>,
    /// Peers that offer the relay protocol, with the address this node
    /// dialled them at (members that judged themselves public).
    hop_peers: HashSet<PeerId>,
    dialled: HashMap<PeerId, Multiaddr>,
    uses: HashMap<ListenerId, RelayUse>,
    backoff: HashMap<PeerId, Instant>,
    links: HashMap<PeerId, Vec<Link>>,
    rtt: HashMap<PeerId, Duration>,
    want: usize,
    pub access: RelayAccess,
    pub bytes: Arc<RelayedBytes>,
    counts: BTreeMap<&'static str, u64>,
    /// Confirmed external addresses (what the relay server hands out).
    external: Vec<Multiaddr>,
    serving: bool,
}

impl Connectivity {
    pub fn new(
        reach: Reach,
        relays: &[Multiaddr],
        want: usize,
        access: RelayAccess,
        bytes: Arc<RelayedBytes>,
    ) -> Connectivity {
        let configured = relays
            .iter()
            .filter_map(|a| match a.iter().last() {
                Some(Addr::P2p(peer)) => Some((peer, a.clone())),
                _ => None,
            })
            .collect();
        Connectivity {
            reach,
            judged: Reachability::Unknown,
            configured,
            relay_dials: HashMap::new(),
            hop_peers: HashSet::new(),
            dialled: HashMap::new(),
            uses: HashMap::new(),
            backoff: HashMap::new(),
            links: HashMap::new(),
            rtt: HashMap::new(),
            want,
            access,
            bytes,
            counts: BTreeMap::new(),
            external: Vec::new(),
            serving: false,
        }
    }

    fn bump(&mut self, name: &'static str) {
        *self.counts.entry(name).or_default() += 1;
    }

    /// The configured relays, dialled at start and on every tick while
    /// not connected ([`Self::dial_relays`]).
    pub fn configured(&self) -> &[(PeerId, Multiaddr)] {
        &self.configured
    }

    /// Dials each configured relay that is neither connected nor still
    /// being dialled. Why never twice at once: a second TCP dial of one
    /// address cannot bind the listening port (that four-tuple is taken),
    /// so libp2p-tcp silently leaves from a new port, and what the relay
    /// observes over that connection is a NAT mapping no hole punch can
    /// reach.
    pub fn dial_relays(&mut self, swarm: &mut Swarm<Behaviour>) {
        for (peer, addr) in &self.configured {
            if swarm.is_connected(peer) || self.relay_dials.contains_key(peer) {
                continue;
            }
            // Not the default condition (also "not dialling"): a dial it
            // refuses reaches every behaviour as a dial failure, and
            // request-response fails the requests waiting on that peer.
            let dial = DialOpts::peer_id(*peer)
                .condition(PeerCondition::Disconnected)
                .addresses(vec![addr.clone()])
                .build();
            let id = dial.connection_id();
            match swarm.dial(dial) {
                Ok(()) => {
                    self.relay_dials.insert(*peer, id);
                }
                Err(e) => {
                    tracing::warn!(relay = %addr, error = %e, "cannot dial a configured relay")
                }
            }
        }
    }

    /// A dial ended, connected or not (only this node's own relay dials
    /// are tracked).
    pub fn dial_ended(&mut self, id: ConnectionId) {
        self.relay_dials.retain(|_, dial| *dial != id);
    }

    pub fn listening(&mut self, listener: ListenerId, addr: Multiaddr) {
        if let Some(used) = self.uses.get_mut(&listener) {
            if !used.relayed.contains(&addr) {
                used.relayed.push(addr);
            }
        } else {
            self.reach.listening(addr);
        }
    }

    pub fn expired(&mut self, listener: ListenerId, addr: &Multiaddr) {
        if let Some(used) = self.uses.get_mut(&listener) {
            used.relayed.retain(|a| a != addr);
        } else {
            self.reach.stopped_listening(addr);
        }
    }

    /// A listener closed: a relay listener means the relay went away, or
    /// refused (`refused` holds why; that relay then waits out a backoff).
    /// Another relay, or the same one redialled, is used from the next tick.
    pub fn listener_closed(&mut self, listener: ListenerId, refused: Option<&str>) {
        if let Some(used) = self.uses.remove(&listener) {
            self.bump("relay.client.reservations.lost");
            match refused {
                Some(why) => {
                    tracing::info!(relay = %used.relay, %why, "relay reservation failed");
                    self.backoff
                        .insert(used.relay, Instant::now() + RELAY_BACKOFF);
                }
                None => {
                    tracing::info!(relay = %used.relay, "relay reservation ended: connection closed")
                }
            }
        }
    }

    /// A connection came up; `punched` when it is a hole punch's (an
    /// inbound one then says nothing about who may dial this node).
    pub fn connected(
        &mut self,
        peer: PeerId,
        id: ConnectionId,
        endpoint: &ConnectedPoint,
        punched: bool,
    ) {
        self.dial_ended(id);
        // An inbound circuit names the relay in its local address (its
        // remote one is only `/p2p/<source>`).
        let (remote, relayed, dialer) = match endpoint {
            ConnectedPoint::Dialer { address, .. } => {
                (address.clone(), reach::is_relayed(address), true)
            }
            ConnectedPoint::Listener { local_addr, .. } if reach::is_relayed(local_addr) => {
                (local_addr.clone(), true, false)
            }
            ConnectedPoint::Listener { send_back_addr, .. } => (
                send_back_addr.clone(),
                reach::is_relayed(send_back_addr),
                false,
            ),
        };
        if !relayed {
            if dialer {
                self.dialled.insert(peer, remote.clone());
            } else if !punched {
                self.reach.inbound(&remote);
            }
        }
        self.links.entry(peer).or_default().push(Link {
            id,
            remote,
            relayed,
        });
    }

    pub fn closed(&mut self, peer: PeerId, id: ConnectionId) {
        self.reach.closed(&peer, id);
        if let Some(links) = self.links.get_mut(&peer) {
            links.retain(|l| l.id != id);
            if links.is_empty() {
                self.links.remove(&peer);
                self.rtt.remove(&peer);
                self.dialled.remove(&peer);
                self.hop_peers.remove(&peer);
            }
        }
    }

    pub fn identified(
        &mut self,
        peer: PeerId,
        id: ConnectionId,
        observed: Multiaddr,
        protocols: &[libp2p::StreamProtocol],
    ) {
        self.reach.observed(peer, id, observed);
        if protocols.contains(&relay::HOP_PROTOCOL_NAME) {
            self.hop_peers.insert(peer);
        } else {
            self.hop_peers.remove(&peer);
        }
    }

    pub fn rtt(&mut self, peer: PeerId, rtt: Duration) {
        self.rtt.insert(peer, rtt);
    }

    pub fn on_client(&mut self, event: relay::client::Event) {
        match event {
            relay::client::Event::ReservationReqAccepted {
                relay_peer_id,
                renewal,
                ..
            } => {
                let now = Instant::now();
                for used in self.uses.values_mut().filter(|u| u.relay == relay_peer_id) {
                    used.reserved = true;
                    if renewal {
                        used.renewed = Some(now);
                    }
                }
                self.bump(if renewal {
                    "relay.client.reservations.renewed"
                } else {
                    "relay.client.reservations.accepted"
                });
            }
            relay::client::Event::OutboundCircuitEstablished { .. } => {
                self.bump("relay.client.circuits.outbound")
            }
            relay::client::Event::InboundCircuitEstablished { .. } => {
                self.bump("relay.client.circuits.inbound")
            }
        }
    }

    /// Counts the relay server's events; returns what admission and the
    /// swarm must act on.
    #[allow(deprecated)]
    pub fn on_server(&mut self, event: relay::Event) -> Option<RelayNote> {
        use relay::Event as E;
        let name = match &event {
            E::ReservationReqAccepted { renewed: true, .. } => "relay.server.reservations.renewed",
            E::ReservationReqAccepted { .. } => "relay.server.reservations.accepted",
            E::ReservationReqDenied { .. } => "relay.server.reservations.denied",
            E::ReservationTimedOut { .. } => "relay.server.reservations.expired",
            E::ReservationClosed { .. } => "relay.server.reservations.closed",
            E::CircuitReqAccepted { .. } => "relay.server.circuits.accepted",
            E::CircuitReqDenied { .. } => "relay.server.circuits.denied",
            E::CircuitClosed { error: Some(_), .. }
            | E::CircuitReqOutboundConnectFailed { .. }
            | E::CircuitReqAcceptFailed { .. }
            | E::CircuitReqDenyFailed { .. } => "relay.server.circuits.failed",
            E::CircuitClosed { .. } => "relay.server.circuits.closed",
            E::ReservationReqAcceptFailed { .. } | E::ReservationReqDenyFailed { .. } => {
                "relay.server.reservations.failed"
            }
            E::StatusChanged { status } => {
                tracing::info!(?status, "relay service");
                return None;
            }
        };
        self.bump(name);
        match event {
            E::CircuitReqAccepted {
                src_peer_id,
                dst_peer_id,
            } if self.access.overreaches(&src_peer_id, &dst_peer_id) => {
                Some(RelayNote::Overreach(src_peer_id))
            }
            E::ReservationReqAccepted {
                src_peer_id,
                renewed: false,
            } => Some(RelayNote::Uses(src_peer_id, true)),
            E::CircuitReqAccepted { src_peer_id, .. } => Some(RelayNote::Uses(src_peer_id, true)),
            E::ReservationClosed { src_peer_id } | E::ReservationTimedOut { src_peer_id } => {
                Some(RelayNote::Uses(src_peer_id, false))
            }
            E::CircuitClosed { src_peer_id, .. } => Some(RelayNote::Uses(src_peer_id, false)),
            _ => None,
        }
    }

    pub fn addresses(&self) -> Addresses {
        Addresses {
            listen: self.reach.listen_addresses(),
            relayed: self
                .uses
                .values()
                .filter(|u| u.reserved)
                .flat_map(|u| u.relayed.iter().cloned())
                .collect(),
        }
    }

    /// Re-judges reachability and acts on it: a public node confirms its
    /// external addresses (so its relay serves) and drops its
    /// reservations; another reserves on relays up to `want`. Returns the
    /// new judgement when it changed.
    pub fn tick(&mut self, swarm: &mut Swarm<Behaviour>) -> Option<(Reachability, String)> {
        let judgement = self.reach.judge();
        let mut changed = None;
        if judgement.reachability != self.judged {
            tracing::info!(
                reachability = judgement.reachability.as_str(),
                why = %judgement.why,
                "reachability"
            );
            self.judged = judgement.reachability;
            changed = Some((judgement.reachability, judgement.why.clone()));
        }
        self.act(swarm, judgement);
        changed
    }

    /// Serves as a relay, confirms external addresses and keeps relay
    /// reservations as `judgement` says.
    fn act(&mut self, swarm: &mut Swarm<Behaviour>, judgement: super::reach::Judgement) {
        self.serve(swarm, &judgement);
        if judgement.reachability == Reachability::Public {
            for (listener, _) in std::mem::take(&mut self.uses) {
                swarm.remove_listener(listener);
            }
            return;
        }
        self.reserve(swarm);
    }

    /// Turns the relay server on while public, and confirms the public
    /// addresses (what the server hands out, and offers the relay protocol
    /// only while it has some).
    fn serve(&mut self, swarm: &mut Swarm<Behaviour>, judgement: &super::reach::Judgement) {
        let external: Vec<Multiaddr> = if self.access.serve == super::RelayServe::Off {
            Vec::new()
        } else {
            judgement.public.clone()
        };
        // Serves as a relay only while public (libp2p would also count a
        // relayed address of this node's own as a reason to serve).
        let serving = judgement.reachability == Reachability::Public
            && self.access.serve != super::RelayServe::Off;
        if serving != self.serving {
            swarm.behaviour_mut().relay.set_status(if serving {
                relay::Status::Enable
            } else {
                relay::Status::Disable
            });
            self.serving = serving;
        }
        if external != self.external {
            for old in std::mem::take(&mut self.external) {
                swarm.remove_external_address(&old);
            }
            for new in &external {
                swarm.add_external_address(new.clone());
            }
            self.external = external;
        }
    }

    /// Relays this node may reserve on: the configured ones it is
    /// connected to first, then members that serve (a member's relay serves
    /// members only: a node outside the mesh, a joiner, would be refused).
    fn relay_candidates(&self) -> Vec<(PeerId, Multiaddr)> {
        let mut candidates: Vec<(PeerId, Multiaddr)> = self
            .configured
            .iter()
            .filter(|(peer, _)| self.links.contains_key(peer))
            .cloned()
            .collect();
        for peer in self
            .hop_peers
            .iter()
            .filter(|p| self.access.gate.is_member(p))
        {
            if let Some(addr) = self.dialled.get(peer)
                && !candidates.iter().any(|(p, _)| p == peer)
            {
                candidates.push((*peer, super::with_peer_id(addr, *peer)));
            }
        }
        candidates
    }

    /// Asks for reservations on relays until `want` are held or asked.
    fn reserve(&mut self, swarm: &mut Swarm<Behaviour>) {
        let now = Instant::now();
        self.backoff.retain(|_, until| *until > now);
        for (peer, addr) in self.relay_candidates() {
            if self.uses.len() >= self.want {
                break;
            }
            if self.backoff.contains_key(&peer) || self.uses.values().any(|u| u.relay == peer) {
                continue;
            }
            let circuit = super::with_peer_id(&addr, peer).with(Addr::P2pCircuit);
            match swarm.listen_on(circuit.clone()) {
                Ok(listener) => {
                    tracing::info!(relay = %peer, address = %addr, "asking for a relay reservation");
                    self.bump("relay.client.reservations.asked");
                    self.uses.insert(
                        listener,
                        RelayUse {
                            relay: peer,
                            address: addr,
                            reserved: false,
                            since: now,
                            renewed: None,
                            relayed: Vec::new(),
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(relay = %peer, error = %e, "cannot listen through the relay");
                    self.backoff.insert(peer, now + RELAY_BACKOFF);
                }
            }
        }
    }

    /// The connections open to `peer`.
    pub fn connections_of(&self, peer: &PeerId) -> Vec<ConnectionId> {
        self.links
            .get(peer)
            .map(|l| l.iter().map(|l| l.id).collect())
            .unwrap_or_default()
    }

    /// The address this node dialled `peer` at, while connected (a
    /// relayed one included).
    pub fn dialled_address(&self, peer: &PeerId) -> Option<Multiaddr> {
        self.dialled.get(peer).cloned().or_else(|| {
            self.links
                .get(peer)?
                .iter()
                .find(|l| l.relayed && l.remote.iter().any(|p| matches!(p, Addr::P2pCircuit)))
                .map(|l| l.remote.clone())
        })
    }

    /// How this node's NAT maps its address.
    pub fn mapping(&self) -> Mapping {
        self.reach.mapping()
    }

    /// The report, with `admitted` the peers whose connections the gate
    /// admitted, and how punching to each went.
    pub fn report(
        &self,
        admitted: &std::collections::HashSet<PeerId>,
        punching: &Punching,
    ) -> ConnectivityReport {
        let mapping = self.mapping();
        let links = self
            .links
            .iter()
            .filter_map(|(peer, links)| {
                // A direct link is the one in use when there is one.
                let best = links
                    .iter()
                    .find(|l| !l.relayed)
                    .or_else(|| links.first())?;
                let punch = punching.view(peer, mapping);
                Some((
                    *peer,
                    LinkReport {
                        relayed: best.relayed,
                        address: best.remote.clone(),
                        rtt: self.rtt.get(peer).copied(),
                        admitted: admitted.contains(peer),
                        punched: !best.relayed && punch.punched,
                        why_relayed: best
                            .relayed
                            .then(|| punch.why_relayed.unwrap_or(WhyRelayed::Trying)),
                    },
                ))
            })
            .collect();
        let mut counts = self.counts.clone();
        counts.extend(punching.counts().iter().map(|(k, v)| (*k, *v)));
        counts.insert(
            "relay.bytes.received",
            self.bytes
                .received
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        counts.insert(
            "relay.bytes.sent",
            self.bytes.sent.load(std::sync::atomic::Ordering::Relaxed),
        );
        ConnectivityReport {
            judgement: self.reach.judge(),
            mapping,
            listen: self.reach.listen_addresses(),
            observed: self.reach.observed_addresses(),
            external: self.external.clone(),
            relays: self.uses.values().cloned().collect(),
            links,
            counts,
        }
    }
}
