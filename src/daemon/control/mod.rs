//! The control socket: HTTP/1.1 + JSON on a Unix socket, routed by axum.
//! [`router`] is the one route table (every path, its method and its
//! handler); each handler takes only the part of the node it needs
//! (axum's `State` sub-states), and answers a `dto` type or an
//! [`ApiError`], whose kind picks the HTTP status.

mod books;
mod conn;
mod doctor;
mod mesh;
mod moots;
mod peers;

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;

pub use self::books::Books;
pub use self::mesh::MeshOps;
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

substate!(books: Books, mesh: MeshOps, node: NodeView, moots: MootHost, rpc: Rpc, info: Arc<dto::NodeInfo>);

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

/// The route table: every control endpoint, once.
pub fn router(state: ControlState) -> Router {
    let max_body = state.books.max_body;
    Router::new()
        .route("/v1/node", get(books::node_info))
        .route("/v1/books", get(books::list))
        .route("/v1/books/add", post(books::add))
        .route("/v1/books/show", get(books::show))
        .route("/v1/books/remove", post(books::remove))
        .route("/v1/books/proof", get(books::proof))
        .route("/v1/books/verify", get(books::verify))
        .route("/v1/books/search", post(books::search))
        .route("/v1/shards", get(books::shards))
        .route("/v1/shards/compact", post(books::compact))
        .route("/v1/audit", get(books::audit))
        .route("/v1/identity", get(peers::identity))
        .route("/v1/peers", get(peers::peers))
        .route("/v1/roots", get(peers::roots))
        .route("/v1/node/stats", get(peers::stats))
        .route("/v1/node/doctor", get(doctor::doctor))
        .route("/v1/node/gossip", get(peers::gossip))
        .route("/v1/mesh/status", get(mesh::status))
        .route("/v1/mesh/watch", get(mesh::watch))
        .route("/v1/mesh/proposals", get(mesh::proposals))
        .route("/v1/mesh/invites", get(mesh::invites))
        .route("/v1/mesh/init", post(mesh::init))
        .route("/v1/mesh/invite", post(mesh::invite))
        .route("/v1/mesh/invite/revoke", post(mesh::revoke))
        .route("/v1/mesh/join", post(mesh::join))
        .route("/v1/mesh/propose", post(mesh::propose))
        .route("/v1/mesh/vote", post(mesh::vote))
        .route("/v1/mesh/withdraw", post(mesh::withdraw))
        .route("/v1/mesh/leave", post(mesh::leave))
        .route("/v1/moots", get(moots::list))
        .route("/v1/moot/start", post(moots::start))
        .route("/v1/moot/resume", post(moots::resume))
        .route("/v1/moot/show", get(moots::show))
        .route("/v1/moot/export", get(moots::export))
        .fallback(unknown)
        .layer(axum::middleware::from_fn(log_request))
        .method_not_allowed_fallback(unknown)
        // A book is sent whole in one request; its handler says the limit.
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state)
}

pub use self::conn::serve;
