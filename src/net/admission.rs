//! Admission control at the connection level: roster members always get
//! in; peers that are not members (joiners and strangers) share a smaller
//! set of slots, in all and per IP address, and must send a join request
//! within a short window. When their slots are full the longest-idle
//! stranger without a join in progress is closed to make room, so a real
//! joiner gets in even from a flood's own address. Handshakes under way are
//! capped in all and per address. A connection whose peer gained or lost
//! membership since it was established is closed (see [`super::gate`]).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use libp2p::PeerId;
use libp2p::core::transport::PortUse;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::swarm::{
    CloseConnection, ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandler,
    THandlerInEvent, THandlerOutEvent, ToSwarm, dummy,
};

use super::AdmissionLimits;
use super::gate::Gate;
use super::reach::ip_of;

/// How long a joiner's connection stays after its last join call, in
/// join windows (its polls come at most ten seconds apart).
const JOINER_LEASE_WINDOWS: u32 = 6;
/// A connection whose peer just became a member is closed after this
/// grace, so the answer that welcomed it is delivered first.
const PROMOTION_GRACE: Duration = Duration::from_secs(3);
/// How often expired windows are swept.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// Why admission refused a connection (the swarm reports it as the
/// connection's error).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("too many handshakes under way ({0} at most)")]
    Pending(usize),
    #[error("too many handshakes under way from {ip} ({cap} at most)")]
    PendingFromIp { ip: IpAddr, cap: usize },
    #[error("every slot for non-members is held by a join in progress")]
    StrangersFull,
}

#[derive(Debug)]
struct Stranger {
    peer: PeerId,
    ip: Option<IpAddr>,
    /// When it connected, or last made a join call.
    active: Instant,
    joining: bool,
}

impl Stranger {
    fn expires(&self, window: Duration) -> Instant {
        if self.joining {
            self.active + window * JOINER_LEASE_WINDOWS
        } else {
            self.active + window
        }
    }
}

/// How many connections admission closed or refused, by cause.
#[derive(Debug, Default, Clone, Copy)]
pub struct AdmissionCounts {
    pub refused_pending: u64,
    pub refused_full: u64,
    pub evicted: u64,
    pub window_closed: u64,
    pub membership_changed: u64,
}

pub struct Admission {
    limits: AdmissionLimits,
    gate: Gate,
    pending: HashMap<ConnectionId, Option<IpAddr>>,
    strangers: HashMap<ConnectionId, Stranger>,
    /// Every established connection: its peer and whether the gate
    /// admitted it then.
    established: HashMap<ConnectionId, (PeerId, bool)>,
    /// Connections to close once their instant has passed.
    closing: Vec<(Instant, PeerId, ConnectionId)>,
    ready: VecDeque<(PeerId, ConnectionId)>,
    sweep: tokio::time::Interval,
    pub counts: AdmissionCounts,
    /// Strangers using this node's relay (a reservation, or a circuit
    /// open): how many such uses each has. Their connections carry the
    /// relay and are not closed by the join window while used.
    relaying: HashMap<PeerId, u32>,
}

impl Admission {
    pub fn new(limits: AdmissionLimits, gate: Gate) -> Admission {
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Admission {
            limits,
            gate,
            pending: HashMap::new(),
            strangers: HashMap::new(),
            established: HashMap::new(),
            closing: Vec::new(),
            ready: VecDeque::new(),
            sweep,
            counts: AdmissionCounts::default(),
            relaying: HashMap::new(),
        }
    }

    /// `peer` made a join call: its connections are a join in progress.
    pub fn join_activity(&mut self, peer: &PeerId) {
        let now = Instant::now();
        for s in self.strangers.values_mut().filter(|s| s.peer == *peer) {
            s.active = now;
            s.joining = true;
        }
    }

    /// `peer` began (`true`) or ended a use of this node's relay (a
    /// reservation or a circuit); its window starts afresh when its last
    /// use ends.
    pub fn relay_use(&mut self, peer: &PeerId, begins: bool) {
        let uses = self.relaying.entry(*peer).or_default();
        if begins {
            *uses += 1;
            return;
        }
        *uses = uses.saturating_sub(1);
        if *uses == 0 {
            self.relaying.remove(peer);
            let now = Instant::now();
            for s in self.strangers.values_mut().filter(|s| s.peer == *peer) {
                s.active = now;
            }
        }
    }

    /// The peers with a live connection the gate admitted when it was
    /// established: the members-only protocols run on it. A new member's
    /// connection from before its add is not one of them until it is
    /// replaced (see [`Admission::roster_changed`]).
    pub fn admitted_peers(&self) -> std::collections::HashSet<PeerId> {
        self.established
            .values()
            .filter(|(_, admitted)| *admitted)
            .map(|(peer, _)| *peer)
            .collect()
    }

