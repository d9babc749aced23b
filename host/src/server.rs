//! The TCP server: accepts connections (bounded by a semaphore), reads
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

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};

use crate::broker::Broker;
use crate::wire::{self, Handled};

/// Responses in flight per connection before the reader waits.
const PIPELINE: usize = 64;

/// Serves `listener` until `shutdown` resolves.
pub async fn run(listener: TcpListener, broker: Arc<Broker>, shutdown: impl Future<Output = ()>) {
    let limit = Arc::new(Semaphore::new(broker.config.max_connections));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                let (sock, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, "connection limit reached; closing");
                    continue;
                };
                let broker = broker.clone();
                broker.metrics.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let _ = sock.set_nodelay(true);
                    if let Err(e) = connection(sock, broker).await {
                        tracing::debug!(%peer, error = %e, "connection closed");
                    }
                    drop(permit);
                });
            }
        }
    }
}

/// Bytes a connection reads ahead.
const READ_BUFFER: usize = 16 << 10;

type Queued = (ApiKey, i16, i32, Instant, Handled);

async fn connection(sock: TcpStream, broker: Arc<Broker>) -> anyhow::Result<()> {
    let (rd, wr) = sock.into_split();
    // Reads the size and the body of a request (and whatever pipelined
    // requests arrived with them) in one syscall, not two per request.
    let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
    let (tx, mut rx) = mpsc::channel::<Queued>(PIPELINE);
    let writer_broker = broker.clone();
    let writer = tokio::spawn(async move {
        let mut wr = BufWriter::new(wr);
        while let Some((key, version, correlation, started, handled)) = rx.recv().await {
            let body = match handled {
                Handled::Now(b) => b,
                Handled::Later(f) => f.await,
                Handled::Nothing => {
                    writer_broker
                        .metrics
                        .record(key as i16, started.elapsed().as_nanos() as u64);
                    continue;
                }
            };
            let frame = match wire::encode(key, version, correlation, &body) {
                Ok(f) => f,
                Err(e) => {
                    tracing::error!(api = ?key, version, error = %e, "encoding a response failed; closing");
                    return;
                }
            };
            writer_broker
                .metrics
                .record(key as i16, started.elapsed().as_nanos() as u64);
            if wr.write_all(&frame).await.is_err() {
                return;
            }
            if rx.is_empty() && wr.flush().await.is_err() {
                return;
            }
        }
        let _ = wr.flush().await;
    });

    let max = broker.config.max_request_bytes;
    let result: anyhow::Result<()> = async {
        loop {
            let mut size = [0u8; 4];
            if rd.read_exact(&mut size).await.is_err() {
                return Ok(());
            }
            let size = i32::from_be_bytes(size);
            if size < 0 || size as usize > max {
                anyhow::bail!("request of {size} bytes exceeds the {max}-byte limit");
            }
            let mut buf = BytesMut::zeroed(size as usize);
            rd.read_exact(&mut buf).await?;
            let started = Instant::now();
            let req = wire::decode(Bytes::from(buf))?;
            let (key, version, correlation) = (req.api_key, req.version, req.correlation_id);
            // A too-new ApiVersions is answered in the v0 format (KIP-511).
            let reply_version = if req.body.is_none() { 0 } else { version };
            let handled = wire::dispatch(&broker, req).await;
            if tx
                .send((key, reply_version, correlation, started, handled))
                .await
                .is_err()
            {
                return Ok(());
            }
        }
    }
    .await;
    drop(tx);
    let _ = writer.await;
    result
}
