//! A NAT laboratory built from Linux network namespaces that the test
//! creates and always removes: a "wan" bridge (203.0.113.0/24) with two
//! public hosts, a firewalled public host (no NAT; only replies come in),
//! and five home routers, each translating its own home LAN
//! (198.18.N.0/24) as its [`Nat`] says: two port-restricted cones (plain
//! `masquerade`), two symmetric NATs (`masquerade random`), and one
//! address-restricted cone (`masquerade`, and a peer it has sent to may
//! reach it from any port). The rules are nftables' and cover TCP and UDP
//! (QUIC) alike. Nothing here
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
use std::time::Duration;

/// Where `ip netns` keeps its named namespaces.
pub const NETNS_DIR: &str = "/run/netns";
/// Every lab namespace is named `glab<pid>-<n><role>`: the pid tells a
/// later run whether the run that made it is still alive.
const PREFIX: &str = "glab";

/// One machine (namespace) of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// The segment itself: a bridge joining the public hosts and the
    /// routers' WAN sides.
    Wan,
    /// Publicly reachable host 203.0.113.10.
    Public1,
    /// Publicly reachable host 203.0.113.11.
    Public2,
    /// A host on a public address, 203.0.113.12, behind its own stateful
    /// firewall: no NAT, but only replies come in.
    Firewalled,
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
    /// Home C's router: 203.0.113.3, 198.18.3.1, port-restricted cone.
    RouterC,
    HomeC,
    /// Home D's router: 203.0.113.4, 198.18.4.1, symmetric.
    RouterD,
    HomeD,
    /// Home E's router: 203.0.113.5, 198.18.5.1, address-restricted cone.
    RouterE,
    HomeE,
}

/// How a home router maps and filters (RFC 4787's terms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nat {
    /// Endpoint-independent mapping, address-and-port-dependent filtering:
    /// plain `masquerade` (keeps the source port when it is free), and only
    /// replies from the exact address and port sent to come in.
    PortRestricted,
    /// Endpoint-independent mapping, address-dependent filtering: as above,
    /// but a host this home sent to may reach it from any port (a new
    /// connection from such an IP is forwarded to the home, same port).
    AddressRestricted,
    /// Endpoint-dependent mapping: `masquerade random`, a new source port
    /// per destination; replies only.
    Symmetric,
}

impl Host {
    pub const ALL: [Host; 14] = [
        Host::Wan,
        Host::Public1,
        Host::Public2,
        Host::Firewalled,
        Host::RouterA,
        Host::RouterB,
        Host::RouterC,
        Host::RouterD,
        Host::RouterE,
        Host::HomeA,
        Host::HomeB,
        Host::HomeC,
        Host::HomeD,
        Host::HomeE,
    ];

    /// A home's NAT (none for other hosts).
    pub fn nat(self) -> Option<Nat> {
        HOMES.iter().find(|h| h.home == self).map(|h| h.nat)
    }

    fn role(self) -> &'static str {
        match self {
            Host::Wan => "wan",
            Host::Public1 => "p1",
            Host::Public2 => "p2",
            Host::Firewalled => "fw",
            Host::RouterA => "ra",
            Host::RouterB => "rb",
            Host::RouterC => "rc",
            Host::RouterD => "rd",
            Host::RouterE => "re",
            Host::HomeA => "ha",
            Host::HomeB => "hb",
            Host::HomeC => "hc",
            Host::HomeD => "hd",
            Host::HomeE => "he",
        }
    }

    /// The host's own address (a router's is its WAN side); the WAN
    /// bridge has none.
    pub fn addr(self) -> &'static str {
        match self {
            Host::Wan => "",
            Host::Public1 => "203.0.113.10",
            Host::Public2 => "203.0.113.11",
            Host::Firewalled => "203.0.113.12",
            Host::RouterA => "203.0.113.1",
            Host::RouterB => "203.0.113.2",
            Host::RouterC => "203.0.113.3",
            Host::RouterD => "203.0.113.4",
            Host::RouterE => "203.0.113.5",
            Host::HomeA => "198.18.1.10",
            Host::HomeB => "198.18.2.10",
            Host::HomeC => "198.18.3.10",
            Host::HomeD => "198.18.4.10",
            Host::HomeE => "198.18.5.10",
        }
    }

    /// The router in front of a home (the host itself otherwise): the
    /// address peers see the home at.
    pub fn router(self) -> Host {
        HOMES
            .iter()
            .find(|h| h.home == self)
            .map_or(self, |h| h.router)
    }
}

