//! The identity a connection's requests are decided for.
//!
//! A connection starts as `User:ANONYMOUS` on its listener; SASL or a
//! client certificate replaces the principal once, before any request other
//! than ApiVersions and the SASL exchange reaches a handler.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// A Kafka principal: `Type:name`, e.g. `User:alice`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    pub const ANONYMOUS: &'static str = "ANONYMOUS";

    pub fn user(name: &str) -> Self {
        Principal {
            kind: "User".into(),
            name: name.into(),
        }
    }

    pub fn anonymous() -> Self {
        Self::user(Self::ANONYMOUS)
    }

    /// Parses `Type:name` (the name may itself contain `:`).
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, name) = s.split_once(':')?;
        if kind.is_empty() || name.is_empty() {
            return None;
        }
        Some(Principal {
            kind: kind.into(),
            name: name.into(),
        })
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// Who sent a request, and how it arrived.
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    /// The listener's name (`--listener NAME=...`).
    pub listener: Arc<str>,
    /// The client's address, as ACL hosts match it.
    pub client_ip: IpAddr,
}

impl Session {
    /// An unauthenticated session (PLAINTEXT, or before SASL completes).
    pub fn anonymous(listener: Arc<str>, client_ip: IpAddr) -> Self {
        Session {
            principal: Principal::anonymous(),
            listener,
            client_ip,
        }
    }

    /// A session for the broker's own work and for tests: `User:ANONYMOUS`
    /// on listener `PLAINTEXT` from 127.0.0.1.
    pub fn internal() -> Arc<Self> {
        Arc::new(Self::anonymous(
            Arc::from("PLAINTEXT"),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        ))
    }
}
