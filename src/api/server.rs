//! The control socket's server: HTTP/1.1 + JSON on a Unix socket, each
//! request answered by the store thread through [`BookApi`].

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot, watch};

use super::books::{AddRequest, ApiError, BookApi, ErrorKind, LocalBooks, SearchRequest};
use super::dto;

/// A job for the store thread.
type Job = Box<dyn FnOnce(&LocalBooks) + Send>;

/// A handle to the thread that owns the state directory's databases: all
/// book operations run there, one at a time, so there is a single writer.
#[derive(Clone)]
pub struct StoreThread {
    jobs: mpsc::Sender<Job>,
}

impl StoreThread {
    /// Starts the thread; it ends when every handle is dropped, after
    /// finishing the jobs already queued.
    pub fn spawn(books: LocalBooks) -> std::io::Result<(StoreThread, std::thread::JoinHandle<()>)> {
        let (jobs, mut queue) = mpsc::channel::<Job>(64);
        let thread = std::thread::Builder::new()
            .name("grove-store".into())
            .spawn(move || {
                while let Some(job) = queue.blocking_recv() {
                    job(&books);
                }
            })?;
        Ok((StoreThread { jobs }, thread))
    }

    /// Runs `f` on the store thread and waits for its answer.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&LocalBooks) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |books| {
            let _ = reply.send(f(books));
        });
        let gone = || ApiError::new(ErrorKind::Unavailable, "the node is shutting down");
        self.jobs.send(job).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// Node endpoints outside `/v1/mesh` (answered by node_routes.rs).
const NODE_PATHS: &[&str] = &[
    "/v1/identity",
    "/v1/peers",
    "/v1/roots",
    "/v1/node/stats",
    "/v1/node/gossip",
];

/// Shared by every connection.
struct Shared {
    store: StoreThread,
    node: crate::daemon::node::Node,
    node_name: Option<String>,
    info: dto::NodeInfo,
    max_body: usize,
}

/// Serves the control socket until `shutdown` turns true, then lets
/// in-flight requests finish (at most `grace`).
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    listener: UnixListener,
    store: StoreThread,
    node: crate::daemon::node::Node,
    node_name: Option<String>,
    info: dto::NodeInfo,
    max_body: usize,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let shared = Arc::new(Shared {
        store,
        node,
        node_name,
        info,
        max_body,
    });
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "control socket accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let shared = shared.clone();
                let mut stop = shutdown.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |req| handle(req, shared.clone()));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        result = conn.as_mut() => {
                            if let Err(e) = result {
                                tracing::debug!(error = %e, "control connection ended with an error");
                            }
                        }
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("control requests still running at shutdown were cut off");
        connections.abort_all();
    }
}

pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Full<Bytes>> {
    let body =
        serde_json::to_vec(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}").into_bytes());
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

pub(super) fn error(e: &ApiError) -> Response<Full<Bytes>> {
    let status = match e.kind {
        ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json(
        status,
        &dto::ErrorBody {
            error: e.message.clone(),
        },
    )
}

pub(super) fn reply<T: Serialize>(result: Result<T, ApiError>) -> Response<Full<Bytes>> {
    match result {
        Ok(v) => json(StatusCode::OK, &v),
        Err(e) => error(&e),
    }
}

/// The query string as a map (later values win).
pub(super) fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

pub(super) fn bad(message: String) -> ApiError {
    ApiError::new(ErrorKind::BadRequest, message)
}

pub(super) fn required(q: &HashMap<String, String>, name: &str) -> Result<String, ApiError> {
    q.get(name)
        .cloned()
        .ok_or_else(|| bad(format!("missing query parameter `{name}`")))
}

pub(super) fn number<T: std::str::FromStr>(
    q: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, ApiError> {
    q.get(name)
        .map(|v| {
            v.parse::<T>()
                .map_err(|_| bad(format!("query parameter `{name}` is not a number: {v}")))
        })
        .transpose()
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let q = query(&req);
    let store = &shared.store;
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    tracing::debug!(%method, %path, "control request");
    let resp = match (method, path.as_str()) {
        (Method::GET, "/v1/node") => json(StatusCode::OK, &shared.info),
        (Method::POST, "/v1/books/add") => {
            let source = q
                .get("source")
                .cloned()
                .unwrap_or_else(|| "(control socket)".into());
            let add = AddRequest {
                key: q.get("key").cloned(),
                shard: q.get("shard").cloned(),
                source,
            };
            match Limited::new(req.into_body(), shared.max_body)
                .collect()
                .await
            {
                Ok(body) => {
                    let bytes = body.to_bytes();
                    let added = store.call(move |b| b.add(&add, &bytes, &mut |_| {})).await;
                    if added.is_ok() {
                        shared.node.books_changed();
                    }
                    reply(added)
                }
                Err(e) => error(&bad(format!(
                    "book body refused: {e} (limit {} bytes)",
                    shared.max_body
                ))),
            }
        }
        (Method::GET, "/v1/books") => {
            let all = q.get("all").is_some_and(|v| v == "true");
            reply(store.call(move |b| b.list(all)).await)
        }
        (Method::GET, "/v1/books/show") => match (required(&q, "key"), number(&q, "version")) {
            (Ok(key), Ok(version)) => reply(store.call(move |b| b.show(&key, version)).await),
            (Err(e), _) | (_, Err(e)) => error(&e),
        },
        (Method::POST, "/v1/books/remove") => match required(&q, "key") {
            Ok(key) => {
                let removed = store.call(move |b| b.remove(&key)).await;
                if removed.is_ok() {
                    shared.node.books_changed();
                }
                reply(removed)
            }
            Err(e) => error(&e),
        },
        (Method::GET, "/v1/books/proof") => {
            match (
                required(&q, "key"),
                number::<u64>(&q, "index"),
                number(&q, "version"),
            ) {
                (Ok(key), Ok(Some(index)), Ok(version)) => {
                    reply(store.call(move |b| b.proof(&key, index, version)).await)
                }
                (Ok(_), Ok(None), _) => error(&bad("missing query parameter `index`".into())),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => error(&e),
            }
        }
        (Method::GET, "/v1/books/verify") => match (required(&q, "key"), number(&q, "version")) {
            (Ok(key), Ok(version)) => reply(store.call(move |b| b.verify(&key, version)).await),
            (Err(e), _) | (_, Err(e)) => error(&e),
        },
        (Method::GET, "/v1/books/search") => {
            match (
                required(&q, "q"),
                number(&q, "version"),
                number::<usize>(&q, "k"),
            ) {
                (Ok(query), Ok(version), Ok(k)) => {
                    let search = SearchRequest {
                        query,
                        key: q.get("key").cloned(),
                        version,
                        k: k.unwrap_or(6),
                    };
                    if q.get("mesh").is_some_and(|v| v == "true") {
                        reply(shared.node.mesh_search(search).await)
                    } else {
                        reply(store.call(move |b| b.search(&search)).await)
                    }
                }
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => error(&e),
            }
        }
        (Method::GET, "/v1/shards") => reply(store.call(|b| b.shards()).await),
        (Method::GET, "/v1/audit") => reply(store.call(|b| b.audit()).await),
        (method, path)
            if path.starts_with("/v1/mesh")
                || path.starts_with("/v1/moot")
                || NODE_PATHS.contains(&path) =>
        {
            super::node_routes::handle(&method, path, &q, &shared.node, shared.node_name.as_deref())
                .await
        }
        (method, path) => json(
            StatusCode::NOT_FOUND,
            &dto::ErrorBody {
                error: format!("no such control endpoint: {method} {path}"),
            },
        ),
    };
    Ok(resp)
}
