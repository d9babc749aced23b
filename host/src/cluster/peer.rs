//! The inter-broker client: one broker calling another
//! over the Kafka wire, e.g. the transaction coordinator sending
//! WriteTxnMarkers to a partition's leader, or a partition leader asking a
//! remote coordinator to verify a transaction (AddPartitionsToTxn v4).
//!
//! [`Peers`] is a pool of plain TCP connections keyed by "host:port". A
//! call takes one connection for itself (one request in flight per
//! connection, so no response demultiplexing), writes one size-prefixed
//! request frame and reads one response frame, with the header versions the
//! kafka-protocol crate assigns to (API key, version). Everything a call
//! holds is bounded: at most [`MAX_IN_FLIGHT`] calls per peer (a semaphore;
//! a caller waits for a permit within its timeout), at most [`MAX_IDLE`]
//! idle connections kept per peer, responses of at most
//! [`MAX_RESPONSE_BYTES`] (the buffer grows with the bytes that arrive, not
//! with the size a peer claims), and one overall timeout per call for the
//! permit, the connect, the write and the read. A connection that fails in
//! any way is dropped, never pooled. An idle connection the peer has closed
//! meanwhile (a restart, an idle timeout) is noticed and replaced: if a
//! reused connection ends before any byte of the answer, the request goes
//! once more on a fresh connection.
//!
//! It touches only sockets: no broker state, no etcd. Callers decide what to
//! retry and where (leader changes, NOT_COORDINATOR).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Idle connections kept per peer.
pub const MAX_IDLE: usize = 4;
/// Calls in flight per peer.
pub const MAX_IN_FLIGHT: usize = 16;
/// The largest response accepted (the size prefix excluded).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Why a call to a peer failed. Each message names the peer's address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// No TCP connection could be made.
    #[error("connecting to broker {0}")]
    Connect(String),
    /// The connection failed or closed mid-call.
    #[error("talking to broker {0}")]
    Io(String),
    /// No answer within the call's timeout (the address).
    #[error("broker {0} did not answer in time")]
    Timeout(String),
    /// A frame that could not be encoded, or an answer that could not be
    /// decoded (oversize, wrong correlation id, malformed body).
    #[error("bad exchange with broker {0}")]
    Decode(String),
}

/// One peer's connections.
#[derive(Debug)]
struct Pool {
    idle: Mutex<Vec<TcpStream>>,
    permits: Semaphore,
}

impl Pool {
    fn new() -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(MAX_IN_FLIGHT),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<TcpStream>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recently used idle connection that is still open.
    fn take_idle(&self) -> Option<TcpStream> {
        loop {
            let conn = self.idle().pop()?;
            if still_open(&conn) {
                return Some(conn);
            }
        }
    }

    fn put_back(&self, conn: TcpStream) {
        let mut idle = self.idle();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

/// False if the peer has closed an idle connection (or sent bytes nobody
/// asked for): a non-blocking peek that reports EOF, data or an error.
fn still_open(conn: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    matches!(conn.poll_peek(&mut cx, &mut buf), Poll::Pending)
}

const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Peers>();
};

/// Connections to other brokers, shared as `Arc<Peers>`.
#[derive(Debug)]
pub struct Peers {
    client_id: StrBytes,
    timeout: Duration,
    correlation: AtomicI32,
    /// One entry per peer ever called and not forgotten: the cluster's
    /// brokers, so bounded by the membership.
    pools: Mutex<HashMap<String, Arc<Pool>>>,
    /// SASL PLAIN login for a SASL_PLAINTEXT inter-broker listener: user
    /// and password.
    login: Option<(String, String)>,
}

/// How one exchange on one connection failed.
enum Failure {
    /// The connection ended before any byte of the answer: a reused
    /// connection the peer had closed; worth one try on a fresh one.
    ClosedBeforeAnswer(String),
    Io(String),
    Decode(String),
}

impl Peers {
    /// A pool whose calls send `client_id` and each take at most `timeout`.
    pub fn new(client_id: &str, timeout: Duration) -> Peers {
        Peers {
            client_id: StrBytes::from_string(client_id.to_string()),
            timeout,
            correlation: AtomicI32::new(0),
            pools: Mutex::new(HashMap::new()),
            login: None,
        }
    }

