//! The NAT laboratory's own checks (no grove): each home's NAT maps and
//! filters as labelled (port-restricted cones, symmetric NATs, an
//! address-restricted cone), over TCP and UDP; the firewalled host is seen
//! at its own address and takes no new connection; nothing dials into a
//! home; and a dropped lab leaves no namespace or process behind.

use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::lab;
use crate::support::netlab::{Host, Lab, NETNS_DIR, must};

/// Serves `listener` until `count` connections came or `within` passed:
/// tells each caller the address it is seen from; returns those addresses.
fn tell_callers_their_address(
    listener: TcpListener,
    count: usize,
    within: Duration,
) -> Vec<String> {
    listener
        .set_nonblocking(true)
        .expect("nonblocking listener");
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < count && start.elapsed() < within {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let _ = stream.write_all(peer.to_string().as_bytes());
                seen.push(peer.to_string());
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    seen
}

/// From `home`, one connection per destination, all from local port
/// `port` (SO_REUSEADDR), kept open together; returns the address each
/// destination saw. Every step times out after 5 s.
fn seen_from(lab: &Lab, home: Host, port: u16, destinations: &[&str]) -> Vec<String> {
    const CLIENT: &str = r#"
import socket, sys
port, seen, kept = int(sys.argv[1]), [], []
for dest in sys.argv[2:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.settimeout(5)
    s.connect((dest, 7000))
    seen.append(s.recv(64).decode())
    kept.append(s)
print(" ".join(seen))
"#;
    let mut cmd = lab.cmd(home, "python3");
    cmd.args(["-c", CLIENT, &port.to_string()])
        .args(destinations);
    let out = must(cmd, &format!("the python client in {home:?}"));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Answers each UDP datagram on `socket` with the address it came from,
/// until `count` came or `within` passed.
fn tell_udp_senders(socket: UdpSocket, count: usize, within: Duration) {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("udp timeout");
    let start = Instant::now();
    let mut answered = 0;
    let mut buf = [0u8; 64];
    while answered < count && start.elapsed() < within {
        if let Ok((_, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(from.to_string().as_bytes(), from);
            answered += 1;
        }
    }
}

/// A UDP server on port 7002 inside `host` telling `count` senders their
/// address.
fn udp_server(lab: &Lab, host: Host, count: usize) -> JoinHandle<()> {
    let socket = lab
        .spawn_in(host, || UdpSocket::bind("0.0.0.0:7002"))
        .join()
        .expect("bind thread")
        .expect("udp bind");
    std::thread::spawn(move || tell_udp_senders(socket, count, Duration::from_secs(30)))
}

/// From `home`, one UDP socket on local `port` sends to each destination
/// (port 7002) and returns the address each saw it at.
fn udp_seen_from(lab: &Lab, home: Host, port: u16, destinations: &[&str]) -> Vec<String> {
    const CLIENT: &str = r#"
import socket, sys
port, seen = int(sys.argv[1]), []
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", port))
s.settimeout(5)
for dest in sys.argv[2:]:
    s.sendto(b"seen?", (dest, 7002))
    seen.append(s.recv(64).decode())
print(" ".join(seen))
"#;
    let mut cmd = lab.cmd(home, "python3");
    cmd.args(["-c", CLIENT, &port.to_string()])
        .args(destinations);
    let out = must(cmd, &format!("the python UDP client in {home:?}"));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The ports a home was seen at, all at its router's address.
fn ports_at(seen: &[String], home: Host) -> Vec<String> {
    seen.iter()
        .map(|s| {
            let (ip, port) = s.split_once(':').expect("ip:port");
            assert_eq!(ip, home.router().addr(), "{home:?}: {seen:?}");
            port.to_string()
        })
        .collect()
}

#[test]
fn netlab_every_home_maps_tcp_and_udp_as_labelled_and_filters_as_labelled() {
    use crate::support::netlab::Nat;
    let Some(lab) = lab() else { return };
    let publics = [Host::Public1, Host::Public2];
    let destinations = [Host::Public1.addr(), Host::Public2.addr()];
    let homes = [
        Host::HomeC,
        Host::HomeD,
        Host::HomeE,
        Host::Firewalled,
        Host::HomeA,
        Host::HomeB,
    ];
    let servers: Vec<JoinHandle<Vec<String>>> = publics
        .iter()
        .map(|&h| {
            let listener = lab.listen(h, 7000);
            std::thread::spawn(move || {
                tell_callers_their_address(listener, 4, Duration::from_secs(30))
            })
        })
        .collect();
    let udp: Vec<JoinHandle<()>> = publics
        .iter()
        .map(|&h| udp_server(&lab, h, homes.len()))
        .collect();
    for (i, home) in homes.into_iter().enumerate() {
        let port = 41000 + i as u16;
        let mut seen = udp_seen_from(&lab, home, port, &destinations);
        if home.nat() != Some(Nat::Symmetric) {
            seen.extend(seen_from(&lab, home, port, &destinations));
        }
        let ports = ports_at(&seen, home);
        match home.nat() {
            // No NAT, or one mapping for every destination and protocol:
            // the source port itself (it was free).
            None | Some(Nat::PortRestricted) | Some(Nat::AddressRestricted) => {
                assert!(
                    ports.iter().all(|p| *p == port.to_string()),
                    "{home:?}: {seen:?}"
                )
            }
            Some(Nat::Symmetric) => {
                assert_ne!(ports[0], ports[1], "{home:?} kept one UDP port: {seen:?}")
            }
        }
    }
    for server in servers {
        server.join().expect("server thread");
    }
    for u in udp {
        u.join().expect("udp thread");
    }

    // Filtering. The address-restricted home, having sent to public 1,
    // takes a new connection from public 1 (at another port), not from a
    // host it never sent to (router C's own address); the port-restricted
    // home takes neither; nor does the firewalled host.
    let short = Duration::from_millis(1500);
    for (home, from_public1) in [
        (Host::HomeE, true),
        (Host::HomeA, false),
        (Host::Firewalled, false),
    ] {
        let _listener = lab.listen(home, 7001);
        let at = format!("{}:7001", home.router().addr());
        assert_eq!(
            lab.connect(Host::Public1, &at, short).is_ok(),
            from_public1,
            "{home:?} from public 1 (it sent there)"
        );
        assert!(
            lab.connect(Host::RouterC, &at, short).is_err(),
            "{home:?} from a host it never sent to"
        );
    }
}

#[test]
fn netlab_homes_reach_out_through_a_cone_and_a_symmetric_nat_and_nothing_dials_in() {
    let Some(lab) = lab() else { return };
    let publics = [Host::Public1, Host::Public2];
    let servers: Vec<JoinHandle<Vec<String>>> = publics
        .iter()
        .map(|&h| {
            let listener = lab.listen(h, 7000);
            std::thread::spawn(move || {
                tell_callers_their_address(listener, 2, Duration::from_secs(30))
            })
        })
        .collect();
    let destinations = [Host::Public1.addr(), Host::Public2.addr()];

    // Home A (plain masquerade): one mapping for every destination, its
    // source port kept.
    let a = seen_from(&lab, Host::HomeA, 40001, &destinations);
    assert_eq!(a, ["203.0.113.1:40001", "203.0.113.1:40001"], "home A");
    // Home B (masquerade random): its router's address, a new port per
    // destination.
    let b = seen_from(&lab, Host::HomeB, 40002, &destinations);
    assert_eq!(b.len(), 2, "{b:?}");
    let ports: Vec<&str> = b
        .iter()
        .map(|s| {
            let (ip, port) = s.split_once(':').expect("ip:port");
            assert_eq!(ip, "203.0.113.2", "home B: {b:?}");
            port
        })
        .collect();
    assert_ne!(ports[0], ports[1], "home B's NAT kept one port: {b:?}");
    // Each public host saw home A's one mapping and home B's own one.
    for (i, server) in servers.into_iter().enumerate() {
        let mut seen = server.join().expect("server thread");
        seen.sort();
        let mut expected = [a[i].clone(), b[i].clone()];
        expected.sort();
        assert_eq!(seen, expected, "what {:?} saw", publics[i]);
    }

    // Nothing dials into a home: not its LAN address (even with a route
    // to it through the router: the router forwards only replies), not
    // its router's WAN address. The listener itself is up: the router,
    // on the LAN, reaches it.
    let listener = lab.listen(Host::HomeA, 7001);
    let short = Duration::from_millis(1500);
    let inside = format!("{}:7001", Host::HomeA.addr());
    assert!(lab.connect(Host::Public1, &inside, short).is_err());
    lab.ip(
        Host::Public1,
        &["route", "add", "198.18.0.0/15", "via", Host::RouterA.addr()],
    );
    let refused = lab.connect(Host::Public1, &inside, short);
    assert!(refused.is_err(), "a public host dialed into home A");
    let at_router = format!("{}:7001", Host::RouterA.addr());
    assert!(lab.connect(Host::Public2, &at_router, short).is_err());
    assert!(lab.connect(Host::HomeB, &at_router, short).is_err());
    assert!(lab.connect(Host::HomeB, &inside, short).is_err());
    lab.connect(Host::RouterA, &inside, Duration::from_secs(5))
        .expect("the router reaches its own LAN");
    // Every call that reached the listener is in its backlog by now.
    let seen = tell_callers_their_address(listener, 10, Duration::from_secs(2));
    assert_eq!(seen.len(), 1, "calls that reached home A: {seen:?}");
    assert!(seen[0].starts_with("198.18.1.1:"), "{seen:?}");
}

#[test]
fn netlab_removes_its_namespaces_and_the_processes_inside_when_dropped() {
    let Some(lab) = lab() else { return };
    let names: Vec<String> = Host::ALL.iter().map(|h| lab.ns(*h).to_string()).collect();
    // Entered between fork and exec: inside home B once spawn returns.
    let mut sleeper = Command::new("sleep");
    sleeper.arg("600");
    lab.enter(Host::HomeB, &mut sleeper);
    let mut child = sleeper.spawn().expect("sleep in home B");
    drop(lab);
    // Killed by the drop: it exits within a moment, not after 600 s.
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the process in home B survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for name in names {
        assert!(
            !PathBuf::from(NETNS_DIR).join(&name).exists(),
            "{name} left behind"
        );
    }
}
