//! The shapes a request arrives in and a handler's answer leaves in, apart
//! from the decoder and the dispatcher, so the handlers under `api/` use
//! them without importing the dispatcher that calls them.

use std::future::Future;
use std::pin::Pin;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};

/// A future resolving to a response.
pub type Pending = Pin<Box<dyn Future<Output = ResponseKind> + Send>>;

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
}
