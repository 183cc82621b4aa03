//! The task that owns the swarm: turns commands into swarm calls and swarm
//! events into [`Event`]s. Every failure becomes an event or an error reply.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use libp2p::request_response::{self, OutboundRequestId, ResponseChannel};
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::swarm::{ConnectionId, SwarmEvent};
use libp2p::{Multiaddr, PeerId, Swarm, gossipsub, identify, identity, ping};
use tokio::sync::{mpsc, oneshot, watch};

use super::behaviour::{Behaviour, BehaviourEvent};
use super::connectivity::{Addresses, Connectivity, RelayNote};
use super::gate::Gate;
use super::transport;
use super::with_causes;
use super::{Command, DropReason, Event, NetConfig, NetError, Protocol, Verdict};

/// How long after its welcome a new member reconnects to the members.
const RECONNECT_AFTER_WELCOME: Duration = Duration::from_millis(500);
/// How often reachability is judged again and relay slots are sought.
const CONNECTIVITY_TICK: Duration = Duration::from_secs(2);
/// How long a peer may send gossip on a topic it never told this node it
/// subscribes to before its connections are replaced ([`EventLoop::note_unheard`]).
const UNHEARD_GRACE: Duration = Duration::from_secs(2);
/// How long a member may stay connected without telling this node any
/// topic before its connections are replaced (members subscribe to their
/// mesh's topics as they start or are welcomed).
const SILENT_MEMBER_GRACE: Duration = Duration::from_secs(10);
/// Least time between two such replacements for one peer.
const UNHEARD_RETRY: Duration = Duration::from_secs(15);

type Pending = oneshot::Sender<Result<Vec<u8>, NetError>>;

struct EventLoop {
    swarm: Swarm<Behaviour>,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
    /// Outbound requests awaiting an answer, by protocol and id (ids are
    /// per behaviour).
    requests: HashMap<(Protocol, OutboundRequestId), Pending>,
    responses: HashMap<u64, (Protocol, ResponseChannel<Vec<u8>>)>,
    next_inbound: u64,
    members: Vec<PeerId>,
    blocked: Vec<PeerId>,
    /// Who the members-only behaviours admit (open to all until the first
    /// `SetPeers`: the node has no roster to filter by).
    gate: Gate,
    /// `connect` calls waiting: the peer, this call's own dial (none when
    /// it waits for the peer to dial in), the reply.
    connecting: Vec<(PeerId, Option<ConnectionId>, Connecting)>,
    connectivity: Connectivity,
    addresses: watch::Sender<Addresses>,
    /// Members whose connections this node closed after its welcome, to
    /// dial again (at this address) once the last one is down.
    redial_after_close: HashMap<PeerId, Multiaddr>,
    /// When to reconnect to the members after this node's welcome.
    reconnect_at: Option<tokio::time::Instant>,
    /// libp2p's own metrics, fed every swarm event.
    metrics: libp2p_metrics::Metrics,
    /// Peers whose gossip came on a topic they never told this node they
    /// subscribe to: the topic and when it was first seen.
    unheard: HashMap<PeerId, (gossipsub::TopicHash, Instant)>,
    /// When each peer's connections were last replaced for that.
    replaced: HashMap<PeerId, Instant>,
    /// Since when each connected peer has been connected without a break.
    connected_since: HashMap<PeerId, Instant>,
}

type Connecting = oneshot::Sender<Result<(), NetError>>;

pub(super) async fn spawn(
    keypair: identity::Keypair,
    config: NetConfig,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
    metrics: libp2p_metrics::Metrics,
) -> Result<watch::Receiver<Addresses>, NetError> {
    let gate = Gate::default();
    let (mut swarm, mut connectivity) = transport::build_swarm(keypair, &config, &gate)?;
    gate.set_relays(connectivity.configured().iter().map(|(peer, _)| *peer));
    transport::listen(&mut swarm, &mut connectivity, &config, &events).await?;
    connectivity.dial_relays(&mut swarm);
    let (addresses, watched) = watch::channel(connectivity.addresses());
    let event_loop = EventLoop {
        swarm,
        commands,
        events,
        requests: HashMap::new(),
        responses: HashMap::new(),
        next_inbound: 0,
        members: Vec::new(),
        blocked: Vec::new(),
        gate,
        connecting: Vec::new(),
        connectivity,
        addresses,
        redial_after_close: HashMap::new(),
        reconnect_at: None,
        metrics,
        unheard: HashMap::new(),
        replaced: HashMap::new(),
        connected_since: HashMap::new(),
    };
    tokio::spawn(event_loop.run());
    Ok(watched)
}

