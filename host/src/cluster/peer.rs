//! Stub (issue 15 item 3): replaced by the real client in the next commit.

use std::time::Duration;

use kafka_protocol::protocol::Request;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}: no answer in time")]
    Timeout(String),
    #[error("{0}")]
    Decode(String),
}

#[derive(Debug)]
pub struct Peers {
    timeout: Duration,
}

impl Peers {
    pub fn new(_client_id: &str, timeout: Duration) -> Peers {
        Peers { timeout }
    }

    pub async fn call<R: Request>(
        &self,
        addr: &str,
        _version: i16,
        _request: &R,
    ) -> Result<R::Response, PeerError> {
        let _ = self.timeout;
        Err(PeerError::Io(addr.to_string()))
    }

    pub fn forget(&self, _addr: &str) {}
}
