//! The operator's HTTP listener (`[http]`, off by default): `/health`,
//! `/metrics` and read-only views, from the control socket's own handlers
//! (`control::http_router`), behind the rules of Syncthing's GUI and
//! Tailscale's web client:
//!
//! - on a loopback listener the `Host` header must name loopback, so a
//!   DNS-rebinding page gets 403;
//! - a request that could change state (not GET or HEAD) must come from
//!   the same origin or carry the token, else 403;
//! - on any other listen address every route needs `Authorization: Bearer
//!   TOKEN` (401 without), except `/metrics` when
//!   `http.metrics_without_auth` is set;
//! - every answer says `X-Frame-Options: DENY`, `nosniff` and a CSP that
//!   allows nothing (a web page of `daemon::control::web`: its own scripts, styles
//!   and fetches only).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{Semaphore, watch};

use crate::api::dto;
use crate::config::HttpSettings;
use crate::state_dir::StateDir;

/// A client has this long to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 64;
/// Event streams (`/v1/events`) served at once, so long-lived streams
/// leave most connections for requests.
const MAX_STREAMS: usize = 16;

/// The CSP of every answer: nothing may load, nothing may frame it.
const CSP: &str = "default-src 'none'; frame-ancestors 'none'";

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot listen on {addr} (http.listen)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Storage(#[from] crate::db::StorageError),
}

/// Who may ask what, decided from the configured listen address.
#[derive(Debug, Clone)]
pub struct Guard {
    loopback: bool,
    token: Option<String>,
    metrics_without_auth: bool,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401: this listener needs the token.
    Unauthorized,
    /// 403, with the reason.
    Forbidden(&'static str),
}

impl Guard {
    pub fn new(listen: SocketAddr, token: Option<String>, metrics_without_auth: bool) -> Guard {
        Guard {
            loopback: listen.ip().is_loopback(),
            token,
            metrics_without_auth,
        }
    }

    /// The rules, in order: the Host check (loopback), the token (any
    /// other address), then the same-origin check for state changes.
    pub fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refusal> {
        if self.loopback && !headers.get(header::HOST).is_some_and(is_loopback_host) {
            return Err(Refusal::Forbidden(
                "the Host header must name this machine (localhost, 127.0.0.1 or [::1]) on a loopback listener",
            ));
        }
        let bearer = self.carries_token(headers);
        let open_metrics = path == "/metrics" && self.metrics_without_auth;
        if !(self.loopback || bearer || open_metrics) {
            return Err(Refusal::Unauthorized);
        }
        let safe = method == Method::GET || method == Method::HEAD;
        if !safe && !bearer && !same_origin(headers) {
            return Err(Refusal::Forbidden(
                "a request that changes state must come from the same origin or carry the token",
            ));
        }
        Ok(())
    }

    /// Whether `Authorization: Bearer` carries the token (compared in
    /// constant time).
    fn carries_token(&self, headers: &HeaderMap) -> bool {
        use subtle::ConstantTimeEq;
        let Some(token) = &self.token else {
            return false;
        };
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        given.trim().as_bytes().ct_eq(token.as_bytes()).into()
    }
}

/// `localhost`, a loopback IP, or `[::1]`, with an optional port.
fn is_loopback_host(value: &HeaderValue) -> bool {
    let Ok(host) = value.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        // `[::1]` or `[::1]:8470`.
        Some(rest) => match rest.split_once(']') {
            Some((ip, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) => {
                ip
            }
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_port(s: &str) -> bool {
    s.parse::<u16>().is_ok()
}

/// `Sec-Fetch-Site: same-origin`, or (without it) an `Origin` whose host
/// and port are the `Host` header's.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin";
    }
    match (text(header::ORIGIN.as_str()), text(header::HOST.as_str())) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host)),
        _ => false,
    }
}

/// The middleware: the rules, then the headers on every answer.
async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let mut response = match guard.check(request.method(), request.uri().path(), request.headers())
    {
        Ok(()) => next.run(request).await,
        Err(refusal) => refused(refusal),
    };
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // A web page sets its own, narrower policy (its own scripts and
    // styles); everything else allows nothing.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    response
}

fn refused(refusal: Refusal) -> Response {
    let (status, message) = match refusal {
        Refusal::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            "this listener needs Authorization: Bearer TOKEN (http.token, or the http.token file in the state directory)",
        ),
        Refusal::Forbidden(why) => (StatusCode::FORBIDDEN, why),
    };
    let body = axum::Json(dto::ErrorBody {
        error: message.to_string(),
    });
    let mut response = (status, body).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"grove\""),
        );
    }
    response
}

/// The bound listener with its rules; `None` when `http.listen` is unset.
pub struct Listener {
    listener: tokio::net::TcpListener,
    guard: Arc<Guard>,
}

impl Listener {
    /// Binds `http.listen` (before the node is ready, so a bad address
    /// fails the start) and settles the token: `http.token`, else on a
    /// non-loopback address the token file (made 0600 when missing).
    pub fn bind(settings: &HttpSettings, state_dir: &Path) -> Result<Option<Listener>, HttpError> {
        let addr = settings
            .listen_addr()
            .map_err(crate::config::ConfigError::from)?;
        let Some(addr) = addr else {
            return Ok(None);
        };
        let token = match &settings.token {
            Some(t) => Some(t.clone()),
            None if !addr.ip().is_loopback() => Some(token_file(state_dir)?),
            None => None,
        };
        let bind_err = |source| HttpError::Bind { addr, source };
        let std_listener = std::net::TcpListener::bind(addr).map_err(bind_err)?;
        std_listener.set_nonblocking(true).map_err(bind_err)?;
        let listener = tokio::net::TcpListener::from_std(std_listener).map_err(bind_err)?;
        let bound = listener.local_addr().map_err(bind_err)?;
        tracing::info!(listen = %bound, loopback = addr.ip().is_loopback(), "HTTP listener");
        Ok(Some(Listener {
            listener,
            guard: Arc::new(Guard::new(addr, token, settings.metrics_without_auth)),
        }))
    }

