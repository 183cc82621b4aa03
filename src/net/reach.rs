//! Reachability: whether other hosts can dial this node, judged from what
//! its peers report (identify's observed address) and from the inbound
//! connections it took. A pure core: the event loop feeds it observations
//! and asks it for a [`Judgement`].
//!
//! A peer that sees this node at an address the node does not listen on
//! is looking through a NAT. A peer that sees it at its own listen address
//! (same IP, same port), with that IP not a private-use one, and an
//! inbound direct connection from a non-loopback host taken, make the node
//! public. Only private-use ranges count as private (RFC 1918, the shared
//! 100.64.0.0/10, loopback, link-local, and the IPv6 counterparts): the
//! documentation and benchmarking ranges the NAT laboratory uses are
//! "possibly public", as on the internet.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use libp2p::multiaddr::Protocol;
use libp2p::multiaddr::Protocol as Addr;
use libp2p::swarm::ConnectionId;
use libp2p::{Multiaddr, PeerId};

/// What the operator configured (`net.reachability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReachabilityMode {
    /// Judged from peers' observations.
    Auto,
    /// Dialable at its listen (or external) addresses: it never reserves
    /// relay slots and serves as a relay.
    Public,
    /// Not dialable: it always reserves relay slots.
    Private,
}

impl std::str::FromStr for ReachabilityMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ReachabilityMode::Auto),
            "public" => Ok(ReachabilityMode::Public),
            "private" => Ok(ReachabilityMode::Private),
            other => Err(format!("`{other}` is not one of auto, public, private")),
        }
    }
}

/// Whether other hosts can dial this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reachability {
    Public,
    Private,
    Unknown,
}

impl Reachability {
    pub fn as_str(self) -> &'static str {
        match self {
            Reachability::Public => "public",
            Reachability::Private => "private",
            Reachability::Unknown => "unknown",
        }
    }
}

/// The verdict with its reason, and the addresses others reach this node at
/// when it is public.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub reachability: Reachability,
    pub why: String,
    pub public: Vec<Multiaddr>,
}

/// Observations so far.
#[derive(Debug, Clone)]
pub struct Reach {
    mode: ReachabilityMode,
    /// The addresses this node listens on (each interface's, for an
    /// unspecified listen address).
    listen: BTreeSet<Multiaddr>,
    /// The address each peer saw this node at, per direct connection:
    /// the latest observation over each. A peer may hold two connections
    /// from two local ports (a second dial to an address already connected
    /// cannot reuse the listen port), and only beside each other do the
    /// two tell a new mapping per port from a new mapping per destination.
    observed: BTreeMap<PeerId, BTreeMap<ConnectionId, Multiaddr>>,
    /// A remote host (not loopback) dialled this node directly.
    inbound_direct: bool,
    /// `net.external_addresses`: the operator's word for where it is.
    external: Vec<Multiaddr>,
}

impl Reach {
    pub fn new(mode: ReachabilityMode, external: Vec<Multiaddr>) -> Reach {
        Reach {
            mode,
            listen: BTreeSet::new(),
            observed: BTreeMap::new(),
            inbound_direct: false,
            external,
        }
    }

    pub fn listening(&mut self, addr: Multiaddr) {
        if !is_relayed(&addr) {
            self.listen.insert(addr);
        }
    }

    pub fn stopped_listening(&mut self, addr: &Multiaddr) {
        self.listen.remove(addr);
    }

    /// `peer` saw this node at `observed` (identify); observations over a
    /// relayed connection (a circuit address, or only `/p2p/<id>`) say
    /// nothing about this node's own address and are ignored.
    pub fn observed(&mut self, peer: PeerId, connection: ConnectionId, observed: Multiaddr) {
        if !is_relayed(&observed) && ip_of(&observed).is_some() {
            self.observed
                .entry(peer)
                .or_default()
                .insert(connection, observed);
        }
    }

