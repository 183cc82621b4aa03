//! The members-only gate: a behaviour wrapped in [`MembersOnly`] sees only
//! the connections of roster members. A non-member's connection gets a
//! handler that supports no protocol, so its gossipsub, sync, search or
//! turn streams are refused at negotiation, before a byte of body is read,
//! and the wrapped behaviour never learns the peer exists (it cannot graft
//! it, send it gossip or forward it any).
//!
//! Whether a connection is gated is decided once, when it is established,
//! from the [`Gate`]'s roster at that moment; a connection whose peer's
//! membership changes later is closed by the admission behaviour (the peer
//! reconnects and is decided afresh).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use either::Either;
use libp2p::PeerId;
use libp2p::core::transport::PortUse;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::swarm::behaviour::{ConnectionClosed, ConnectionEstablished};
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, NotifyHandler, THandler,
    THandlerInEvent, THandlerOutEvent, ToSwarm, dummy,
};

/// Who the gate lets through: every peer until the node knows a roster
/// (a node outside any mesh has nothing members-only to protect), then the
/// roster's members. The relays named in `net.relays` are let through by
/// neither unless they are members: they carry circuits and reservations,
/// never members-only traffic, so the first roster changes nothing for
/// their connections (admission would otherwise close them, losing the
/// reservations and the circuits on them, and the redial would have to
/// come from a fresh port while the old connection's TIME_WAIT holds the
/// listening port's). Shared by every gated behaviour and the admission
/// behaviour; set at each epoch.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<RwLock<Admits>>);

#[derive(Debug, Default)]
struct Admits {
    members: Option<HashSet<PeerId>>,
    relays: HashSet<PeerId>,
}

impl Gate {
    pub fn admits(&self, peer: &PeerId) -> bool {
        let admits = self.0.read().unwrap_or_else(|e| e.into_inner());
        match &admits.members {
            None => !admits.relays.contains(peer),
            Some(members) => members.contains(peer),
        }
    }

    /// True when `peer` is a member of the known roster (false while no
    /// roster is known: then every peer is a stranger to admission).
    pub fn is_member(&self, peer: &PeerId) -> bool {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .members
            .as_ref()
            .is_some_and(|m| m.contains(peer))
    }

    pub fn set_members(&self, members: impl IntoIterator<Item = PeerId>) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).members =
            Some(members.into_iter().collect());
    }

    /// The relays this node is configured to use (`net.relays`).
    pub fn set_relays(&self, relays: impl IntoIterator<Item = PeerId>) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).relays = relays.into_iter().collect();
    }
}

/// `B`, seeing only the connections the [`Gate`] admitted.
pub struct MembersOnly<B> {
    inner: B,
    gate: Gate,
    /// Decisions made for connections not yet reported established.
    decided: HashMap<ConnectionId, bool>,
    /// The admitted connections, by peer.
    admitted: HashMap<PeerId, Vec<ConnectionId>>,
}

impl<B> MembersOnly<B> {
    pub fn new(inner: B, gate: Gate) -> MembersOnly<B> {
        MembersOnly {
            inner,
            gate,
            decided: HashMap::new(),
            admitted: HashMap::new(),
        }
    }

    pub fn inner(&mut self) -> &mut B {
        &mut self.inner
    }

    fn admitted_count(&self, peer: &PeerId) -> usize {
        self.admitted.get(peer).map_or(0, Vec::len)
    }
}

