//! Hole punching's bookkeeping around rust-libp2p's DCUtR: which dials are
//! punches (and over which transport), how each member's punches ended,
//! when to try again, when to stop (no direct path can exist), and why a
//! link stays relayed. [`Punching`] is a behaviour that opens no streams:
//! it only watches the swarm's dials and connections; the event loop feeds
//! it DCUtR's events and acts on what it asks (retries, closing relayed
//! connections a direct one replaced).
//!
//! A dial is a punch when it goes to a peer this node holds a relayed
//! connection to, at direct addresses, and the event loop did not make it
//! (its own dials to a connected peer are refused by their condition
//! before any behaviour sees them). Its addresses are the peer's
//! candidates, its observed addresses: from them this node judges the
//! peer's NAT mapping, as it judges its own from what its peers observe.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use libp2p::core::transport::PortUse;
use libp2p::core::{ConnectedPoint, Endpoint};
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandler, THandlerInEvent,
    THandlerOutEvent, ToSwarm, dummy,
};
use libp2p::{Multiaddr, PeerId, dcutr};

use super::reach::{Mapping, Transport, is_relayed, mapping_of, port_of};

/// The first retry after a failed round waits this long; each later one
/// three times as long as the one before, up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(600);
/// Rounds of punching (each one DCUtR exchange over a fresh relayed
/// connection, of up to three dials) before this node gives up on a peer.
pub const MAX_ROUNDS: u32 = 5;
/// A relayed connection a direct one replaced is closed this long after
/// (on the next connectivity tick past it): long enough for what was
/// exchanged on it as it opened (gossipsub's subscriptions, sent once per
/// peer, on its first connection) to arrive; short, since requests are
/// spread over a peer's connections. One in flight on it when it closes
/// fails and is retried.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// A relayed link with no punch tried on it this long is retried.
const STALLED: Duration = Duration::from_secs(30);
/// A direct connection this soon after a punch was tried counts as its
/// success (the peer's dial may be the one that got through).
const PUNCH_WINDOW: Duration = Duration::from_secs(60);

/// The counter of `outcome` ("attempts", "successes", "failures") over
/// `transport` (`holepunch.<outcome>.<transport>`).
fn counter(outcome: Outcome, transport: Transport) -> &'static str {
    match (outcome, transport) {
        (Outcome::Attempt, Transport::Tcp) => "holepunch.attempts.tcp",
        (Outcome::Attempt, Transport::Quic) => "holepunch.attempts.quic",
        (Outcome::Success, Transport::Tcp) => "holepunch.successes.tcp",
        (Outcome::Success, Transport::Quic) => "holepunch.successes.quic",
        (Outcome::Failure, Transport::Tcp) => "holepunch.failures.tcp",
        (Outcome::Failure, Transport::Quic) => "holepunch.failures.quic",
    }
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Attempt,
    Success,
    Failure,
}

/// Why a member's link is relayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WhyRelayed {
    /// This node, or the peer (it refused the DCUtR stream), does not punch.
    Disabled,
    /// Both ends map a new port per destination: no direct path can exist,
    /// and no punch is tried again.
    BothSymmetric,
    /// This many punches failed (retried with a backoff, up to
    /// [`MAX_ROUNDS`] rounds).
    Failed(u32),
    /// No punch has ended yet.
    Trying,
}

impl std::fmt::Display for WhyRelayed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WhyRelayed::Disabled => f.write_str("punching disabled"),
            WhyRelayed::BothSymmetric => f.write_str("both ends symmetric"),
            WhyRelayed::Failed(1) => f.write_str("punch failed 1 time"),
            WhyRelayed::Failed(n) => write!(f, "punch failed {n} times"),
            WhyRelayed::Trying => f.write_str("punch under way"),
        }
    }
}

/// What this node knows of punching to one peer.
#[derive(Debug, Default)]
struct Peer {
    relayed: Vec<(ConnectionId, Instant)>,
    /// The circuit address of this node's own relayed connection to it
    /// (this node dialled the circuit, so it can open another to retry).
    circuit: Option<Multiaddr>,
    direct: HashSet<ConnectionId>,
    /// The current direct link came from a punch.
    punched: bool,
    failures: u32,
    rounds: u32,
    last_try: Option<Instant>,
    last_failure: Option<Instant>,
    remote: Option<Mapping>,
    /// The peer refused the DCUtR stream.
    refused: bool,
    /// The ports the peer listens on (identify): a candidate at one of
    /// them shows a NAT that kept the port.
    listens: HashSet<(Transport, u16)>,
}

