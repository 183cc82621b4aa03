//! Layered configuration: a TOML file, then `GROVE_*` environment variables
//! (`__` separates nested keys), then flags; checked once into [`Config`].
//!
//! Values are read strictly (`read`) into the raw [`Settings`]: a misspelt
//! key is refused with its name instead of being silently ignored, and no
//! value is coerced into another kind. [`Settings::check`] then applies the
//! command line's [`Overrides`], checks every value's range, and builds the
//! one [`Config`] every command and the daemon read (ripgrep's `LowArgs` →
//! `HiArgs`). `grove config check` and a node's start run that same call.

use grove_core::settings::Invalid;
use std::path::{Path, PathBuf};

use crate::state_dir::StateDir;

use serde::Deserialize;

mod read;

/// Default config file, read when present and no `--config` is given.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/grove/grove.toml";

/// The longest path a Unix socket's address holds (`sun_path`, less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Where the packaged service (`systemd/grove.service`, `RuntimeDirectory=grove`)
/// puts its control socket.
pub const SYSTEM_SOCKET: &str = "/run/grove/grove.sock";

/// Errors while loading or validating configuration. Each shows at most
/// about 80 characters of any one value (see [`clip`]).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config: {}", clip(.0))]
    Load(String),
    #[error("config key `{}`: {}", clip(.key), clip(.reason))]
    Invalid { key: String, reason: String },
    /// A value of the wrong kind, named with where it was set (the file or
    /// a variable).
    #[error("config key `{}` ({}): {}", clip(.key), clip(.origin), clip(.reason))]
    Value {
        key: String,
        origin: String,
        reason: String,
    },
    #[error("no state directory: pass --state, set state_dir (GROVE_STATE_DIR), or set $HOME")]
    NoStateDir,
    #[error(
        "{} is not a config key: there is no key `{}` (GROVE_SECTION__KEY sets `section.key`)",
        clip(.var),
        clip(.key)
    )]
    UnknownVariable { var: String, key: String },
}

impl From<Invalid> for ConfigError {
    fn from(e: Invalid) -> ConfigError {
        ConfigError::invalid(e.key, e.reason)
    }
}

impl ConfigError {
    fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}

// How an error shows a value is the core's rule (so the core's own checks
// can use it too).
use grove_core::settings::SHOWN_CHARS;
pub use grove_core::settings::shown;

/// A message with every overlong word (a value quoted in it by a check or a
/// library) shortened as [`shown`] does, and the whole kept under 2,000
/// characters: the last guard, under checks that already shorten values.
fn clip(message: &str) -> String {
    let mut out = String::new();
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if word.chars().count() > SHOWN_CHARS {
            out.push_str(&shown(word));
        } else {
            out.push_str(word);
        }
        if out.len() > 2000 {
            out.push_str(" …");
            break;
        }
    }
    out
}

/// Refuses `value` outside `min..=max`, naming `key`.
fn within<T: PartialOrd + std::fmt::Display>(
    key: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(ConfigError::invalid(
            key,
            format!("must be between {min} and {max} (it is {value})"),
        ));
    }
    Ok(())
}

/// Size limits applied to every book (bytes).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest book file or download accepted.
    pub max_book_bytes: u64,
    /// Largest single chunk accepted (guards against e.g. a 20 MB line without spaces).
    pub max_chunk_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_book_bytes: 64 << 20,
            max_chunk_bytes: 64 << 10,
        }
    }
}

/// How books are fetched (`[fetch]`): beside the fetching, in `source.rs`.
pub use crate::source::FetchSettings;

/// The daemon's control socket.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSettings {
    /// Socket path; default `$RUNTIME_DIRECTORY/grove.sock` under systemd,
    /// else `grove.sock` in the state directory.
    pub socket: Option<PathBuf>,
}

/// This node as members see it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSettings {
    /// Display name members see.
    pub name: Option<String>,
    /// How often a running node runs `PRAGMA quick_check` on each of its
    /// databases, in seconds (0: never; at start it always does).
    pub integrity_check_secs: u64,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            name: None,
            integrity_check_secs: 6 * 3600,
        }
    }
}

/// Logging of the daemon (to stderr; journald adds its own timestamps).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// A tracing filter such as `info` or `grove=debug`; `RUST_LOG` wins.
    pub level: String,
    /// `text` (lines for people), or `json` (one JSON object per line).
    pub format: String,
}

/// The values of `log.format`.
pub const LOG_FORMATS: &[&str] = &["text", "json"];

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            level: "info".into(),
            format: "text".into(),
        }
    }
}

