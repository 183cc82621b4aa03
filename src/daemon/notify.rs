//! systemd readiness protocol (`sd_notify`): READY=1, STOPPING=1 and
//! watchdog pings sent to `$NOTIFY_SOCKET` when systemd sets it.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Where notifications go; a no-op when not started by systemd.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<(UnixDatagram, std::path::PathBuf)>,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET` (a path; abstract `@names` are not used by
    /// grove's tests and are skipped with a debug message).
    pub fn from_env() -> Notifier {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|path| {
            let path = std::path::PathBuf::from(path);
            if path.as_os_str().to_string_lossy().starts_with('@') {
                return Self::abstract_socket(&path);
            }
            UnixDatagram::unbound().ok().map(|s| (s, path))
        });
        Notifier { socket }
    }

    #[cfg(target_os = "linux")]
    fn abstract_socket(path: &std::path::Path) -> Option<(UnixDatagram, std::path::PathBuf)> {
        use std::os::linux::net::SocketAddrExt;
        let name = path.as_os_str().to_string_lossy();
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(&name.as_bytes()[1..]).ok()?;
        let socket = UnixDatagram::unbound().ok()?;
        socket.connect_addr(&addr).ok()?;
        Some((socket, std::path::PathBuf::new()))
    }

    #[cfg(not(target_os = "linux"))]
    fn abstract_socket(_: &std::path::Path) -> Option<(UnixDatagram, std::path::PathBuf)> {
        None
    }

    /// Sends one notification; failures are logged, never fatal.
    pub fn notify(&self, state: &str) {
        let Some((socket, path)) = &self.socket else {
            return;
        };
        let sent = if path.as_os_str().is_empty() {
            socket.send(state.as_bytes())
        } else {
            socket.send_to(state.as_bytes(), path)
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, state, "systemd notification failed");
        }
    }

    /// How often to ping the watchdog: half of `$WATCHDOG_USEC`, when it is
    /// set for this process.
    pub fn watchdog_interval() -> Option<Duration> {
        let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
        if let Some(pid) = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            && pid != std::process::id()
        {
            return None;
        }
        (usec > 0).then(|| Duration::from_micros(usec / 2))
    }
}