impl EventLoop {
    async fn run(mut self) {
        let mut tick = tokio::time::interval(CONNECTIVITY_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let reconnect = self.reconnect_at;
            tokio::select! {
                _ = tokio::time::sleep_until(reconnect.unwrap_or_else(tokio::time::Instant::now)), if reconnect.is_some() => {
                    self.reconnect_at = None;
                    self.reconnect_members();
                }
                event = self.swarm.select_next_some() => {
                    self.on_swarm(event).await;
                    self.publish_addresses();
                }
                _ = tick.tick() => {
                    self.on_tick();
                    self.publish_addresses();
                }
                command = self.commands.recv() => match command {
                    Some(c) => self.on_command(c),
                    // Every handle is gone: the node is shutting down.
                    None => break,
                },
            }
        }
    }

    /// Judges reachability, keeps relay slots, and redials configured
    /// relays that are not connected.
    fn on_tick(&mut self) {
        if let Some((reachability, why)) = self.connectivity.tick(&mut self.swarm) {
            self.emit(Event::ReachabilityChanged {
                reachability: reachability.as_str(),
                why,
            });
        }
        self.connectivity.dial_relays(&mut self.swarm);
        self.punch_again();
        self.replace_unheard();
    }

    /// gossipsub tells a peer this node's topics over its first connection
    /// only. A node that comes back under the same identity before the
    /// other side saw its old connection close never hears the other's
    /// topics: their gossip still reaches it, but it can publish to nobody
    /// (its votes and answers are lost for good). Gossip from a peer on a
    /// topic it never said it subscribes to shows that state.
    fn note_unheard(&mut self, peer: PeerId, topic: &gossipsub::TopicHash) {
        let heard = self
            .swarm
            .behaviour_mut()
            .gossip()
            .all_peers()
            .any(|(p, topics)| *p == peer && topics.contains(&topic));
        if !heard {
            self.unheard
                .entry(peer)
                .or_insert_with(|| (topic.clone(), Instant::now()));
        }
    }

    /// Replaces the connections of each peer still unheard after
    /// [`UNHEARD_GRACE`], and of each member connected for
    /// [`SILENT_MEMBER_GRACE`] that told this node no topic at all (its
    /// first connection then tells both sides' topics), at most once per
    /// [`UNHEARD_RETRY`].
    fn replace_unheard(&mut self) {
        let now = Instant::now();
        self.replaced
            .retain(|_, at| now.duration_since(*at) < UNHEARD_RETRY);
        let gossip = self.swarm.behaviour_mut().gossip();
        let heard: HashMap<PeerId, Vec<gossipsub::TopicHash>> = gossip
            .all_peers()
            .map(|(p, topics)| (*p, topics.into_iter().cloned().collect()))
            .collect();
        let told = |peer: &PeerId, topic: Option<&gossipsub::TopicHash>| {
            heard
                .get(peer)
                .is_some_and(|topics| topic.map_or(!topics.is_empty(), |t| topics.contains(t)))
        };
        self.unheard
            .retain(|peer, (topic, _)| !told(peer, Some(topic)));
        let local = *self.swarm.local_peer_id();
        let silent = self.members.iter().filter(|p| {
            **p != local
                && self
                    .connected_since
                    .get(p)
                    .is_some_and(|since| now.duration_since(*since) >= SILENT_MEMBER_GRACE)
                && !told(p, None)
        });
        let mut due: Vec<PeerId> = self
            .unheard
            .iter()
            .filter(|(_, (_, since))| now.duration_since(*since) >= UNHEARD_GRACE)
            .map(|(peer, _)| *peer)
            .chain(silent.copied())
            .filter(|peer| !self.replaced.contains_key(peer))
            .collect();
        due.sort();
        due.dedup();
        for peer in due {
            self.unheard.remove(&peer);
            self.replaced.insert(peer, now);
            tracing::info!(%peer, "this member's gossip topics never reached this node (it came back before its old connection was seen closed, or was connected before it was a member): reconnecting");
            self.replace_connections(peer);
        }
    }