/// The node's network (`[net]`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetSettings {
    /// Multiaddrs to listen on; `/tcp/0` picks a free port.
    pub listen: Vec<String>,
    /// Addresses to advertise instead of the bound ones (behind NAT or a proxy).
    pub external_addresses: Vec<String>,
    /// Largest gossip message or request/response accepted.
    pub max_message_bytes: usize,
    /// Most connections at once.
    pub max_connections: u32,
    pub request_timeout_secs: u64,
    /// How long a moot's host waits for a speaker's turn (the speaker's
    /// model runs inside it, which on a CPU can take minutes).
    pub turn_timeout_secs: u64,
    /// How many more times a moot's host asks a speaker's node that did not
    /// answer (down, unreachable, timed out) before pausing the moot.
    pub turn_retries: u32,
    /// The wait before the first of those retries; it doubles each time,
    /// up to a minute.
    pub turn_retry_backoff_ms: u64,
    pub idle_timeout_secs: u64,
    /// Most connections at once from peers that are not roster members
    /// (joiners, strangers); members' slots (`max_connections`) stay free.
    pub max_stranger_connections: u32,
    /// Most of those from one IP address.
    pub max_stranger_connections_per_ip: u32,
    /// Most inbound connections still in their handshake, in all and from
    /// one IP address.
    pub max_pending_incoming: u32,
    pub max_pending_incoming_per_ip: u32,
    /// A non-member's connection that sends no join request within this
    /// window is closed (a joiner's, six windows after its last call).
    pub join_window_secs: u64,
    /// A request must arrive in full within this time (a turn's model time
    /// runs after it, under `turn_timeout_secs`).
    pub request_read_secs: u64,
    /// Most concurrent streams per connection, per protocol.
    pub max_inbound_streams: usize,
    /// Bytes of requests being read at once, over all peers.
    pub inflight_request_bytes: usize,
    /// Most requests being answered at once; more are refused as busy.
    pub max_request_tasks: usize,
    /// Model seconds one member's turn requests may use per hour.
    pub turn_quota_secs: u64,
    /// Longest search query accepted from a peer, in bytes.
    pub max_query_bytes: usize,
    /// Requests per minute one peer may make, per protocol.
    pub rate: RateSettings,
    /// Whether other hosts can dial this node: "auto" (judged from what
    /// peers see), "public" or "private".
    pub reachability: String,
    /// Relays that are not mesh members (`/ip4/…/tcp/…/p2p/<id>`), used
    /// when this node is not public, and dialled at start.
    pub relays: Vec<String>,
    /// This node as a relay for others.
    pub relay: RelaySettings,
    /// Hole punching (DCUtR): members reached through a relay try a direct
    /// connection, coordinated over the relayed one.
    pub hole_punching: bool,
    /// QUIC (UDP) beside TCP: each TCP listen address is also listened on
    /// over QUIC at the same port number.
    pub quic: bool,
}

/// The circuit relay this node runs for others (docs/networking.md).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RelaySettings {
    /// "members" (roster members, and strangers presenting an open invite,
    /// to reach its inviter), "anyone", or "off". A node relays only while
    /// it judges itself public.
    pub serve: String,
    pub max_reservations: u32,
    pub max_reservations_per_peer: u32,
    pub reservation_secs: u64,
    pub max_circuits: u32,
    pub max_circuits_per_peer: u32,
    /// A relayed connection lasts at most this long (then it is redialled):
    /// at least `net.turn_timeout_secs`, so a turn fits in one.
    pub circuit_secs: u64,
    /// … and carries at most this many bytes each way.
    pub circuit_bytes: u64,
    /// How many relays a node that is not public holds a slot on.
    pub use_relays: u32,
}

impl Default for RelaySettings {
    fn default() -> Self {
        RelaySettings {
            serve: "members".into(),
            max_reservations: 128,
            max_reservations_per_peer: 4,
            reservation_secs: 3600,
            max_circuits: 64,
            max_circuits_per_peer: 8,
            circuit_secs: 3600,
            circuit_bytes: 1 << 30,
            use_relays: 2,
        }
    }
}

impl RelaySettings {
    fn checked(&self, turn_timeout_secs: u64) -> Result<crate::net::RelayLimits, ConfigError> {
        let serve = self
            .serve
            .parse()
            .map_err(|e: String| ConfigError::invalid("net.relay.serve", e))?;
        for (key, value) in [
            ("net.relay.max_reservations", self.max_reservations),
            (
                "net.relay.max_reservations_per_peer",
                self.max_reservations_per_peer,
            ),
            ("net.relay.max_circuits", self.max_circuits),
            (
                "net.relay.max_circuits_per_peer",
                self.max_circuits_per_peer,
            ),
        ] {
            within(key, value, 1, 65_536)?;
        }
        within("net.relay.reservation_secs", self.reservation_secs, 60, DAY)?;
        if self.circuit_secs < turn_timeout_secs || self.circuit_secs > DAY {
            return Err(ConfigError::invalid(
                "net.relay.circuit_secs",
                format!(
                    "must be between net.turn_timeout_secs ({turn_timeout_secs}) and {DAY}, so a turn fits in one circuit (it is {})",
                    self.circuit_secs
                ),
            ));
        }
        within(
            "net.relay.circuit_bytes",
            self.circuit_bytes,
            1 << 20,
            1 << 40,
        )?;
        within("net.relay.use_relays", self.use_relays, 0, 8)?;
        Ok(crate::net::RelayLimits {
            serve,
            max_reservations: self.max_reservations as usize,
            max_reservations_per_peer: self.max_reservations_per_peer as usize,
            reservation_duration: std::time::Duration::from_secs(self.reservation_secs),
            max_circuits: self.max_circuits as usize,
            max_circuits_per_peer: self.max_circuits_per_peer as usize,
            circuit_duration: std::time::Duration::from_secs(self.circuit_secs),
            circuit_bytes: self.circuit_bytes,
            use_relays: self.use_relays as usize,
        })
    }
}

