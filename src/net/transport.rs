//! The swarm's making: TCP and circuits through relays (their bytes
//! counted), each under Noise and Yamux, and QUIC beside them (its own
//! TLS and streams); the behaviour; the listeners bound (each TCP one
//! also over QUIC at the same port number, where QUIC is on) (every port probed first, so one another process holds is refused
//! by name); and the errors of all that with their OS causes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::Either;
use libp2p::core::muxing::StreamMuxerBox;
use libp2p::core::transport::{Boxed, OrTransport, Transport as _};
use libp2p::core::upgrade::Version;
use libp2p::multiaddr::Protocol as Addr;
use libp2p::swarm::SwarmEvent;
use libp2p::{Multiaddr, PeerId, Swarm, identity, noise, quic, relay, tcp, yamux};
use tokio::sync::mpsc;

use super::behaviour::{self, Behaviour};
use super::connectivity::Connectivity;
use super::gate::Gate;
use super::reach::Reach;
use super::relay::{Counted, Passes, RelayAccess, RelayedBytes};
use super::with_causes;
use super::{Event, NetConfig, NetError};

/// The swarm and what tracks its connectivity.
pub(super) fn build_swarm(
    keypair: identity::Keypair,
    config: &NetConfig,
    gate: &Gate,
) -> Result<(Swarm<Behaviour>, Connectivity), NetError> {
    let access = RelayAccess {
        serve: config.relay.serve,
        gate: gate.clone(),
        passes: Passes::default(),
    };
    let local = keypair.public().to_peer_id();
    let bytes = Arc::new(RelayedBytes::default());
    let (relay_transport, relay_client) = relay::client::new(local);
    let behaviour = behaviour::build(&keypair, config, gate, &access, relay_client)?;
    let counted = bytes.clone();
    let relayed = relay_transport.map(move |conn, _| Counted {
        inner: conn,
        bytes: counted.clone(),
    });
    // libp2p-tcp dials from the listening port (port reuse): the port a
    // peer observes is the one a hole punch must reach.
    let tcp = tcp::tokio::Transport::new(tcp::Config::default().nodelay(true));
    let noise = noise::Config::new(&keypair).map_err(|e| NetError::Transport(e.to_string()))?;
    let streams = OrTransport::new(relayed, tcp)
        .upgrade(Version::V1Lazy)
        .authenticate(noise)
        .multiplex(yamux::Config::default())
        .timeout(Duration::from_secs(20));
    let transport: Boxed<(PeerId, StreamMuxerBox)> = if config.quic {
        // QUIC dials from its listening socket too.
        let quic = quic::tokio::Transport::new(quic::Config::new(&keypair));
        OrTransport::new(quic, streams)
            .map(|either, _| match either {
                Either::Left((peer, conn)) => (peer, StreamMuxerBox::new(conn)),
                Either::Right((peer, conn)) => (peer, StreamMuxerBox::new(conn)),
            })
            .boxed()
    } else {
        streams
            .map(|(peer, conn), _| (peer, StreamMuxerBox::new(conn)))
            .boxed()
    };
    let swarm = Swarm::new(
        transport,
        behaviour,
        local,
        libp2p::swarm::Config::with_tokio_executor()
            .with_idle_connection_timeout(config.idle_timeout),
    );
    let connectivity = Connectivity::new(
        Reach::new(config.reachability, config.external.clone()),
        &config.relays,
        config.relay.use_relays,
        access,
        bytes,
    );
    Ok((swarm, connectivity))
}