/// One home: its router, its host, the LAN prefix and gateway, the NAT.
struct Home {
    router: Host,
    home: Host,
    lan: &'static str,
    gateway: &'static str,
    nat: Nat,
}

const fn home(router: Host, home: Host, n: u8, nat: Nat) -> Home {
    const LANS: [(&str, &str); 5] = [
        ("198.18.1", "198.18.1.1"),
        ("198.18.2", "198.18.2.1"),
        ("198.18.3", "198.18.3.1"),
        ("198.18.4", "198.18.4.1"),
        ("198.18.5", "198.18.5.1"),
    ];
    let (lan, gateway) = LANS[n as usize - 1];
    Home {
        router,
        home,
        lan,
        gateway,
        nat,
    }
}

const HOMES: [Home; 5] = [
    home(Host::RouterA, Host::HomeA, 1, Nat::PortRestricted),
    home(Host::RouterB, Host::HomeB, 2, Nat::Symmetric),
    home(Host::RouterC, Host::HomeC, 3, Nat::PortRestricted),
    home(Host::RouterD, Host::HomeD, 4, Nat::Symmetric),
    home(Host::RouterE, Host::HomeE, 5, Nat::AddressRestricted),
];

/// The running lab; dropping it kills what runs inside its namespaces and
/// deletes them, also when the test panicked.
pub struct Lab {
    names: Vec<(Host, String)>,
}

static LABS_IN_THIS_PROCESS: AtomicUsize = AtomicUsize::new(0);

impl Lab {
    /// Builds the whole topology, or says why namespaces cannot be made
    /// here (tests skip on it, or fail under GROVE_TEST_STRICT=1).
    pub fn build() -> Result<Lab, String> {
        for (tool, flag) in [("ip", "-V"), ("nft", "--version")] {
            let found = Command::new(tool)
                .arg(flag)
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                return Err(format!(
                    "the NAT laboratory needs `{tool}` (iproute2, nftables)"
                ));
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
                    return Err(format!("cannot create network namespaces here: {why}"));
                }
                panic!("ip netns add {name}: {why}");
            }
            lab.names.push((host, name));
            lab.ip(host, &["link", "set", "lo", "up"]);
        }
        lab.wire();
        Ok(lab)
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
        let wan_hosts = [Host::Public1, Host::Public2, Host::Firewalled]
            .into_iter()
            .chain(HOMES.iter().map(|h| h.router));
        for host in wan_hosts {
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
        self.nft(Host::Firewalled, FIREWALL);
        for &Home {
            router,
            home,
            lan,
            gateway,
            nat,
        } in &HOMES
        {
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
            self.nft(router, &router_rules(lan, home.addr(), nat));
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

/// A host's own firewall: replies come in, new connections from the WAN
/// do not (loopback is untouched).
const FIREWALL: &str = r#"table inet filter {
    chain input {
        type filter hook input priority filter; policy accept;
        iifname "wan0" ct state new drop
    }
}
"#;

/// A home router: translation on the WAN side as `nat` says; from the WAN
/// only replies (established, related) come in, to the LAN or to the router
/// itself, and for an address-restricted cone also new connections from an
/// IP the home sent to in the last 10 minutes (forwarded to the home's
/// host at the same port). One table, so the set of contacted IPs is
/// shared by its chains; every rule covers TCP and UDP alike.
fn router_rules(lan: &str, host: &str, nat: Nat) -> String {
    let masquerade = match nat {
        Nat::Symmetric => "masquerade random",
        Nat::PortRestricted | Nat::AddressRestricted => "masquerade",
    };
    let (remember, admit, forward) = match nat {
        Nat::AddressRestricted => (
            "iifname \"lan0\" oifname \"wan0\" update @contacted { ip daddr }",
            format!("iifname \"wan0\" ip saddr @contacted ct state new dnat to {host}"),
            "iifname \"wan0\" ct status dnat accept",
        ),
        _ => ("", String::new(), ""),
    };
    format!(
        r#"table ip lab {{
    set contacted {{
        type ipv4_addr; flags dynamic, timeout; timeout 10m;
    }}
    chain prerouting {{
        type nat hook prerouting priority dstnat; policy accept;
        {admit}
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        oifname "wan0" ip saddr {lan}.0/24 {masquerade}
    }}
    chain forward {{
        type filter hook forward priority filter; policy drop;
        {remember}
        ct state established,related accept
        {forward}
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

pub fn must(mut cmd: Command, what: &str) -> Output {
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
