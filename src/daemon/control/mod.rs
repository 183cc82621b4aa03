//! The control socket: HTTP/1.1 + JSON on a Unix socket, routed by axum.
//! [`router`] is the one route table (every path, its method and its
//! handler); each handler takes only the part of the node it needs
//! (axum's `State` sub-states), and answers a `dto` type or an
//! [`ApiError`], whose kind picks the HTTP status.

mod books;
mod doctor;
mod mesh;
mod moots;
mod observe;
mod peers;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::de::DeserializeOwned;
use tokio::net::UnixListener;
use tokio::sync::watch;

pub use self::books::Books;
pub use self::mesh::MeshOps;
pub use self::observe::{Observe, Verdict};
pub use self::peers::NodeView;
use super::moots::MootHost;
use super::rpc::Rpc;
use crate::api::{ApiError, ErrorKind, dto};

/// Everything the routes can reach; each handler extracts only its part.
#[derive(Clone)]
pub struct ControlState {
    pub books: Books,
    pub mesh: MeshOps,
    pub node: NodeView,
    pub moots: MootHost,
    /// The mesh-wide search asks other members over the network.
    pub rpc: Rpc,
    pub info: Arc<dto::NodeInfo>,
    pub observe: Observe,
}

macro_rules! substate {
    ($($field:ident: $ty:ty),* $(,)?) => {
        $(impl FromRef<ControlState> for $ty {
            fn from_ref(state: &ControlState) -> $ty {
                state.$field.clone()
            }
        })*
    };
}

substate!(books: Books, mesh: MeshOps, node: NodeView, moots: MootHost, rpc: Rpc, info: Arc<dto::NodeInfo>, observe: Observe);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = dto::ErrorBody {
            error: self.message,
        };
        (status, axum::Json(body)).into_response()
    }
}

/// A handler's answer: a JSON shape, or the error the CLI prints.
pub type Answer<T> = Result<axum::Json<T>, ApiError>;

/// Query parameters, refused with the control API's own error shape.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e| ApiError::bad_request(format!("query parameters: {}", e.body_text())))
    }
}

async fn unknown(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorKind::NotFound,
        format!("no such control endpoint: {method} {}", uri.path()),
    )
}

/// Logs every request (at debug), so an operator can see what reached the
/// daemon.
async fn log_request(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    tracing::debug!(method = %request.method(), path = %request.uri().path(), "control request");
    next.run(request).await
}

/// The route table: every endpoint, once. The control socket serves all
/// of it; the HTTP listener the paths in [`HTTP_ROUTES`].
fn routes() -> Vec<(&'static str, MethodRouter<ControlState>)> {
    vec![
        ("/health", get(observe::health)),
        ("/metrics", get(observe::metrics)),
        ("/v1/node", get(books::node_info)),
        ("/v1/books", get(books::list)),
        ("/v1/books/add", post(books::add)),
        ("/v1/books/show", get(books::show)),
        ("/v1/books/remove", post(books::remove)),
        ("/v1/books/proof", get(books::proof)),
        ("/v1/books/verify", get(books::verify)),
        ("/v1/books/search", post(books::search)),
        ("/v1/shards", get(books::shards)),
        ("/v1/shards/compact", post(books::compact)),
        ("/v1/audit", get(books::audit)),
        ("/v1/identity", get(peers::identity)),
        ("/v1/peers", get(peers::peers)),
        ("/v1/roots", get(peers::roots)),
        ("/v1/node/stats", get(peers::stats)),
        ("/v1/node/doctor", get(doctor::doctor)),
        ("/v1/node/gossip", get(peers::gossip)),
        ("/v1/mesh/status", get(mesh::status)),
        ("/v1/mesh/watch", get(mesh::watch)),
        ("/v1/mesh/proposals", get(mesh::proposals)),
        ("/v1/mesh/invites", get(mesh::invites)),
        ("/v1/mesh/init", post(mesh::init)),
        ("/v1/mesh/invite", post(mesh::invite)),
        ("/v1/mesh/invite/revoke", post(mesh::revoke)),
        ("/v1/mesh/join", post(mesh::join)),
        ("/v1/mesh/propose", post(mesh::propose)),
        ("/v1/mesh/vote", post(mesh::vote)),
        ("/v1/mesh/withdraw", post(mesh::withdraw)),
        ("/v1/mesh/leave", post(mesh::leave)),
        ("/v1/moots", get(moots::list)),
        ("/v1/moot/start", post(moots::start)),
        ("/v1/moot/resume", post(moots::resume)),
        ("/v1/moot/show", get(moots::show)),
        ("/v1/moot/export", get(moots::export)),
    ]
}

/// What the HTTP listener serves: the probes and read-only views (no
/// secrets, nothing that changes state, nothing that streams).
pub const HTTP_ROUTES: &[&str] = &[
    "/health",
    "/metrics",
    "/v1/node",
    "/v1/node/stats",
    "/v1/peers",
    "/v1/mesh/status",
    "/v1/mesh/proposals",
    "/v1/books",
    "/v1/shards",
    "/v1/moots",
    "/v1/moot/show",
];

/// The control socket's router: every route.
pub fn router(state: ControlState) -> Router {
    finish(routes(), state)
}

/// The HTTP listener's router: the same handlers, [`HTTP_ROUTES`] only.
pub fn http_router(state: ControlState) -> Router {
    let narrow = routes()
        .into_iter()
        .filter(|(path, _)| HTTP_ROUTES.contains(path))
        .collect();
    finish(narrow, state)
}

fn finish(routes: Vec<(&'static str, MethodRouter<ControlState>)>, state: ControlState) -> Router {
    let max_body = state.books.max_body;
    routes
        .into_iter()
        .fold(Router::new(), |r, (path, method)| r.route(path, method))
        .fallback(unknown)
        .layer(axum::middleware::from_fn(log_request))
        .method_not_allowed_fallback(unknown)
        // A book is sent whole in one request; its handler says the limit.
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// Serves `router` on the control socket until `shutdown` turns true, then
/// lets in-flight requests finish (at most `grace`).
pub async fn serve(
    listener: UnixListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut stop = shutdown.clone();
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = stop.wait_for(|s| *s).await;
    });
    let mut task = tokio::spawn(async move { server.await });
    tokio::select! {
        ended = &mut task => {
            if let Ok(Err(e)) = ended {
                tracing::warn!(error = %e, "control server ended");
            }
            return;
        }
        _ = shutdown.wait_for(|s| *s) => {}
    }
    if tokio::time::timeout(grace, &mut task).await.is_err() {
        tracing::warn!("control requests still running at shutdown were cut off");
        task.abort();
    }
}