    /// Serves `router` behind the rules until `shutdown` turns true, then
    /// lets open connections finish their request (at most `grace`).
    pub async fn serve(self, router: Router, mut shutdown: watch::Receiver<bool>, grace: Duration) {
        let streams = super::control::StreamSlots(Arc::new(Semaphore::new(MAX_STREAMS)));
        let app = router
            .layer(axum::Extension(streams))
            .layer(axum::middleware::from_fn_with_state(self.guard, guard));
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let permit = tokio::select! {
                _ = shutdown.wait_for(|s| *s) => break,
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let accepted = tokio::select! {
                _ = shutdown.wait_for(|s| *s) => break,
                accepted = self.listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment
                    // rather than spin.
                    tracing::warn!(error = %e, "HTTP listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let app = app.clone();
            let stop = shutdown.clone();
            connections.spawn(async move {
                serve_connection(stream, app, stop).await;
                drop(permit);
            });
            // Reap finished connections so the set stays small.
            while connections.try_join_next().is_some() {}
        }
        let drained = tokio::time::timeout(grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("HTTP requests still running at shutdown were cut off");
            connections.abort_all();
        }
    }
}

/// One connection, HTTP/1.1, with a deadline for its request headers;
/// at shutdown it finishes the request in flight and closes.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
            return;
        }
        _ = stop.wait_for(|s| *s) => {}
    }
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

/// The token in the state directory's token file ([`StateDir::http_token`]), made (0600, 32
/// random bytes in hex) when missing.
fn token_file(state_dir: &Path) -> Result<String, HttpError> {
    use crate::db::{self, Put, StorageError};
    let path = StateDir::new(state_dir).http_token();
    let err = StorageError::at(&path, "read");
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => {
            tracing::info!(file = %path.display(), "HTTP token: read from the token file");
            return Ok(text.trim().to_string());
        }
        Ok(_) => {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the file is empty; delete it and grove makes a new token",
            ))
            .into());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e).into()),
    }
    let token = hex::encode(rand::random::<[u8; 32]>());
    db::write_private(&path, format!("{token}\n").as_bytes(), Put::New)?;
    tracing::info!(file = %path.display(), "HTTP token: made a new token file (mode 0600)");
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for ok in [
            "localhost",
            "localhost:8470",
            "127.0.0.1",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:8470",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(&HeaderValue::from_static(ok)), "{ok}");
        }
        for bad in [
            "rebind.example",
            "rebind.example:8470",
            "localhost.evil.example",
            "10.0.0.1",
            "[::2]:80",
            "127.0.0.1:x",
            "::1",
            "",
        ] {
            assert!(!is_loopback_host(&HeaderValue::from_static(bad)), "{bad}");
        }
    }

    #[test]
    fn the_rules_in_order() {
        let local: SocketAddr = "127.0.0.1:8470".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8470".parse().unwrap();
        let token = Some("0123456789abcdef".to_string());
        let g = Guard::new(local, None, false);
        let host = ("host", "127.0.0.1:8470");
        assert_eq!(g.check(&Method::GET, "/health", &headers(&[host])), Ok(()));
        assert!(matches!(
            g.check(
                &Method::GET,
                "/health",
                &headers(&[("host", "rebind.example")])
            ),
            Err(Refusal::Forbidden(_))
        ));
        assert!(g.check(&Method::POST, "/x", &headers(&[host])).is_err());
        let cross = headers(&[host, ("origin", "http://evil.example")]);
        assert!(g.check(&Method::POST, "/x", &cross).is_err());
        let same = headers(&[host, ("origin", "http://127.0.0.1:8470")]);
        assert_eq!(g.check(&Method::POST, "/x", &same), Ok(()));
        let fetch = headers(&[host, ("sec-fetch-site", "cross-site")]);
        assert!(g.check(&Method::POST, "/x", &fetch).is_err());

        let g = Guard::new(any, token.clone(), false);
        let bearer = ("authorization", "Bearer 0123456789abcdef");
        assert_eq!(
            g.check(&Method::GET, "/health", &headers(&[])),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            g.check(&Method::GET, "/metrics", &headers(&[])),
            Err(Refusal::Unauthorized)
        );
        let wrong = headers(&[("authorization", "Bearer 0123456789abcdeX")]);
        assert_eq!(
            g.check(&Method::GET, "/health", &wrong),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            g.check(&Method::GET, "/health", &headers(&[bearer])),
            Ok(())
        );
        assert_eq!(g.check(&Method::POST, "/x", &headers(&[bearer])), Ok(()));
        let g = Guard::new(any, token, true);
        assert_eq!(g.check(&Method::GET, "/metrics", &headers(&[])), Ok(()));
        assert_eq!(
            g.check(&Method::GET, "/health", &headers(&[])),
            Err(Refusal::Unauthorized)
        );
    }
}