impl<B: NetworkBehaviour> NetworkBehaviour for MembersOnly<B> {
    type ConnectionHandler = Either<THandler<B>, dummy::ConnectionHandler>;
    type ToSwarm = B::ToSwarm;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        self.inner
            .handle_pending_inbound_connection(connection_id, local_addr, remote_addr)
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        peer: PeerId,
        local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        let admit = self.gate.admits(&peer);
        self.decided.insert(connection_id, admit);
        if !admit {
            return Ok(Either::Right(dummy::ConnectionHandler));
        }
        self.inner
            .handle_established_inbound_connection(connection_id, peer, local_addr, remote_addr)
            .map(Either::Left)
    }

    fn handle_pending_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        maybe_peer: Option<PeerId>,
        addresses: &[Multiaddr],
        effective_role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        self.inner.handle_pending_outbound_connection(
            connection_id,
            maybe_peer,
            addresses,
            effective_role,
        )
    }

    fn handle_established_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        peer: PeerId,
        addr: &Multiaddr,
        role_override: Endpoint,
        port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        let admit = self.gate.admits(&peer);
        self.decided.insert(connection_id, admit);
        if !admit {
            return Ok(Either::Right(dummy::ConnectionHandler));
        }
        self.inner
            .handle_established_outbound_connection(
                connection_id,
                peer,
                addr,
                role_override,
                port_use,
            )
            .map(Either::Left)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ConnectionEstablished(e) => {
                if self.decided.remove(&e.connection_id) != Some(true) {
                    return;
                }
                let other_established = self.admitted_count(&e.peer_id);
                self.admitted
                    .entry(e.peer_id)
                    .or_default()
                    .push(e.connection_id);
                self.inner.on_swarm_event(FromSwarm::ConnectionEstablished(
                    ConnectionEstablished {
                        other_established,
                        ..e
                    },
                ));
            }
            FromSwarm::ConnectionClosed(e) => {
                let Some(list) = self.admitted.get_mut(&e.peer_id) else {
                    return;
                };
                let Some(at) = list.iter().position(|c| *c == e.connection_id) else {
                    return;
                };
                list.remove(at);
                let remaining_established = list.len();
                if list.is_empty() {
                    self.admitted.remove(&e.peer_id);
                }
                self.inner
                    .on_swarm_event(FromSwarm::ConnectionClosed(ConnectionClosed {
                        remaining_established,
                        ..e
                    }));
            }
            FromSwarm::AddressChange(e) => {
                if self
                    .admitted
                    .get(&e.peer_id)
                    .is_some_and(|l| l.contains(&e.connection_id))
                {
                    self.inner.on_swarm_event(event);
                }
            }
            FromSwarm::DialFailure(e) => {
                self.decided.remove(&e.connection_id);
                self.inner.on_swarm_event(event);
            }
            FromSwarm::ListenFailure(e) => {
                self.decided.remove(&e.connection_id);
                self.inner.on_swarm_event(event);
            }
            other => self.inner.on_swarm_event(other),
        }
    }

    fn on_connection_handler_event(
        &mut self,
        peer_id: PeerId,
        connection_id: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        match event {
            Either::Left(e) => self
                .inner
                .on_connection_handler_event(peer_id, connection_id, e),
            Either::Right(never) => match never {},
        }
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        loop {
            let event = match self.inner.poll(cx) {
                Poll::Ready(e) => e,
                Poll::Pending => return Poll::Pending,
            };
            // A handler event must reach an admitted connection: the
            // gated ones run a handler of another type.
            if let ToSwarm::NotifyHandler {
                peer_id,
                handler,
                event,
            } = event
            {
                let target = match handler {
                    NotifyHandler::One(c) => self
                        .admitted
                        .get(&peer_id)
                        .and_then(|l| l.iter().find(|x| **x == c))
                        .copied(),
                    NotifyHandler::Any => {
                        self.admitted.get(&peer_id).and_then(|l| l.first()).copied()
                    }
                };
                match target {
                    Some(c) => {
                        return Poll::Ready(ToSwarm::NotifyHandler {
                            peer_id,
                            handler: NotifyHandler::One(c),
                            event: Either::Left(event),
                        });
                    }
                    None => {
                        tracing::debug!(%peer_id, "handler event for a gated connection dropped");
                        continue;
                    }
                }
            }
            return Poll::Ready(event.map_in(Either::Left));
        }
    }
}