    /// The gate's roster changed: connections decided under the old one
    /// whose peer's standing changed are closed (a new member's after a
    /// short grace, so the welcome it is being sent arrives first).
    pub fn roster_changed(&mut self) {
        let now = Instant::now();
        for (conn, (peer, admitted)) in &self.established {
            if *admitted == self.gate.admits(peer) {
                continue;
            }
            let at = if self.gate.admits(peer) {
                now + PROMOTION_GRACE
            } else {
                now
            };
            if !self.closing.iter().any(|(_, _, c)| c == conn) {
                self.closing.push((at, *peer, *conn));
                self.counts.membership_changed += 1;
            }
        }
        // A stranger that became a member holds no stranger slot.
        let gate = &self.gate;
        self.strangers.retain(|_, s| !gate.is_member(&s.peer));
    }

    /// The longest-idle stranger without a join in progress, among those
    /// from `ip` when given.
    fn eviction_candidate(&self, ip: Option<Option<IpAddr>>) -> Option<ConnectionId> {
        self.strangers
            .iter()
            .filter(|(_, s)| !s.joining && ip.is_none_or(|ip| s.ip == ip))
            .min_by_key(|(_, s)| s.active)
            .map(|(c, _)| *c)
    }

    fn evict(&mut self, conn: ConnectionId) {
        if let Some(s) = self.strangers.remove(&conn) {
            self.counts.evicted += 1;
            self.ready.push_back((s.peer, conn));
        }
    }

    fn admit_stranger(
        &mut self,
        conn: ConnectionId,
        peer: PeerId,
        ip: Option<IpAddr>,
    ) -> Result<(), ConnectionDenied> {
        let from_ip = self.strangers.values().filter(|s| s.ip == ip).count();
        if from_ip >= self.limits.max_strangers_per_ip {
            match self.eviction_candidate(Some(ip)) {
                Some(victim) => self.evict(victim),
                None => {
                    self.counts.refused_full += 1;
                    return Err(ConnectionDenied::new(Refused::StrangersFull));
                }
            }
        }
        if self.strangers.len() >= self.limits.max_strangers {
            match self.eviction_candidate(None) {
                Some(victim) => self.evict(victim),
                None => {
                    self.counts.refused_full += 1;
                    return Err(ConnectionDenied::new(Refused::StrangersFull));
                }
            }
        }
        self.strangers.insert(
            conn,
            Stranger {
                peer,
                ip,
                active: Instant::now(),
                joining: false,
            },
        );
        Ok(())
    }

    fn sweep_expired(&mut self) {
        let now = Instant::now();
        let window = self.limits.join_window;
        let relaying = &self.relaying;
        let expired: Vec<ConnectionId> = self
            .strangers
            .iter()
            .filter(|(_, s)| s.expires(window) <= now && !relaying.contains_key(&s.peer))
            .map(|(c, _)| *c)
            .collect();
        for conn in expired {
            if let Some(s) = self.strangers.remove(&conn) {
                self.counts.window_closed += 1;
                self.ready.push_back((s.peer, conn));
            }
        }
        let (due, later): (Vec<_>, Vec<_>) =
            self.closing.drain(..).partition(|(at, ..)| *at <= now);
        self.closing = later;
        self.ready
            .extend(due.into_iter().map(|(_, peer, conn)| (peer, conn)));
    }
}