/// Binds every listen address and waits until each listener has an
/// address, so callers (and invites) see the ports actually bound; an
/// unspecified address reports each interface's in turn, later ones through
/// the address watch.
pub(super) async fn listen(
    swarm: &mut Swarm<Behaviour>,
    connectivity: &mut Connectivity,
    config: &NetConfig,
    events: &mpsc::Sender<Event>,
) -> Result<(), NetError> {
    // Every port is probed before this node binds any (two of its own
    // addresses may share a port).
    for addr in &config.listen {
        refuse_port_in_use(addr)?;
    }
    let addrs = listen_addresses(config);
    let mut unreported = HashSet::new();
    let mut off_loopback_unseen = HashSet::new();
    for addr in &addrs {
        let id = swarm
            .listen_on(addr.clone())
            .map_err(|e| NetError::Listen {
                addr: addr.to_string(),
                reason: with_causes(&e),
            })?;
        unreported.insert(id);
        if reports_each_interface_over_tcp(addr) {
            off_loopback_unseen.insert(id);
        }
    }
    // Why wait past the first address of an unspecified TCP listener:
    // libp2p-tcp dials from the listening port only towards an IP whose
    // kind (loopback or not) it has seen as a listen address, and
    // interfaces are reported one at a time, loopback first. A dial made
    // before the first other interface is reported (the configured relays
    // are dialled next) leaves from an ephemeral port, which a cone NAT
    // maps apart from the listening port: peers then observe a port no
    // hole punch can reach. A host with no other interface waits the bound.
    let off_loopback_by = tokio::time::Instant::now() + OTHER_INTERFACE_WAIT;
    while !unreported.is_empty() || !off_loopback_unseen.is_empty() {
        let event = if unreported.is_empty() {
            match tokio::time::timeout_at(off_loopback_by, swarm.select_next_some()).await {
                Ok(event) => event,
                Err(_) => break,
            }
        } else {
            swarm.select_next_some().await
        };
        match event {
            SwarmEvent::NewListenAddr {
                listener_id,
                address,
            } => {
                unreported.remove(&listener_id);
                if !is_loopback(&address) {
                    off_loopback_unseen.remove(&listener_id);
                }
                connectivity.listening(listener_id, address.clone());
                let _ = events.try_send(Event::Listening(address));
            }
            SwarmEvent::ListenerError { error, .. }
            | SwarmEvent::ListenerClosed {
                reason: Err(error), ..
            } => {
                return Err(NetError::Listen {
                    addr: "listener".into(),
                    reason: with_causes(&error),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// How long a start waits for an unspecified TCP listener's first
/// interface other than loopback (see [`listen`]).
const OTHER_INTERFACE_WAIT: Duration = Duration::from_secs(1);

/// A TCP listener on an unspecified IP (`0.0.0.0`, `::`), which reports
/// each interface's address as its own.
fn reports_each_interface_over_tcp(addr: &Multiaddr) -> bool {
    super::reach::tcp_port(addr).is_some()
        && super::reach::ip_of(addr).is_some_and(|ip| ip.is_unspecified())
}

fn is_loopback(addr: &Multiaddr) -> bool {
    super::reach::ip_of(addr).is_some_and(|ip| ip.is_loopback())
}

/// What this node listens on: `net.listen`, and where QUIC is on, each
/// TCP address's twin over QUIC (`/ip4/0.0.0.0/udp/4100/quic-v1` beside
/// `/ip4/0.0.0.0/tcp/4100`).
pub(super) fn listen_addresses(config: &NetConfig) -> Vec<Multiaddr> {
    let mut out = config.listen.clone();
    if config.quic {
        for addr in &config.listen {
            let twin: Multiaddr = addr
                .iter()
                .flat_map(|p| match p {
                    Addr::Tcp(port) => vec![Addr::Udp(port), Addr::QuicV1],
                    other => vec![other],
                })
                .collect();
            if twin != *addr && !out.contains(&twin) {
                out.push(twin);
            }
        }
    }
    out
}

/// libp2p-tcp always sets port reuse (hole punching needs it), so two
/// processes could both listen on one port and peers would reach either at
/// random. An exclusive bind first (no port reuse; the probe is closed at
/// once) refuses a port another process already listens on.
pub fn refuse_port_in_use(addr: &Multiaddr) -> Result<(), NetError> {
    let (Some(ip), Some(port)) = (super::reach::ip_of(addr), super::reach::tcp_port(addr)) else {
        return Ok(());
    };
    if port == 0 {
        return Ok(());
    }
    match std::net::TcpListener::bind((ip, port)) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(NetError::Listen {
            addr: addr.to_string(),
            reason: format!(
                "TCP port {port} on {ip} is already in use by another process (Address already in use); stop it or choose another port in net.listen"
            ),
        }),
        Err(e) => Err(NetError::Listen {
            addr: addr.to_string(),
            reason: e.to_string(),
        }),
    }
}