    /// `connection` to `peer` closed: what was seen over it is gone.
    pub fn closed(&mut self, peer: &PeerId, connection: ConnectionId) {
        if let Some(seen) = self.observed.get_mut(peer) {
            seen.remove(&connection);
            if seen.is_empty() {
                self.observed.remove(peer);
            }
        }
    }

    /// A direct inbound connection arrived from `remote`.
    pub fn inbound(&mut self, remote: &Multiaddr) {
        if !is_relayed(remote) && ip_of(remote).is_some_and(|ip| !ip.is_loopback()) {
            self.inbound_direct = true;
        }
    }

    pub fn listen_addresses(&self) -> Vec<Multiaddr> {
        self.listen.iter().cloned().collect()
    }

    /// How this node's NAT maps its address, from what each peer sees over
    /// its connections.
    pub fn mapping(&self) -> Mapping {
        mapping_of(self.observed.values().map(|seen| seen.values()))
    }

    /// Distinct observed addresses.
    pub fn observed_addresses(&self) -> Vec<Multiaddr> {
        let set: BTreeSet<&Multiaddr> = self.observed.values().flat_map(|s| s.values()).collect();
        set.into_iter().cloned().collect()
    }

    /// Seen at an address it listens on: same IP, same transport and port.
    fn is_own(&self, addr: &Multiaddr) -> bool {
        let (Some(ip), Some(port)) = (ip_of(addr), port_of(addr)) else {
            return false;
        };
        self.listen
            .iter()
            .any(|l| ip_of(l) == Some(ip) && port_of(l) == Some(port))
    }

    pub fn judge(&self) -> Judgement {
        match self.mode {
            ReachabilityMode::Public => {
                let public = if self.external.is_empty() {
                    self.listen
                        .iter()
                        .filter(|a| ip_of(a).is_some_and(|ip| !ip.is_loopback()))
                        .cloned()
                        .collect()
                } else {
                    self.external.clone()
                };
                return Judgement {
                    reachability: Reachability::Public,
                    why: "configured: net.reachability = \"public\"".into(),
                    public,
                };
            }
            ReachabilityMode::Private => {
                return Judgement {
                    reachability: Reachability::Private,
                    why: "configured: net.reachability = \"private\"".into(),
                    public: Vec::new(),
                };
            }
            ReachabilityMode::Auto => {}
        }
        let own_public: Vec<Multiaddr> = self
            .observed_addresses()
            .into_iter()
            .filter(|a| self.is_own(a) && ip_of(a).is_some_and(|ip| !is_private(ip)))
            .collect();
        let natted: Vec<Multiaddr> = self
            .observed_addresses()
            .into_iter()
            .filter(|a| !self.is_own(a) && ip_of(a).is_some_and(|ip| !ip.is_loopback()))
            .collect();
        if !own_public.is_empty() && self.inbound_direct {
            return Judgement {
                reachability: Reachability::Public,
                why: format!(
                    "peers see this node at its own address {} and another host dialled it",
                    super::address_list(&own_public)
                ),
                public: own_public,
            };
        }
        if let Some(seen) = natted.first() {
            return Judgement {
                reachability: Reachability::Private,
                why: format!(
                    "peers see this node at {seen}, an address it does not listen on: it is behind a NAT"
                ),
                public: Vec::new(),
            };
        }
        if !own_public.is_empty() {
            return Judgement {
                reachability: Reachability::Unknown,
                why: format!(
                    "peers see this node at its own address {}, but no other host has dialled it yet",
                    super::address_list(&own_public)
                ),
                public: Vec::new(),
            };
        }
        let why = if self.observed.is_empty() {
            "no peer has reported the address it sees this node at yet".to_string()
        } else {
            format!(
                "peers see this node only at loopback or private-use addresses ({})",
                super::address_list(&self.observed_addresses())
            )
        };
        Judgement {
            reachability: Reachability::Unknown,
            why,
            public: Vec::new(),
        }
    }
}

