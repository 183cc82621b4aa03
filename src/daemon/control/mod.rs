//! The control socket: HTTP/1.1 + JSON on a Unix socket, routed by axum.
//! `routes` is the one route table (every path, its method, its handler
//! and whether the HTTP listener serves it too: [`router`] takes all,
//! [`http_router`] the listener's); each handler takes only the part of the node it needs
//! (axum's `State` sub-states), and answers a `dto` type or an
//! [`ApiError`], whose kind picks the HTTP status.

mod books;
mod conn;
mod doctor;
mod events;
mod mesh;
mod moots;
mod observe;
mod peers;

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::de::DeserializeOwned;

pub use self::books::Books;
pub use self::events::StreamSlots;
pub use self::mesh::MeshOps;
pub use self::observe::{Observe, Verdict};
pub use self::peers::NodeView;
use super::events::Events;
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
    /// The node's event stream.
    pub events: Events,
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

substate!(books: Books, mesh: MeshOps, node: NodeView, moots: MootHost, rpc: Rpc, info: Arc<dto::NodeInfo>, observe: Observe, events: Events);

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

/// Where requests are counted: the listener's name and the paths of its
/// routes (anything else counts as `unknown`, so peers' typos cannot grow
/// the counters).
#[derive(Clone)]
struct Counted {
    listener: &'static str,
    paths: Arc<std::collections::BTreeSet<&'static str>>,
    stats: Arc<super::stats::Stats>,
}

/// Logs every request (at debug), so an operator can see what reached the
/// daemon, and counts it by listener and endpoint
/// (`control.requests.<listener>.<path>`).
async fn log_request(
    axum::extract::State(counted): axum::extract::State<Counted>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path();
    tracing::debug!(method = %request.method(), %path, listener = counted.listener, "control request");
    let endpoint = counted.paths.get(path).copied().unwrap_or("unknown");
    counted
        .stats
        .bump(&format!("control.requests.{}.{endpoint}", counted.listener));
    next.run(request).await
}

/// Where a route is served: the control socket serves every route; the
/// HTTP listener only the probes, read-only views and the event stream
/// (no secrets, nothing that changes state).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Served {
    Socket,
    Both,
}

/// The route table: every endpoint, once, with where it is served.
fn routes() -> Vec<(&'static str, MethodRouter<ControlState>, Served)> {
    use Served::{Both, Socket};
    let mut table = vec![
        ("/health", get(observe::health), Both),
        ("/metrics", get(observe::metrics), Both),
        ("/v1/events", get(events::events), Both),
        ("/v1/node", get(books::node_info), Both),
        ("/v1/books", get(books::list), Both),
        ("/v1/books/add", post(books::add), Socket),
        ("/v1/books/show", get(books::show), Socket),
        ("/v1/books/remove", post(books::remove), Socket),
        ("/v1/books/proof", get(books::proof), Socket),
        ("/v1/books/verify", get(books::verify), Socket),
        ("/v1/books/search", post(books::search), Socket),
        ("/v1/shards", get(books::shards), Both),
        ("/v1/shards/compact", post(books::compact), Socket),
        ("/v1/audit", get(books::audit), Socket),
        ("/v1/identity", get(peers::identity), Socket),
        ("/v1/peers", get(peers::peers), Both),
        ("/v1/roots", get(peers::roots), Socket),
        ("/v1/node/stats", get(peers::stats), Both),
        ("/v1/node/doctor", get(doctor::doctor), Socket),
        ("/v1/node/gossip", get(peers::gossip), Socket),
        ("/v1/mesh/status", get(mesh::status), Both),
        ("/v1/mesh/proposals", get(mesh::proposals), Both),
        ("/v1/mesh/invites", get(mesh::invites), Socket),
        ("/v1/mesh/init", post(mesh::init), Socket),
        ("/v1/mesh/invite", post(mesh::invite), Socket),
        ("/v1/mesh/invite/revoke", post(mesh::revoke), Socket),
        ("/v1/mesh/join", post(mesh::join), Socket),
        ("/v1/mesh/propose", post(mesh::propose), Socket),
        ("/v1/mesh/vote", post(mesh::vote), Socket),
        ("/v1/mesh/withdraw", post(mesh::withdraw), Socket),
        ("/v1/mesh/leave", post(mesh::leave), Socket),
        ("/v1/moots", get(moots::list), Both),
        ("/v1/moot/start", post(moots::start), Socket),
        ("/v1/moot/resume", post(moots::resume), Socket),
        ("/v1/moot/show", get(moots::show), Both),
        ("/v1/moot/export", get(moots::export), Socket),
    ];
    // The web pages (`daemon::web`), on both.
    table.extend(super::web::routes().into_iter().map(|(p, m)| (p, m, Both)));
    table
}

/// `mesh status`, for the web overview.
pub(crate) async fn mesh_status(ops: &MeshOps) -> Result<dto::MeshStatus, ApiError> {
    mesh::status(axum::extract::State(ops.clone()))
        .await
        .map(|j| j.0)
}

/// Every member's announced roots, for the web overview.
pub(crate) async fn roots(node: &NodeView) -> dto::RootsView {
    peers::roots(axum::extract::State(node.clone())).await.0
}

/// The control socket's router: every route.
pub fn router(state: ControlState) -> Router {
    let all = routes().into_iter().map(|(path, method, _)| (path, method));
    finish(all.collect(), state, "socket")
}

/// The HTTP listener's router: the same handlers, its routes only.
pub fn http_router(state: ControlState) -> Router {
    let narrow = routes()
        .into_iter()
        .filter(|(_, _, served)| *served == Served::Both)
        .map(|(path, method, _)| (path, method));
    finish(narrow.collect(), state, "http")
}

fn finish(
    routes: Vec<(&'static str, MethodRouter<ControlState>)>,
    state: ControlState,
    listener: &'static str,
) -> Router {
    let max_body = state.books.max_body;
    let counted = Counted {
        listener,
        paths: Arc::new(routes.iter().map(|(path, _)| *path).collect()),
        stats: state.node.stats.clone(),
    };
    routes
        .into_iter()
        .fold(Router::new(), |r, (path, method)| r.route(path, method))
        .fallback(unknown)
        .layer(axum::middleware::from_fn_with_state(counted, log_request))
        .method_not_allowed_fallback(unknown)
        // A book is sent whole in one request; its handler says the limit.
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state)
}

pub use self::conn::serve;