    /// Logs in with SASL PLAIN as `user` on every new connection (the
    /// inter-broker listener is SASL_PLAINTEXT).
    pub fn with_login(mut self, user: &str, password: &str) -> Peers {
        self.login = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// A new connection to `addr`, logged in when a login is configured.
    async fn open(&self, addr: &str) -> Result<TcpStream, PeerError> {
        let conn = connect(addr).await?;
        let Some((user, password)) = &self.login else {
            return Ok(conn);
        };
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        let fail = |what: String| PeerError::Connect(format!("{addr}: SASL login: {what}"));
        let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        let c = self.next_correlation();
        let frame = self.frame(&hs, 1, c).map_err(|e| fail(e.to_string()))?;
        let (conn, body) = exchange(conn, &frame)
            .await
            .map_err(|_| fail("no handshake answer".into()))?;
        let r = decode::<SaslHandshakeRequest>(body, 1, c).map_err(fail)?;
        if r.error_code != 0 {
            return Err(fail(format!("SaslHandshake error {}", r.error_code)));
        }
        let mut token = Vec::with_capacity(2 + user.len() + password.len());
        token.push(0);
        token.extend_from_slice(user.as_bytes());
        token.push(0);
        token.extend_from_slice(password.as_bytes());
        let auth = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let c = self.next_correlation();
        let frame = self.frame(&auth, 2, c).map_err(|e| fail(e.to_string()))?;
        let (conn, body) = exchange(conn, &frame)
            .await
            .map_err(|_| fail("no answer".into()))?;
        let r = decode::<SaslAuthenticateRequest>(body, 2, c).map_err(fail)?;
        if r.error_code != 0 {
            return Err(fail(format!("SaslAuthenticate error {}", r.error_code)));
        }
        Ok(conn)
    }

    fn pool(&self, addr: &str) -> Arc<Pool> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools
            .entry(addr.to_string())
            .or_insert_with(|| Arc::new(Pool::new()))
            .clone()
    }

    /// Drops the idle connections to `addr` (a broker that left the
    /// cluster). Calls in flight finish; their connections are not kept.
    pub fn forget(&self, addr: &str) {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools.remove(addr);
    }

    /// Sends `request` at `version` to the broker at `addr` ("host:port")
    /// and decodes its response.
    pub async fn call<R: Request>(
        &self,
        addr: &str,
        version: i16,
        request: &R,
    ) -> Result<R::Response, PeerError> {
        let correlation = self.next_correlation();
        let frame = self.frame(request, version, correlation).map_err(|e| {
            PeerError::Decode(format!("{addr}: encoding key {} v{version}: {e}", R::KEY))
        })?;
        let pool = self.pool(addr);
        let answer = tokio::time::timeout(self.timeout, async {
            let _permit = pool
                .permits
                .acquire()
                .await
                .map_err(|e| PeerError::Io(format!("{addr}: {e}")))?;
            let body = match pool.take_idle() {
                Some(conn) => match exchange(conn, &frame).await {
                    Ok((conn, body)) => Ok((conn, body)),
                    // The peer closed it while it sat idle: once more anew.
                    Err(Failure::ClosedBeforeAnswer(_)) => {
                        exchange(self.open(addr).await?, &frame).await
                    }
                    Err(e) => Err(e),
                },
                None => exchange(self.open(addr).await?, &frame).await,
            };
            let (conn, body) = body.map_err(|f| match f {
                Failure::ClosedBeforeAnswer(e) | Failure::Io(e) => {
                    PeerError::Io(format!("{addr}: {e}"))
                }
                Failure::Decode(e) => PeerError::Decode(format!("{addr}: {e}")),
            })?;
            let decoded = decode::<R>(body, version, correlation).map_err(|e| {
                PeerError::Decode(format!("{addr}: key {} v{version}: {e}", R::KEY))
            })?;
            // Returned before the permit is, so a caller waiting for the
            // permit finds the connection.
            pool.put_back(conn);
            Ok(decoded)
        })
        .await;
        answer.unwrap_or_else(|_| Err(PeerError::Timeout(addr.to_string())))
    }

