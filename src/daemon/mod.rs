//! The node daemon (`grove node run`): opens the state, serves the control
//! socket, tells systemd when it is ready and when it stops, and shuts down
//! gracefully on SIGTERM or SIGINT.
//!
//! [`run`] takes its shutdown signal as a future so tests can embed a node.

pub mod advertised;
pub mod ask;
pub mod control;
pub mod due;
pub mod events;
pub mod gossip;
pub mod hooks;
pub mod http;
pub mod integrity;
pub mod mesh;
pub mod metrics;
pub mod model;
pub mod moots;
pub mod node;
pub mod notify;
pub mod outbox;
pub mod peers;
pub mod rpc;
pub mod stats;
pub mod store;
pub mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::api::dto;
use crate::books::LocalBooks;
use crate::config::{Config, Settings};
use crate::state_dir::StateDir;

/// How long in-flight control requests may take to finish at shutdown; the
/// whole process exits well within systemd's 10 s budget.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(7);

/// How long a node whose part died keeps answering (`/health` says 503
/// and names the part) before it stops, so probes record why.
pub const UNHEALTHY_LINGER: Duration = Duration::from_secs(3);

/// Why the daemon could not start or run. A variant with a source names
/// only its own context: `main` prints the chain (`{:#}`), so the cause
/// appears once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    #[error(
        "control socket {path} is in use by a running grove node; stop it first, or give this node its own state directory or control.socket"
    )]
    SocketInUse { path: PathBuf },
    #[error("control socket {path}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot listen on {addr} (net.listen): {ip} must be an address of this host (or 0.0.0.0 / ::)"
    )]
    Listen {
        addr: String,
        ip: std::net::IpAddr,
        source: std::io::Error,
    },
    #[error("node identity")]
    Identity(#[from] crate::identity::IdentityError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("network")]
    Net(#[from] crate::net::NetError),
    #[error("mesh state")]
    Mesh(#[from] crate::mesh::store::MeshStoreError),
    /// Opening the mesh worker's state, which finishes a key update.
    #[error("mesh state")]
    MeshOpen(#[from] mesh::ActorError),
    #[error(transparent)]
    Storage(#[from] crate::db::StorageError),
    #[error(transparent)]
    Damaged(#[from] crate::db::Damaged),
    #[error("shards")]
    Shards(#[from] crate::store::StoreError),
    #[error("HTTP listener")]
    Http(#[from] http::HttpError),
    #[error("starting a worker thread")]
    Worker(#[source] std::io::Error),
    #[error(
        "the {0} stopped (it panicked); the node exits so that its service manager restarts it"
    )]
    Unhealthy(&'static str),
}

/// Runs the node until `shutdown` completes, on `config` (checked once by
/// [`crate::config::Settings::check`]).
pub async fn run(
    config: Config,
    state_dir: PathBuf,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DaemonError> {
    let settings = config.settings();
    let Opened {
        keypair,
        socket_path,
        listener,
        http,
        core,
        peer_book,
    } = Opened::open(&config, &state_dir)?;
    // One registry for /metrics: libp2p's own families, then grove's.
    let mut registry = prometheus_client::registry::Registry::default();
    let (network, net_events) =
        crate::net::Network::start_with_metrics(keypair, config.net().clone(), &mut registry)
            .await?;
    let bound = network.listeners().await?;
    let listen: Vec<String> = bound.iter().map(|a| a.to_string()).collect();
    tracing::info!(peer_id = %network.local_peer_id(), listen = ?listen, "network listening");
    let advertised = advertised::Advertised::new(&settings.net.external_addresses, network.clone());
    let books = LocalBooks::new(
        &state_dir,
        settings.limits.clone(),
        settings.default_shard.clone(),
    );
    let (store, store_thread) = store::StoreWorker::spawn(books).map_err(DaemonError::Worker)?;
    let (mesh_worker, mesh_thread) = mesh::MeshWorker::spawn(core).map_err(DaemonError::Worker)?;
    // The one set of counters (`node stats`, `/metrics`); the model worker counts in it.
    let stats = Arc::new(stats::Stats::default());
    let (model, ask_cache, ask_cache_thread) = spawn_asking(settings, &state_dir, &stats)?;
    let events = mesh_worker.events().clone();
    let integrity = integrity::Integrity::default();
    let background = Background::spawn(settings, &state_dir, &events, &integrity);
    let (verdict, verdict_rx) = watch::channel(None);
    let health = Health::new(
        &store,
        &mesh_worker,
        (&model, &ask_cache),
        &network,
        verdict,
    );
    health.inject_fault_if_asked();
    let parts = Parts {
        settings,
        state_dir: &state_dir,
        net: network.clone(),
        store: store.clone(),
        mesh: mesh_worker,
        model,
        ask_cache,
        stats,
        peers: peers::Peers::new(peer_book),
        advertised,
        verdict: verdict_rx,
        integrity,
    };
    let (node, control) = wire_up(parts, listen, registry);
    let tasks = Tasks::start(node, net_events, listener, http, control, background);
    let notifier = notify::Notifier::from_env();
    tracing::info!(state_dir = %state_dir.display(), socket = %socket_path.display(), "grove node ready");
    notifier.notify("READY=1\nSTATUS=serving the control socket");
    let outcome = serve_until(shutdown, &health, &tasks.node).await;
    tracing::info!("shutting down: no new requests; finishing those in flight");
    notifier.notify("STOPPING=1\nSTATUS=shutting down");
    tasks.stop(&events).await;
    // In-flight request handlers may still hold worker handles: give them a
    // moment, then the threads finish queued work (each a whole
    // transaction) and end once the last handle is gone. The health check
    // holds handles of every worker too.
    drop(health);
    drop(store);
    drop(network);
    join_workers(vec![store_thread, mesh_thread, ask_cache_thread]).await;
    let _ = std::fs::remove_file(&socket_path);
    tracing::info!("stopped");
    outcome
}

/// The workers an ask runs on beside the store: the model, and `ask.db`'s
/// owner (whose thread is joined at shutdown; the model's holds no files).
fn spawn_asking(
    settings: &Settings,
    state_dir: &Path,
    stats: &Arc<stats::Stats>,
) -> Result<
    (
        model::ModelWorker,
        ask::CacheWorker,
        std::thread::JoinHandle<()>,
    ),
    DaemonError,
> {
    let (model, _model_thread) = model::ModelWorker::spawn(
        settings.model.clone(),
        state_dir.to_path_buf(),
        stats.clone(),
    )
    .map_err(DaemonError::Worker)?;
    let (cache, cache_thread) =
        ask::spawn_cache(state_dir.to_path_buf()).map_err(DaemonError::Worker)?;
    Ok((model, cache, cache_thread))
}

/// What a start opens before the network: checked in this order so a start
/// that fails on its settings or its state leaves nothing behind.
struct Opened {
    keypair: libp2p::identity::Keypair,
    socket_path: PathBuf,
    listener: tokio::net::UnixListener,
    http: Option<http::Listener>,
    core: mesh::MeshCore,
    peer_book: peers::PeerBook,
}

impl Opened {
    fn open(config: &Config, state_dir: &Path) -> Result<Opened, DaemonError> {
        let settings = config.settings();
        check_listen_addresses(&config.net().listen)?;
        StateDir::new(state_dir).make(crate::state_dir::Folder::Root)?;
        let identity = crate::identity::load_or_create(&StateDir::new(state_dir).identity())?;
        let keypair =
            libp2p::identity::Keypair::ed25519_from_bytes(identity.signing_key().to_bytes())
                .map_err(|e| crate::net::NetError::Transport(format!("node key: {e}")))?;
        // The socket first: a second node on this state gets the clearer
        // "in use" message rather than a lock error. The mesh state lock is
        // then held for the daemon's life: offline mesh commands refuse to
        // write beside it.
        let socket_path = settings.control_socket(state_dir);
        let listener = bind_control_socket(&socket_path)?;
        check_databases(state_dir)?;
        let http = http::Listener::bind(&settings.http, state_dir)?;
        let core = mesh::MeshCore::open(state_dir, identity, settings.mesh.timing())?;
        let peer_book = open_peer_book(state_dir)?;
        Ok(Opened {
            keypair,
            socket_path,
            listener,
            http,
            core,
            peer_book,
        })
    }
}

/// Serves until `shutdown`, or until a part of the node dies: then `/health`
/// answers 503 naming it for a linger, and the start's caller sees why.
async fn serve_until(
    shutdown: impl std::future::Future<Output = ()>,
    health: &Health,
    node_task: &tokio::task::JoinHandle<()>,
) -> Result<(), DaemonError> {
    tokio::pin!(shutdown);
    tokio::select! {
        _ = &mut shutdown => Ok(()),
        dead = health.watch(node_task) => {
            tracing::error!(part = dead, linger_secs = UNHEALTHY_LINGER.as_secs(), "a part of the node stopped; shutting down after the linger");
            tokio::select! {
                _ = &mut shutdown => {}
                _ = tokio::time::sleep(UNHEALTHY_LINGER) => {}
            }
            Err(DaemonError::Unhealthy(dead))
        }
    }
}

/// The node's tasks: the node loop, the control server, the HTTP listener
/// and the background ones.
struct Tasks {
    stop: watch::Sender<bool>,
    node: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<()>,
    http: Option<tokio::task::JoinHandle<()>>,
    background: Background,
}

/// The tasks beside the node loop: the hook runner (ends when the event
/// stream closes) and the periodic integrity check (aborted at shutdown:
/// it only reads).
struct Background {
    hooks: Option<tokio::task::JoinHandle<()>>,
    integrity: Option<tokio::task::JoinHandle<()>>,
}

impl Background {
    fn spawn(
        settings: &Settings,
        state_dir: &Path,
        events: &events::Events,
        integrity: &integrity::Integrity,
    ) -> Background {
        let every = settings.node.integrity_check_secs;
        Background {
            hooks: hooks::spawn(&settings.hooks, events),
            integrity: (every > 0).then(|| {
                tokio::spawn(integrity::run(
                    state_dir.to_path_buf(),
                    Duration::from_secs(every),
                    integrity.clone(),
                    events.clone(),
                ))
            }),
        }
    }
}

impl Tasks {
    /// Starts the node loop and the control server.
    fn start(
        node: node::NodeLoop,
        net_events: tokio::sync::mpsc::Receiver<crate::net::Event>,
        listener: tokio::net::UnixListener,
        http: Option<http::Listener>,
        control: control::ControlState,
        background: Background,
    ) -> Tasks {
        let (stop, stop_rx) = watch::channel(false);
        let node = tokio::spawn(node.run(net_events, stop_rx.clone()));
        let http = http.map(|h| {
            let router = control::http_router(control.clone());
            tokio::spawn(h.serve(router, stop_rx.clone(), SHUTDOWN_GRACE))
        });
        let server = tokio::spawn(control::serve(
            listener,
            control::router(control),
            stop_rx,
            SHUTDOWN_GRACE,
        ));
        Tasks {
            stop,
            node,
            server,
            http,
            background,
        }
    }

    /// Tells every task to stop and waits for each within the shutdown
    /// budget.
    async fn stop(self, events: &events::Events) {
        let _ = self.stop.send(true);
        // Ends the event streams (so in-flight requests can finish)
        // and the hook runner.
        events.close();
        if let Err(e) = self.server.await {
            tracing::warn!(error = %e, "control server task failed");
        }
        if let Some(http) = self.http
            && let Err(e) = http.await
        {
            tracing::warn!(error = %e, "HTTP listener task failed");
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), self.node).await;
        if let Some(integrity) = self.background.integrity {
            integrity.abort();
        }
        if let Some(hooks) = self.background.hooks {
            let _ = tokio::time::timeout(Duration::from_secs(2), hooks).await;
        }
    }
}

/// The parts whose death leaves a node that only looks alive: the workers,
/// the network task and the node loop. The watchdog pings only while all
/// answer.
struct Health {
    store: store::StoreWorker,
    mesh: mesh::MeshWorker,
    model: model::ModelWorker,
    ask_cache: ask::CacheWorker,
    net: crate::net::Network,
    /// The latest verdict, for `/health`.
    verdict: watch::Sender<Option<&'static str>>,
}

impl Health {
    /// The workers' handles (the model's with `ask.db`'s, the two an ask
    /// runs on), the network and where the verdict goes.
    fn new(
        store: &store::StoreWorker,
        mesh: &mesh::MeshWorker,
        (model, ask_cache): (&model::ModelWorker, &ask::CacheWorker),
        net: &crate::net::Network,
        verdict: watch::Sender<Option<&'static str>>,
    ) -> Health {
        Health {
            store: store.clone(),
            mesh: mesh.clone(),
            model: model.clone(),
            ask_cache: ask_cache.clone(),
            net: net.clone(),
            verdict,
        }
    }
}

/// How often health is checked when systemd set no watchdog.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

impl Health {
    /// The first part found dead, if any.
    fn failed(&self, node_task: &tokio::task::JoinHandle<()>) -> Option<&'static str> {
        if !self.store.is_alive() {
            Some("store worker")
        } else if !self.mesh.is_alive() {
            Some("mesh worker")
        } else if !self.model.is_alive() {
            Some("model worker")
        } else if !self.ask_cache.is_alive() {
            Some("ask cache worker")
        } else if !self.net.is_alive() {
            Some("network task")
        } else if node_task.is_finished() {
            Some("node loop")
        } else {
            None
        }
    }

    /// Checks health at half the watchdog interval (or every second) and
    /// pings the watchdog while every part is alive; returns the first part
    /// that died.
    async fn watch(&self, node_task: &tokio::task::JoinHandle<()>) -> &'static str {
        let watchdog = notify::Notifier::watchdog_interval();
        let every = watchdog.unwrap_or(HEALTH_EVERY).min(HEALTH_EVERY);
        let pinger = notify::Notifier::from_env();
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let failed = self.failed(node_task);
            self.verdict
                .send_if_modified(|v| std::mem::replace(v, failed) != failed);
            if let Some(dead) = failed {
                return dead;
            }
            if watchdog.is_some() {
                pinger.notify("WATCHDOG=1");
            }
        }
    }

    /// The test-only fault switch: `GROVETEST_PANIC=store|mesh|model` makes
    /// that worker panic a second after start.
    fn inject_fault_if_asked(&self) {
        let Some(which) = std::env::var_os("GROVETEST_PANIC") else {
            return;
        };
        let (store, mesh, model) = (self.store.clone(), self.mesh.clone(), self.model.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tracing::warn!(worker = ?which, "GROVETEST_PANIC: injecting a fault");
            match which.to_str() {
                Some("store") => store.inject_panic().await,
                Some("mesh") => mesh.inject_panic().await,
                Some("model") => model.inject_panic().await,
                _ => tracing::warn!("GROVETEST_PANIC names no worker (store, mesh, model)"),
            }
        });
    }
}

/// Binds each `/ip4|ip6/ADDR/tcp/…` listen address's IP on a free port for
/// a moment: an address that is not this host's fails here, before the
/// identity, socket and databases exist, rather than in the network's own
/// bind after them; so does a port another process already listens on
/// (the network's own check, `net::refuse_port_in_use`, run early here).
fn check_listen_addresses(addrs: &[libp2p::Multiaddr]) -> Result<(), DaemonError> {
    use libp2p::multiaddr::Protocol;
    for addr in addrs {
        let ip: std::net::IpAddr = match addr.iter().next() {
            Some(Protocol::Ip4(ip)) => ip.into(),
            Some(Protocol::Ip6(ip)) => ip.into(),
            _ => continue,
        };
        std::net::TcpListener::bind((ip, 0)).map_err(|source| DaemonError::Listen {
            addr: addr.to_string(),
            ip,
            source,
        })?;
        crate::net::refuse_port_in_use(addr)?;
    }
    Ok(())
}

/// `node.db`, created private first (the state directory's file-mode
/// policy).
/// `PRAGMA quick_check` on every database of the state directory before the
/// node serves from them: damage stops the start, named with the way out.
fn check_databases(state_dir: &Path) -> Result<(), DaemonError> {
    let files = crate::store::Store::new(state_dir).databases()?;
    let start = std::time::Instant::now();
    let checked = crate::db::check_all(&files)?;
    let slowest = checked.iter().max_by_key(|c| c.took);
    tracing::info!(
        databases = checked.len(),
        ms = start.elapsed().as_millis() as u64,
        slowest = ?slowest.map(|c| c.path.display().to_string()),
        slowest_ms = slowest.map_or(0, |c| c.took.as_millis() as u64),
        "databases checked (quick_check)"
    );
    Ok(())
}

fn open_peer_book(state_dir: &Path) -> Result<peers::PeerBook, DaemonError> {
    Ok(peers::PeerBook::open(state_dir)?)
}

/// Waits (within the shutdown budget) for the worker threads to finish
/// their queued transactions.
async fn join_workers(threads: Vec<std::thread::JoinHandle<()>>) {
    let joined = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::task::spawn_blocking(move || threads.into_iter().all(|t| t.join().is_ok())),
    )
    .await;
    if !matches!(joined, Ok(Ok(true))) {
        tracing::warn!("store or mesh thread did not end cleanly within the shutdown budget");
    }
}

/// The workers and handles a node is wired from.
struct Parts<'a> {
    settings: &'a Settings,
    state_dir: &'a Path,
    net: crate::net::Network,
    store: store::StoreWorker,
    mesh: mesh::MeshWorker,
    model: model::ModelWorker,
    ask_cache: ask::CacheWorker,
    stats: Arc<stats::Stats>,
    peers: peers::Peers,
    advertised: advertised::Advertised,
    verdict: control::Verdict,
    integrity: integrity::Integrity,
}

/// Wires the node loop and the control routes from the workers: each gets
/// the handles it needs and nothing else.
fn wire_up(
    p: Parts<'_>,
    listen: Vec<String>,
    registry: prometheus_client::registry::Registry,
) -> (node::NodeLoop, control::ControlState) {
    let stats = p.stats.clone();
    let due = Arc::new(due::Due::default());
    let link = outbox::MeshLink::new(p.mesh.clone(), p.net.clone(), stats.clone());
    let speaking = speaking(&p);
    let rpc = rpc_handlers(&p, &link, speaking.clone(), &stats);
    let moots = moot_host(&p, speaking, &due, &stats);
    let asker = ask::Asker::new(
        rpc.clone(),
        p.model.clone(),
        due.clone(),
        p.ask_cache.clone(),
        p.settings.model.profile(p.state_dir),
    );
    let gossip = gossip::Gossip::new(
        link.clone(),
        p.net.clone(),
        p.peers.clone(),
        p.store.clone(),
        stats.clone(),
        due.clone(),
        p.advertised.clone(),
    );
    let started_ms = crate::now_ms();
    let events = p.mesh.events().clone();
    let control = control::ControlState {
        books: book_ops(&p, &due, &events),
        mesh: mesh_ops(&p, &link),
        observe: control::Observe {
            health: p.verdict.clone(),
            metrics: Arc::new(metrics::Metrics::new(stats.clone(), registry)),
            mesh: p.mesh.clone(),
            peers: p.peers.clone(),
            store: p.store.clone(),
            integrity: p.integrity.clone(),
        },
        node: control::NodeView {
            me: p.net.local_peer_id(),
            mesh: p.mesh,
            peers: p.peers.clone(),
            stats: stats.clone(),
            recent: gossip.recent.clone(),
            started_ms,
            net: p.net.clone(),
            advertised: p.advertised,
        },
        moots: moots.clone(),
        asker,
        events,
        rpc: rpc.clone(),
        info: Arc::new(dto::NodeInfo {
            peer_id: p.net.local_peer_id().to_string(),
            listen,
            version: env!("CARGO_PKG_VERSION").to_string(),
            state_dir: p.state_dir.display().to_string(),
            pid: std::process::id(),
            started_ms,
        }),
    };
    let node = node::NodeLoop {
        net: p.net,
        mesh: link,
        peers: p.peers,
        stats,
        due,
        gossip,
        rpc,
        moots,
    };
    (node, control)
}

/// The control routes' book operations.
fn book_ops(p: &Parts<'_>, due: &Arc<due::Due>, events: &events::Events) -> control::Books {
    control::Books {
        store: p.store.clone(),
        due: due.clone(),
        events: events.clone(),
        stats: p.stats.clone(),
        // A book is sent whole in one request; allow it plus headroom.
        max_body: usize::try_from(p.settings.limits.max_book_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(4096),
    }
}

/// The control routes' mesh operations, joining included.
fn mesh_ops(p: &Parts<'_>, link: &outbox::MeshLink) -> control::MeshOps {
    control::MeshOps {
        link: link.clone(),
        joiner: rpc::join::Joiner {
            mesh: link.clone(),
            net: p.net.clone(),
            peers: p.peers.clone(),
            progress: Default::default(),
        },
        advertised: p.advertised.clone(),
        node_name: p.settings.node.name.clone(),
    }
}

/// What speaking a turn needs, from the node's workers.
fn speaking(p: &Parts<'_>) -> rpc::turn::Speaking {
    rpc::turn::Speaking {
        store: p.store.clone(),
        model: p.model.clone(),
        mesh: p.mesh.clone(),
        policy: p.settings.speaker.clone(),
    }
}

/// The request-response protocols, both sides (answering other peers and
/// asking them).
fn rpc_handlers(
    p: &Parts<'_>,
    link: &outbox::MeshLink,
    speaker: rpc::turn::Speaking,
    stats: &Arc<stats::Stats>,
) -> rpc::Rpc {
    rpc::Rpc {
        mesh: link.clone(),
        net: p.net.clone(),
        peers: p.peers.clone(),
        store: p.store.clone(),
        speaker,
        stats: stats.clone(),
        limits: rpc::limits::Limits::new(&p.settings.net),
        relay_serve: p
            .settings
            .net
            .relay
            .serve
            .parse()
            .unwrap_or(crate::net::RelayServe::Members),
    }
}

/// The host of the moots started on this node.
fn moot_host(
    p: &Parts<'_>,
    speaking: rpc::turn::Speaking,
    due: &Arc<due::Due>,
    stats: &Arc<stats::Stats>,
) -> moots::MootHost {
    moots::MootHost {
        mesh: p.mesh.clone(),
        net: p.net.clone(),
        peers: p.peers.clone(),
        speaking,
        book: Arc::new(moots::book::MootBook::open(p.state_dir)),
        settings: p.settings.moot.clone(),
        retry: moots::TurnRetry {
            retries: p.settings.net.turn_retries,
            backoff: Duration::from_millis(p.settings.net.turn_retry_backoff_ms),
        },
        due: due.clone(),
        stats: stats.clone(),
        events: p.mesh.events().clone(),
    }
}

/// Binds the control socket with mode 0660, replacing a stale socket file
/// but never one a running node still answers on.
fn bind_control_socket(path: &Path) -> Result<tokio::net::UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |e| DaemonError::Socket {
        path: path.to_path_buf(),
        source: e,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(DaemonError::SocketInUse {
                path: path.to_path_buf(),
            });
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(err)?;
    Ok(listener)
}
