//! Request-response framing: one unsigned-varint length, then that many
//! bytes (a `proto/` message encoded by the caller). Lengths over the limit
//! are refused before anything is read into memory; a body is read as it
//! arrives, so a peer that announces a large frame and stalls pins almost
//! nothing, and every request must arrive within a deadline.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::prelude::*;
use libp2p::StreamProtocol;

/// The first read of a frame's body; each further read may double, up to
/// [`MAX_CHUNK`]. Memory follows the bytes that arrived, never the length
/// a peer announced.
const FIRST_CHUNK: usize = 4 * 1024;
const MAX_CHUNK: usize = 64 * 1024;

/// Frames requests and responses. A request must be within `max_request`
/// bytes and arrive in full within `read_deadline`; responses (whose wait
/// includes the answering node's work) are bounded by the protocol's
/// request timeout instead.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    pub max_request: usize,
    pub max_response: usize,
    pub read_deadline: Duration,
    pub budget: ReadBudget,
}

/// The bytes all inbound requests being read may hold at once; a frame
/// that would pass it is refused ("busy") rather than buffered.
#[derive(Debug, Clone)]
pub struct ReadBudget {
    left: Arc<AtomicUsize>,
}

impl ReadBudget {
    pub fn new(bytes: usize) -> ReadBudget {
        ReadBudget {
            left: Arc::new(AtomicUsize::new(bytes)),
        }
    }

    /// The bytes still free.
    pub fn available(&self) -> usize {
        self.left.load(Ordering::Relaxed)
    }
}

/// Bytes taken from a [`ReadBudget`], given back when dropped.
struct Held<'a> {
    budget: Option<&'a ReadBudget>,
    bytes: usize,
}

impl Held<'_> {
    fn grow(&mut self, n: usize) -> io::Result<()> {
        let Some(budget) = self.budget else {
            return Ok(());
        };
        budget
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n)
            })
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "the node is reading too many requests at once (net.inflight_request_bytes)",
                )
            })?;
        self.bytes += n;
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(budget) = self.budget {
            budget.left.fetch_add(self.bytes, Ordering::AcqRel);
        }
    }
}

async fn read_len<T: AsyncRead + Unpin + Send>(io: &mut T, max: usize) -> io::Result<usize> {
    let mut len: u64 = 0;
    for shift in (0..64).step_by(7) {
        let mut byte = [0u8; 1];
        io.read_exact(&mut byte).await?;
        len |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            if len > max as u64 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("message of {len} bytes is over the limit of {max}"),
                ));
            }
            return Ok(len as usize);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "length prefix longer than 64 bits",
    ))
}

/// One frame, read as its bytes arrive (charged to `budget` when given).
async fn read_frame<T: AsyncRead + Unpin + Send>(
    io: &mut T,
    max: usize,
    budget: Option<&ReadBudget>,
) -> io::Result<Vec<u8>> {
    let len = read_len(io, max).await?;
    let mut held = Held { budget, bytes: 0 };
    let mut buf = Vec::new();
    let mut chunk = FIRST_CHUNK;
    while buf.len() < len {
        let n = chunk.min(len - buf.len());
        held.grow(n)?;
        let start = buf.len();
        buf.resize(start + n, 0);
        io.read_exact(&mut buf[start..]).await?;
        chunk = (chunk * 2).min(MAX_CHUNK);
    }
    Ok(buf)
}

/// A request frame, which must arrive in full within `deadline`.
async fn read_request_frame<T: AsyncRead + Unpin + Send>(
    io: &mut T,
    max: usize,
    deadline: Duration,
    budget: &ReadBudget,
) -> io::Result<Vec<u8>> {
    match tokio::time::timeout(deadline, read_frame(io, max, Some(budget))).await {
        Ok(frame) => frame,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the request did not arrive in full within {} s (net.request_read_secs)",
                deadline.as_secs()
            ),
        )),
    }
}

