//! The hole-punch candidates DCUtR sends a peer: the addresses this node's
//! peers actually observed it at, as they reported them. libp2p's identify
//! "translates" an observed address whose port this node does not listen
//! on into the observed IP with the listening port, which behind a NAT that
//! picks its own ports (a symmetric one, or a cone that could not keep the
//! port) names a port nobody is mapped at, and the punch dials it in vain.
//! [`RawCandidates`] wraps a behaviour (DCUtR) so that it hears no
//! swarm-wide candidates, only the raw observations the event loop hands it.

use std::task::{Context, Poll};

use libp2p::PeerId;
use libp2p::core::transport::PortUse;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, NewExternalAddrCandidate,
    THandler, THandlerInEvent, THandlerOutEvent, ToSwarm,
};

use super::reach::is_relayed;

/// `B`, told of candidate addresses only through [`RawCandidates::observed`].
pub struct RawCandidates<B> {
    inner: B,
}

impl<B: NetworkBehaviour> RawCandidates<B> {
    pub fn new(inner: B) -> RawCandidates<B> {
        RawCandidates { inner }
    }

    /// A peer saw this node at `addr` over a direct connection.
    pub fn observed(&mut self, addr: &Multiaddr) {
        if !is_relayed(addr) {
            self.inner
                .on_swarm_event(FromSwarm::NewExternalAddrCandidate(
                    NewExternalAddrCandidate { addr },
                ));
        }
    }
}

impl<B: NetworkBehaviour> NetworkBehaviour for RawCandidates<B> {
    type ConnectionHandler = THandler<B>;
    type ToSwarm = B::ToSwarm;

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
        self.inner
            .handle_established_outbound_connection(id, peer, addr, role, port_use)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        if !matches!(event, FromSwarm::NewExternalAddrCandidate(_)) {
            self.inner.on_swarm_event(event);
        }
    }

    fn on_connection_handler_event(
        &mut self,
        peer: PeerId,
        id: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        self.inner.on_connection_handler_event(peer, id, event)
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        self.inner.poll(cx)
    }
}