/// The per-peer punching state, watched from the swarm's events.
pub struct Punching {
    enabled: bool,
    peers: HashMap<PeerId, Peer>,
    /// Punch dials under way: their peer and the transports they try.
    dials: HashMap<ConnectionId, (PeerId, Vec<Transport>)>,
    /// Circuits this node opened to retry (not punches themselves).
    retries: HashSet<ConnectionId>,
    /// Relayed connections to close, and when.
    closing: Vec<(ConnectionId, Instant)>,
    counts: BTreeMap<&'static str, u64>,
}

/// A peer's link as punching sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PunchView {
    pub punched: bool,
    pub why_relayed: Option<WhyRelayed>,
}

impl Punching {
    pub fn new(enabled: bool) -> Punching {
        Punching {
            enabled,
            peers: HashMap::new(),
            dials: HashMap::new(),
            retries: HashSet::new(),
            closing: Vec::new(),
            counts: BTreeMap::new(),
        }
    }

    fn bump(&mut self, outcome: Outcome, transports: &[Transport]) {
        for t in transports {
            *self.counts.entry(counter(outcome, *t)).or_default() += 1;
        }
    }

    pub fn counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.counts
    }

    /// The addresses `peer` says it listens on (identify).
    pub fn listens(&mut self, peer: PeerId, addrs: &[Multiaddr]) {
        if let Some(state) = self.peers.get_mut(&peer) {
            state.listens = addrs.iter().filter_map(port_of).collect();
        }
    }

    /// DCUtR's own verdict on a round: a refused stream means the peer
    /// does not punch.
    pub fn on_dcutr(&mut self, event: &dcutr::Event) {
        let Err(e) = &event.result else { return };
        let text = super::with_causes(e);
        tracing::debug!(peer = %event.remote_peer_id, error = %text, "hole punch ended without a direct connection");
        let Some(state) = self.peers.get_mut(&event.remote_peer_id) else {
            return;
        };
        if text.contains("does not support") {
            state.refused = true;
        } else if !text.contains("Giving up after") && state.direct.is_empty() {
            // The exchange itself failed (no dial was made): a failed
            // round all the same, retried like one.
            state.failures += 1;
            state.last_failure = Some(Instant::now());
        }
    }

    fn established(&mut self, peer: PeerId, id: ConnectionId, endpoint: &ConnectedPoint) {
        let now = Instant::now();
        let relayed = endpoint.is_relayed();
        let state = self.peers.entry(peer).or_default();
        if relayed {
            state.relayed.push((id, now));
            if let ConnectedPoint::Dialer { address, .. } = endpoint {
                state.circuit = Some(address.clone());
            }
            return;
        }
        let address = match endpoint {
            ConnectedPoint::Dialer { address, .. } => address,
            ConnectedPoint::Listener { send_back_addr, .. } => send_back_addr,
        };
        let tried = state
            .last_try
            .is_some_and(|t| now.duration_since(t) < PUNCH_WINDOW);
        // The peer may close the relayed connection (its side of the punch
        // completed first) before this side's direct one is up.
        let was_relayed = !state.relayed.is_empty() || tried;
        state.direct.insert(id);
        let relayed: Vec<ConnectionId> = state.relayed.iter().map(|(c, _)| *c).collect();
        let punched = was_relayed && (tried || self.dials.contains_key(&id));
        if punched {
            state.punched = true;
            tracing::info!(%peer, %address, "hole punched: a direct connection replaces the relayed one");
            let transport: Vec<Transport> = Transport::of(address).into_iter().collect();
            self.bump(Outcome::Success, &transport);
            // The other dials of this round are moot now.
            self.dials.retain(|_, (p, _)| *p != peer);
        }
        let at = now + CLOSE_GRACE;
        self.closing.extend(relayed.into_iter().map(|c| (c, at)));
    }

    fn closed(&mut self, peer: PeerId, id: ConnectionId) {
        self.retries.remove(&id);
        self.closing.retain(|(c, _)| *c != id);
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.relayed.retain(|(c, _)| *c != id);
        if state.direct.remove(&id) && state.direct.is_empty() {
            state.punched = false;
        }
        let recent = state.last_try.is_some_and(|t| t.elapsed() < PUNCH_WINDOW);
        if state.relayed.is_empty() && state.direct.is_empty() && !recent {
            self.peers.remove(&peer);
        }
    }

    fn dial_failed(&mut self, id: ConnectionId) {
        self.retries.remove(&id);
        let Some((peer, transports)) = self.dials.remove(&id) else {
            return;
        };
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        if !state.direct.is_empty() {
            return;
        }
        state.failures += 1;
        state.last_failure = Some(Instant::now());
        tracing::info!(%peer, failures = state.failures, "hole punch failed; the link stays relayed");
        self.bump(Outcome::Failure, &transports);
    }

    /// A dial the swarm is about to make: a punch when it matches (see the
    /// module's note).
    fn dialling(
        &mut self,
        id: ConnectionId,
        peer: Option<PeerId>,
        addresses: &[Multiaddr],
        role: Endpoint,
    ) {
        let Some(peer) = peer else { return };
        if self.retries.contains(&id) {
            return;
        }
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        if state.relayed.is_empty() || !state.direct.is_empty() {
            return;
        }
        let direct: Vec<&Multiaddr> = addresses.iter().filter(|a| !is_relayed(a)).collect();
        let mut transports: Vec<Transport> =
            direct.iter().filter_map(|a| Transport::of(a)).collect();
        transports.sort();
        transports.dedup();
        if transports.is_empty() {
            return;
        }
        // Two ports at one IP, but one of them the port the peer listens on:
        // its NAT keeps ports (the other is an old mapping, or a dial from
        // another port), so it is no symmetric NAT.
        let kept = direct
            .iter()
            .filter_map(|a| port_of(a))
            .any(|p| state.listens.contains(&p));
        // Whose observations the candidates are is not known: each counts as
        // its own observer's.
        let remote = match mapping_of(direct.iter().copied().map(std::iter::once)) {
            Mapping::Dependent if kept => Mapping::Independent,
            other => other,
        };
        if remote != Mapping::Unknown {
            state.remote = Some(remote);
        }
        state.last_try = Some(Instant::now());
        tracing::debug!(%peer, ?role, addresses = ?direct, "hole punch dial");
        self.bump(Outcome::Attempt, &transports);
        self.dials.insert(id, (peer, transports));
    }

    /// Whether a direct connection to `peer` now comes beside a relayed one
    /// (a punch's: it proves nothing about who may dial this node).
    pub fn beside_relayed(&self, peer: &PeerId) -> bool {
        self.peers.get(peer).is_some_and(|s| {
            !s.relayed.is_empty() || s.last_try.is_some_and(|t| t.elapsed() < PUNCH_WINDOW)
        })
    }

    /// How `peer`'s link looks: punched, or why it is relayed (`None` when
    /// it is direct or not connected), given this node's own mapping.
    pub fn view(&self, peer: &PeerId, own: Mapping) -> PunchView {
        let Some(state) = self.peers.get(peer) else {
            return PunchView {
                punched: false,
                why_relayed: None,
            };
        };
        let why_relayed =
            (state.direct.is_empty() && !state.relayed.is_empty()).then(|| self.why(state, own));
        PunchView {
            punched: state.punched && !state.direct.is_empty(),
            why_relayed,
        }
    }

    fn why(&self, state: &Peer, own: Mapping) -> WhyRelayed {
        if !self.enabled || state.refused {
            WhyRelayed::Disabled
        } else if own == Mapping::Dependent && state.remote == Some(Mapping::Dependent) {
            WhyRelayed::BothSymmetric
        } else if state.failures > 0 {
            WhyRelayed::Failed(state.failures)
        } else {
            WhyRelayed::Trying
        }
    }

    /// The circuits to open now to try again (each peer whose last round
    /// failed, whose backoff passed, that this node reaches by a circuit it
    /// dialled, and where a direct path may exist); each is counted as a
    /// round. The caller dials them and reports the ids ([`Self::retrying`]).
    pub fn due_retries(&mut self, own: Mapping, now: Instant) -> Vec<(PeerId, Multiaddr)> {
        if !self.enabled {
            return Vec::new();
        }
        let in_flight: HashSet<PeerId> = self.dials.values().map(|(p, _)| *p).collect();
        let mut due = Vec::new();
        for (peer, state) in &mut self.peers {
            let hopeless = state.refused
                || (own == Mapping::Dependent && state.remote == Some(Mapping::Dependent));
            if hopeless
                || !state.direct.is_empty()
                || in_flight.contains(peer)
                || state.rounds + 1 >= MAX_ROUNDS
            {
                continue;
            }
            // A relayed link on which no punch was even tried for a while
            // (its exchange never started) counts as a failed round.
            let newest = state.relayed.iter().map(|(_, t)| *t).max();
            let stalled = newest.filter(|since| {
                state.last_try.is_none_or(|t| t < *since) && now >= *since + STALLED
            });
            let (Some(failed), Some(circuit)) =
                (state.last_failure.or(stalled), state.circuit.clone())
            else {
                continue;
            };
            if now < failed + backoff(state.rounds) {
                continue;
            }
            // The last retry's circuit has done its work: the oldest
            // relayed connection stays, the others go before the next.
            if state.relayed.len() > 1 {
                let extra = state.relayed.iter().skip(1).map(|(c, _)| (*c, now));
                self.closing.extend(extra);
                continue;
            }
            state.rounds += 1;
            state.last_failure = None;
            tracing::info!(%peer, round = state.rounds + 1, "trying the hole punch again");
            due.push((*peer, circuit));
        }
        due
    }

    /// A retry's circuit dial is under way (its connection is not a punch).
    pub fn retrying(&mut self, id: ConnectionId) {
        self.retries.insert(id);
    }

    /// Relayed connections whose grace passed, to close now.
    pub fn due_closes(&mut self, now: Instant) -> Vec<ConnectionId> {
        let (due, later): (Vec<_>, Vec<_>) = self.closing.drain(..).partition(|(_, at)| *at <= now);
        self.closing = later;
        due.into_iter().map(|(c, _)| c).collect()
    }
}

