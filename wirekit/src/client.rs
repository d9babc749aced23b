//! A minimal Kafka client over exact wire bytes (kafka-protocol codecs):
//! used by the wire kit's probes (`kaas conformance --bootstrap`) and, through a
//! thin wrapper, by the integration tests. One request at a time unless the
//! caller pipelines frames itself.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long a response may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`Client::read_frame_within`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameRead {
    /// A whole response frame (without its size prefix).
    Frame(Bytes),
    /// The broker closed the connection (or reset it).
    Closed,
    /// Nothing within the time allowed.
    Silent,
}

/// A raw Kafka connection.
#[derive(Debug)]
pub struct Client {
    /// Buffered reads: a response's size and body in one syscall.
    stream: BufReader<TcpStream>,
    correlation: i32,
}

impl Client {
    /// Connects to `addr` (host:port).
    pub async fn connect(addr: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: BufReader::new(stream),
            correlation: 0,
        })
    }

    /// Sends raw bytes as one frame (size prefix added).
    pub async fn send_raw(&mut self, frame: &[u8]) -> anyhow::Result<()> {
        // One write, as real clients do: a size prefix sent on its own is
        // a TCP segment (and a broker wake-up) of its own.
        let mut buf = Vec::with_capacity(4 + frame.len());
        buf.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        buf.extend_from_slice(frame);
        self.stream.write_all(&buf).await?;
        Ok(())
    }

    /// Reads one response frame, or None if the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        match tokio::time::timeout(RESPONSE_TIMEOUT, self.stream.read_exact(&mut size)).await {
            Ok(Ok(_)) => {}
            _ => return None,
        }
        let len = usize::try_from(i32::from_be_bytes(size)).ok()?;
        let mut buf = BytesMut::zeroed(len);
        self.stream.read_exact(&mut buf).await.ok()?;
        Some(buf.freeze())
    }

    /// Writes bytes as they are, without a size prefix (a malformed or
    /// partial frame of the caller's making).
    pub async fn write_unframed(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Reads one response frame within `within`: the frame, `Closed` when
    /// the broker closed the connection, `Silent` when nothing came.
    pub async fn read_frame_within(&mut self, within: Duration) -> FrameRead {
        let mut size = [0u8; 4];
        match tokio::time::timeout(within, self.stream.read_exact(&mut size)).await {
            Err(_) => return FrameRead::Silent,
            Ok(Err(_)) => return FrameRead::Closed,
            Ok(Ok(_)) => {}
        }
        let Ok(len) = usize::try_from(i32::from_be_bytes(size)) else {
            return FrameRead::Closed;
        };
        let mut buf = BytesMut::zeroed(len);
        match tokio::time::timeout(within, self.stream.read_exact(&mut buf)).await {
            Err(_) => FrameRead::Silent,
            Ok(Err(_)) => FrameRead::Closed,
            Ok(Ok(_)) => FrameRead::Frame(buf.freeze()),
        }
    }

    /// Encodes a request frame; returns its correlation id.
    pub fn frame<R: Request>(&mut self, req: &R, version: i16) -> anyhow::Result<(i32, BytesMut)> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("kaas-probe")));
        let mut buf = BytesMut::new();
        header.encode(&mut buf, R::header_version(version))?;
        req.encode(&mut buf, version)?;
        Ok((self.correlation, buf))
    }

    /// Sends a request and decodes its response.
    pub async fn call<R: Request>(&mut self, req: &R, version: i16) -> anyhow::Result<R::Response> {
        let (id, frame) = self.frame(req, version)?;
        self.send_raw(&frame).await?;
        let mut resp = self
            .read_frame()
            .await
            .context("the broker closed the connection or did not answer")?;
        let header = ResponseHeader::decode(
            &mut resp,
            <R::Response as HeaderVersion>::header_version(version),
        )?;
        if header.correlation_id != id {
            bail!(
                "response for correlation id {} where {id} was expected",
                header.correlation_id
            );
        }
        let body = R::Response::decode(&mut resp, version)?;
        if resp.remaining() != 0 {
            bail!("{} bytes left after the response body", resp.remaining());
        }
        Ok(body)
    }
}
