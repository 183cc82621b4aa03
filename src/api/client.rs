//! The control socket's client: the CLI's way to a running daemon. It
//! implements [`BookApi`], so a command prints the same whether the daemon
//! or the CLI itself did the work.

use std::path::{Path, PathBuf};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;

use super::books::{AddRequest, ApiError, BookApi, ErrorKind, SearchRequest};
use super::dto;
use super::routes;

/// Who ended a stream of lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The daemon ended it (it stopped, or dropped this reader).
    Daemon,
    /// The line callback asked to stop (e.g. stdout closed).
    Caller,
}

/// A connection target: the daemon's control socket.
pub struct Client {
    socket: PathBuf,
    runtime: tokio::runtime::Runtime,
}

impl Client {
    /// A client when a daemon answers on `socket`; `None` when nothing
    /// listens there (no socket file, or a stale one).
    pub fn connect(socket: &Path) -> Option<Client> {
        std::os::unix::net::UnixStream::connect(socket).ok()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(Client {
            socket: socket.to_path_buf(),
            runtime,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `POST /v1/books/search`: this node's books, or every member's.
    pub fn search_call(&self, req: &SearchRequest, mesh: bool) -> Result<dto::Hits, ApiError> {
        let call = dto::SearchCall {
            request: req.clone(),
            mesh,
        };
        let body = serde_json::to_vec(&call).map_err(|e| ApiError::internal(e.to_string()))?;
        self.request(Method::POST, routes::BOOKS_SEARCH, body)
    }

    /// `POST /v1/ask`: an ask on the daemon (its books, or the mesh's).
    pub fn ask_call(
        &self,
        call: &crate::api::ask::AskCall,
    ) -> Result<crate::api::ask::Answered, ApiError> {
        let body = serde_json::to_vec(call).map_err(|e| ApiError::internal(e.to_string()))?;
        self.request(Method::POST, routes::ASK, body)
    }

    /// One request; the answer's JSON as `T`, or the daemon's error.
    pub fn request<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> Result<T, ApiError> {
        let _ignored = PipeSignalIgnored::new();
        self.runtime.block_on(self.send(method, path, body))
    }

    /// A streaming request (`mesh watch`): calls `line` with each line of
    /// the answer as it arrives, until the daemon ends it or `line` returns
    /// false; says which.
    pub fn stream_lines(
        &self,
        path: &str,
        line: impl FnMut(&[u8]) -> bool,
    ) -> Result<StreamEnd, ApiError> {
        self.stream_after(path, None::<(&str, fn(()) -> bool)>, line)
    }

    /// [`stream_lines`](Self::stream_lines), asking `snapshot` (a GET of
    /// the state so far) once the stream is open, so nothing that happens
    /// after the snapshot is missed: its answer goes to the callback first
    /// (which returns false to stop there), then each line to `line`.
    pub fn stream_after<T: DeserializeOwned>(
        &self,
        path: &str,
        snapshot: Option<(&str, impl FnOnce(T) -> bool)>,
        mut line: impl FnMut(&[u8]) -> bool,
    ) -> Result<StreamEnd, ApiError> {
        self.runtime.block_on(async {
            let resp = self.open(Method::GET, path, Vec::new()).await?;
            let status = resp.status();
            let mut body = resp.into_body();
            if status != StatusCode::OK {
                let bytes = body
                    .collect()
                    .await
                    .map_err(|e| self.unavailable("answer", &e))?
                    .to_bytes();
                return Err(error_of(status, &bytes));
            }
            // The daemon subscribed before it answered the stream's head.
            if let Some((snapshot, first)) = snapshot {
                let state: T = self.send(Method::GET, snapshot, Vec::new()).await?;
                if !first(state) {
                    return Ok(StreamEnd::Caller);
                }
            }
            let mut pending = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| self.unavailable("answer", &e))?;
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                pending.extend_from_slice(data);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let rest = pending.split_off(end + 1);
                    if !line(&pending[..end]) {
                        return Ok(StreamEnd::Caller);
                    }
                    pending = rest;
                }
            }
            Ok(StreamEnd::Daemon)
        })
    }

