//! A NAT laboratory built from Linux network namespaces that the test
//! creates and always removes: a "wan" bridge (203.0.113.0/24) with two
//! public hosts and two home routers, each router masquerading its own home
//! LAN (198.18.1.0/24 behind plain `masquerade`, a port-restricted cone;
//! 198.18.2.0/24 behind `masquerade random`, symmetric). Nothing here
//! touches the host's own interfaces, routes or firewall: every link is
//! created directly inside the lab's namespaces (veth pairs with both ends
//! there), `ip_forward` and nftables are set in the router namespaces only,
//! and every address is a documentation or benchmarking one.

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::skip;

/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";
/// Every lab namespace is named `glab<pid>-<n><role>`: the pid tells a
/// later run whether the run that made it is still alive.
const PREFIX: &str = "glab";

/// One machine (namespace) of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// The segment itself: a bridge joining the public hosts and the
    /// routers' WAN sides.
    Wan,
    /// Publicly reachable host 203.0.113.10.
    Public1,
    /// Publicly reachable host 203.0.113.11.
    Public2,
    /// Home A's router: 203.0.113.1 on the WAN, 198.18.1.1 on its LAN,
    /// plain `masquerade` (port-restricted cone).
    RouterA,
    /// Home B's router: 203.0.113.2 on the WAN, 198.18.2.1 on its LAN,
    /// `masquerade random` (symmetric: a new port per destination).
    RouterB,
    /// The host in home A: 198.18.1.10, default route via its router.
    HomeA,
    /// The host in home B: 198.18.2.10, default route via its router.
    HomeB,
}

impl Host {
    pub const ALL: [Host; 7] = [
        Host::Wan,
        Host::Public1,
        Host::Public2,
        Host::RouterA,
        Host::RouterB,
        Host::HomeA,
        Host::HomeB,
    ];

    fn role(self) -> &'static str {
        match self {
            Host::Wan => "wan",
            Host::Public1 => "p1",
            Host::Public2 => "p2",
            Host::RouterA => "ra",
            Host::RouterB => "rb",
            Host::HomeA => "ha",
            Host::HomeB => "hb",
        }
    }

    /// The host's own address (a router's is its WAN side); the WAN
    /// bridge has none.
    pub fn addr(self) -> &'static str {
        match self {
            Host::Wan => "",
            Host::Public1 => "203.0.113.10",
            Host::Public2 => "203.0.113.11",
            Host::RouterA => "203.0.113.1",
            Host::RouterB => "203.0.113.2",
            Host::HomeA => "198.18.1.10",
            Host::HomeB => "198.18.2.10",
        }
    }
}

/// The routers: (router, its home, LAN prefix, LAN gateway, masquerade
/// statement).
const HOMES: [(Host, Host, &str, &str, &str); 2] = [
    (
        Host::RouterA,
        Host::HomeA,
        "198.18.1",
        "198.18.1.1",
        "masquerade",
    ),
    (
        Host::RouterB,
        Host::HomeB,
        "198.18.2",
        "198.18.2.1",
        "masquerade random",
    ),
];

/// The running lab; dropping it kills what runs inside its namespaces and
/// deletes them, also when the test panicked.
pub struct Lab {
    names: Vec<(Host, String)>,
}

static LABS_IN_THIS_PROCESS: AtomicUsize = AtomicUsize::new(0);

