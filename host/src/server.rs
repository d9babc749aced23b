//! The TCP server: accepts connections (at most `max_connections`), reads
//! size-prefixed frames (bounded by `max_request_bytes`), decodes and
//! dispatches them, and writes responses in request order.
//!
//! Requests on one connection are decoded and dispatched in order, so
//! appends keep their order; a handler's slow part (durability, long poll)
//! resolves in a per-connection queue drained by a writer task; Produce
//! joins the group commit when it is dispatched (not when the writer
//! reaches it), so pipelined produces share one fdatasync. Malformed frames,
//! unknown APIs and unsupported versions close the connection, as Kafka
//! does; nothing a client sends can panic the broker.
//!
//! What a hostile client can hold (docs/design.md "Hostile
//! clients"):
//! - a connection slot: at `max_connections` the connection that has gone
//!   longest without progress (no byte received, no response written) is
//!   closed to make room, one that owes part of a frame (or has sent
//!   none) before one that does not, so idle connections and half-sent frames cannot
//!   lock new clients out; one with a request in flight is spared unless it
//!   has made no progress for `request_timeout` (a response its client
//!   does not read, a long poll longer than any client waits);
//! - time: a connection with nothing in flight that has been silent for
//!   `connections_max_idle` is closed, a frame whose first byte has
//!   arrived must be whole within `request_timeout` (its body: within
//!   that long of the budget below being granted), and each response must
//!   be written within `request_timeout`;
//! - memory: a frame over [`SMALL_FRAME`] bytes takes its size from the
//!   broker-wide `queued_max_request_bytes` budget before its buffer is
//!   allocated and gives it back once the request has been decoded and
//!   dispatched; a frame larger than the whole budget closes the
//!   connection. Smaller frames skip the budget (each connection reads one
//!   frame at a time, so they hold at most `max_connections` ×
//!   [`SMALL_FRAME`]), which keeps small requests from queueing behind big
//!   ones.
//!
//! - memory per idle connection: its read-ahead buffer exists only while
//!   it holds unread bytes ([`read_ahead`]), and the space of a request's
//!   dispatch and of a queued response is allocated per request, so a
//!   connection waiting for its next request holds a few KiB (10,000 idle
//!   clients: BENCHMARKS.md "Scale").
//!
//! A failing `accept` (a full fd table) backs off exponentially instead of
//! spinning, and its log line is rate-limited.
//!
//! It touches only what [`Serving`] hands it: its part of the
//! configuration ([`ServerConfig`]), the metrics, the SASL mechanisms, and a
//! [`Dispatch`] (the broker, in `broker_ports.rs`) that answers each
//! decoded request. On shutdown it drains: see [`SHUTDOWN_DRAIN`].
//!
//! Its submodules:
//! - [`bind`]: binding a client listener with the operator's accept backlog (KIP-764).
//! - [`budget`]: `queued.max.request.bytes`, the budget a large frame's buffer comes from.
//! - [`read_ahead`]: a connection's read-ahead buffer, held only while it has bytes to read.
//! - [`slots`]: the open connections and the eviction that makes room at `max_connections`.
//! - [`settling`]: a connection's acks=0 appends not yet visible, awaited before a non-Produce.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::ratelimit::{Backoff, RateLimit};
use crate::security::SecurityConfig;
use crate::security::sasl::Sasl;
use crate::wire::{self, Handled, Request};
use budget::Budget;
use slots::{Conn, Registered, Registry};

pub mod bind;
mod budget;
mod read_ahead;
mod settling;
mod slots;
use read_ahead::{ReadAhead, Readiness};

/// What the server reads of the broker's configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// max.connections (over all listeners).
    pub max_connections: usize,
    /// request.timeout.ms: a frame's arrival and a response's write.
    pub request_timeout: Duration,
    /// queued.max.request.bytes: request bytes held at once.
    pub queued_max_request_bytes: usize,
    /// socket.request.max.bytes: the largest frame.
    pub max_request_bytes: usize,
    /// connections.max.idle.ms.
    pub connections_max_idle: Duration,
    /// SASL and TLS timing and sizes.
    pub security: SecurityConfig,
}