    /// Why a stream the daemon ended (`cut`: with an error) ended: "the
    /// daemon stopped" when it no longer answers a request (a stopping
    /// daemon may still accept a connection and never serve it, hence the
    /// bound), else the error it was cut off with.
    pub fn stream_ended(&self, cut: Option<ApiError>) -> ApiError {
        let probe = self.runtime.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(3),
                self.send::<serde_json::Value>(Method::GET, routes::NODE, Vec::new()),
            )
            .await
        });
        if !matches!(probe, Ok(Ok(_))) {
            return ApiError::unavailable(format!(
                "the daemon stopped (nothing answers on {} any more)",
                self.socket.display()
            ));
        }
        cut.unwrap_or_else(|| ApiError::unavailable("the daemon ended the stream"))
    }

    fn unavailable(&self, what: &str, e: &dyn std::fmt::Display) -> ApiError {
        ApiError::new(
            ErrorKind::Unavailable,
            format!("control socket {}: {what}: {e}", self.socket.display()),
        )
    }

    /// The daemon could not be reached: the request never went out.
    fn not_sent(&self, e: &dyn std::fmt::Display) -> ApiError {
        ApiError::new(
            ErrorKind::NotSent,
            format!(
                "control socket {}: the daemon stopped answering before the request was sent ({e})",
                self.socket.display()
            ),
        )
    }

    /// The connection ended between the request and its answer: says
    /// whether anything may have changed and how to check.
    fn lost(&self, method: &Method, path: &str, e: &dyn std::fmt::Display) -> ApiError {
        let socket = self.socket.display();
        let message = if method == Method::GET {
            format!(
                "control socket {socket}: the connection ended before the daemon answered ({e}); the request only reads, so nothing changed: run it again once `grove node status` answers"
            )
        } else {
            format!(
                "control socket {socket}: the connection ended before the daemon answered ({e}), so whether the change was made is unknown: check with {} once the daemon answers again (`grove node status`), or with no daemon running",
                how_to_check(path)
            )
        };
        ApiError::new(ErrorKind::Lost, message)
    }

    /// Sends one request and returns the answer's head and body.
    async fn open(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ApiError> {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|e| self.not_sent(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.not_sent(&e))?;
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(hyper::header::HOST, "grove")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| self.unavailable("request", &e))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| self.lost(&method, path, &e))
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> Result<T, ApiError> {
        let resp = self.open(method.clone(), path, body).await?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| self.lost(&method, path, &e))?
            .to_bytes();
        if status == StatusCode::OK {
            return serde_json::from_slice(&bytes).map_err(|e| self.unavailable("answer", &e));
        }
        Err(error_of(status, &bytes))
    }
}

/// SIGPIPE ignored while a request is under way. The CLI's disposition
/// (the default, set in `main` so that `grove … | head` ends quietly) would
/// kill it without a word when it writes to a daemon that just died;
/// ignored, the write fails with EPIPE and the command says what happened.
struct PipeSignalIgnored(libc::sighandler_t);

impl PipeSignalIgnored {
    fn new() -> PipeSignalIgnored {
        // SAFETY: `signal` swaps the process's SIGPIPE disposition and
        // returns the previous one; SIG_IGN installs no handler.
        PipeSignalIgnored(unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) })
    }
}

impl Drop for PipeSignalIgnored {
    fn drop(&mut self) {
        if self.0 != libc::SIG_ERR {
            // SAFETY: restores the disposition `new` found.
            unsafe { libc::signal(libc::SIGPIPE, self.0) };
        }
    }
}

/// The command that shows whether a change sent to `path` was made.
fn how_to_check(path: &str) -> &'static str {
    let path = path.split('?').next().unwrap_or(path);
    if path.starts_with(routes::BOOKS) {
        "`grove book list` (or `grove book show KEY`)"
    } else if path.starts_with(routes::SHARDS) {
        "`grove shard list`"
    } else if path.starts_with(routes::MESH_INVITE) {
        "`grove mesh invite list`"
    } else if path.starts_with(routes::MESH_FAMILY) {
        "`grove mesh status` and `grove mesh proposals`"
    } else if path.starts_with(routes::MOOT_FAMILY) {
        "`grove moot list`"
    } else {
        "`grove node status`"
    }
}

/// The daemon's error answer as an [`ApiError`] of the kind its status names.
fn error_of(status: StatusCode, bytes: &[u8]) -> ApiError {
    let message = serde_json::from_slice::<dto::ErrorBody>(bytes)
        .map(|b| b.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned());
    ApiError::new(ErrorKind::from_status(status.as_u16()), message)
}

