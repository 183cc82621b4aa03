//! Layered configuration: a TOML file, then `GROVE_*` environment variables
//! (`__` separates nested keys), then flags; validated into [`Settings`].
//!
//! Raw values are deserialized with `deny_unknown_fields`, so a misspelt key
//! is refused with its name instead of being silently ignored.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default config file, read when present and no `--config` is given.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/grove/grove.toml";

/// Where the packaged service (`systemd/grove.service`, `RuntimeDirectory=grove`)
/// puts its control socket.
pub const SYSTEM_SOCKET: &str = "/run/grove/grove.sock";

/// Errors while loading or validating configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config: {0}")]
    Load(String),
    #[error("config key `{key}`: {reason}")]
    Invalid { key: String, reason: String },
    #[error("no state directory: pass --state, set state_dir (GROVE_STATE_DIR), or set $HOME")]
    NoStateDir,
    #[error(
        "{var} is not a config key: there is no key `{key}` (GROVE_SECTION__KEY sets `section.key`)"
    )]
    UnknownVariable { var: String, key: String },
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

/// How books are fetched from http(s) URLs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchSettings {
    pub connect_timeout_secs: u64,
    pub timeout_secs: u64,
    pub max_redirects: usize,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            connect_timeout_secs: 10,
            timeout_secs: 120,
            max_redirects: 5,
        }
    }
}

/// The daemon's control socket.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSettings {
    /// Socket path; default `$RUNTIME_DIRECTORY/grove.sock` under systemd,
    /// else `grove.sock` in the state directory.
    pub socket: Option<PathBuf>,
}

/// This node as members see it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSettings {
    /// Display name members see.
    pub name: Option<String>,
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
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            key: format!("net.relay.{key}"),
            reason,
        };
        let serve = self.serve.parse().map_err(|e| invalid("serve", e))?;
        for (key, value) in [
            ("max_reservations", self.max_reservations),
            ("max_reservations_per_peer", self.max_reservations_per_peer),
            ("max_circuits", self.max_circuits),
            ("max_circuits_per_peer", self.max_circuits_per_peer),
        ] {
            if !(1..=65_536).contains(&value) {
                return Err(invalid(key, "must be between 1 and 65536".into()));
            }
        }
        if !(60..=86_400).contains(&self.reservation_secs) {
            return Err(invalid(
                "reservation_secs",
                "must be between 60 and 86400".into(),
            ));
        }
        if self.circuit_secs < turn_timeout_secs || self.circuit_secs > 86_400 {
            return Err(invalid(
                "circuit_secs",
                format!(
                    "must be between net.turn_timeout_secs ({turn_timeout_secs}) and 86400, so a turn fits in one circuit"
                ),
            ));
        }
        if self.circuit_bytes < 1 << 20 {
            return Err(invalid("circuit_bytes", "must be at least 1 MiB".into()));
        }
        if self.use_relays > 8 {
            return Err(invalid("use_relays", "must be at most 8".into()));
        }
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
        }
    }
}