    /// Opens a fresh circuit to each member whose hole punch is due again
    /// (DCUtR starts on every new relayed connection), and closes relayed
    /// connections a direct one replaced.
    fn punch_again(&mut self) {
        let now = Instant::now();
        let own = self.connectivity.mapping();
        let punching = &mut self.swarm.behaviour_mut().punching;
        let closes = punching.due_closes(now);
        let retries = punching.due_retries(own, now);
        for id in closes {
            self.swarm.close_connection(id);
        }
        for (peer, circuit) in retries {
            let opts = DialOpts::peer_id(peer)
                .condition(PeerCondition::Always)
                .addresses(vec![circuit])
                .build();
            let id = opts.connection_id();
            self.swarm.behaviour_mut().punching.retrying(id);
            if let Err(e) = self.swarm.dial(opts) {
                tracing::debug!(%peer, error = %e, "no fresh circuit for a hole punch");
            }
        }
    }

    /// Tells the node when the addresses others reach it at changed.
    fn publish_addresses(&mut self) {
        let now = self.connectivity.addresses();
        if *self.addresses.borrow() != now {
            self.addresses.send_replace(now);
            self.emit(Event::AddressesChanged);
        }
    }

    fn emit(&self, event: Event) {
        // A full event queue means the node is overloaded: drop (logged at
        // debug; node stats counters come with the daemon's next step) rather
        // than block the swarm.
        if let Err(e) = self.events.try_send(event) {
            tracing::debug!("network event dropped: {e}");
        }
    }

    fn on_command(&mut self, command: Command) {
        let behaviour = self.swarm.behaviour_mut();
        match command {
            Command::Dial(addr, reply) => {
                let result = self.swarm.dial(addr.clone()).map_err(|e| NetError::Dial {
                    addr: addr.to_string(),
                    reason: e.to_string(),
                });
                let _ = reply.send(result);
            }
            Command::Listeners(reply) => {
                let _ = reply.send(self.listeners());
            }
            Command::Subscribe(topic, reply) => {
                let result = behaviour
                    .gossip()
                    .subscribe(&gossipsub::IdentTopic::new(topic))
                    .map(|_| ())
                    .map_err(|e| NetError::Publish(e.to_string()));
                let _ = reply.send(result);
            }
            Command::Publish(topic, data, reply) => {
                let result = behaviour
                    .gossip()
                    .publish(gossipsub::IdentTopic::new(topic), data)
                    .map(|_| ())
                    .map_err(|e| NetError::Publish(e.to_string()));
                let _ = reply.send(result);
            }
            Command::Report(id, source, verdict) => {
                let acceptance = match verdict {
                    Verdict::Accept => gossipsub::MessageAcceptance::Accept,
                    Verdict::Reject => gossipsub::MessageAcceptance::Reject,
                    Verdict::Ignore => gossipsub::MessageAcceptance::Ignore,
                };
                behaviour.gossip().report_message_validation_result(
                    &gossipsub::MessageId::from(id),
                    &source,
                    acceptance,
                );
            }
            Command::Request(peer, protocol, data, reply) => {
                let id = behaviour.rpc(protocol).send_request(&peer, data);
                self.requests.insert((protocol, id), reply);
            }
            Command::Admission(reply) => {
                let _ = reply.send(behaviour.admission.counts);
            }
            Command::Connectivity(reply) => {
                let admitted = behaviour.admission.admitted_peers();
                let _ = reply.send(self.connectivity.report(&admitted, &behaviour.punching));
            }
            Command::GrantRelayPass {
                peer,
                inviter,
                until,
            } => self.connectivity.access.passes.grant(peer, inviter, until),
            Command::Respond(id, data) => {
                if let Some((protocol, channel)) = self.responses.remove(&id) {
                    let sent = behaviour.rpc(protocol).send_response(channel, data).is_ok();
                    if !sent {
                        tracing::debug!(id, "response not sent: the requester went away");
                    }
                }
            }
            Command::SetPeers { members, blocked } => self.set_peers(members, blocked),
            Command::Connected(reply) => {
                let _ = reply.send(self.swarm.connected_peers().copied().collect());
            }
            Command::Connect(peer, addrs, reply) => self.connect(peer, addrs, reply),
        }
    }

