//! A connection's read-ahead buffer, held only while it has bytes to read.
//!
//! tokio's `BufReader` allocates (and zeroes) its buffer when the
//! connection opens and keeps it for the connection's life: 16 KiB for
//! every idle client. [`ReadAhead`] allocates it when the socket has
//! something to read ([`Readiness`]: a plaintext socket is peeked first)
//! and frees it once every buffered byte is consumed, so a connection
//! waiting for its next request holds no buffer. Pipelined requests that
//! arrive together are still read in one syscall.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncBufRead, AsyncRead};

/// Whether a read would find something (data or the end of the stream)
/// without reading it.
pub trait Readiness {
    fn poll_readiness(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

impl Readiness for tokio::net::tcp::OwnedReadHalf {
    fn poll_readiness(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut one = [0u8; 1];
        let mut peek = tokio::io::ReadBuf::new(&mut one);
        ready!(self.poll_peek(cx, &mut peek))?;
        Poll::Ready(Ok(()))
    }
}

/// A TLS stream keeps its own buffers; its reads are attempted at once.
impl<T> Readiness for tokio::io::ReadHalf<T> {
    fn poll_readiness(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Buffered reads whose buffer exists only while it holds unread bytes.
#[derive(Debug)]
pub struct ReadAhead<R> {
    inner: R,
    capacity: usize,
    /// Empty (no allocation) when nothing is buffered.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
}

impl<R> ReadAhead<R> {
    pub fn with_capacity(capacity: usize, inner: R) -> Self {
        ReadAhead {
            inner,
            capacity,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
        }
    }

    /// Bytes allocated for read-ahead now (0 while nothing is buffered).
    #[cfg(test)]
    pub fn allocated(&self) -> usize {
        self.buf.capacity()
    }
}

impl<R: AsyncRead + Readiness + Unpin> AsyncBufRead for ReadAhead<R> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        if this.pos >= this.filled {
            if this.buf.is_empty() {
                ready!(this.inner.poll_readiness(cx))?;
                this.buf = vec![0; this.capacity];
            }
            let mut rb = tokio::io::ReadBuf::new(&mut this.buf);
            let read = Pin::new(&mut this.inner).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            if let Poll::Ready(Err(e)) = read {
                return Poll::Ready(Err(e));
            }
            if read.is_pending() {
                // Readiness was spurious: wait without the buffer.
                this.buf = Vec::new();
                return Poll::Pending;
            }
            this.pos = 0;
            this.filled = n;
            if n == 0 {
                this.buf = Vec::new();
                return Poll::Ready(Ok(&[]));
            }
        }
        Poll::Ready(Ok(this.buf.get(this.pos..this.filled).unwrap_or_default()))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        this.pos = (this.pos + amt).min(this.filled);
        if this.pos >= this.filled {
            this.buf = Vec::new();
            this.pos = 0;
            this.filled = 0;
        }
    }
}

impl<R: AsyncRead + Readiness + Unpin> AsyncRead for ReadAhead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // Nothing buffered and a large read: straight into the caller's
        // buffer, as tokio's BufReader does.
        if self.pos >= self.filled && out.remaining() >= self.capacity {
            return Pin::new(&mut self.inner).poll_read(cx, out);
        }
        let available = ready!(self.as_mut().poll_fill_buf(cx))?;
        let n = available.len().min(out.remaining());
        out.put_slice(available.get(..n).unwrap_or_default());
        self.consume(n);
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

    async fn pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let c = tokio::net::TcpStream::connect(l.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (s, _) = l.accept().await.expect("accept");
        (c, s)
    }

    #[tokio::test]
    async fn an_idle_connection_holds_no_read_buffer() {
        let (mut client, server) = pair().await;
        let (rd, _wr) = server.into_split();
        let mut rd = ReadAhead::with_capacity(16 << 10, rd);
        assert_eq!(rd.allocated(), 0, "nothing allocated before a byte arrives");
        // Waiting for a request that has not come allocates nothing.
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), rd.fill_buf()).await;
        assert!(waited.is_err(), "no data yet");
        assert_eq!(rd.allocated(), 0, "waiting holds no buffer");

        client.write_all(b"abcdefgh").await.expect("write");
        let mut head = [0u8; 4];
        rd.read_exact(&mut head).await.expect("read");
        assert_eq!(&head, b"abcd");
        assert_eq!(rd.allocated(), 16 << 10, "held while bytes are buffered");
        rd.read_exact(&mut head).await.expect("read");
        assert_eq!(&head, b"efgh");
        assert_eq!(rd.allocated(), 0, "freed once every byte is consumed");
    }

    #[tokio::test]
    async fn pipelined_and_large_reads_arrive_whole_and_in_order() {
        let (mut client, server) = pair().await;
        let (rd, _wr) = server.into_split();
        let mut rd = ReadAhead::with_capacity(64, rd);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            for chunk in sent.chunks(777) {
                client.write_all(chunk).await.expect("write");
            }
            client
        });
        let mut got = vec![0u8; data.len()];
        let (small, large) = got.split_at_mut(100);
        rd.read_exact(small)
            .await
            .expect("small reads through the buffer");
        rd.read_exact(large)
            .await
            .expect("a large read past the buffer");
        assert_eq!(got, data);
        drop(writer.await.expect("writer"));
        let mut rest = Vec::new();
        rd.read_to_end(&mut rest).await.expect("eof");
        assert!(rest.is_empty());
        assert_eq!(rd.allocated(), 0);
    }
}