impl NetSettings {
    /// The checked network configuration, or the key and reason it is refused.
    pub fn checked(&self) -> Result<crate::net::NetConfig, ConfigError> {
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            key: key.to_string(),
            reason,
        };
        let parse = |key: &str, list: &[String]| -> Result<Vec<libp2p::Multiaddr>, ConfigError> {
            list.iter()
                .map(|a| {
                    a.parse()
                        .map_err(|e| invalid(key, format!("`{a}` is not a multiaddr: {e}")))
                })
                .collect()
        };
        let listen = parse("net.listen", &self.listen)?;
        if listen.is_empty() {
            return Err(invalid("net.listen", "needs at least one address".into()));
        }
        let external = parse("net.external_addresses", &self.external_addresses)?;
        let relays = parse("net.relays", &self.relays)?;
        for relay in &relays {
            if !matches!(
                relay.iter().last(),
                Some(libp2p::multiaddr::Protocol::P2p(_))
            ) {
                return Err(invalid(
                    "net.relays",
                    format!("`{relay}` does not end in /p2p/<peer id> (the relay's identity)"),
                ));
            }
        }
        let reachability = self
            .reachability
            .parse()
            .map_err(|e| invalid("net.reachability", e))?;
        let relay = self.relay.checked(self.turn_timeout_secs)?;
        if !(4096..=16 << 20).contains(&self.max_message_bytes) {
            return Err(invalid(
                "net.max_message_bytes",
                "must be between 4 KiB and 16 MiB".into(),
            ));
        }
        if self.max_connections == 0 {
            return Err(invalid(
                "net.max_connections",
                "must be greater than 0".into(),
            ));
        }
        if self.request_timeout_secs == 0 || self.idle_timeout_secs == 0 {
            return Err(invalid(
                "net.request_timeout_secs",
                "timeouts must be greater than 0".into(),
            ));
        }
        if self.turn_timeout_secs == 0 {
            return Err(invalid(
                "net.turn_timeout_secs",
                "must be greater than 0".into(),
            ));
        }
        if self.turn_retry_backoff_ms == 0 || self.turn_retry_backoff_ms > 60_000 {
            return Err(invalid(
                "net.turn_retry_backoff_ms",
                "must be between 1 and 60000".into(),
            ));
        }
        if self.turn_retries > 20 {
            return Err(invalid("net.turn_retries", "must be at most 20".into()));
        }
        for (key, value) in [
            (
                "net.max_stranger_connections",
                self.max_stranger_connections,
            ),
            (
                "net.max_stranger_connections_per_ip",
                self.max_stranger_connections_per_ip,
            ),
            ("net.max_pending_incoming", self.max_pending_incoming),
            (
                "net.max_pending_incoming_per_ip",
                self.max_pending_incoming_per_ip,
            ),
            ("net.rate.join", self.rate.join),
            ("net.rate.sync", self.rate.sync),
            ("net.rate.search", self.rate.search),
            ("net.rate.turn", self.rate.turn),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be greater than 0".into()));
            }
        }
        for (key, value) in [
            ("net.join_window_secs", self.join_window_secs),
            ("net.request_read_secs", self.request_read_secs),
            ("net.turn_quota_secs", self.turn_quota_secs),
        ] {
            if value == 0 || value > 86_400 {
                return Err(invalid(key, "must be between 1 and 86400".into()));
            }
        }
        if !(1..=1024).contains(&self.max_inbound_streams) {
            return Err(invalid(
                "net.max_inbound_streams",
                "must be between 1 and 1024".into(),
            ));
        }
        if !(1..=4096).contains(&self.max_request_tasks) {
            return Err(invalid(
                "net.max_request_tasks",
                "must be between 1 and 4096".into(),
            ));
        }
        if self.inflight_request_bytes < self.max_message_bytes {
            return Err(invalid(
                "net.inflight_request_bytes",
                format!(
                    "must be at least net.max_message_bytes ({})",
                    self.max_message_bytes
                ),
            ));
        }
        if !(16..=self.max_message_bytes).contains(&self.max_query_bytes) {
            return Err(invalid(
                "net.max_query_bytes",
                "must be between 16 and net.max_message_bytes".into(),
            ));
        }
        Ok(crate::net::NetConfig {
            listen,
            max_message_bytes: self.max_message_bytes,
            max_connections: self.max_connections,
            request_timeout: std::time::Duration::from_secs(self.request_timeout_secs),
            turn_timeout: std::time::Duration::from_secs(self.turn_timeout_secs),
            idle_timeout: std::time::Duration::from_secs(self.idle_timeout_secs),
            admission: crate::net::AdmissionLimits {
                max_strangers: self.max_stranger_connections as usize,
                max_strangers_per_ip: self.max_stranger_connections_per_ip as usize,
                max_pending: self.max_pending_incoming as usize,
                max_pending_per_ip: self.max_pending_incoming_per_ip as usize,
                join_window: std::time::Duration::from_secs(self.join_window_secs),
            },
            request_read: std::time::Duration::from_secs(self.request_read_secs),
            max_inbound_streams: self.max_inbound_streams,
            inflight_request_bytes: self.inflight_request_bytes,
            reachability,
            external,
            relays,
            relay,
        })
    }
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
    /// The listen address, checked; on error returns the key (under
    /// `http.`) and why.
    pub fn listen_addr(&self) -> Result<Option<std::net::SocketAddr>, (&'static str, String)> {
        if let Some(token) = &self.token
            && (token.chars().count() < MIN_HTTP_TOKEN_CHARS
                || token.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err((
                "token",
                format!(
                    "at least {MIN_HTTP_TOKEN_CHARS} characters, no spaces or control characters"
                ),
            ));
        }
        let Some(listen) = &self.listen else {
            return Ok(None);
        };
        listen.trim().parse().map(Some).map_err(|_| {
            (
                "listen",
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
    /// Checks the values; on error returns the key (under `hooks.`) and why.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if let Some(p) = &self.program
            && !p.is_absolute()
        {
            return Err(("program", "must be an absolute path".into()));
        }
        if let Some(bad) = self
            .events
            .iter()
            .find(|e| !crate::daemon::events::NAMES.contains(&e.as_str()))
        {
            return Err((
                "events",
                format!(
                    "unknown event `{bad}`; known: {}",
                    crate::daemon::events::NAMES.join(", ")
                ),
            ));
        }
        if !(1..=3600).contains(&self.timeout_secs) {
            return Err(("timeout_secs", "must be between 1 s and one hour".into()));
        }
        if !(1..=64).contains(&self.max_running) {
            return Err(("max_running", "must be between 1 and 64".into()));
        }
        Ok(())
    }
}

impl Settings {
    /// Loads settings from `file` (or the default file when it exists), then
    /// `GROVE_*` environment variables.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut builder = config::Config::builder();
        match file {
            Some(path) => {
                if !path.is_file() {
                    return Err(ConfigError::Load(format!(
                        "config file {} does not exist or is not a file",
                        path.display()
                    )));
                }
                builder =
                    builder.add_source(config::File::from(path).format(config::FileFormat::Toml));
            }
            None if Path::new(DEFAULT_CONFIG_FILE).is_file() => {
                builder = builder.add_source(
                    config::File::with_name(DEFAULT_CONFIG_FILE).format(config::FileFormat::Toml),
                );
            }
            None => {}
        }
        check_environment(std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()))?;
        builder = builder.add_source(
            config::Environment::with_prefix("GROVE")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true),
        );
        // Name the file in every load error (a wrong type or unknown key
        // in it), since the message alone may not.
        let origin = match file {
            Some(path) => path.display().to_string(),
            None if Path::new(DEFAULT_CONFIG_FILE).is_file() => DEFAULT_CONFIG_FILE.to_string(),
            None => "the environment".to_string(),
        };
        let load = |e: config::ConfigError| ConfigError::Load(format!("{origin}: {e}"));
        let raw = builder.build().map_err(load)?;
        let settings: Settings = raw.try_deserialize().map_err(load)?;
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: &str| ConfigError::Invalid {
            key: key.to_string(),
            reason: reason.to_string(),
        };
        if self.limits.max_book_bytes == 0 {
            return Err(invalid("limits.max_book_bytes", "must be greater than 0"));
        }
        if self.limits.max_chunk_bytes == 0 {
            return Err(invalid("limits.max_chunk_bytes", "must be greater than 0"));
        }
        if self.fetch.timeout_secs == 0 || self.fetch.connect_timeout_secs == 0 {
            return Err(invalid(
                "fetch.timeout_secs",
                "timeouts must be greater than 0",
            ));
        }
        if self.log.level.trim().is_empty() {
            return Err(invalid("log.level", "must not be empty (e.g. info)"));
        }
        if !LOG_FORMATS.contains(&self.log.format.as_str()) {
            return Err(invalid("log.format", "`text` or `json`"));
        }
        if let Some(name) = &self.node.name
            && (name.trim().is_empty() || name.len() > 64 || name.chars().any(char::is_control))
        {
            return Err(invalid(
                "node.name",
                "1 to 64 characters, no control characters",
            ));
        }
        self.net.checked()?;
        if let Err((key, reason)) = self.mesh.validate() {
            return Err(invalid(&format!("mesh.{key}"), &reason));
        }
        if let Err((key, reason)) = self.hooks.validate() {
            return Err(invalid(&format!("hooks.{key}"), &reason));
        }
        if let Err((key, reason)) = self.http.listen_addr() {
            return Err(invalid(&format!("http.{key}"), &reason));
        }
        self.moot
            .validate()
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        if let Err((key, reason)) = self.speaker.validate() {
            return Err(invalid(key, &reason));
        }
        if let Some(shard) = &self.default_shard {
            crate::store::validate_shard_name(shard)
                .map_err(|e| invalid("default_shard", &e.to_string()))?;
        }
        Ok(())
    }

    /// The control socket: `control.socket`, else `$RUNTIME_DIRECTORY/grove.sock`
    /// (systemd), else `grove.sock` in the state directory, so several nodes
    /// with their own state directories run side by side.
    pub fn control_socket(&self, state_dir: &Path) -> PathBuf {
        self.configured_socket()
            .unwrap_or_else(|| state_dir.join("grove.sock"))
    }

    /// The socket named outright: `control.socket`, else systemd's
    /// `$RUNTIME_DIRECTORY/grove.sock`; `None` when the state directory decides.
    fn configured_socket(&self) -> Option<PathBuf> {
        if let Some(path) = &self.control.socket {
            return Some(path.clone());
        }
        first_systemd_dir("RUNTIME_DIRECTORY").map(|dir| dir.join("grove.sock"))
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
        let own = state_dir.join("grove.sock");
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

/// Every config key, dotted (`net.listen`), from the settings' own shape.
pub fn known_keys() -> Vec<String> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        if let serde_json::Value::Object(map) = v {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(key.clone());
                walk(&key, v, out);
            }
        }
    }
    let mut keys = Vec::new();
    walk(
        "",
        &serde_json::to_value(Settings::default()).unwrap_or_default(),
        &mut keys,
    );
    keys
}

/// Refuses a `GROVE_*` variable that names no config key, by its own name
/// (the config loader would only say ``unknown field `nope` ``).
fn check_environment(vars: impl Iterator<Item = String>) -> Result<(), ConfigError> {
    let known = known_keys();
    for var in vars {
        let Some(rest) = var.strip_prefix("GROVE_") else {
            continue;
        };
        let key = rest.to_ascii_lowercase().replace("__", ".");
        if !known.contains(&key) {
            return Err(ConfigError::UnknownVariable { var, key });
        }
    }
    Ok(())
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