    /// A new roster: gossipsub's explicit peers, the block list and the
    /// gate follow it, and a node just welcomed reconnects as a member.
    fn set_peers(&mut self, members: Vec<PeerId>, blocked: Vec<PeerId>) {
        let local = *self.swarm.local_peer_id();
        // Judged before the old roster is taken apart below: a node that
        // was a member already is not welcomed again at each new epoch
        // (which would close and redial every member link, punched ones
        // too).
        let welcomed = members.contains(&local) && !self.members.contains(&local);
        let behaviour = self.swarm.behaviour_mut();
        for old in std::mem::take(&mut self.members) {
            behaviour.gossip().remove_explicit_peer(&old);
        }
        for old in std::mem::take(&mut self.blocked) {
            behaviour.blocked.unblock_peer(old);
        }
        for peer in members.iter().filter(|p| **p != local) {
            behaviour.gossip().add_explicit_peer(peer);
        }
        for peer in &blocked {
            behaviour.blocked.block_peer(*peer);
        }
        // The gate admits exactly this roster from now on; the
        // connections decided under the old one are closed where a
        // peer's standing changed.
        let mut admitted = members.clone();
        admitted.push(local);
        self.gate.set_members(admitted);
        behaviour.admission.roster_changed();
        self.members = members;
        self.blocked = blocked;
        // Just welcomed: the members took this node's connections as a
        // stranger's (no gossip on them) and close them soon; a fresh
        // connection to each is a member's at once.
        if welcomed {
            // After a moment: the answer that welcomed this node
            // may still be arriving on one of those connections.
            self.reconnect_at = Some(tokio::time::Instant::now() + RECONNECT_AFTER_WELCOME);
        }
    }

    /// Reconnects to every connected member at the address it was dialled
    /// at. The members took this node's connections as a stranger's (no
    /// gossip, sync, search or turns on them) and would close them after a
    /// grace; closing them now and dialling again once they are down (not
    /// before: gossipsub sends its subscriptions only to a peer it sees
    /// connect afresh) makes this node a member on the wire at once.
    fn reconnect_members(&mut self) {
        let local = *self.swarm.local_peer_id();
        let targets: Vec<PeerId> = self
            .members
            .iter()
            .filter(|p| **p != local && self.swarm.is_connected(p))
            .filter(|p| self.connectivity.dialled_address(p).is_some())
            .copied()
            .collect();
        for peer in targets {
            self.replace_connections(peer);
        }
    }

    /// Closes every connection to `peer`, to dial it again at the address
    /// it was dialled at (if any) once the last is down: the fresh first
    /// connection is one gossipsub tells both sides' topics over.
    fn replace_connections(&mut self, peer: PeerId) {
        if let Some(addr) = self.connectivity.dialled_address(&peer) {
            self.redial_after_close.insert(peer, addr);
        }
        for id in self.connectivity.connections_of(&peer) {
            self.swarm.close_connection(id);
        }
    }

    fn connect(&mut self, peer: PeerId, addrs: Vec<Multiaddr>, reply: Connecting) {
        if self.swarm.is_connected(&peer) {
            let _ = reply.send(Ok(()));
            return;
        }
        // Calls whose caller gave up (timed out) are dropped here.
        self.connecting.retain(|(_, _, r)| !r.is_closed());
        if addrs.is_empty() {
            self.connecting.push((peer, None, reply));
            return;
        }
        let shown = super::address_list(&addrs);
        // `Disconnected` dials even while another dial to the peer is under
        // way (a redial at an address that went stale, say).
        let opts = DialOpts::peer_id(peer)
            .condition(PeerCondition::Disconnected)
            .addresses(addrs)
            .build();
        let id = opts.connection_id();
        match self.swarm.dial(opts) {
            Ok(()) => self.connecting.push((peer, Some(id), reply)),
            Err(e) => {
                let _ = reply.send(Err(NetError::Dial {
                    addr: shown,
                    reason: e.to_string(),
                }));
            }
        }
    }

