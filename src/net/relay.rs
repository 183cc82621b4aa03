//! Circuit relay v2, both sides: who this node relays for (the server's
//! access rule and limits), and the bytes that cross relayed connections
//! (a counting wrapper around the relay client's transport).
//!
//! Who may use this node's relay (`net.relay.serve`): in `members` mode,
//! reservations are for roster members only, and circuits are opened for
//! members and for peers holding a pass, which a stranger gets by
//! presenting an open invite of this mesh (`/grove/relay-pass/1`) and which
//! lets it reach that invite's inviter only, for a joiner's lease. In
//! `anyone` mode (a relay run for meshes it is not part of) everyone may
//! reserve and connect, within the same limits.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use either::Either;
use libp2p::core::Endpoint;
use libp2p::core::transport::PortUse;
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, NotifyHandler, THandler,
    THandlerInEvent, THandlerOutEvent, ToSwarm,
};
use libp2p::{Multiaddr, PeerId, relay};

use super::gate::Gate;
use super::reach::is_relayed;

/// Whom this node relays for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayServe {
    /// Roster members, and strangers presenting an open invite (to reach
    /// its inviter).
    Members,
    /// Anyone (a relay that is not a member of the meshes it serves).
    Anyone,
    /// Nobody.
    Off,
}

impl std::str::FromStr for RelayServe {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "members" => Ok(RelayServe::Members),
            "anyone" => Ok(RelayServe::Anyone),
            "off" => Ok(RelayServe::Off),
            other => Err(format!("`{other}` is not one of members, anyone, off")),
        }
    }
}

/// The relay server's limits, checked (`net.relay.*`).
#[derive(Debug, Clone)]
pub struct RelayLimits {
    pub serve: RelayServe,
    pub max_reservations: usize,
    pub max_reservations_per_peer: usize,
    pub reservation_duration: Duration,
    pub max_circuits: usize,
    pub max_circuits_per_peer: usize,
    /// A relayed connection is closed after this long (the peers redial):
    /// long enough for a turn (`net.turn_timeout_secs`).
    pub circuit_duration: Duration,
    /// … or after this many bytes each way.
    pub circuit_bytes: u64,
    /// How many relays a node that is not public reserves on.
    pub use_relays: usize,
}

/// Strangers' passes: the inviter each may reach, until when.
#[derive(Debug, Clone, Default)]
pub struct Passes(Arc<Mutex<HashMap<PeerId, (PeerId, Instant)>>>);

impl Passes {
    pub fn grant(&self, peer: PeerId, inviter: PeerId, until: Instant) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, (_, t)| *t > now);
        map.insert(peer, (inviter, until));
    }

    /// The inviter `peer` may reach, while its pass lasts.
    pub fn inviter_of(&self, peer: &PeerId) -> Option<PeerId> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(peer)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(inviter, _)| *inviter)
    }
}

/// The rule the relay server's limiters apply.
#[derive(Debug, Clone)]
pub struct RelayAccess {
    pub serve: RelayServe,
    pub gate: Gate,
    pub passes: Passes,
}

impl RelayAccess {
    pub fn may_reserve(&self, peer: &PeerId) -> bool {
        match self.serve {
            RelayServe::Anyone => true,
            RelayServe::Members => self.gate.is_member(peer),
            RelayServe::Off => false,
        }
    }

    pub fn may_connect(&self, src: &PeerId) -> bool {
        match self.serve {
            RelayServe::Anyone => true,
            RelayServe::Members => {
                self.gate.is_member(src) || self.passes.inviter_of(src).is_some()
            }
            RelayServe::Off => false,
        }
    }

    /// A circuit from `src` to `dst` this node's rule does not allow
    /// (a pass holder reaching someone other than its inviter).
    pub fn overreaches(&self, src: &PeerId, dst: &PeerId) -> bool {
        self.serve == RelayServe::Members
            && !self.gate.is_member(src)
            && self
                .passes
                .inviter_of(src)
                .is_some_and(|inviter| inviter != *dst)
    }
}

/// The relay server's configuration: libp2p's with grove's limits and
/// access rule, plus per-peer rates.
pub fn server_config(limits: &RelayLimits, access: &RelayAccess) -> relay::Config {
    let (reserve, connect) = (access.clone(), access.clone());
    let per_minute = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    relay::Config {
        max_reservations: limits.max_reservations,
        max_reservations_per_peer: limits.max_reservations_per_peer,
        reservation_duration: limits.reservation_duration,
        reservation_rate_limiters: vec![Box::new(move |peer: PeerId, _: &Multiaddr, _| {
            reserve.may_reserve(&peer)
        })],
        max_circuits: limits.max_circuits,
        max_circuits_per_peer: limits.max_circuits_per_peer,
        max_circuit_duration: limits.circuit_duration,
        max_circuit_bytes: limits.circuit_bytes,
        circuit_src_rate_limiters: vec![Box::new(move |peer: PeerId, _: &Multiaddr, _| {
            connect.may_connect(&peer)
        })],
    }
    .reservation_rate_per_peer(per_minute(30), Duration::from_secs(60))
    .circuit_src_per_peer(per_minute(60), Duration::from_secs(60))
}

