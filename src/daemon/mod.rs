//! The node daemon (`grove node run`): opens the state, serves the control
//! socket, tells systemd when it is ready and when it stops, and shuts down
//! gracefully on SIGTERM or SIGINT.
//!
//! [`run`] takes its shutdown signal as a future so tests can embed a node.

pub mod control;
pub mod mesh_actor;
pub mod model_thread;
pub mod moots;
pub mod node;
pub mod notify;
pub mod peers;
pub mod rpc;
pub mod stats;
pub mod turns;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use crate::api::books::LocalBooks;
use crate::api::dto;
use crate::api::server::{self, StoreThread};
use crate::config::Settings;

/// How long in-flight control requests may take to finish at shutdown; the
/// whole process exits well within systemd's 10 s budget.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(7);

/// Why the daemon could not start or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    #[error("state directory {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "control socket {path} is in use by a running grove node; stop it first, or give this node its own state directory or control.socket"
    )]
    SocketInUse { path: PathBuf },
    #[error("control socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting the store thread: {0}")]
    StoreThread(std::io::Error),
    #[error("node identity: {0}")]
    Identity(#[from] crate::identity::IdentityError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("network: {0}")]
    Net(#[from] crate::net::NetError),
    #[error("mesh state: {0}")]
    Mesh(#[from] crate::mesh::store::StoreError),
    #[error("node database: {0}")]
    NodeDb(#[from] rusqlite::Error),
    #[error("starting a worker thread: {0}")]
    MeshThread(std::io::Error),
}

/// Runs the node until `shutdown` completes.
pub async fn run(
    settings: Settings,
    state_dir: PathBuf,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DaemonError> {
    std::fs::create_dir_all(&state_dir).map_err(|e| DaemonError::StateDir {
        path: state_dir.clone(),
        source: e,
    })?;
    let net_config = settings.net.checked()?;
    settings
        .mesh
        .validate()
        .map_err(|(key, reason)| crate::config::ConfigError::Invalid {
            key: format!("mesh.{key}"),
            reason,
        })?;
    let identity =
        crate::identity::Identity::load_or_create(&state_dir.join(crate::identity::IDENTITY_DIR))?;
    let keypair = libp2p::identity::Keypair::ed25519_from_bytes(identity.signing_key().to_bytes())
        .map_err(|e| crate::net::NetError::Transport(format!("node key: {e}")))?;
    // The mesh state lock is held for the daemon's life: offline mesh
    // commands refuse to write beside it.
    // The socket first: a second node on this state gets the clearer
    // "in use" message rather than a lock error.
    let socket_path = settings.control_socket(&state_dir);
    let listener = bind_control_socket(&socket_path)?;
    let core = mesh_actor::MeshCore::open(&state_dir, identity, settings.mesh.timing())?;
    let peer_book = peers::PeerBook::open(&state_dir)?;
    let request_timeout = net_config.request_timeout;
    let (network, net_events) = crate::net::Network::start(keypair, net_config).await?;
    let bound = network.listeners().await?;
    let listen: Vec<String> = bound.iter().map(|a| a.to_string()).collect();
    tracing::info!(peer_id = %network.local_peer_id(), listen = ?listen, "network listening");
    let advertised = advertised_addresses(&settings.net.external_addresses, &bound);
    let books = LocalBooks::new(
        &state_dir,
        settings.limits.clone(),
        settings.default_shard.clone(),
    );
    let (store, store_thread) = StoreThread::spawn(books).map_err(DaemonError::StoreThread)?;
    let (mesh, mesh_thread) =
        mesh_actor::MeshActor::spawn(core).map_err(DaemonError::MeshThread)?;
    let model = model_thread::ModelThread::spawn(settings.model.clone(), state_dir.clone())
        .map_err(DaemonError::MeshThread)?;
    let node = node::Node::new(node::Parts {
        net: network.clone(),
        mesh,
        store: store.clone(),
        model,
        peers: peer_book,
        advertised,
        request_timeout,
        state_dir: state_dir.clone(),
        moot_settings: settings.moot.clone(),
        policy: settings.speaker.clone(),
        turn_retry: moots::TurnRetry {
            retries: settings.net.turn_retries,
            backoff: std::time::Duration::from_millis(settings.net.turn_retry_backoff_ms),
        },
    });
    let info = dto::NodeInfo {
        peer_id: network.local_peer_id().to_string(),
        listen,
        version: env!("CARGO_PKG_VERSION").to_string(),
        state_dir: state_dir.display().to_string(),
        pid: std::process::id(),
        started_ms: crate::now_ms(),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    // A book is sent whole in one request; allow it plus headroom.
    let max_body = usize::try_from(settings.limits.max_book_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(4096);
    let node_task = tokio::spawn(node.clone().run(net_events, stop_rx.clone()));
    let server = tokio::spawn(server::serve(
        listener,
        store.clone(),
        node.clone(),
        settings.node.name.clone(),
        info,
        max_body,
        stop_rx,
        SHUTDOWN_GRACE,
    ));

    let notifier = notify::Notifier::from_env();
    tracing::info!(state_dir = %state_dir.display(), socket = %socket_path.display(), "grove node ready");
    notifier.notify("READY=1\nSTATUS=serving the control socket");
    let watchdog = notify::Notifier::watchdog_interval().map(|every| {
        tokio::spawn(async move {
            let pinger = notify::Notifier::from_env();
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                pinger.notify("WATCHDOG=1");
            }
        })
    });

    shutdown.await;
    tracing::info!("shutting down: no new requests; finishing those in flight");
    notifier.notify("STOPPING=1\nSTATUS=shutting down");
    if let Some(w) = watchdog {
        w.abort();
    }
    let _ = stop_tx.send(true);
    if let Err(e) = server.await {
        tracing::warn!(error = %e, "control server task failed");
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), node_task).await;
    // In-flight request handlers may still hold node handles: give them a
    // moment, then the threads finish queued work (each a whole
    // transaction) and end once the last handle is gone.
    drop(node);
    drop(store);
    drop(network);
    let joined = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::task::spawn_blocking(move || (store_thread.join(), mesh_thread.join())),
    )
    .await;
    if !matches!(joined, Ok(Ok((Ok(()), Ok(()))))) {
        tracing::warn!("store or mesh thread did not end cleanly within the shutdown budget");
    }
    let _ = std::fs::remove_file(&socket_path);
    tracing::info!("stopped");
    Ok(())
}

/// What invites and announcements advertise: `net.external_addresses` when
/// set, else the bound addresses that another host could dial (unspecified
/// and, when others exist, loopback addresses left out).
pub fn advertised_addresses(
    external: &[String],
    bound: &[libp2p::Multiaddr],
) -> Vec<libp2p::Multiaddr> {
    use libp2p::multiaddr::Protocol;
    if !external.is_empty() {
        return external.iter().filter_map(|a| a.parse().ok()).collect();
    }
    let unspecified = |a: &libp2p::Multiaddr| {
        a.iter().any(|p| match p {
            Protocol::Ip4(ip) => ip.is_unspecified(),
            Protocol::Ip6(ip) => ip.is_unspecified(),
            _ => false,
        })
    };
    let loopback = |a: &libp2p::Multiaddr| {
        a.iter().any(|p| match p {
            Protocol::Ip4(ip) => ip.is_loopback(),
            Protocol::Ip6(ip) => ip.is_loopback(),
            _ => false,
        })
    };
    let usable: Vec<libp2p::Multiaddr> =
        bound.iter().filter(|a| !unspecified(a)).cloned().collect();
    let routable: Vec<libp2p::Multiaddr> =
        usable.iter().filter(|a| !loopback(a)).cloned().collect();
    if routable.is_empty() {
        usable
    } else {
        routable
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