    /// Answers the `connect` calls a connection (or a failed dial) settles.
    fn settle_connects(&mut self, peer: PeerId, failed: Option<(ConnectionId, String)>) {
        let connected = self.swarm.is_connected(&peer);
        let mut waiting = Vec::new();
        for (p, dial, reply) in self.connecting.drain(..) {
            let result = if p != peer {
                None
            } else if connected {
                Some(Ok(()))
            } else {
                match (&failed, dial) {
                    (Some((failed_id, reason)), Some(id)) if *failed_id == id => {
                        Some(Err(NetError::Dial {
                            addr: peer.to_string(),
                            reason: reason.clone(),
                        }))
                    }
                    _ => None,
                }
            };
            match result {
                Some(result) => {
                    let _ = reply.send(result);
                }
                None => waiting.push((p, dial, reply)),
            }
        }
        self.connecting = waiting;
    }

    /// Feeds libp2p's metrics the swarm event and the behaviour events
    /// they know.
    fn record(&self, event: &SwarmEvent<BehaviourEvent>) {
        use libp2p_metrics::Recorder;
        self.metrics.record(event);
        match event {
            SwarmEvent::Behaviour(BehaviourEvent::Identify(e)) => self.metrics.record(e),
            SwarmEvent::Behaviour(BehaviourEvent::Ping(e)) => self.metrics.record(e),
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(e)) => self.metrics.record(e),
            SwarmEvent::Behaviour(BehaviourEvent::Relay(e)) => self.metrics.record(e),
            SwarmEvent::Behaviour(BehaviourEvent::Dcutr(e)) => self.metrics.record(e),
            _ => {}
        }
    }

    async fn on_swarm(&mut self, event: SwarmEvent<BehaviourEvent>) {
        self.record(&event);
        match event {
            SwarmEvent::IncomingConnectionError { error, .. } => {
                self.emit(Event::Dropped {
                    peer: None,
                    reason: DropReason::IncomingConnection,
                    detail: error.to_string(),
                });
            }
            SwarmEvent::OutgoingConnectionError {
                connection_id,
                peer_id,
                error,
            } => {
                self.connectivity.dial_ended(connection_id);
                if let Some(peer) = peer_id {
                    self.settle_connects(peer, Some((connection_id, error.to_string())));
                }
                self.emit(Event::Dropped {
                    peer: peer_id,
                    reason: DropReason::OutgoingConnection,
                    detail: error.to_string(),
                });
            }
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) => {
                self.note_unheard(propagation_source, &message.topic);
                self.emit(Event::Gossip {
                    // The raw id (our content ids are ASCII hex), so the
                    // verdict reported back names the same message.
                    id: String::from_utf8_lossy(&message_id.0).into_owned(),
                    source: propagation_source,
                    author: message.source,
                    topic: message.topic.into_string(),
                    data: message.data,
                });
            }
            SwarmEvent::Behaviour(BehaviourEvent::Join(event)) => {
                self.on_rpc(Protocol::Join, event)
            }
            SwarmEvent::Behaviour(BehaviourEvent::RelayPass(event)) => {
                self.on_rpc(Protocol::RelayPass, event)
            }
            SwarmEvent::Behaviour(BehaviourEvent::Sync(event)) => {
                self.on_rpc(Protocol::Sync, event)
            }
            SwarmEvent::Behaviour(BehaviourEvent::Search(event)) => {
                self.on_rpc(Protocol::Search, event)
            }
            SwarmEvent::Behaviour(BehaviourEvent::Turn(event)) => {
                self.on_rpc(Protocol::Turn, event)
            }
            other => self.on_link(other),
        }
    }

    /// Connections, identify, ping, the relay and hole punching (and
    /// listeners, in [`Self::on_listener`]): what connectivity tracks.
    fn on_link(&mut self, event: SwarmEvent<BehaviourEvent>) {
        match event {
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                endpoint,
                num_established,
                ..
            } => self.on_established(peer_id, connection_id, &endpoint, num_established.get()),
            SwarmEvent::ConnectionClosed {
                peer_id,
                connection_id,
                num_established,
                ..
            } => self.on_closed(peer_id, connection_id, num_established),
            SwarmEvent::Behaviour(BehaviourEvent::Identify(identify::Event::Received {
                peer_id,
                connection_id,
                info,
            })) => self.on_identified(peer_id, connection_id, info),
            SwarmEvent::Behaviour(BehaviourEvent::Ping(ping::Event {
                peer,
                result: Ok(rtt),
                ..
            })) => self.connectivity.rtt(peer, rtt),
            SwarmEvent::Behaviour(BehaviourEvent::Relay(event)) => self.on_relay_server(event),
            SwarmEvent::Behaviour(BehaviourEvent::RelayClient(event)) => {
                self.connectivity.on_client(event)
            }
            SwarmEvent::Behaviour(BehaviourEvent::Dcutr(event)) => {
                self.swarm.behaviour_mut().punching.on_dcutr(&event)
            }
            other => self.on_listener(other),
        }
    }

    /// A listener's addresses came or went, or it closed (a relay
    /// listener's closing means its reservation ended).
    fn on_listener(&mut self, event: SwarmEvent<BehaviourEvent>) {
        match event {
            SwarmEvent::NewListenAddr {
                listener_id,
                address,
            } => {
                self.connectivity.listening(listener_id, address.clone());
                self.emit(Event::Listening(address));
            }
            SwarmEvent::ExpiredListenAddr {
                listener_id,
                address,
            } => self.connectivity.expired(listener_id, &address),
            SwarmEvent::ListenerClosed {
                listener_id,
                reason,
                ..
            } => {
                let refused = reason.as_ref().err().map(|e| with_causes(e));
                self.connectivity
                    .listener_closed(listener_id, refused.as_deref());
            }
            SwarmEvent::ListenerError { listener_id, error } => {
                self.connectivity
                    .listener_closed(listener_id, Some(&with_causes(&error)));
            }
            _ => {}
        }
    }

    /// A connection closed; when it was the last to `peer_id`, a member
    /// waiting to be redialled (after its welcome) is dialled now.
    fn on_closed(&mut self, peer_id: PeerId, connection_id: ConnectionId, num_established: u32) {
        self.connectivity.closed(peer_id, connection_id);
        if num_established == 0 {
            self.unheard.remove(&peer_id);
            self.connected_since.remove(&peer_id);
            if let Some(addr) = self.redial_after_close.remove(&peer_id) {
                let opts = DialOpts::peer_id(peer_id)
                    .condition(PeerCondition::Disconnected)
                    .addresses(vec![addr])
                    .build();
                if let Err(e) = self.swarm.dial(opts) {
                    tracing::debug!(peer = %peer_id, error = %e, "no fresh connection to a member");
                }
            }
            self.emit(Event::PeerDisconnected(peer_id));
        }
    }

    /// Acts on what the relay server's events ask: disconnects a pass
    /// holder that overreached, tells admission of relay uses.
    fn on_relay_server(&mut self, event: libp2p::relay::Event) {
        match self.connectivity.on_server(event) {
            Some(RelayNote::Overreach(peer)) => {
                tracing::info!(%peer, "a relay pass holder reached past its inviter: disconnected");
                let _ = self.swarm.disconnect_peer_id(peer);
            }
            Some(RelayNote::Uses(peer, begins)) => self
                .swarm
                .behaviour_mut()
                .admission
                .relay_use(&peer, begins),
            None => {}
        }
    }

    fn on_established(
        &mut self,
        peer: PeerId,
        id: ConnectionId,
        endpoint: &libp2p::core::ConnectedPoint,
        established: u32,
    ) {
        let punched = self.swarm.behaviour().punching.beside_relayed(&peer);
        self.connectivity.connected(peer, id, endpoint, punched);
        if established == 1 {
            self.connected_since.insert(peer, Instant::now());
            self.settle_connects(peer, None);
            self.emit(Event::PeerConnected(peer));
        }
    }

    fn on_identified(&mut self, peer: PeerId, id: ConnectionId, info: identify::Info) {
        // Hole punches are sent what peers really observed.
        let behaviour = self.swarm.behaviour_mut();
        if let Some(dcutr) = behaviour.dcutr.as_mut() {
            dcutr.inner().observed(&info.observed_addr);
        }
        behaviour.punching.listens(peer, &info.listen_addrs);
        self.connectivity
            .identified(peer, id, info.observed_addr, &info.protocols);
    }

    /// The bound addresses, TCP first (what a peer without QUIC can dial).
    fn listeners(&self) -> Vec<Multiaddr> {
        let mut bound: Vec<Multiaddr> = self.swarm.listeners().cloned().collect();
        bound.sort_by_key(|a| {
            a.iter()
                .any(|p| matches!(p, libp2p::multiaddr::Protocol::QuicV1))
        });
        bound
    }

    fn on_rpc(&mut self, protocol: Protocol, event: request_response::Event<Vec<u8>, Vec<u8>>) {
        match event {
            request_response::Event::Message { peer, message, .. } => match message {
                request_response::Message::Request {
                    request, channel, ..
                } => {
                    if matches!(protocol, Protocol::Join | Protocol::RelayPass) {
                        self.swarm.behaviour_mut().admission.join_activity(&peer);
                    }
                    let id = self.next_inbound;
                    self.next_inbound += 1;
                    let request = Event::Request {
                        id,
                        peer,
                        protocol,
                        data: request,
                    };
                    // A request the node cannot take (its queue is full) is
                    // not kept: dropping its channel tells the requester.
                    match self.events.try_send(request) {
                        Ok(()) => {
                            self.responses.insert(id, (protocol, channel));
                        }
                        Err(_) => {
                            drop(channel);
                            self.emit(Event::Dropped {
                                peer: Some(peer),
                                reason: DropReason::Overloaded,
                                detail: format!("{protocol}: the node's event queue is full"),
                            });
                        }
                    }
                }
                request_response::Message::Response {
                    request_id,
                    response,
                } => {
                    if let Some(reply) = self.requests.remove(&(protocol, request_id)) {
                        let _ = reply.send(Ok(response));
                    }
                }
            },
            request_response::Event::OutboundFailure {
                peer,
                request_id,
                error,
                ..
            } => {
                if let Some(reply) = self.requests.remove(&(protocol, request_id)) {
                    let _ = reply.send(Err(NetError::Request {
                        peer,
                        reason: no_answer(protocol, &error),
                    }));
                }
            }
            request_response::Event::InboundFailure { peer, error, .. } => {
                self.emit(Event::Dropped {
                    peer: Some(peer),
                    reason: DropReason::InboundRequest,
                    detail: format!("{protocol}: {error}"),
                });
            }
            request_response::Event::ResponseSent { .. } => {}
        }
    }
}

