//! The shapes a request arrives in and a handler's answer leaves in, apart
//! from the decoder and the dispatcher, so the handlers under `api/` use
//! them without importing the dispatcher that calls them.

use std::future::Future;
use std::pin::Pin;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};

/// A future resolving to a response.
pub type Pending = Pin<Box<dyn Future<Output = ResponseKind> + Send>>;

/// A future resolving once work a handler started elsewhere is done:
/// true when it succeeded.
pub type Settling = Pin<Box<dyn Future<Output = bool> + Send>>;

/// What a handler produced.
// Moved once per request; boxing the response would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Handled {
    /// Respond with this.
    Now(ResponseKind),
    /// Respond when this resolves (durability waits, long polls).
    Later(Pending),
    /// Send nothing (Produce with acks=0).
    Nothing,
    /// Send nothing, and handle no later request of the connection other
    /// than a Produce until this resolves (an acks=0 Produce whose appends
    /// become visible once durable: a later Fetch on the connection must
    /// see them, as Kafka answers a connection's requests in order). When
    /// it resolves false, the connection is closed instead.
    NothingUntil(Settling),
    /// Send nothing and close the connection once the answers before it
    /// are written: a failed Produce with acks=0, whose client expects no
    /// answer (Kafka closes it so).
    Close,
    /// Send these bytes as a raw size-prefixed frame with no response
    /// header (SASL tokens after SaslHandshake v0).
    Raw(Vec<u8>),
}

impl std::fmt::Debug for Handled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Handled::Now(_) => "Handled::Now",
            Handled::Later(_) => "Handled::Later",
            Handled::Nothing => "Handled::Nothing",
            Handled::NothingUntil(_) => "Handled::NothingUntil",
            Handled::Close => "Handled::Close",
            Handled::Raw(_) => "Handled::Raw",
        })
    }
}

/// A decoded request ready for dispatch.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub header: RequestHeader,
    /// None for ApiVersions requests newer than we speak (KIP-511).
    pub body: Option<RequestKind>,
    /// The frame's size without its length prefix (what a produce counts
    /// against `producer_byte_rate`, as Kafka's `request.sizeInBytes`).
    pub size: usize,
}

/// A connection's mute (KIP-219): a throttled client's response leaves at
/// once, and its connection reads no further request until the throttle
/// time has passed. Set by the quota checks (`wire::throttling`), possibly
/// from a response still pending; honoured by the server before it reads
/// or dispatches the next request.
#[derive(Debug)]
pub struct Mute {
    origin: std::time::Instant,
    /// Milliseconds after `origin` until which the connection is muted.
    until_ms: std::sync::atomic::AtomicU64,
}

impl Default for Mute {
    fn default() -> Self {
        Mute {
            origin: std::time::Instant::now(),
            until_ms: Default::default(),
        }
    }
}

impl Mute {
    /// Mutes for `ms` from now (a longer mute already set stays).
    pub fn mute_for(&self, ms: u64) {
        if ms == 0 {
            return;
        }
        let until = self.origin.elapsed().as_millis() as u64 + ms;
        self.until_ms
            .fetch_max(until, std::sync::atomic::Ordering::AcqRel);
    }

    /// When the mute ends, if it has not yet.
    pub fn until(&self) -> Option<std::time::Instant> {
        let ms = self.until_ms.load(std::sync::atomic::Ordering::Acquire);
        let at = self.origin + std::time::Duration::from_millis(ms);
        (ms > 0 && at > std::time::Instant::now()).then_some(at)
    }
}