/// The wait before retry round `rounds + 1`.
fn backoff(rounds: u32) -> Duration {
    BACKOFF_FIRST
        .saturating_mul(3u32.saturating_pow(rounds))
        .min(BACKOFF_MAX)
}

impl NetworkBehaviour for Punching {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = std::convert::Infallible;

    fn handle_established_inbound_connection(
        &mut self,
        _: ConnectionId,
        _: PeerId,
        _: &Multiaddr,
        _: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn handle_pending_outbound_connection(
        &mut self,
        id: ConnectionId,
        peer: Option<PeerId>,
        addresses: &[Multiaddr],
        role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        self.dialling(id, peer, addresses, role);
        Ok(Vec::new())
    }

    fn handle_established_outbound_connection(
        &mut self,
        _: ConnectionId,
        _: PeerId,
        _: &Multiaddr,
        _: Endpoint,
        _: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ConnectionEstablished(e) => {
                self.established(e.peer_id, e.connection_id, e.endpoint)
            }
            FromSwarm::ConnectionClosed(e) => self.closed(e.peer_id, e.connection_id),
            FromSwarm::DialFailure(e) => self.dial_failed(e.connection_id),
            _ => {}
        }
    }

    fn on_connection_handler_event(
        &mut self,
        _: PeerId,
        _: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        match event {}
    }