/// True for an address through a relay (`…/p2p-circuit…`).
pub fn is_relayed(addr: &Multiaddr) -> bool {
    addr.iter().any(|p| matches!(p, Protocol::P2pCircuit))
}

/// Circuits to `peer` through the relays this node holds a reservation on
/// (its own relayed addresses, `…/p2p/RELAY/p2p-circuit`, with or without
/// its own id after them). A member behind a NAT reserves on the relays its
/// config names, as this node does; when the relay its announced address
/// goes through is gone, its announcement of the one left cannot reach
/// this node (that relay was their only path), but a circuit through a
/// relay both hold still can.
pub fn circuits_through(own_relayed: &[Multiaddr], peer: PeerId) -> Vec<Multiaddr> {
    let mut circuits: Vec<Multiaddr> = Vec::new();
    for addr in own_relayed {
        let parts: Vec<Protocol> = addr.iter().collect();
        let Some(end) = parts.iter().position(|p| matches!(p, Protocol::P2pCircuit)) else {
            continue;
        };
        let circuit: Multiaddr = parts[..=end].iter().cloned().collect();
        let circuit = circuit.with(Protocol::P2p(peer));
        if !circuits.contains(&circuit) {
            circuits.push(circuit);
        }
    }
    circuits
}

pub fn ip_of(addr: &Multiaddr) -> Option<IpAddr> {
    addr.iter().find_map(|p| match p {
        Protocol::Ip4(ip) => Some(IpAddr::V4(ip)),
        Protocol::Ip6(ip) => Some(IpAddr::V6(ip)),
        _ => None,
    })
}

pub fn tcp_port(addr: &Multiaddr) -> Option<u16> {
    addr.iter().find_map(|p| match p {
        Protocol::Tcp(port) => Some(port),
        _ => None,
    })
}

/// Private-use, shared, loopback, link-local and unspecified addresses:
/// never reachable from the internet at large.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_private(IpAddr::V4(v4)))
        }
    }
}

/// How a NAT maps one local address to public ones, as observers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// One public port for every destination (a cone NAT, or no NAT): a
    /// punch can get through.
    Independent,
    /// A new public port per destination (a symmetric NAT): the port a
    /// peer was told is not the one that dials it.
    Dependent,
    /// Too few observations to tell.
    Unknown,
}

impl Mapping {
    pub fn as_str(self) -> &'static str {
        match self {
            Mapping::Independent => "endpoint-independent",
            Mapping::Dependent => "endpoint-dependent (symmetric)",
            Mapping::Unknown => "unknown",
        }
    }
}

/// The mapping that `observers` (per observer, the public addresses it saw
/// one host at) show. One IP and port seen twice over (by two observers, or
/// over two transports) means one mapping for all, and it outweighs any
/// other port, which a dial from another local port explains: a cone maps
/// each local port once, and a symmetric NAT never gives two destinations
/// one port. One IP at two ports, seen by two observers (or over two
/// transports) and no port twice, means a new port per destination; two
/// ports from one observer over one transport are two local ports and say
/// nothing. Transports are pooled: a node listens on one port number for
/// TCP and QUIC, and a NAT that keeps ports keeps it for both. Loopback and
/// relayed addresses say nothing.
pub fn mapping_of<'a, Seen>(observers: impl IntoIterator<Item = Seen>) -> Mapping
where
    Seen: IntoIterator<Item = &'a Multiaddr>,
{
    // IP → port → the (observer, transport) pairs that saw it.
    let mut seen: BTreeMap<IpAddr, BTreeMap<u16, BTreeSet<(usize, Transport)>>> = BTreeMap::new();
    for (observer, addrs) in observers.into_iter().enumerate() {
        for addr in addrs {
            let (Some(ip), Some((transport, port))) = (ip_of(addr), port_of(addr)) else {
                continue;
            };
            if ip.is_loopback() || is_relayed(addr) {
                continue;
            }
            let by = seen.entry(ip).or_default().entry(port).or_default();
            by.insert((observer, transport));
        }
    }
    let ports = || seen.values();
    if ports().flat_map(|p| p.values()).any(|by| by.len() > 1) {
        Mapping::Independent
    } else if ports()
        .any(|p| p.len() > 1 && p.values().flatten().collect::<BTreeSet<_>>().len() > 1)
    {
        Mapping::Dependent
    } else {
        Mapping::Unknown
    }
}

