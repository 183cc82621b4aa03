//! The control socket: HTTP/1.1 + JSON on a Unix socket, routed by axum.
//! `routes` is the one route table (every path, its method, its handler
//! and whether the HTTP listener serves it too: [`router`] takes all,
//! [`http_router`] the listener's); each handler takes only the part of the node it needs
//! (axum's `State` sub-states), and answers a `dto` type or an
//! [`ApiError`], whose kind picks the HTTP status.

mod ask;
mod books;
mod conn;
mod doctor;
mod events;
mod mesh;
mod moots;
mod observe;
mod peers;
pub mod web;

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
use super::ask::Asker;
use super::events::Events;
use super::moots::MootHost;
use super::rpc::Rpc;
use crate::api::routes;
use crate::api::{ApiError, ErrorKind, dto};

/// Everything the routes can reach; each handler extracts only its part.
#[derive(Clone)]
pub struct ControlState {
    pub books: Books,
    pub mesh: MeshOps,
    pub node: NodeView,
    pub moots: MootHost,
    /// Asks of the books (this node's, or the mesh's).
    pub asker: Asker,
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

substate!(books: Books, mesh: MeshOps, node: NodeView, moots: MootHost, asker: Asker, rpc: Rpc, info: Arc<dto::NodeInfo>, observe: Observe, events: Events);

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
        (routes::HEALTH, get(observe::health), Both),
        (routes::METRICS, get(observe::metrics), Both),
        (routes::EVENTS, get(events::events), Both),
        (routes::NODE, get(books::node_info), Both),
        (routes::BOOKS, get(books::list), Both),
        (routes::BOOKS_ADD, post(books::add), Socket),
        (routes::BOOKS_SHOW, get(books::show), Socket),
        (routes::BOOKS_REMOVE, post(books::remove), Socket),
        (routes::BOOKS_PROOF, get(books::proof), Socket),
        (routes::BOOKS_VERIFY, get(books::verify), Socket),
        (routes::BOOKS_SEARCH, post(books::search), Socket),
        (routes::SHARDS, get(books::shards), Both),
        (routes::SHARDS_COMPACT, post(books::compact), Socket),
        (routes::AUDIT, get(books::audit), Socket),
        (routes::IDENTITY, get(peers::identity), Socket),
        (routes::IDENTITY_ROTATE, post(mesh::rotate_key), Socket),
        (routes::PEERS, get(peers::peers), Both),
        (routes::ROOTS, get(peers::roots), Socket),
        (routes::NODE_STATS, get(peers::stats), Both),
        (routes::NODE_DOCTOR, get(doctor::doctor), Socket),
        (routes::NODE_GOSSIP, get(peers::gossip), Socket),
        (routes::MESH_STATUS, get(mesh::status), Both),
        (routes::MESH_PROPOSALS, get(mesh::proposals), Both),
        (routes::MESH_INVITES, get(mesh::invites), Socket),
        (routes::MESH_INIT, post(mesh::init), Socket),
        (routes::MESH_INVITE, post(mesh::invite), Socket),
        (routes::MESH_INVITE_REVOKE, post(mesh::revoke), Socket),
        (routes::MESH_JOIN, post(mesh::join), Socket),
        (routes::MESH_PROPOSE, post(mesh::propose), Socket),
        (routes::MESH_VOTE, post(mesh::vote), Socket),
        (routes::MESH_WITHDRAW, post(mesh::withdraw), Socket),
        (routes::MESH_LEAVE, post(mesh::leave), Socket),
        (routes::MOOTS, get(moots::list), Both),
        (routes::MOOT_START, post(moots::start), Socket),
        (routes::MOOT_RESUME, post(moots::resume), Socket),
        (routes::MOOT_SHOW, get(moots::show), Both),
        (routes::MOOT_EXPORT, get(moots::export), Socket),
        (routes::ASK, post(ask::ask), Socket),
    ];
    // The web pages (`control::web`), on both.
    table.extend(web::routes().into_iter().map(|(p, m)| (p, m, Both)));
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