impl Lab {
    /// Builds the whole topology, or `None` (after [`skip`]: a failure
    /// under GROVE_TEST_STRICT=1) where namespaces cannot be made here.
    pub fn new() -> Option<Lab> {
        for (tool, flag) in [("ip", "-V"), ("nft", "--version")] {
            let found = Command::new(tool)
                .arg(flag)
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                skip(&format!(
                    "the NAT laboratory needs `{tool}` (iproute2, nftables)"
                ));
                return None;
            }
        }
        remove_leftovers();
        let n = LABS_IN_THIS_PROCESS.fetch_add(1, Ordering::SeqCst);
        let stem = format!("{PREFIX}{}-{n}", std::process::id());
        let mut lab = Lab { names: Vec::new() };
        for host in Host::ALL {
            let name = format!("{stem}{}", host.role());
            let out = Command::new("ip")
                .args(["netns", "add", &name])
                .output()
                .expect("run ip");
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                if lab.names.is_empty() {
                    skip(&format!("cannot create network namespaces here: {why}"));
                    return None;
                }
                panic!("ip netns add {name}: {why}");
            }
            lab.names.push((host, name));
            lab.ip(host, &["link", "set", "lo", "up"]);
        }
        lab.wire();
        Some(lab)
    }

    /// The namespace's name.
    pub fn ns(&self, host: Host) -> &str {
        self.names
            .iter()
            .find(|(h, _)| *h == host)
            .map(|(_, n)| n.as_str())
            .expect("every host has a namespace")
    }

    /// The namespace's file (for `setns`).
    pub fn ns_path(&self, host: Host) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(self.ns(host))
    }

    /// `program` run inside `host`'s namespace (`ip netns exec`).
    pub fn cmd(&self, host: Host, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.ns(host), program]);
        cmd
    }

    /// Runs `ip -n NS args…` and requires success.
    pub fn ip(&self, host: Host, args: &[&str]) {
        let mut cmd = Command::new("ip");
        cmd.arg("-n").arg(self.ns(host)).args(args);
        must(cmd, &format!("ip -n {} {args:?}", self.ns(host)));
    }

    /// Makes `cmd` start inside `host`'s namespace: the child enters it
    /// between fork and exec, so its pid is the program's own (signals
    /// reach it directly, unlike through a wrapper).
    pub fn enter(&self, host: Host, cmd: &mut Command) {
        enter_at(self.ns_path(host), cmd);
    }

    /// A thread of this process running `f` inside `host`'s namespace:
    /// the sockets it makes belong there (and stay there).
    pub fn spawn_in<T: Send + 'static>(
        &self,
        host: Host,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        let path = self.ns_path(host);
        let ns = File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        std::thread::spawn(move || {
            // SAFETY: setns on this thread only, with a namespace fd we own.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            drop(ns);
            f()
        })
    }

    /// Links, addresses, routes, forwarding and the NAT rules.
    fn wire(&self) {
        self.ip(Host::Wan, &["link", "add", "br0", "type", "bridge"]);
        self.ip(Host::Wan, &["link", "set", "br0", "up"]);
        // One veth per WAN host: `<role>` on the bridge, `wan0` in the host.
        for host in [Host::Public1, Host::Public2, Host::RouterA, Host::RouterB] {
            let port = host.role();
            self.ip(
                Host::Wan,
                &[
                    "link",
                    "add",
                    port,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "wan0",
                    "netns",
                    self.ns(host),
                ],
            );
            self.ip(Host::Wan, &["link", "set", port, "master", "br0", "up"]);
            self.ip(host, &["link", "set", "wan0", "up"]);
            let addr = format!("{}/24", host.addr());
            self.ip(host, &["addr", "add", &addr, "dev", "wan0"]);
        }
        for (router, home, lan, gateway, masquerade) in HOMES {
            self.ip(
                router,
                &[
                    "link",
                    "add",
                    "lan0",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    self.ns(home),
                ],
            );
            self.ip(router, &["link", "set", "lan0", "up"]);
            self.ip(
                router,
                &["addr", "add", &format!("{gateway}/24"), "dev", "lan0"],
            );
            self.ip(home, &["link", "set", "eth0", "up"]);
            self.ip(
                home,
                &["addr", "add", &format!("{}/24", home.addr()), "dev", "eth0"],
            );
            self.ip(home, &["route", "add", "default", "via", gateway]);
            // Forwarding is per namespace: this is the router's own.
            let mut sysctl = self.cmd(router, "sysctl");
            sysctl.args(["-q", "-w", "net.ipv4.ip_forward=1"]);
            must(sysctl, "sysctl net.ipv4.ip_forward=1 in a router namespace");
            self.nft(router, &router_rules(lan, masquerade));
        }
    }

    /// Loads an nftables ruleset into `host`'s namespace.
    pub fn nft(&self, host: Host, rules: &str) {
        let mut nft = self.cmd(host, "nft");
        nft.args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = nft.spawn().expect("run nft");
        child
            .stdin
            .take()
            .expect("nft stdin")
            .write_all(rules.as_bytes())
            .expect("write nft rules");
        let out = child.wait_with_output().expect("wait for nft");
        assert!(
            out.status.success(),
            "nft in {}: {}\n{rules}",
            self.ns(host),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A home router: masquerade on the WAN side; from the WAN only replies
/// (established, related) come in, to the LAN or to the router itself.
fn router_rules(lan: &str, masquerade: &str) -> String {
    format!(
        r#"table ip nat {{
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        oifname "wan0" ip saddr {lan}.0/24 {masquerade}
    }}
}}
table inet filter {{
    chain forward {{
        type filter hook forward priority filter; policy drop;
        ct state established,related accept
        iifname "lan0" oifname "wan0" accept
    }}
    chain input {{
        type filter hook input priority filter; policy accept;
        iifname "wan0" ct state new drop
    }}
}}
"#
    )
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Homes first, the WAN last; each namespace's processes die
        // before it is deleted (a deleted namespace lives on while a
        // process is inside it).
        for (_, name) in self.names.iter().rev() {
            remove_namespace(name);
        }
    }
}

/// Makes `cmd` enter the namespace at `path` before it execs.
pub fn enter_at(path: PathBuf, cmd: &mut Command) {
    let ns = File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    // SAFETY: between fork and exec only setns runs (async-signal-safe),
    // on a descriptor opened before the fork; O_CLOEXEC closes it at exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

fn must(mut cmd: Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Kills every process in namespace `name` (never this test process) and
/// deletes the namespace.
fn remove_namespace(name: &str) {
    let own = std::process::id();
    if let Ok(out) = Command::new("ip").args(["netns", "pids", name]).output() {
        for pid in String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .filter(|p| *p != own)
        {
            // SAFETY: a plain signal to a process inside the lab.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", name])
        .stderr(Stdio::null())
        .status();
}

/// Namespaces of earlier runs that died without their `Drop` (a killed
/// test process): their pid is gone, so they are removed.
fn remove_leftovers() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove_namespace(&name);
        }
    }
}

impl Lab {
    /// A TCP listener bound inside `host`'s namespace (it may be served
    /// from any thread: a socket stays in the namespace it was made in).
    pub fn listen(&self, host: Host, port: u16) -> TcpListener {
        self.spawn_in(host, move || TcpListener::bind(("0.0.0.0", port)))
            .join()
            .expect("bind thread")
            .unwrap_or_else(|e| panic!("bind port {port} in {host:?}: {e}"))
    }

    /// A TCP connection from inside `from`'s namespace, given up after
    /// `timeout`.
    pub fn connect(&self, from: Host, to: &str, timeout: Duration) -> std::io::Result<TcpStream> {
        let to: SocketAddr = to.parse().expect("socket address");
        self.spawn_in(from, move || TcpStream::connect_timeout(&to, timeout))
            .join()
            .expect("connect thread")
    }
}

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

#[test]
fn netlab_homes_reach_out_through_a_cone_and_a_symmetric_nat_and_nothing_dials_in() {
    let Some(lab) = Lab::new() else { return };
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
    let Some(lab) = Lab::new() else { return };
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