/// Requests per minute one peer may make on each protocol; a burst of a
/// quarter of that (at least 5) is allowed at once.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateSettings {
    pub join: u32,
    pub sync: u32,
    pub search: u32,
    pub turn: u32,
}

impl Default for RateSettings {
    fn default() -> Self {
        RateSettings {
            join: 60,
            sync: 120,
            search: 300,
            turn: 60,
        }
    }
}

impl Default for NetSettings {
    fn default() -> Self {
        NetSettings {
            listen: vec!["/ip4/0.0.0.0/tcp/4100".into()],
            external_addresses: Vec::new(),
            max_message_bytes: 256 * 1024,
            max_connections: 128,
            request_timeout_secs: 30,
            turn_timeout_secs: 600,
            turn_retries: 3,
            turn_retry_backoff_ms: 1_000,
            idle_timeout_secs: 120,
            max_stranger_connections: 64,
            max_stranger_connections_per_ip: 16,
            max_pending_incoming: 128,
            max_pending_incoming_per_ip: 32,
            join_window_secs: 10,
            request_read_secs: 10,
            max_inbound_streams: 16,
            inflight_request_bytes: 32 << 20,
            max_request_tasks: 64,
            turn_quota_secs: 1800,
            max_query_bytes: 4096,
            rate: RateSettings::default(),
            reachability: "auto".into(),
            relays: Vec::new(),
            relay: RelaySettings::default(),
            hole_punching: true,
            quic: true,
        }
    }
}

impl NetSettings {
    /// The checked network configuration, or the key and reason it is refused.
    pub fn checked(&self) -> Result<crate::net::NetConfig, ConfigError> {
        let listen = listen_addresses(&self.listen)?;
        let external = addresses("net.external_addresses", &self.external_addresses)?;
        let relays = self.relay_addresses()?;
        let reachability = self
            .reachability
            .parse()
            .map_err(|e: String| ConfigError::invalid("net.reachability", e))?;
        for (key, value, min, max) in self.bounds() {
            within(key, value, min, max)?;
        }
        self.check_byte_limits()?;
        let relay = self.relay.checked(self.turn_timeout_secs)?;
        Ok(crate::net::NetConfig {
            listen,
            max_message_bytes: self.max_message_bytes,
            max_connections: self.max_connections,
            request_timeout: std::time::Duration::from_secs(self.request_timeout_secs),
            turn_timeout: std::time::Duration::from_secs(self.turn_timeout_secs),
            idle_timeout: std::time::Duration::from_secs(self.idle_timeout_secs),
            admission: self.admission(),
            request_read: std::time::Duration::from_secs(self.request_read_secs),
            max_inbound_streams: self.max_inbound_streams,
            inflight_request_bytes: self.inflight_request_bytes,
            reachability,
            external,
            relays,
            relay,
            hole_punching: self.hole_punching,
            quic: self.quic,
        })
    }

    /// `net.relays`: addresses that end in the relay's identity.
    fn relay_addresses(&self) -> Result<Vec<libp2p::Multiaddr>, ConfigError> {
        let relays = addresses("net.relays", &self.relays)?;
        for relay in &relays {
            if !matches!(
                relay.iter().last(),
                Some(libp2p::multiaddr::Protocol::P2p(_))
            ) {
                return Err(ConfigError::invalid(
                    "net.relays",
                    format!(
                        "`{}` does not end in /p2p/<peer id> (the relay's identity)",
                        shown(&relay.to_string())
                    ),
                ));
            }
        }
        Ok(relays)
    }