/// The transport a direct address is dialled over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    Tcp,
    Quic,
}

impl Transport {
    pub fn of(addr: &Multiaddr) -> Option<Transport> {
        port_of(addr).map(|(t, _)| t)
    }
}

/// The transport and port of a direct address.
pub fn port_of(addr: &Multiaddr) -> Option<(Transport, u16)> {
    let mut udp = None;
    for p in addr.iter() {
        match p {
            Addr::Tcp(port) => return Some((Transport::Tcp, port)),
            Addr::Udp(port) => udp = Some(port),
            Addr::QuicV1 => return udp.map(|port| (Transport::Quic, port)),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    fn peer() -> PeerId {
        PeerId::random()
    }

    fn conn(n: usize) -> ConnectionId {
        ConnectionId::new_unchecked(n)
    }

    #[test]
    fn a_member_is_dialled_through_every_relay_this_node_holds() {
        let (relay1, relay2, me, member) = (peer(), peer(), peer(), peer());
        let own = [
            a(&format!(
                "/ip4/203.0.113.10/tcp/4100/p2p/{relay1}/p2p-circuit"
            )),
            a(&format!(
                "/ip4/203.0.113.20/tcp/4100/p2p/{relay2}/p2p-circuit/p2p/{me}"
            )),
            a("/ip4/198.51.100.7/tcp/4100"),
        ];
        assert_eq!(
            circuits_through(&own, member),
            [
                a(&format!(
                    "/ip4/203.0.113.10/tcp/4100/p2p/{relay1}/p2p-circuit/p2p/{member}"
                )),
                a(&format!(
                    "/ip4/203.0.113.20/tcp/4100/p2p/{relay2}/p2p-circuit/p2p/{member}"
                )),
            ]
        );
        assert!(circuits_through(&[], member).is_empty());
    }

    #[test]
    fn a_cone_seen_over_a_second_connection_from_another_port_is_still_a_cone() {
        // The NAT laboratory's port-restricted cone: the second dial to a
        // relay could not reuse the listen port, so that relay saw a new
        // mapping; the other relay saw the first one again.
        let mut r = Reach::new(ReachabilityMode::Auto, vec![]);
        let (relay1, relay2) = (peer(), peer());
        r.observed(relay1, conn(1), a("/ip4/203.0.113.1/tcp/46980"));
        r.observed(relay1, conn(2), a("/ip4/203.0.113.1/tcp/60470"));
        r.observed(relay2, conn(3), a("/ip4/203.0.113.1/tcp/46980"));
        assert_eq!(r.mapping(), Mapping::Independent);
        // One observer's two connections alone tell nothing.
        r.closed(&relay2, conn(3));
        assert_eq!(r.mapping(), Mapping::Unknown);
        assert_eq!(r.observed_addresses().len(), 2);
        r.closed(&relay1, conn(1));
        r.closed(&relay1, conn(2));
        assert!(r.observed_addresses().is_empty());
    }

    #[test]
    fn a_symmetric_nat_gives_each_observer_its_own_port() {
        let mut r = Reach::new(ReachabilityMode::Auto, vec![]);
        r.observed(peer(), conn(1), a("/ip4/203.0.113.2/tcp/40001"));
        r.observed(peer(), conn(2), a("/ip4/203.0.113.2/tcp/51234"));
        assert_eq!(r.mapping(), Mapping::Dependent);
    }

    #[test]
    fn only_private_use_ranges_are_private() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.1.1",
            "fd00::1",
            "fe80::1",
            "::1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "198.18.1.2",
            "198.51.100.7",
            "203.0.113.10",
            "8.8.8.8",
            "100.128.0.1",
            "2001:db8::1",
        ] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_node_seen_at_a_foreign_address_is_behind_a_nat() {
        let mut r = Reach::new(ReachabilityMode::Auto, vec![]);
        r.listening(a("/ip4/198.18.1.2/tcp/4100"));
        r.listening(a("/ip4/127.0.0.1/tcp/4100"));
        assert_eq!(r.judge().reachability, Reachability::Unknown);
        r.observed(peer(), conn(0), a("/ip4/203.0.113.1/tcp/4100"));
        let j = r.judge();
        assert_eq!(j.reachability, Reachability::Private, "{}", j.why);
        assert!(j.why.contains("203.0.113.1"));
    }

    #[test]
    fn a_node_seen_at_its_own_address_and_dialled_is_public() {
        let mut r = Reach::new(ReachabilityMode::Auto, vec![]);
        r.listening(a("/ip4/203.0.113.10/tcp/4100"));
        r.observed(peer(), conn(0), a("/ip4/203.0.113.10/tcp/4100"));
        assert_eq!(
            r.judge().reachability,
            Reachability::Unknown,
            "not dialled yet"
        );
        r.inbound(&a("/ip4/127.0.0.1/tcp/5555"));
        assert_eq!(
            r.judge().reachability,
            Reachability::Unknown,
            "loopback does not count"
        );
        r.inbound(&a("/ip4/203.0.113.1/tcp/4100"));
        let j = r.judge();
        assert_eq!(j.reachability, Reachability::Public, "{}", j.why);
        assert_eq!(j.public, vec![a("/ip4/203.0.113.10/tcp/4100")]);
    }

    #[test]
    fn loopback_and_private_lan_observations_leave_it_unknown() {
        let mut r = Reach::new(ReachabilityMode::Auto, vec![]);
        r.listening(a("/ip4/127.0.0.1/tcp/4100"));
        r.observed(peer(), conn(0), a("/ip4/127.0.0.1/tcp/4100"));
        r.inbound(&a("/ip4/127.0.0.1/tcp/4101"));
        assert_eq!(r.judge().reachability, Reachability::Unknown);
        let mut lan = Reach::new(ReachabilityMode::Auto, vec![]);
        lan.listening(a("/ip4/192.168.1.5/tcp/4100"));
        lan.observed(peer(), conn(0), a("/ip4/192.168.1.5/tcp/4100"));
        lan.inbound(&a("/ip4/192.168.1.6/tcp/4100"));
        assert_eq!(lan.judge().reachability, Reachability::Unknown);
    }

    #[test]
    fn relayed_observations_are_ignored_and_configured_modes_win() {
        let mut r = Reach::new(ReachabilityMode::Auto, vec![]);
        r.listening(a("/ip4/198.18.2.2/tcp/4100"));
        r.observed(peer(), conn(0), a("/ip4/203.0.113.10/tcp/4100/p2p/12D3KooWRBhwfeP2Y4TCx1SM6s9rUoHhR5STiGwxBhgFRcw3UERE/p2p-circuit"));
        r.observed(
            peer(),
            conn(1),
            a("/p2p/12D3KooWRBhwfeP2Y4TCx1SM6s9rUoHhR5STiGwxBhgFRcw3UERE"),
        );
        assert_eq!(r.judge().reachability, Reachability::Unknown);
        assert!(r.observed_addresses().is_empty());
        let mut p = Reach::new(ReachabilityMode::Private, vec![]);
        p.listening(a("/ip4/203.0.113.10/tcp/4100"));
        assert_eq!(p.judge().reachability, Reachability::Private);
        let mut q = Reach::new(ReachabilityMode::Public, vec![]);
        q.listening(a("/ip4/203.0.113.10/tcp/4100"));
        q.listening(a("/ip4/127.0.0.1/tcp/4100"));
        assert_eq!(q.judge().public, vec![a("/ip4/203.0.113.10/tcp/4100")]);
    }
}