/// Builds `path?name=value&…`, skipping absent values.
fn url(path: &str, params: &[(&str, Option<String>)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in params {
        if let Some(v) = value {
            query.append_pair(name, v);
        }
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

impl BookApi for Client {
    fn add(
        &mut self,
        req: &AddRequest,
        bytes: &[u8],
        progress: &mut dyn FnMut(u64),
    ) -> Result<dto::Added, ApiError> {
        let path = url(
            routes::BOOKS_ADD,
            &[
                ("key", req.key.clone()),
                ("shard", req.shard.clone()),
                ("source", Some(req.source.clone())),
                ("force", req.force.then(|| "true".to_string())),
            ],
        );
        let added: dto::Added = self.request(Method::POST, &path, bytes.to_vec())?;
        progress(added.count);
        Ok(added)
    }

    fn list(&mut self, all: bool) -> Result<dto::BookList, ApiError> {
        self.request(
            Method::GET,
            &url(routes::BOOKS, &[("all", all.then(|| "true".into()))]),
            Vec::new(),
        )
    }

    fn show(&mut self, key: &str, version: Option<u32>) -> Result<dto::Book, ApiError> {
        let path = url(
            routes::BOOKS_SHOW,
            &[
                ("key", Some(key.into())),
                ("version", version.map(|v| v.to_string())),
            ],
        );
        self.request(Method::GET, &path, Vec::new())
    }

    fn remove(&mut self, key: &str) -> Result<dto::Book, ApiError> {
        self.request(
            Method::POST,
            &url(routes::BOOKS_REMOVE, &[("key", Some(key.into()))]),
            Vec::new(),
        )
    }

    fn proof(
        &mut self,
        key: &str,
        index: u64,
        version: Option<u32>,
    ) -> Result<dto::Proof, ApiError> {
        let path = url(
            routes::BOOKS_PROOF,
            &[
                ("key", Some(key.into())),
                ("index", Some(index.to_string())),
                ("version", version.map(|v| v.to_string())),
            ],
        );
        self.request(Method::GET, &path, Vec::new())
    }

    fn verify(&mut self, key: &str, version: Option<u32>) -> Result<dto::Verified, ApiError> {
        let path = url(
            routes::BOOKS_VERIFY,
            &[
                ("key", Some(key.into())),
                ("version", version.map(|v| v.to_string())),
            ],
        );
        self.request(Method::GET, &path, Vec::new())
    }

    fn search(&mut self, req: &SearchRequest) -> Result<dto::Hits, ApiError> {
        self.search_call(req, false)
    }

    fn shards(&mut self) -> Result<dto::ShardList, ApiError> {
        self.request(Method::GET, routes::SHARDS, Vec::new())
    }

    fn compact(&mut self, shard: Option<&str>) -> Result<dto::Compacted, ApiError> {
        let path = url(
            routes::SHARDS_COMPACT,
            &[("shard", shard.map(str::to_string))],
        );
        self.request(Method::POST, &path, Vec::new())
    }

    fn audit(&mut self) -> Result<dto::AuditReport, ApiError> {
        self.request(Method::GET, routes::AUDIT, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_change_names_the_command_that_shows_whether_it_was_made() {
        let client = Client {
            socket: PathBuf::from("/run/grove/grove.sock"),
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        };
        let cut = "connection closed before message completed";
        for (path, check) in [
            ("/v1/books/add?key=a/b", "`grove book list`"),
            ("/v1/books/remove?key=a/b", "`grove book list`"),
            (routes::SHARDS_COMPACT, "`grove shard list`"),
            (routes::MESH_INVITE, "`grove mesh invite list`"),
            (routes::MESH_PROPOSE, "`grove mesh status`"),
            ("/v1/moot/start?trees=x", "`grove moot list`"),
        ] {
            let e = client.lost(&Method::POST, path, &cut);
            assert_eq!(e.kind, ErrorKind::Lost);
            assert!(
                e.message.contains("whether the change was made is unknown"),
                "{e}"
            );
            assert!(e.message.contains(check), "{path}: {e}");
            assert!(e.message.contains(cut), "{e}");
        }
        let read = client.lost(&Method::GET, routes::BOOKS, &cut);
        assert!(read.message.contains("nothing changed"), "{read}");
    }
}
