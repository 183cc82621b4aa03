//! Request-response framing: one unsigned-varint length, then that many
//! bytes (a `proto/` message encoded by the caller). Lengths over the limit
//! are refused before anything is read into memory.

use std::io;

use futures::prelude::*;
use libp2p::StreamProtocol;

/// Frames requests and responses of at most `max_bytes` each.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    pub max_bytes: usize,
}

async fn read_frame<T: AsyncRead + Unpin + Send>(io: &mut T, max: usize) -> io::Result<Vec<u8>> {
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
            let mut buf = vec![0u8; len as usize];
            io.read_exact(&mut buf).await?;
            return Ok(buf);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "length prefix longer than 64 bits",
    ))
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
        read_frame(io, self.max_bytes)
    }

    fn read_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> impl Future<Output = io::Result<Vec<u8>>> + Send
    where
        T: AsyncRead + Unpin + Send,
    {
        read_frame(io, self.max_bytes)
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
        let max = self.max_bytes;
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
        let max = self.max_bytes;
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
                assert_eq!(read_frame(&mut read, 100_000).await.unwrap(), data);
            }
            let mut buf = futures::io::Cursor::new(Vec::new());
            write_frame(&mut buf, &[1u8; 50], 100).await.unwrap();
            let mut read = futures::io::Cursor::new(buf.into_inner());
            assert!(read_frame(&mut read, 10).await.is_err());
            let mut endless = futures::io::Cursor::new(vec![0xffu8; 20]);
            assert!(read_frame(&mut endless, 10).await.is_err());
        });
    }
}