async fn write_frame<T: AsyncWrite + Unpin + Send>(
    io: &mut T,
    data: &[u8],
    max: usize,
) -> io::Result<()> {
    if data.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("message of {} bytes is over the limit of {max}", data.len()),
        ));
    }
    let mut len = data.len() as u64;
    let mut prefix = Vec::with_capacity(10);
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            prefix.push(byte);
            break;
        }
        prefix.push(byte | 0x80);
    }
    io.write_all(&prefix).await?;
    io.write_all(data).await?;
    io.close().await
}

impl libp2p::request_response::Codec for FrameCodec {
    type Protocol = StreamProtocol;
    type Request = Vec<u8>;
    type Response = Vec<u8>;

    fn read_request<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> impl Future<Output = io::Result<Vec<u8>>> + Send
    where
        T: AsyncRead + Unpin + Send,
    {
        let (max, deadline, budget) = (self.max_request, self.read_deadline, self.budget.clone());
        async move { read_request_frame(io, max, deadline, &budget).await }
    }

    fn read_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> impl Future<Output = io::Result<Vec<u8>>> + Send
    where
        T: AsyncRead + Unpin + Send,
    {
        read_frame(io, self.max_response, None)
    }

    fn write_request<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        req: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send
    where
        T: AsyncWrite + Unpin + Send,
    {
        let max = self.max_request;
        async move { write_frame(io, &req, max).await }
    }

    fn write_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        res: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send
    where
        T: AsyncWrite + Unpin + Send,
    {
        let max = self.max_response;
        async move { write_frame(io, &res, max).await }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversize_is_refused() {
        futures::executor::block_on(async {
            for len in [0usize, 1, 127, 128, 300, 70_000] {
                let data = vec![7u8; len];
                let mut buf = futures::io::Cursor::new(Vec::new());
                write_frame(&mut buf, &data, 100_000).await.unwrap();
                let mut read = futures::io::Cursor::new(buf.into_inner());
                assert_eq!(read_frame(&mut read, 100_000, None).await.unwrap(), data);
            }
            let mut buf = futures::io::Cursor::new(Vec::new());
            write_frame(&mut buf, &[1u8; 50], 100).await.unwrap();
            let mut read = futures::io::Cursor::new(buf.into_inner());
            assert!(read_frame(&mut read, 10, None).await.is_err());
            let mut endless = futures::io::Cursor::new(vec![0xffu8; 20]);
            assert!(read_frame(&mut endless, 10, None).await.is_err());
        });
    }

    #[test]
    fn frames_are_charged_to_the_budget_while_read_and_refused_past_it() {
        futures::executor::block_on(async {
            let budget = ReadBudget::new(100_000);
            let mut buf = futures::io::Cursor::new(Vec::new());
            write_frame(&mut buf, &[3u8; 70_000], 200_000)
                .await
                .unwrap();
            let bytes = buf.into_inner();
            let mut read = futures::io::Cursor::new(bytes.clone());
            assert_eq!(
                read_frame(&mut read, 200_000, Some(&budget))
                    .await
                    .unwrap()
                    .len(),
                70_000
            );
            // Given back once read.
            assert_eq!(budget.available(), 100_000);
            let small = ReadBudget::new(50_000);
            let mut read = futures::io::Cursor::new(bytes);
            let err = read_frame(&mut read, 200_000, Some(&small))
                .await
                .unwrap_err();
            assert!(
                err.to_string().contains("net.inflight_request_bytes"),
                "{err}"
            );
            assert_eq!(small.available(), 50_000);
        });
    }

    #[tokio::test]
    async fn a_stalled_request_fails_at_its_deadline_holding_only_what_arrived() {
        /// A peer that sends nothing more.
        struct Stall;
        impl AsyncRead for Stall {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                _: &mut [u8],
            ) -> std::task::Poll<io::Result<usize>> {
                std::task::Poll::Pending
            }
        }
        let budget = ReadBudget::new(1 << 20);
        // A maximal length prefix and a few bytes of body, then nothing.
        let mut server = futures::io::Cursor::new(vec![0x80, 0x80, 0x10, 1, 2, 3]).chain(Stall);
        let started = std::time::Instant::now();
        let err = read_request_frame(&mut server, 1 << 18, Duration::from_millis(200), &budget)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(budget.available(), 1 << 20);
    }
}