/// Bytes through relayed connections, both ways (Noise and Yamux framing
/// included: what the relay carries).
#[derive(Debug, Default)]
pub struct RelayedBytes {
    pub received: AtomicU64,
    pub sent: AtomicU64,
}

/// A relayed connection that counts its bytes.
pub struct Counted<C> {
    pub inner: C,
    pub bytes: Arc<RelayedBytes>,
}

impl<C: futures::AsyncRead + Unpin> futures::AsyncRead for Counted<C> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.bytes.received.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl<C: futures::AsyncWrite + Unpin> futures::AsyncWrite for Counted<C> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.bytes.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

/// The relay server, kept from writing to relayed connections. libp2p's
/// server runs no handler on a relayed connection (it relays over direct
/// ones only) yet, when its status changes, tells every connection it
/// knows, relayed ones included — a panic in the swarm. This drops those
/// notices; nothing else changes.
pub struct DirectOnly {
    inner: relay::Behaviour,
    relayed: HashSet<ConnectionId>,
}

impl DirectOnly {
    pub fn new(inner: relay::Behaviour) -> DirectOnly {
        DirectOnly {
            inner,
            relayed: HashSet::new(),
        }
    }

    pub fn set_status(&mut self, status: relay::Status) {
        self.inner.set_status(Some(status));
    }
}

impl NetworkBehaviour for DirectOnly {
    type ConnectionHandler = THandler<relay::Behaviour>;
    type ToSwarm = relay::Event;

    fn handle_pending_inbound_connection(
        &mut self,
        id: ConnectionId,
        local: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        self.inner
            .handle_pending_inbound_connection(id, local, remote)
    }

    fn handle_established_inbound_connection(
        &mut self,
        id: ConnectionId,
        peer: PeerId,
        local: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        if is_relayed(local) {
            self.relayed.insert(id);
        }
        self.inner
            .handle_established_inbound_connection(id, peer, local, remote)
    }

    fn handle_pending_outbound_connection(
        &mut self,
        id: ConnectionId,
        peer: Option<PeerId>,
        addresses: &[Multiaddr],
        role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        self.inner
            .handle_pending_outbound_connection(id, peer, addresses, role)
    }

    fn handle_established_outbound_connection(
        &mut self,
        id: ConnectionId,
        peer: PeerId,
        addr: &Multiaddr,
        role: Endpoint,
        port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        if is_relayed(addr) {
            self.relayed.insert(id);
        }
        self.inner
            .handle_established_outbound_connection(id, peer, addr, role, port_use)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        if let FromSwarm::ConnectionClosed(e) = &event {
            self.relayed.remove(&e.connection_id);
        }
        self.inner.on_swarm_event(event)
    }

    fn on_connection_handler_event(
        &mut self,
        peer: PeerId,
        id: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        self.inner.on_connection_handler_event(peer, id, event)
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<ToSwarm<relay::Event, THandlerInEvent<Self>>> {
        loop {
            match self.inner.poll(cx) {
                Poll::Ready(ToSwarm::NotifyHandler {
                    handler: NotifyHandler::One(id),
                    event: Either::Left(_),
                    ..
                }) if self.relayed.contains(&id) => continue,
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_mode_lets_members_reserve_and_pass_holders_reach_only_their_inviter() {
        let gate = Gate::default();
        let (member, stranger, inviter, other) = (
            PeerId::random(),
            PeerId::random(),
            PeerId::random(),
            PeerId::random(),
        );
        gate.set_members([member, inviter, other]);
        let access = RelayAccess {
            serve: RelayServe::Members,
            gate,
            passes: Passes::default(),
        };
        assert!(access.may_reserve(&member));
        assert!(!access.may_reserve(&stranger));
        assert!(!access.may_connect(&stranger));
        access
            .passes
            .grant(stranger, inviter, Instant::now() + Duration::from_secs(60));
        assert!(access.may_connect(&stranger));
        assert!(!access.may_reserve(&stranger), "a pass is no reservation");
        assert!(!access.overreaches(&stranger, &inviter));
        assert!(access.overreaches(&stranger, &other));
        access
            .passes
            .grant(stranger, inviter, Instant::now() - Duration::from_secs(1));
        assert!(!access.may_connect(&stranger), "an expired pass");
    }

    #[test]
    fn anyone_and_off_modes() {
        let stranger = PeerId::random();
        let open = RelayAccess {
            serve: RelayServe::Anyone,
            gate: Gate::default(),
            passes: Passes::default(),
        };
        assert!(open.may_reserve(&stranger) && open.may_connect(&stranger));
        let off = RelayAccess {
            serve: RelayServe::Off,
            ..open
        };
        assert!(!off.may_reserve(&stranger) && !off.may_connect(&stranger));
    }
}