    fn poll(&mut self, _: &mut Context<'_>) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    #[test]
    fn mappings_are_judged_from_ports_seen_by_several_observers() {
        let cone = [
            a("/ip4/203.0.113.1/tcp/4100"),
            a("/ip4/203.0.113.1/tcp/4100"),
        ];
        assert_eq!(
            mapping_of(cone.iter().map(std::iter::once)),
            Mapping::Independent
        );
        let symmetric = [
            a("/ip4/203.0.113.2/tcp/40001"),
            a("/ip4/203.0.113.2/tcp/51234"),
        ];
        assert_eq!(
            mapping_of(symmetric.iter().map(std::iter::once)),
            Mapping::Dependent
        );
        let once = [a("/ip4/203.0.113.1/tcp/4100")];
        assert_eq!(
            mapping_of(once.iter().map(std::iter::once)),
            Mapping::Unknown
        );
        // TCP and QUIC at one port: one mapping kept for both; at two
        // ports, a new one per destination.
        let both = [
            a("/ip4/203.0.113.1/tcp/4100"),
            a("/ip4/203.0.113.1/udp/4100/quic-v1"),
        ];
        assert_eq!(
            mapping_of(both.iter().map(std::iter::once)),
            Mapping::Independent
        );
        let apart = [
            a("/ip4/203.0.113.4/tcp/42473"),
            a("/ip4/203.0.113.4/udp/31612/quic-v1"),
        ];
        assert_eq!(
            mapping_of(apart.iter().map(std::iter::once)),
            Mapping::Dependent
        );
        let relayed = [a("/ip4/127.0.0.1/tcp/4100"), a("/ip4/127.0.0.1/tcp/4101")];
        assert_eq!(
            mapping_of(relayed.iter().map(std::iter::once)),
            Mapping::Unknown
        );
    }

    #[test]
    fn reasons_read_as_the_doctor_shows_them() {
        assert_eq!(WhyRelayed::Failed(3).to_string(), "punch failed 3 times");
        assert_eq!(WhyRelayed::Failed(1).to_string(), "punch failed 1 time");
        assert_eq!(WhyRelayed::BothSymmetric.to_string(), "both ends symmetric");
        assert_eq!(WhyRelayed::Disabled.to_string(), "punching disabled");
    }

    #[test]
    fn retries_back_off_and_stop() {
        assert_eq!(backoff(0), Duration::from_secs(10));
        assert_eq!(backoff(1), Duration::from_secs(30));
        assert_eq!(backoff(2), Duration::from_secs(90));
        assert_eq!(backoff(9), BACKOFF_MAX);
    }

    #[test]
    fn a_failed_punch_is_retried_over_a_new_circuit_unless_both_ends_are_symmetric() {
        let peer = PeerId::random();
        let relayed = ConnectionId::new_unchecked(1);
        let circuit = a(
            "/ip4/203.0.113.10/tcp/4100/p2p/12D3KooWRBhwfeP2Y4TCx1SM6s9rUoHhR5STiGwxBhgFRcw3UERE/p2p-circuit",
        );
        let endpoint = ConnectedPoint::Dialer {
            address: circuit.clone(),
            role_override: Endpoint::Dialer,
            port_use: PortUse::Reuse,
        };
        for (remote, own, retried) in [
            ("/ip4/203.0.113.2/tcp/4100", Mapping::Independent, true),
            ("/ip4/203.0.113.2/tcp/4100", Mapping::Dependent, true),
        ] {
            let mut p = Punching::new(true);
            p.established(peer, relayed, &endpoint);
            assert_eq!(p.view(&peer, own).why_relayed, Some(WhyRelayed::Trying));
            let punch = ConnectionId::new_unchecked(2);
            p.dialling(punch, Some(peer), &[a(remote)], Endpoint::Listener);
            assert_eq!(p.counts()["holepunch.attempts.tcp"], 1);
            p.dial_failed(punch);
            assert_eq!(p.counts()["holepunch.failures.tcp"], 1);
            assert_eq!(p.view(&peer, own).why_relayed, Some(WhyRelayed::Failed(1)));
            assert!(p.due_retries(own, Instant::now()).is_empty(), "backoff");
            let later = Instant::now() + BACKOFF_FIRST;
            assert_eq!(!p.due_retries(own, later).is_empty(), retried);
        }
        // Both symmetric: said so, and never retried.
        let mut p = Punching::new(true);
        p.established(peer, relayed, &endpoint);
        let punch = ConnectionId::new_unchecked(3);
        let symmetric = [
            a("/ip4/203.0.113.2/tcp/40001"),
            a("/ip4/203.0.113.2/tcp/40002"),
        ];
        p.dialling(punch, Some(peer), &symmetric, Endpoint::Dialer);
        p.dial_failed(punch);
        let own = Mapping::Dependent;
        assert_eq!(
            p.view(&peer, own).why_relayed,
            Some(WhyRelayed::BothSymmetric)
        );
        assert!(p.due_retries(own, Instant::now() + BACKOFF_MAX).is_empty());
        // A direct connection: punched, and the relayed one is closed.
        let direct = ConnectionId::new_unchecked(4);
        p.dialling(
            direct,
            Some(peer),
            &[a("/ip4/203.0.113.2/tcp/4100")],
            Endpoint::Dialer,
        );
        p.established(
            peer,
            direct,
            &ConnectedPoint::Dialer {
                address: a("/ip4/203.0.113.2/tcp/4100"),
                role_override: Endpoint::Dialer,
                port_use: PortUse::Reuse,
            },
        );
        let view = p.view(&peer, own);
        assert!(view.punched && view.why_relayed.is_none(), "{view:?}");
        assert_eq!(p.counts()["holepunch.successes.tcp"], 1);
        assert_eq!(p.due_closes(Instant::now() + CLOSE_GRACE), vec![relayed]);
        // Disabled: said so.
        let mut off = Punching::new(false);
        off.established(peer, relayed, &endpoint);
        assert_eq!(off.view(&peer, own).why_relayed, Some(WhyRelayed::Disabled));
    }
}