/// Answers one decoded request (the broker implements it: `wire::dispatch`).
/// The server is generic over it (a static call); each request's dispatch
/// future is boxed, so an idle connection's task does not hold its space.
pub trait Dispatch: Send + Sync + 'static {
    /// `mute`: the connection's mute, which the answer may set (a
    /// throttled client, KIP-219); the server reads nothing more from the
    /// connection until it ends.
    fn dispatch<'a>(
        &'a self,
        session: &'a Arc<crate::security::Session>,
        req: Request,
        mute: &'a Arc<wire::Mute>,
    ) -> impl Future<Output = Handled> + Send + 'a;
}

/// Everything the server uses: its configuration, the metrics it counts
/// into, the SASL mechanisms it authenticates with, and the dispatcher.
pub struct Serving<D> {
    pub config: ServerConfig,
    pub metrics: Arc<Metrics>,
    pub sasl: Sasl,
    pub dispatch: D,
}

impl<D> std::fmt::Debug for Serving<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Responses in flight per connection before the reader waits.
const PIPELINE: usize = 64;

/// Frames up to this size do not take from the queued-request budget.
pub const SMALL_FRAME: usize = 64 << 10;

/// The first wait after a failed `accept`; it doubles up to
/// [`ACCEPT_BACKOFF_MAX`] while `accept` keeps failing.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

static ACCEPT_FAILED: RateLimit = RateLimit::per_second();
static CONNECTION_REFUSED: RateLimit = RateLimit::per_second();

/// One listener: its socket, name, security protocol and TLS acceptor.
pub struct Listener {
    pub socket: TcpListener,
    pub name: Arc<str>,
    pub protocol: crate::security::listener::Protocol,
    /// Present for SSL and SASL_SSL.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.name)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl Listener {
    /// A PLAINTEXT listener named PLAINTEXT (the default).
    pub fn plaintext(socket: TcpListener) -> Self {
        Listener {
            socket,
            name: Arc::from("PLAINTEXT"),
            protocol: crate::security::listener::Protocol::Plaintext,
            tls: None,
        }
    }
}

/// Serves one PLAINTEXT `listener` until `shutdown` resolves.
pub async fn run<D: Dispatch>(
    listener: TcpListener,
    server: Arc<Serving<D>>,
    shutdown: impl Future<Output = ()>,
) {
    run_listeners(vec![Listener::plaintext(listener)], server, shutdown).await
}

/// Serves every listener until `shutdown` resolves; `max_connections` and
/// the request budget are the broker's, shared by all listeners.
pub async fn run_listeners<D: Dispatch>(
    listeners: Vec<Listener>,
    server: Arc<Serving<D>>,
    shutdown: impl Future<Output = ()>,
) {
    let registry = Arc::new(Registry::new());
    let budget = Arc::new(Budget::new(server.config.queued_max_request_bytes));
    let mut loops = tokio::task::JoinSet::new();
    for l in listeners {
        loops.spawn(accept_loop(
            l,
            server.clone(),
            registry.clone(),
            budget.clone(),
        ));
    }
    shutdown.await;
    // Stop accepting first: once the accept loops are gone no connection
    // joins the registry.
    loops.abort_all();
    while loops.join_next().await.is_some() {}
    drain(&registry, SHUTDOWN_DRAIN).await;
}

/// How long a shutdown lets the requests in flight finish before the log
/// is closed under whatever is still running.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);

/// Tells every connection to stop reading requests, then waits (up to
/// `bound`) until each has answered the requests it read and closed. Past
/// the bound the rest are cut off: their unwritten responses are dropped.
async fn drain(registry: &Registry, bound: Duration) {
    let open = registry.all();
    if open.is_empty() {
        return;
    }
    tracing::info!(
        connections = open.len(),
        "shutting down: finishing the requests in flight"
    );
    for c in &open {
        c.close.notify_one();
    }
    drop(open);
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let emptied = registry.emptied.notified();
        tokio::pin!(emptied);
        emptied.as_mut().enable();
        if registry.is_empty() {
            return;
        }
        if tokio::time::timeout_at(deadline, emptied).await.is_err() {
            let left = registry.all();
            tracing::warn!(
                connections = left.len(),
                bound_ms = bound.as_millis() as u64,
                "shutting down: connections still busy past the drain bound; closing them"
            );
            for c in &left {
                c.evicted.store(true, Ordering::Release);
                c.close.notify_one();
            }
            return;
        }
    }
}