/// Why a request got no answer, in an operator's words (libp2p's say what
/// failed on the stream, not what it means for a grove node).
fn no_answer(protocol: Protocol, error: &request_response::OutboundFailure) -> String {
    use request_response::OutboundFailure as F;
    match error {
        F::DialFailure => "it could not be reached (every dial to it failed)".into(),
        F::Timeout => format!(
            "it did not answer the {} request in time (net.request_timeout_secs)",
            protocol.short()
        ),
        F::ConnectionClosed => "the connection to it closed before it answered".into(),
        F::UnsupportedProtocols if protocol.members_only() => format!(
            "it refused the {} request as one from a non-member: it has not admitted this \
             node's connection as a member's yet (a new member's first connection is \
             replaced a few seconds after its add), or it is on another epoch; \
             try again shortly, and see `grove mesh status` on both nodes",
            protocol.short()
        ),
        F::UnsupportedProtocols => format!(
            "it does not serve grove's {} protocol ({}): not a grove node, or another version",
            protocol.short(),
            protocol.name()
        ),
        F::Io(e) => format!("the {} stream to it failed: {e}", protocol.short()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_request_is_explained_in_grove_words() {
        use request_response::OutboundFailure as F;
        let refused = no_answer(Protocol::Search, &F::UnsupportedProtocols);
        assert!(refused.contains("as one from a non-member"), "{refused}");
        assert!(!refused.contains("supports none"), "{refused}");
        let foreign = no_answer(Protocol::Join, &F::UnsupportedProtocols);
        assert!(foreign.contains("/grove/join/1"), "{foreign}");
        let late = no_answer(Protocol::Turn, &F::Timeout);
        assert!(late.contains("net.request_timeout_secs"), "{late}");
    }
}