    fn next_correlation(&self) -> i32 {
        self.correlation
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1)
    }

    /// The request frame, size prefix included.
    fn frame<R: Request>(
        &self,
        request: &R,
        version: i16,
        correlation: i32,
    ) -> anyhow::Result<BytesMut> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::with_capacity(128);
        buf.extend_from_slice(&[0, 0, 0, 0]);
        header.encode(&mut buf, R::header_version(version))?;
        request.encode(&mut buf, version)?;
        let size = i32::try_from(buf.len() - 4)?;
        buf.get_mut(..4)
            .ok_or_else(|| anyhow::anyhow!("no room for the size prefix"))?
            .copy_from_slice(&size.to_be_bytes());
        Ok(buf)
    }
}

async fn connect(addr: &str) -> Result<TcpStream, PeerError> {
    let conn = TcpStream::connect(addr)
        .await
        .map_err(|e| PeerError::Connect(format!("{addr}: {e}")))?;
    conn.set_nodelay(true)
        .map_err(|e| PeerError::Connect(format!("{addr}: {e}")))?;
    Ok(conn)
}

/// Writes `frame` and reads one response frame (its size prefix removed).
async fn exchange(mut conn: TcpStream, frame: &[u8]) -> Result<(TcpStream, Bytes), Failure> {
    let closed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::ConnectionAborted
        | std::io::ErrorKind::BrokenPipe => Failure::ClosedBeforeAnswer(e.to_string()),
        _ => Failure::Io(e.to_string()),
    };
    conn.write_all(frame).await.map_err(closed)?;
    let mut size = [0u8; 4];
    let mut got = 0;
    while let Some(rest) = size.get_mut(got..).filter(|r| !r.is_empty()) {
        let n = conn.read(rest).await.map_err(|e| match got {
            0 => closed(e),
            _ => Failure::Io(e.to_string()),
        })?;
        if n == 0 {
            return Err(match got {
                0 => Failure::ClosedBeforeAnswer("closed before answering".to_string()),
                _ => Failure::Io("closed in a response's size".to_string()),
            });
        }
        got += n;
    }
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size)
        .ok()
        .filter(|&n| n <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| {
            Failure::Decode(format!(
                "a response of {size} bytes (at most {MAX_RESPONSE_BYTES})"
            ))
        })?;
    // Grows with what arrives: a peer that claims 60 MiB and sends nothing
    // costs nothing.
    let mut body = Vec::with_capacity(len.min(64 << 10));
    let mut limited = (&mut conn).take(len as u64);
    limited
        .read_to_end(&mut body)
        .await
        .map_err(|e| Failure::Io(e.to_string()))?;
    if body.len() != len {
        return Err(Failure::Io(format!(
            "closed after {} of {len} response bytes",
            body.len()
        )));
    }
    Ok((conn, Bytes::from(body)))
}

/// The response body, after its header's correlation id is checked.
fn decode<R: Request>(
    mut body: Bytes,
    version: i16,
    correlation: i32,
) -> Result<R::Response, String> {
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let header = ResponseHeader::decode(
            &mut body,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .map_err(|e| format!("response header: {e}"))?;
        if header.correlation_id != correlation {
            return Err(format!(
                "correlation id {} where {correlation} was expected",
                header.correlation_id
            ));
        }
        let resp = R::Response::decode(&mut body, version).map_err(|e| e.to_string())?;
        if body.remaining() != 0 {
            return Err(format!(
                "{} bytes after the response body",
                body.remaining()
            ));
        }
        Ok(resp)
    }));
    decoded.unwrap_or_else(|_| Err("the decoder panicked".to_string()))
}