async fn accept_loop<D: Dispatch>(
    listener: Listener,
    server: Arc<Serving<D>>,
    registry: Arc<Registry>,
    budget: Arc<Budget>,
) {
    let mut backoff = Backoff::new(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
    let listener = Arc::new(listener);
    loop {
        let (sock, peer) = match listener.socket.accept().await {
            Ok(a) => {
                backoff.succeeded();
                a
            }
            Err(e) => {
                // EMFILE and the like fail again at once: wait
                // instead of spinning (and logging) at full speed.
                let wait = backoff.failed();
                if let Some(suppressed) = ACCEPT_FAILED.allow() {
                    tracing::warn!(error = %e, suppressed, retry_in_ms = wait.as_millis() as u64, "accept failed");
                }
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let Some(conn) = registry.admit(
            server.config.max_connections,
            server.config.request_timeout,
            &server.metrics,
        ) else {
            if let Some(suppressed) = CONNECTION_REFUSED.allow() {
                tracing::warn!(%peer, suppressed, "connection limit reached and every connection has a request in progress; closing");
            }
            continue;
        };
        let server = server.clone();
        let budget = budget.clone();
        let registry = registry.clone();
        let listener = listener.clone();
        server.metrics.connections.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let _ = sock.set_nodelay(true);
            let registered = Registered { registry, conn };
            let session = crate::security::Session::anonymous(listener.name.clone(), peer.ip());
            // The TLS handshake and the SASL exchange share one deadline,
            // counted from connecting.
            let deadline =
                tokio::time::Instant::now() + server.config.security.authentication_timeout;
            let sasl = listener.protocol.uses_sasl().then_some(deadline);
            let result = match &listener.tls {
                None => {
                    let (rd, wr) = sock.into_split();
                    connection(rd, wr, server, &registered, budget, session, sasl).await
                }
                Some(acceptor) => {
                    match within(&registered.conn, deadline, acceptor.accept(sock)).await {
                        Ok(Ok(stream)) => {
                            let mut session = session;
                            if sasl.is_none()
                                && let Some(p) = stream
                                    .get_ref()
                                    .1
                                    .peer_certificates()
                                    .and_then(|c| c.first())
                                    .and_then(crate::security::tls::principal_of)
                            {
                                tracing::debug!(target: "kaas::tls", %peer, listener = %listener.name, principal = %p, "TLS client authenticated");
                                session.principal = p;
                            }
                            let (rd, wr) = tokio::io::split(stream);
                            connection(rd, wr, server, &registered, budget, session, sasl).await
                        }
                        Ok(Err(e)) => {
                            server
                                .metrics
                                .tls_handshakes_failed
                                .fetch_add(1, Ordering::Relaxed);
                            Err(anyhow::anyhow!("TLS handshake failed: {e}"))
                        }
                        Err(_) => {
                            server
                                .metrics
                                .tls_handshakes_failed
                                .fetch_add(1, Ordering::Relaxed);
                            Err(anyhow::anyhow!("TLS handshake did not finish in time"))
                        }
                    }
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, listener = %listener.name, error = %e, "connection closed");
            }
        });
    }
}

/// Why a connection's reader stops.
enum Stop {
    /// Evicted to make room for a new connection.
    Evicted,
    /// A deadline passed.
    TimedOut,
}

/// Runs `f` until `deadline`, or until the connection is evicted.
async fn within<F: Future>(
    conn: &Conn,
    deadline: tokio::time::Instant,
    f: F,
) -> Result<F::Output, Stop> {
    tokio::select! {
        biased;
        _ = conn.close.notified() => Err(Stop::Evicted),
        r = tokio::time::timeout_at(deadline, f) => r.map_err(|_| Stop::TimedOut),
    }
}

/// How long a connection whose authentication failed stays open after its
/// answer, for the client to read it and close first.
const LINGER: Duration = Duration::from_millis(500);

/// Reads and drops whatever the client still sends, until it closes.
async fn discard_until_eof<R: AsyncRead + Unpin>(rd: &mut R) {
    let mut buf = [0u8; 512];
    while matches!(rd.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// What the wait for the next frame ended with.
enum Next {
    /// Its first byte is buffered.
    Frame,
    /// The client closed the connection.
    Eof,
    /// Silent for connections.max.idle.ms with nothing in flight.
    Idle,
    Evicted,
}

/// Waits for the first byte of the next frame.
async fn next_frame<R: AsyncRead + Readiness + Unpin>(
    rd: &mut ReadAhead<R>,
    conn: &Conn,
    idle: Duration,
) -> std::io::Result<Next> {
    loop {
        let deadline = if conn.in_flight.load(Ordering::Acquire) > 0 {
            // Not idle while a response is owed; look again later.
            tokio::time::Instant::now() + idle
        } else {
            conn.clock.at(conn.last_progress.load(Ordering::Relaxed)) + idle
        };
        tokio::select! {
            biased;
            _ = conn.close.notified() => return Ok(Next::Evicted),
            filled = rd.fill_buf() => {
                return Ok(if filled?.is_empty() { Next::Eof } else { Next::Frame });
            }
            _ = tokio::time::sleep_until(deadline) => {
                let silent = conn.clock.at(conn.last_progress.load(Ordering::Relaxed)) + idle;
                if conn.in_flight.load(Ordering::Acquire) == 0
                    && silent <= tokio::time::Instant::now()
                {
                    return Ok(Next::Idle);
                }
            }
        }
    }
}

/// Waits out the connection's mute (KIP-219: a throttled client's
/// connection is not read from); false if the connection was evicted
/// meanwhile.
async fn unmuted(conn: &Conn, mute: &wire::Mute) -> bool {
    let Some(until) = mute.until() else {
        return true;
    };
    tokio::select! {
        biased;
        _ = conn.close.notified() => false,
        _ = tokio::time::sleep_until(until.into()) => {
            conn.touch();
            true
        }
    }
}

/// Reads a `size`-byte body, noting progress as bytes arrive.
async fn read_body<R: AsyncRead + Readiness + Unpin>(
    rd: &mut ReadAhead<R>,
    size: usize,
    conn: &Conn,
) -> anyhow::Result<BytesMut> {
    // Read into fresh capacity, not zero-filled first: a Produce body is
    // up to megabytes, and zeroing it cost as much as receiving it.
    let mut buf = BytesMut::with_capacity(size);
    while buf.len() < size {
        let rest = size - buf.len();
        let n = rd.read_buf(&mut (&mut buf).limit(rest)).await?;
        anyhow::ensure!(n > 0, "the client closed the connection mid-frame");
        conn.touch();
    }
    Ok(buf)
}

/// Bytes a connection reads ahead (allocated only while it has bytes to
/// read: see [`ReadAhead`]).
const READ_BUFFER: usize = 16 << 10;

/// A response owed, in the writer's queue. Boxed: the queue allocates its
/// slots in blocks of 32 when the connection opens, and a `Handled` is
/// 256 bytes (8 KiB per idle connection unboxed).
type Queued = Box<(ApiKey, i16, i32, Instant, Handled)>;

async fn connection<R, W, D: Dispatch>(
    rd: R,
    wr: W,
    server: Arc<Serving<D>>,
    registered: &Registered,
    budget: Arc<Budget>,
    session: crate::security::Session,
    sasl_deadline: Option<tokio::time::Instant>,
) -> anyhow::Result<()>
where
    R: AsyncRead + Readiness + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let conn = registered.conn.clone();
    let mut session = Arc::new(session);
    // On a SASL listener: the authenticator, and when it must be done by.
    let mut auth = sasl_deadline.map(|_| {
        crate::security::authenticate::Authenticator::new(
            &server.sasl,
            &server.config.security,
            server.metrics.clone(),
        )
    });
    let auth_deadline = sasl_deadline.unwrap_or_else(tokio::time::Instant::now);
    // Reads the size and the body of a request (and whatever pipelined
    // requests arrived with them) in one syscall, not two per request.
    let mut rd = ReadAhead::with_capacity(READ_BUFFER, rd);
    let (tx, mut rx) = mpsc::channel::<Queued>(PIPELINE);
    let writer_server = server.clone();
    let writer_conn = conn.clone();
    let write_timeout = server.config.request_timeout;
    let writer = tokio::spawn(async move {
        // However it stops, the reader must stop too (it may be waiting
        // for a frame that never comes, with a response still counted).
        struct StopReader(Arc<Conn>);
        impl Drop for StopReader {
            fn drop(&mut self) {
                self.0.close.notify_one();
            }
        }
        let _stop_reader = StopReader(writer_conn.clone());
        let mut wr = BufWriter::new(wr);
        let done = |c: &Conn| {
            c.in_flight.fetch_sub(1, Ordering::AcqRel);
            c.touch();
        };
        while let Some(queued) = rx.recv().await {
            let (key, version, correlation, started, handled) = *queued;
            let raw_frame = match &handled {
                Handled::Raw(token) => {
                    let mut f = BytesMut::with_capacity(4 + token.len());
                    f.extend_from_slice(&(token.len() as u32).to_be_bytes());
                    f.extend_from_slice(token);
                    f
                }
                _ => BytesMut::new(),
            };
            let body = match handled {
                Handled::Now(b) => Some(b),
                Handled::Later(f) => Some(f.await),
                Handled::Raw(_) => None,
                Handled::Nothing | Handled::NothingUntil(_) => {
                    writer_server
                        .metrics
                        .record(key as i16, started.elapsed().as_nanos() as u64);
                    done(&writer_conn);
                    continue;
                }
                Handled::Close => {
                    writer_server
                        .metrics
                        .record(key as i16, started.elapsed().as_nanos() as u64);
                    done(&writer_conn);
                    let _ = wr.flush().await;
                    return;
                }
            };
            let frame = match body {
                Some(body) => match wire::frame::encode(key, version, correlation, &body) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::error!(api = ?key, version, error = %e, "encoding a response failed; closing");
                        return;
                    }
                },
                None => raw_frame.into(),
            };
            writer_server
                .metrics
                .record(key as i16, started.elapsed().as_nanos() as u64);
            let flush = rx.is_empty();
            let write = async {
                frame.write_to(&mut wr).await?;
                if flush {
                    wr.flush().await?;
                }
                std::io::Result::Ok(())
            };
            match tokio::time::timeout(write_timeout, write).await {
                Ok(Ok(())) => done(&writer_conn),
                Ok(Err(_)) => return,
                Err(_) => {
                    writer_server
                        .metrics
                        .request_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(api = ?key, "a response was not written in time; closing");
                    return;
                }
            }
        }
        let _ = wr.flush().await;
    });

    let max = server.config.max_request_bytes;
    let idle = server.config.connections_max_idle;
    let read_timeout = server.config.request_timeout;
    let sasl_max = server.config.security.sasl_max_receive_size;
    let mute = Arc::new(wire::Mute::default());
    let mut settling = settling::Settlings::default();
    let result: anyhow::Result<()> = async {
        loop {
            if !unmuted(&conn, &mute).await {
                return Ok(());
            }
            // Until SASL completes, everything must happen by the
            // authentication deadline, in frames of sasl.server.max.receive.size.
            let unauthenticated = auth.as_ref().is_some_and(|a| !a.is_authenticated());
            let next = if unauthenticated {
                match tokio::time::timeout_at(auth_deadline, next_frame(&mut rd, &conn, idle)).await
                {
                    Ok(n) => n?,
                    Err(_) => {
                        server
                            .metrics
                            .sasl_sessions_expired
                            .fetch_add(1, Ordering::Relaxed);
                        anyhow::bail!("SASL authentication did not complete in time");
                    }
                }
            } else {
                next_frame(&mut rd, &conn, idle).await?
            };
            let (max, read_timeout) = if unauthenticated {
                let left = auth_deadline.saturating_duration_since(tokio::time::Instant::now());
                (max.min(sasl_max), read_timeout.min(left))
            } else {
                (max, read_timeout)
            };
            match next {
                Next::Frame => {}
                Next::Eof | Next::Evicted => return Ok(()),
                Next::Idle => {
                    server
                        .metrics
                        .connections_idle_closed
                        .fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            }
            conn.touch();
            conn.incomplete.store(true, Ordering::Relaxed);
            let timed_out = |stop: Stop| -> anyhow::Result<()> {
                if let Stop::TimedOut = stop {
                    server
                        .metrics
                        .request_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                    anyhow::bail!("a request frame did not arrive within {read_timeout:?}");
                }
                Ok(())
            };
            let deadline = tokio::time::Instant::now() + read_timeout;
            let mut size = [0u8; 4];
            match within(&conn, deadline, rd.read_exact(&mut size)).await {
                Ok(r) => {
                    r?;
                }
                Err(stop) => return timed_out(stop),
            }
            let size = i32::from_be_bytes(size);
            if size < 0 || size as usize > max {
                anyhow::bail!("request of {size} bytes exceeds the {max}-byte limit");
            }
            let size = size as usize;
            let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
            let held = match within(&conn, far, budget.acquire(size, &server.metrics)).await {
                Ok(held) => held?,
                Err(stop) => return timed_out(stop),
            };
            conn.touch();
            let deadline = tokio::time::Instant::now() + read_timeout;
            let buf = match within(&conn, deadline, read_body(&mut rd, size, &conn)).await {
                Ok(buf) => buf?,
                Err(stop) => return timed_out(stop),
            };
            conn.in_flight.fetch_add(1, Ordering::AcqRel);
            conn.incomplete.store(false, Ordering::Relaxed);
            let started = Instant::now();
            use crate::security::authenticate::Verdict;
            // On a SASL listener the authenticator sees every frame first;
            // after SaslHandshake v0 a frame is a bare token, not a request.
            let (verdict, reply_to, req) = match auth.as_mut() {
                Some(a) if a.expects_raw_token() => (
                    a.raw_token(&buf, &mut session),
                    (ApiKey::SaslAuthenticate, 0, 0),
                    None,
                ),
                a => {
                    let req = wire::decode(Bytes::from(buf))?;
                    // A too-new ApiVersions is answered in the v0 format (KIP-511).
                    let reply_version = if req.body.is_none() { 0 } else { req.version };
                    let reply_to = (req.api_key, reply_version, req.correlation_id);
                    let verdict = a.map_or(Verdict::Dispatch, |a| a.request(&req, &mut session));
                    (verdict, reply_to, Some(req))
                }
            };
            let (key, reply_version, correlation) = reply_to;
            match verdict {
                Verdict::Dispatch => {}
                Verdict::Answer(h) => {
                    drop(held);
                    if tx
                        .send(Box::new((key, reply_version, correlation, started, h)))
                        .await
                        .is_err()
                    {
                        return Ok(());
                    }
                    continue;
                }
                Verdict::AnswerAndClose(h) => {
                    let _ = tx
                        .send(Box::new((key, reply_version, correlation, started, h)))
                        .await;
                    // The client closes once it has read the failure:
                    // closing first can make it lose the answer
                    // (kafka-python 3.0 drops data that arrives with the
                    // FIN). Bounded: the answer's delay plus LINGER.
                    let linger = server.config.security.failed_authentication_delay + LINGER;
                    let _ = tokio::time::timeout(linger, discard_until_eof(&mut rd)).await;
                    return Ok(());
                }
                Verdict::Close(why) => anyhow::bail!("{why}"),
                Verdict::CloseAfter(d) => {
                    tokio::time::sleep(d).await;
                    anyhow::bail!("SASL authentication failed");
                }
            }
            let Some(req) = req else {
                anyhow::bail!("a raw SASL token was not answered");
            };
            // A mute set by a response that completed while this frame
            // arrived still holds the request back.
            if !unmuted(&conn, &mute).await {
                return Ok(());
            }
            // Boxed: the dispatch future is the largest state of the
            // connection's task (over 10 KiB), which every idle connection
            // would otherwise hold; boxed, only a request in progress does.
            // Anything but a Produce sees this connection's acks=0 appends.
            if key != ApiKey::Produce && !settling.all().await {
                anyhow::bail!("an acks=0 produce failed");
            }
            let handled = Box::pin(server.dispatch.dispatch(&session, req, &mute)).await;
            // The request's bytes are dropped: its share of the budget is free.
            drop(held);
            let close = matches!(handled, Handled::Close);
            let handled = match handled {
                Handled::NothingUntil(f) => {
                    if !settling.push(f).await {
                        anyhow::bail!("an acks=0 produce failed");
                    }
                    Handled::Nothing
                }
                other => other,
            };
            if tx
                .send(Box::new((
                    key,
                    reply_version,
                    correlation,
                    started,
                    handled,
                )))
                .await
                .is_err()
                || close
            {
                return Ok(());
            }
        }
    }
    .await;
    drop(tx);
    if conn.evicted.load(Ordering::Acquire) {
        // A stuck long poll or unread response must not keep the socket
        // open after its slot went to someone else.
        writer.abort();
    }
    let _ = writer.await;
    result
}