    /// Every whole-number key of `[net]` with its bounds, as (key, value,
    /// least, most), in the order they are checked. Each timeout is added
    /// to an Instant (libp2p's request handler panics on an overflow), so
    /// all are bounded.
    fn bounds(&self) -> [(&'static str, u64, u64, u64); 20] {
        let n = |v: usize| v as u64;
        [
            (
                "net.max_message_bytes",
                n(self.max_message_bytes),
                4096,
                16 << 20,
            ),
            (
                "net.max_connections",
                self.max_connections.into(),
                1,
                65_536,
            ),
            (
                "net.request_timeout_secs",
                self.request_timeout_secs,
                1,
                3600,
            ),
            ("net.idle_timeout_secs", self.idle_timeout_secs, 1, DAY),
            ("net.turn_timeout_secs", self.turn_timeout_secs, 1, DAY),
            (
                "net.turn_retry_backoff_ms",
                self.turn_retry_backoff_ms,
                1,
                60_000,
            ),
            ("net.turn_retries", self.turn_retries.into(), 0, 20),
            (
                "net.max_stranger_connections",
                self.max_stranger_connections.into(),
                1,
                65_536,
            ),
            (
                "net.max_stranger_connections_per_ip",
                self.max_stranger_connections_per_ip.into(),
                1,
                65_536,
            ),
            (
                "net.max_pending_incoming",
                self.max_pending_incoming.into(),
                1,
                65_536,
            ),
            (
                "net.max_pending_incoming_per_ip",
                self.max_pending_incoming_per_ip.into(),
                1,
                65_536,
            ),
            ("net.rate.join", self.rate.join.into(), 1, 100_000),
            ("net.rate.sync", self.rate.sync.into(), 1, 100_000),
            ("net.rate.search", self.rate.search.into(), 1, 100_000),
            ("net.rate.turn", self.rate.turn.into(), 1, 100_000),
            ("net.join_window_secs", self.join_window_secs, 1, DAY),
            ("net.request_read_secs", self.request_read_secs, 1, DAY),
            ("net.turn_quota_secs", self.turn_quota_secs, 1, DAY),
            (
                "net.max_inbound_streams",
                n(self.max_inbound_streams),
                1,
                1024,
            ),
            ("net.max_request_tasks", n(self.max_request_tasks), 1, 4096),
        ]
    }

    /// The byte limits bounded by each other: a request in flight holds at
    /// least one whole message, and a query fits in one.
    fn check_byte_limits(&self) -> Result<(), ConfigError> {
        if self.inflight_request_bytes < self.max_message_bytes
            || self.inflight_request_bytes > 1 << 30
        {
            return Err(ConfigError::invalid(
                "net.inflight_request_bytes",
                format!(
                    "must be between net.max_message_bytes ({}) and 1073741824 (it is {})",
                    self.max_message_bytes, self.inflight_request_bytes
                ),
            ));
        }
        if !(16..=self.max_message_bytes).contains(&self.max_query_bytes) {
            return Err(ConfigError::invalid(
                "net.max_query_bytes",
                format!(
                    "must be between 16 and net.max_message_bytes ({}) (it is {})",
                    self.max_message_bytes, self.max_query_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Admission control's limits on strangers.
    fn admission(&self) -> crate::net::AdmissionLimits {
        crate::net::AdmissionLimits {
            max_strangers: self.max_stranger_connections as usize,
            max_strangers_per_ip: self.max_stranger_connections_per_ip as usize,
            max_pending: self.max_pending_incoming as usize,
            max_pending_per_ip: self.max_pending_incoming_per_ip as usize,
            join_window: std::time::Duration::from_secs(self.join_window_secs),
        }
    }
}

/// A path key's value is a usable path: not empty, no NUL byte.
fn check_path(key: &str, path: &Path) -> Result<(), ConfigError> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() {
        return Err(ConfigError::invalid(key, "must not be empty"));
    }
    if bytes.contains(&0) {
        return Err(ConfigError::invalid(key, "must not hold a NUL byte"));
    }
    Ok(())
}

/// Seconds in a day: the bound of most durations.
const DAY: u64 = 86_400;

/// Most addresses one list key (`net.listen`, `net.external_addresses`,
/// `net.relays`) holds: each listen address holds a socket, each relay a
/// dialled connection.
pub const MAX_ADDRESSES: usize = 64;

/// The multiaddrs of a list key, at most [`MAX_ADDRESSES`] of them.
fn addresses(key: &str, list: &[String]) -> Result<Vec<libp2p::Multiaddr>, ConfigError> {
    if list.len() > MAX_ADDRESSES {
        return Err(ConfigError::invalid(
            key,
            format!(
                "holds {} addresses; at most {MAX_ADDRESSES} are allowed",
                list.len()
            ),
        ));
    }
    list.iter()
        .map(|a| {
            a.parse().map_err(|e| {
                ConfigError::invalid(key, format!("`{}` is not a multiaddr: {e}", shown(a)))
            })
        })
        .collect()
}

/// The listen addresses: at least one, each `/ip4|ip6/ADDR/tcp/PORT` (the
/// only transport grove listens on).
fn listen_addresses(list: &[String]) -> Result<Vec<libp2p::Multiaddr>, ConfigError> {
    use libp2p::multiaddr::Protocol;
    let listen = addresses("net.listen", list)?;
    if listen.is_empty() {
        return Err(ConfigError::invalid(
            "net.listen",
            "needs at least one address",
        ));
    }
    for addr in &listen {
        let parts: Vec<Protocol> = addr.iter().collect();
        let quic = parts.iter().any(|p| {
            matches!(
                p,
                Protocol::Quic | Protocol::QuicV1 | Protocol::WebTransport
            )
        });
        if quic {
            return Err(ConfigError::invalid(
                "net.listen",
                format!(
                    "`{}` is a QUIC address, and grove has no QUIC transport yet: listen on TCP (/ip4/ADDR/tcp/PORT)",
                    shown(&addr.to_string())
                ),
            ));
        }
        if !matches!(
            parts.as_slice(),
            [Protocol::Ip4(_) | Protocol::Ip6(_), Protocol::Tcp(_)]
        ) {
            return Err(ConfigError::invalid(
                "net.listen",
                format!(
                    "`{}` is not a TCP address: grove listens on /ip4/ADDR/tcp/PORT or /ip6/ADDR/tcp/PORT",
                    shown(&addr.to_string())
                ),
            ));
        }
    }
    Ok(listen)
}

/// Everything configurable, as written by the operator.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Where shards, keys and mesh state live.
    pub state_dir: Option<PathBuf>,
    /// Shard a book goes to when `--shard` is not given.
    pub default_shard: Option<String>,
    pub limits: Limits,
    pub fetch: FetchSettings,
    pub control: ControlSettings,
    pub node: NodeSettings,
    pub log: LogSettings,
    pub mesh: crate::mesh::MeshSettings,
    pub moot: crate::moot::MootSettings,
    /// This node as a speaker in other nodes' moots: its turn policy.
    pub speaker: crate::moot::policy::PolicySettings,
    pub net: NetSettings,
    pub model: crate::model::ModelSettings,
    pub hooks: HookSettings,
    pub http: HttpSettings,
}

/// `[http]`: the operator's HTTP listener (health, metrics, read-only
/// views; docs/operator-guide.md). Off unless `listen` is set.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// A socket address such as `127.0.0.1:8470`; none: no listener.
    pub listen: Option<String>,
    /// The bearer token; on a non-loopback listener without one, grove
    /// makes `http.token` in the state directory.
    pub token: Option<String>,
    /// Serve `/metrics` without the token on a non-loopback listener.
    pub metrics_without_auth: bool,
}

/// The shortest token accepted in `http.token`.
pub const MIN_HTTP_TOKEN_CHARS: usize = 16;

impl HttpSettings {
    /// The listen address, checked.
    pub fn listen_addr(&self) -> Result<Option<std::net::SocketAddr>, Invalid> {
        if let Some(token) = &self.token
            && (token.chars().count() < MIN_HTTP_TOKEN_CHARS
                || token.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(Invalid::new(
                "http.token",
                format!(
                    "at least {MIN_HTTP_TOKEN_CHARS} characters, no spaces or control characters"
                ),
            ));
        }
        let Some(listen) = &self.listen else {
            return Ok(None);
        };
        listen.trim().parse().map(Some).map_err(|_| {
            Invalid::new(
                "http.listen",
                format!("`{listen}` is not a socket address (e.g. 127.0.0.1:8470 or [::1]:8470)"),
            )
        })
    }
}

/// `[hooks]`: a program the daemon runs on chosen membership events, with
/// the event in `GROVE_EVENT*` environment variables (docs/operator-guide.md).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HookSettings {
    /// The program (an absolute path); none: no hook runs.
    pub program: Option<PathBuf>,
    /// Its arguments.
    pub args: Vec<String>,
    /// The events that run it, named as `grove mesh watch` prints them;
    /// empty: every event.
    pub events: Vec<String>,
    /// A run still going after this long is killed.
    pub timeout_secs: u64,
    /// Runs at once; an event arriving while this many run is logged and
    /// skipped, never queued without bound.
    pub max_running: usize,
}

impl Default for HookSettings {
    fn default() -> Self {
        HookSettings {
            program: None,
            args: Vec::new(),
            events: Vec::new(),
            timeout_secs: 10,
            max_running: 4,
        }
    }
}

impl HookSettings {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), Invalid> {
        if let Some(p) = &self.program
            && !p.is_absolute()
        {
            return Err(Invalid::new("hooks.program", "must be an absolute path"));
        }
        if self.args.len() > 64 {
            return Err(Invalid::new(
                "hooks.args",
                format!(
                    "holds {} arguments; at most 64 are allowed",
                    self.args.len()
                ),
            ));
        }
        if self.args.iter().any(|a| a.contains('\0')) {
            return Err(Invalid::new(
                "hooks.args",
                "an argument must not hold a NUL byte",
            ));
        }
        if let Some(bad) = self
            .events
            .iter()
            .find(|e| !crate::events::hook_events().any(|n| n == e.as_str()))
        {
            return Err(Invalid::new(
                "hooks.events",
                format!(
                    "unknown event `{}`; known: {}",
                    shown(bad),
                    crate::events::hook_events().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if !(1..=3600).contains(&self.timeout_secs) {
            return Err(Invalid::new(
                "hooks.timeout_secs",
                format!("must be between 1 and 3600 (it is {})", self.timeout_secs),
            ));
        }
        if !(1..=64).contains(&self.max_running) {
            return Err(Invalid::new(
                "hooks.max_running",
                format!("must be between 1 and 64 (it is {})", self.max_running),
            ));
        }
        Ok(())
    }

    /// The program is a file this user may execute (checked at a node's
    /// start, as the node's user, rather than at the first event).
    fn check_program(&self) -> Result<(), ConfigError> {
        let Some(program) = &self.program else {
            return Ok(());
        };
        let refuse = |why: String| {
            ConfigError::invalid(
                "hooks.program",
                format!("{}: {why}", shown(&program.display().to_string())),
            )
        };
        let meta = std::fs::metadata(program).map_err(|e| refuse(e.to_string()))?;
        if !meta.is_file() {
            return Err(refuse("is not a file".into()));
        }
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(program.as_os_str().as_bytes())
            .map_err(|_| refuse("holds a NUL byte".into()))?;
        // SAFETY: `path` is a valid NUL-terminated string for the call.
        if unsafe { libc::access(path.as_ptr(), libc::X_OK) } != 0 {
            return Err(refuse(format!(
                "is not executable by this user ({})",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

impl LogSettings {
    /// The tracing filter the daemon logs with: `RUST_LOG` when set, else
    /// `log.level` (with gossipsub's routine warnings left out, unless
    /// asked for by target).
    pub fn filter(&self) -> Result<String, ConfigError> {
        if let Ok(v) = std::env::var("RUST_LOG")
            && !v.is_empty()
        {
            let refuse =
                |why: String| ConfigError::Load(format!("RUST_LOG `{}`: {why}", shown(&v)));
            // tracing-subscriber 0.3 slices a directive by the indices of
            // its trimmed form (a panic inside a character, a wrong target
            // outside one): it gets ASCII directives with no blanks.
            if !v.is_ascii() {
                return Err(refuse("must be ASCII".into()));
            }
            let v = v.split(',').map(str::trim).collect::<Vec<_>>().join(",");
            tracing_subscriber::EnvFilter::try_new(&v).map_err(|e| refuse(e.to_string()))?;
            return Ok(v);
        }
        self.check()?;
        Ok(if self.level.contains('=') {
            self.level.clone()
        } else {
            format!("{},libp2p_gossipsub=error", self.level)
        })
    }

    /// `log.level` is a level, or directives `target=level` separated by
    /// commas. A bare word that is not a level is refused: tracing would
    /// read it as a target and log nothing else (`inof`).
    fn check(&self) -> Result<(), ConfigError> {
        const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
        let refuse = |why: String| ConfigError::invalid("log.level", why);
        if self.level.trim().is_empty() {
            return Err(refuse("must not be empty (e.g. info)".into()));
        }
        // tracing-subscriber 0.3 slices a directive by the indices of its
        // trimmed form, which panics inside a character: ASCII, no blanks.
        if !self.level.is_ascii()
            || self
                .level
                .chars()
                .any(|c| c.is_ascii_whitespace() || c.is_ascii_control())
        {
            return Err(refuse(format!(
                "`{}` must be ASCII with no blanks (e.g. info, or grove=debug,info)",
                shown(&self.level)
            )));
        }
        for directive in self.level.split(',') {
            if !directive.contains('=')
                && !LEVELS.contains(&directive.to_ascii_lowercase().as_str())
            {
                return Err(refuse(format!(
                    "`{}` is not a level (one of {}); a target takes one as `target=level`",
                    shown(directive),
                    LEVELS.join(", ")
                )));
            }
        }
        tracing_subscriber::EnvFilter::try_new(&self.level).map_err(|e| {
            refuse(format!(
                "`{}`: {}",
                shown(&self.level),
                shown(&e.to_string())
            ))
        })?;
        Ok(())
    }
}

/// What the command line sets over the file and the environment; a flag is
/// checked like the key it overrides.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--socket`: `control.socket`.
    pub socket: Option<PathBuf>,
    /// `grove node run --listen`: `net.listen` (empty: as configured).
    pub listen: Vec<String>,
}

/// The configuration every command and the daemon read: the settings with
/// every value checked, and the forms a node builds from them. Only
/// [`Settings::check`] makes one, so holding a `Config` means the whole
/// check ran; nothing it accepted fails later on its value. Left to the
/// start itself is only what is true of the moment: that the listen
/// addresses are this host's and their ports free, that the state directory
/// and socket can be made, and [`Config::check_start`].
#[derive(Debug, Clone)]
pub struct Config {
    settings: Settings,
    net: crate::net::NetConfig,
    log_filter: String,
}

impl Config {
    /// The checked settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The network configuration built from `[net]`.
    pub fn net(&self) -> &crate::net::NetConfig {
        &self.net
    }

    /// The tracing filter the daemon logs with (`log.level`, `log.filter`).
    pub fn log_filter(&self) -> &str {
        &self.log_filter
    }

    /// What depends on the file system as this user sees it:
    /// `hooks.program` exists and is executable. `grove node run` and
    /// `grove config check` run it; other commands do not need the hook.
    pub fn check_start(&self) -> Result<(), ConfigError> {
        self.settings.hooks.check_program()
    }
}

impl Settings {
    /// Reads settings from `file` (or the default file when it exists), then
    /// `GROVE_*` environment variables, strictly; [`Settings::check`] checks
    /// their values.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        let path = match file {
            Some(path) => {
                if !path.is_file() {
                    return Err(ConfigError::Load(format!(
                        "config file {} does not exist or is not a file",
                        path.display()
                    )));
                }
                Some(path)
            }
            None => Some(Path::new(DEFAULT_CONFIG_FILE)).filter(|p| p.is_file()),
        };
        let text =
            match path {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    ConfigError::Load(format!("config file {}: {e}", path.display()))
                })?),
                None => None,
            };
        let text = match &text {
            Some(bytes) => Some(std::str::from_utf8(bytes).map_err(|e| {
                ConfigError::Load(format!(
                    "config file {} is not UTF-8 text ({e})",
                    path.map(|p| p.display().to_string()).unwrap_or_default()
                ))
            })?),
            None => None,
        };
        let origin = path.map(|p| p.display().to_string()).unwrap_or_default();
        let mut vars = Vec::new();
        for (var, value) in std::env::vars_os() {
            let Some(var) = var.to_str().map(str::to_string) else {
                continue;
            };
            if !var.starts_with("GROVE_") {
                continue;
            }
            let Ok(value) = value.into_string() else {
                return Err(ConfigError::Load(format!("{var} is not UTF-8 text")));
            };
            vars.push((var, value));
        }
        Settings::from_layers(text.map(|t| (t, origin.as_str())), vars)
    }

    /// Settings from a file's text and its name (`None`: no file) and
    /// `GROVE_*` variables, read strictly: what [`Settings::load`] does with
    /// the real file and environment.
    pub fn from_layers(
        file: Option<(&str, &str)>,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        read::read(file, vars)
    }

    /// The one check: the command line's overrides applied, every value's
    /// range, choices and the keys that bound each other checked, and the
    /// [`Config`] built from them. Pure: no file or program is looked at
    /// ([`Config::check_start`] does that for a start).
    pub fn check(mut self, overrides: Overrides) -> Result<Config, ConfigError> {
        if let Some(socket) = overrides.socket {
            self.control.socket = Some(socket);
        }
        if !overrides.listen.is_empty() {
            self.net.listen = overrides.listen;
        }
        let net = self.checked_net()?;
        let log_filter = self.log.filter()?;
        Ok(Config {
            settings: self,
            net,
            log_filter,
        })
    }

    /// Every value's check, returning the network configuration built on
    /// the way (so `[net]` is checked and built in one pass).
    fn checked_net(&self) -> Result<crate::net::NetConfig, ConfigError> {
        within(
            "limits.max_book_bytes",
            self.limits.max_book_bytes,
            1,
            1 << 30,
        )?;
        within(
            "limits.max_chunk_bytes",
            self.limits.max_chunk_bytes,
            1,
            16 << 20,
        )?;
        within(
            "fetch.connect_timeout_secs",
            self.fetch.connect_timeout_secs,
            1,
            600,
        )?;
        within("fetch.timeout_secs", self.fetch.timeout_secs, 1, DAY)?;
        within("fetch.max_redirects", self.fetch.max_redirects, 0, 20)?;
        self.log.check()?;
        if !LOG_FORMATS.contains(&self.log.format.as_str()) {
            return Err(ConfigError::invalid(
                "log.format",
                format!("`{}` is not `text` or `json`", shown(&self.log.format)),
            ));
        }
        within(
            "node.integrity_check_secs",
            self.node.integrity_check_secs,
            0,
            30 * DAY,
        )?;
        if let Some(name) = &self.node.name
            && let Err(e) = crate::mesh::names::check(crate::mesh::names::Field::DisplayName, name)
        {
            return Err(ConfigError::invalid("node.name", e.to_string()));
        }
        for (key, path) in [
            ("state_dir", &self.state_dir),
            ("control.socket", &self.control.socket),
            ("model.path", &self.model.path),
            ("hooks.program", &self.hooks.program),
        ] {
            if let Some(path) = path {
                check_path(key, path)?;
            }
        }
        if let Some(socket) = &self.control.socket
            && socket.as_os_str().len() > MAX_SOCKET_PATH
        {
            return Err(ConfigError::invalid(
                "control.socket",
                format!(
                    "is {} bytes long; a Unix socket's path holds at most {MAX_SOCKET_PATH}",
                    socket.as_os_str().len()
                ),
            ));
        }
        let net = self.net.checked()?;
        self.mesh.validate()?;
        self.hooks.validate()?;
        self.moot.check()?;
        self.http.listen_addr()?;
        self.speaker.validate()?;
        self.model.check()?;
        if let Some(shard) = &self.default_shard {
            crate::store::validate_shard_name(shard)
                .map_err(|e| ConfigError::invalid("default_shard", e.to_string()))?;
        }
        Ok(net)
    }

    /// The control socket: `control.socket`, else `$RUNTIME_DIRECTORY/grove.sock`
    /// (systemd), else `grove.sock` in the state directory, so several nodes
    /// with their own state directories run side by side.
    pub fn control_socket(&self, state_dir: &Path) -> PathBuf {
        self.configured_socket()
            .unwrap_or_else(|| StateDir::new(state_dir).socket())
    }

    /// The socket named outright: `control.socket`, else systemd's
    /// `$RUNTIME_DIRECTORY/grove.sock`; `None` when the state directory decides.
    fn configured_socket(&self) -> Option<PathBuf> {
        if let Some(path) = &self.control.socket {
            return Some(path.clone());
        }
        first_systemd_dir("RUNTIME_DIRECTORY").map(|dir| StateDir::new(&dir).socket())
    }

    /// The effective configuration as JSON, every key with its value;
    /// values of keys named like secrets are masked (`http.token`;
    /// `model.api_key_env` names a variable, not a secret).
    pub fn effective(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        mask_secrets(&mut value);
        value
    }

    /// The control socket a command talks to. In order: `control.socket`
    /// (which `--socket` and `GROVE_CONTROL__SOCKET` set);
    /// `$RUNTIME_DIRECTORY/grove.sock`; the state directory's `grove.sock`
    /// when it exists (a node runs on that state); the system service's
    /// [`SYSTEM_SOCKET`] when it exists and no `--state` was given (an
    /// explicit state directory never sends work to another node); else the
    /// state directory's `grove.sock` (named in "not running" errors).
    pub fn client_socket(&self, state_flag: Option<&Path>, state_dir: &Path) -> PathBuf {
        if let Some(named) = self.configured_socket() {
            return named;
        }
        let own = StateDir::new(state_dir).socket();
        let system = Path::new(SYSTEM_SOCKET);
        if !own.exists() && state_flag.is_none() && system.exists() {
            return system.to_path_buf();
        }
        own
    }

    /// The state directory: `flag`, else `state_dir`, else systemd's
    /// `$STATE_DIRECTORY`, else a per-user default.
    pub fn resolve_state_dir(&self, flag: Option<&Path>) -> Result<PathBuf, ConfigError> {
        if let Some(dir) = flag {
            return Ok(dir.to_path_buf());
        }
        if let Some(dir) = &self.state_dir {
            return Ok(dir.clone());
        }
        if let Some(dir) = first_systemd_dir("STATE_DIRECTORY") {
            return Ok(dir);
        }
        dirs::data_local_dir()
            .map(|d| d.join("grove"))
            .ok_or(ConfigError::NoStateDir)
    }
}

/// The first directory systemd passes in `var` (it may pass several,
/// colon-separated; the first is ours), if set and not empty.
fn first_systemd_dir(var: &str) -> Option<PathBuf> {
    let dirs = std::env::var_os(var).filter(|d| !d.is_empty())?;
    let first = dirs.to_string_lossy().split(':').next()?.to_string();
    Some(PathBuf::from(first))
}

/// Replaces the values of secret-looking keys with `"********"`.
/// A key names a secret when one of its words is "secret", "password" or
/// "token", or it ends in "_key" (`api_token`, yes; `max_tokens`, no).
fn is_secret_key(key: &str) -> bool {
    key.split('_')
        .any(|w| ["secret", "password", "token"].contains(&w))
        || key.ends_with("_key")
}

fn mask_secrets(v: &mut serde_json::Value) {
    if let serde_json::Value::Object(map) = v {
        for (k, v) in map.iter_mut() {
            let secret = is_secret_key(k);
            if secret && !v.is_null() {
                *v = serde_json::Value::String("********".into());
            } else {
                mask_secrets(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tracing-subscriber panics on a blank before a multi-byte character
    /// (found by the config property test): refused before it is reached.
    #[test]
    fn a_log_level_the_filter_parser_would_panic_on_is_refused() {
        for level in ["\u{b}À=", " À=info", "inof", "grove=debug, info", ""] {
            let log = LogSettings {
                level: level.into(),
                ..LogSettings::default()
            };
            assert!(log.check().is_err(), "{level:?}");
        }
        for level in ["info", "grove=debug,info", "WARN", "off"] {
            let log = LogSettings {
                level: level.into(),
                ..LogSettings::default()
            };
            assert!(log.check().is_ok(), "{level:?}");
        }
    }

    #[test]
    fn only_keys_that_name_a_secret_are_masked() {
        for key in ["api_token", "token", "secret", "db_password", "signing_key"] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in ["max_tokens", "api_key_env", "tokenizer", "turn_quota_secs"] {
            assert!(!is_secret_key(key), "{key}");
        }
        let mut v = Settings::default().effective();
        mask_secrets(&mut v);
        assert_ne!(v["moot"]["max_tokens"], "********");
    }
}
