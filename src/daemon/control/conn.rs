//! The control socket's connections: accepted within a cap (in all and per
//! client process), each served by hyper with a deadline on the request
//! head (which also closes idle keep-alive connections), on every stall of
//! a request body, and on every stall of an answer the client does not
//! read. A local client can hold a few connections, never the socket:
//! `node status` from another process still gets in at once.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

/// Connections served at once; one more is answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections one client process may hold at once (the CLI holds one; a
/// watch its event stream), so one process cannot fill [`MAX_CONNECTIONS`].
pub const MAX_PER_CLIENT: usize = 32;
/// A request's head must arrive within this; an idle keep-alive connection
/// is closed after it too.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A request body may stall this long between its pieces.
pub const BODY_STALL: Duration = Duration::from_secs(10);
/// An answer the client stops reading for this long ends its connection.
pub const WRITE_STALL: Duration = Duration::from_secs(30);
/// Refused connections whose request is read (and dropped) before they are
/// closed, so their client gets the 503 rather than a broken pipe; beyond
/// this many at once, one is closed without a word.
const MAX_REFUSING: usize = 64;
/// How long a refused connection's request is read before it is closed.
const REFUSE_DRAIN: Duration = Duration::from_millis(500);
/// The pause after a failed accept (out of file descriptors, say), so the
/// loop does not spin while the cause lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Who holds how many connections.
#[derive(Clone)]
struct Caps {
    total: Arc<Semaphore>,
    per_client: Arc<Mutex<HashMap<i32, usize>>>,
    refusing: Arc<Semaphore>,
}

/// One admitted connection's place under both caps, given back on drop.
struct Slot {
    _total: OwnedSemaphorePermit,
    client: Option<i32>,
    per_client: Arc<Mutex<HashMap<i32, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(pid) = self.client else { return };
        let mut held = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                held.remove(&pid);
            }
        }
    }
}

impl Caps {
    fn new() -> Caps {
        Caps {
            total: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            per_client: Arc::default(),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
        }
    }

    /// A slot for a connection from `stream`'s process, or why not.
    fn admit(&self, stream: &UnixStream) -> Result<Slot, String> {
        let client = stream.peer_cred().ok().and_then(|c| c.pid());
        let total = self.total.clone().try_acquire_owned().map_err(|_| {
            format!("the control socket is serving its limit of {MAX_CONNECTIONS} connections; try again in a moment")
        })?;
        if let Some(pid) = client {
            let mut held = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
            let n = held.entry(pid).or_insert(0);
            if *n >= MAX_PER_CLIENT {
                return Err(format!(
                    "process {pid} already holds {MAX_PER_CLIENT} control connections, the most one client may"
                ));
            }
            *n += 1;
        }
        Ok(Slot {
            _total: total,
            client,
            per_client: self.per_client.clone(),
        })
    }

    /// Answers 503 with `why` and closes, reading the request a moment
    /// first when a refusal place is free.
    fn refuse(&self, stream: UnixStream, why: &str, refusals: &mut JoinSet<()>) {
        let body = serde_json::to_string(&crate::api::dto::ErrorBody {
            error: why.to_string(),
        })
        .unwrap_or_default();
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.try_write(answer.as_bytes());
        // What already came is read, so the close is not a reset that
        // could hide the answer from the client.
        let mut sink = [0u8; 4096];
        while matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {}
        let Ok(place) = self.refusing.clone().try_acquire_owned() else {
            return;
        };
        refusals.spawn(async move {
            let _place = place;
            let mut stream = stream;
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
            let _ = tokio::time::timeout(REFUSE_DRAIN, async {
                while let Ok(n) = tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
            })
            .await;
        });
    }
}

/// Accepts and serves connections until `shutdown` turns true, then lets
/// those in flight finish (at most `grace`).
pub async fn serve(
    listener: UnixListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let caps = Caps::new();
    let mut connections = JoinSet::new();
    let mut refusals = JoinSet::new();
    let mut failed_accepts = 0u64;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
            Some(_) = refusals.join_next() => continue,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        match accepted {
            Ok((stream, _)) => match caps.admit(&stream) {
                Ok(slot) => {
                    connections.spawn(connection(stream, router.clone(), slot, shutdown.clone()));
                }
                Err(why) => {
                    tracing::debug!(reason = %why, "control connection refused");
                    caps.refuse(stream, &why, &mut refusals);
                }
            },
            Err(e) => {
                failed_accepts += 1;
                // Logged on the first failure and then now and again: a
                // cause that lasts (EMFILE) must not flood the log.
                if failed_accepts.is_power_of_two() {
                    tracing::warn!(error = %e, failed_accepts, "control socket: accept failed");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    drop(listener);
    refusals.abort_all();
    let finished = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if finished.is_err() {
        tracing::warn!("control requests still running at shutdown were cut off");
        connections.abort_all();
    }
}

/// Serves one connection under its deadlines; at shutdown it finishes the
/// request in flight and closes.
async fn connection(
    stream: UnixStream,
    router: Router,
    _slot: Slot,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        hyper::service::Service::call(&service, request.map(StallBody::new))
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(WriteStall::new(stream)), service);
    tokio::pin!(served);
    tokio::select! {
        ended = served.as_mut() => {
            if let Err(e) = ended {
                tracing::debug!(error = %e, "control connection ended");
            }
            return;
        }
        _ = shutdown.wait_for(|s| *s) => {}
    }
    served.as_mut().graceful_shutdown();
    let _ = served.await;
}

/// A request body that fails when no piece of it arrives for
/// [`BODY_STALL`].
struct StallBody {
    inner: Incoming,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallBody {
    fn new(inner: Incoming) -> StallBody {
        StallBody { inner, stall: None }
    }
}

impl Body for StallBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            self.stall = None;
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(BODY_STALL)));
        ready!(stall.as_mut().poll(cx));
        Poll::Ready(Some(Err(format!(
            "the request body stalled: nothing arrived for {} s",
            BODY_STALL.as_secs()
        )
        .into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, with a write that waits on the client for more than
/// [`WRITE_STALL`] failing with `TimedOut` (a client that sends a request
/// and never reads the answer frees its connection).
struct WriteStall {
    stream: UnixStream,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl WriteStall {
    fn new(stream: UnixStream) -> WriteStall {
        WriteStall {
            stream,
            stall: None,
        }
    }

    /// `op`'s result, or `TimedOut` once it has been pending too long.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut UnixStream>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(done) = op(Pin::new(&mut self.stream), cx) {
            self.stall = None;
            return Poll::Ready(done);
        }
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL)));
        ready!(stall.as_mut().poll(cx));
        Poll::Ready(Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the client did not read its answer",
        )))
    }
}

impl AsyncRead for WriteStall {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteStall {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.bounded(cx, |s, cx| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.bounded(cx, |s, cx| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.bounded(cx, |s, cx| s.poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
