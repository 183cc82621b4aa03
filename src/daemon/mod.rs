//! The node daemon (`grove node run`): opens the state, serves the control
//! socket, tells systemd when it is ready and when it stops, and shuts down
//! gracefully on SIGTERM or SIGINT.
//!
//! [`run`] takes its shutdown signal as a future so tests can embed a node.

pub mod notify;

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
    let identity =
        crate::identity::Identity::load_or_create(&state_dir.join(crate::identity::IDENTITY_DIR))?;
    let socket_path = settings.control_socket(&state_dir);
    let listener = bind_control_socket(&socket_path)?;
    let keypair = libp2p::identity::Keypair::ed25519_from_bytes(identity.signing_key().to_bytes())
        .map_err(|e| crate::net::NetError::Transport(format!("node key: {e}")))?;
    let (network, mut net_events) = crate::net::Network::start(keypair, net_config).await?;
    let listen: Vec<String> = network
        .listeners()
        .await?
        .iter()
        .map(|a| a.to_string())
        .collect();
    tracing::info!(peer_id = %network.local_peer_id(), listen = ?listen, "network listening");
    // The mesh layer does not consume network events yet (issue 5's next
    // step): they are logged at debug, and nothing from the network reaches
    // the store or the mesh state.
    let net_task = tokio::spawn(async move {
        while let Some(event) = net_events.recv().await {
            tracing::debug!(?event, "network event");
        }
    });
    let books = LocalBooks::new(
        &state_dir,
        settings.limits.clone(),
        settings.default_shard.clone(),
    );
    let (store, store_thread) = StoreThread::spawn(books).map_err(DaemonError::StoreThread)?;
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
    let server = tokio::spawn(server::serve(
        listener,
        store,
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
    // The server held the last store handles; the thread finishes queued
    // work (each a whole transaction) and ends.
    let joined = tokio::task::spawn_blocking(move || store_thread.join()).await;
    if !matches!(joined, Ok(Ok(()))) {
        tracing::warn!("store thread ended abnormally");
    }
    drop(network);
    net_task.abort();
    let _ = std::fs::remove_file(&socket_path);
    tracing::info!("stopped");
    Ok(())
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