impl NetworkBehaviour for Admission {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = std::convert::Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        _local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        let ip = ip_of(remote_addr);
        if self.pending.len() >= self.limits.max_pending {
            self.counts.refused_pending += 1;
            return Err(ConnectionDenied::new(Refused::Pending(
                self.limits.max_pending,
            )));
        }
        if let Some(addr) = ip {
            let from_ip = self.pending.values().filter(|p| **p == ip).count();
            if from_ip >= self.limits.max_pending_per_ip {
                self.counts.refused_pending += 1;
                return Err(ConnectionDenied::new(Refused::PendingFromIp {
                    ip: addr,
                    cap: self.limits.max_pending_per_ip,
                }));
            }
        }
        self.pending.insert(connection_id, ip);
        Ok(())
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        peer: PeerId,
        _local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.pending.remove(&connection_id);
        if !self.gate.is_member(&peer) {
            self.admit_stranger(connection_id, peer, ip_of(remote_addr))?;
        }
        self.established
            .insert(connection_id, (peer, self.gate.admits(&peer)));
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        peer: PeerId,
        _addr: &Multiaddr,
        _role_override: Endpoint,
        _port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        // This node chose to dial (a member, or the inviter it joins): no
        // stranger slot, no window.
        self.established
            .insert(connection_id, (peer, self.gate.admits(&peer)));
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ConnectionClosed(e) => {
                self.strangers.remove(&e.connection_id);
                self.established.remove(&e.connection_id);
                self.closing.retain(|(_, _, c)| *c != e.connection_id);
            }
            FromSwarm::ListenFailure(e) => {
                self.pending.remove(&e.connection_id);
                self.strangers.remove(&e.connection_id);
                self.established.remove(&e.connection_id);
            }
            _ => {}
        }
    }

    fn on_connection_handler_event(
        &mut self,
        _peer_id: PeerId,
        _connection_id: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        match event {}
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        while self.sweep.poll_tick(cx).is_ready() {
            self.sweep_expired();
        }
        match self.ready.pop_front() {
            Some((peer_id, conn)) => Poll::Ready(ToSwarm::CloseConnection {
                peer_id,
                connection: CloseConnection::One(conn),
            }),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> AdmissionLimits {
        AdmissionLimits {
            max_strangers: 4,
            max_strangers_per_ip: 2,
            max_pending: 8,
            max_pending_per_ip: 3,
            join_window: Duration::from_secs(10),
        }
    }

    fn addr(ip: &str) -> Multiaddr {
        format!("/ip4/{ip}/tcp/4000").parse().unwrap()
    }

    fn closed(a: &mut Admission) -> Vec<ConnectionId> {
        a.ready.drain(..).map(|(_, c)| c).collect()
    }

    #[tokio::test]
    async fn members_always_get_in_and_strangers_are_evicted_longest_idle_first() {
        let gate = Gate::default();
        let member = PeerId::random();
        gate.set_members([member]);
        let mut a = Admission::new(limits(), gate);
        let local = addr("127.0.0.1");
        let mut conns = Vec::new();
        // Two strangers from one address fill its slots; the third evicts
        // the oldest.
        for _ in 0..3 {
            let c = ConnectionId::new_unchecked(conns.len() + 1);
            a.handle_established_inbound_connection(
                c,
                PeerId::random(),
                &local,
                &addr("198.51.100.1"),
            )
            .unwrap();
            conns.push(c);
        }
        assert_eq!(closed(&mut a), vec![conns[0]]);
        // A stranger with a join in progress is never evicted.
        let joiner = PeerId::random();
        let j = ConnectionId::new_unchecked(100);
        a.handle_established_inbound_connection(j, joiner, &local, &addr("198.51.100.2"))
            .unwrap();
        a.join_activity(&joiner);
        for i in 0..6 {
            let c = ConnectionId::new_unchecked(200 + i);
            a.handle_established_inbound_connection(
                c,
                PeerId::random(),
                &local,
                &addr("198.51.100.3"),
            )
            .unwrap();
        }
        assert!(a.strangers.contains_key(&j));
        assert!(a.strangers.len() <= 4);
        // Members need no stranger slot, however many strangers there are.
        for i in 0..10 {
            a.handle_established_inbound_connection(
                ConnectionId::new_unchecked(300 + i),
                member,
                &local,
                &addr("198.51.100.3"),
            )
            .unwrap();
        }
        // When every stranger slot is a join in progress, a new stranger is refused.
        let mut b = Admission::new(limits(), Gate::default());
        for i in 0..4 {
            let p = PeerId::random();
            let ip = format!("203.0.113.{i}");
            b.handle_established_inbound_connection(
                ConnectionId::new_unchecked(i),
                p,
                &local,
                &addr(&ip),
            )
            .unwrap();
            b.join_activity(&p);
        }
        assert!(
            b.handle_established_inbound_connection(
                ConnectionId::new_unchecked(9),
                PeerId::random(),
                &local,
                &addr("203.0.113.9")
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn handshakes_are_capped_in_all_and_per_address() {
        let mut a = Admission::new(limits(), Gate::default());
        let local = addr("127.0.0.1");
        for i in 0..3 {
            a.handle_pending_inbound_connection(
                ConnectionId::new_unchecked(i),
                &local,
                &addr("198.18.0.1"),
            )
            .unwrap();
        }
        assert!(
            a.handle_pending_inbound_connection(
                ConnectionId::new_unchecked(3),
                &local,
                &addr("198.18.0.1")
            )
            .is_err()
        );
        for i in 4..9 {
            a.handle_pending_inbound_connection(
                ConnectionId::new_unchecked(i),
                &local,
                &addr(&format!("198.18.0.{i}")),
            )
            .unwrap();
        }
        assert!(
            a.handle_pending_inbound_connection(
                ConnectionId::new_unchecked(10),
                &local,
                &addr("198.18.1.1")
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn a_stranger_without_a_join_is_closed_after_the_window_and_membership_changes_close() {
        let mut l = limits();
        l.join_window = Duration::from_millis(1);
        let gate = Gate::default();
        gate.set_members([]);
        let mut a = Admission::new(l, gate.clone());
        let local = addr("127.0.0.1");
        let stranger = PeerId::random();
        let c = ConnectionId::new_unchecked(1);
        a.handle_established_inbound_connection(c, stranger, &local, &addr("198.51.100.7"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        a.sweep_expired();
        assert_eq!(closed(&mut a), vec![c]);
        // A member removed from the roster loses its connection at once.
        let member = PeerId::random();
        gate.set_members([member]);
        let m = ConnectionId::new_unchecked(2);
        a.handle_established_inbound_connection(m, member, &local, &addr("198.51.100.8"))
            .unwrap();
        gate.set_members([]);
        a.roster_changed();
        a.sweep_expired();
        assert_eq!(closed(&mut a), vec![m]);
    }
}
