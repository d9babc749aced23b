//! Who is asking, and what they may do: the per-connection
//! [`session::Session`] (principal, listener, client address), the
//! authorizer with Kafka's ACL semantics ([`authorizer`], [`acl`]), and the
//! pieces that establish a principal (listeners, TLS, SASL, credentials).
//!
//! Handlers see only a `Session` and ask the broker's authorizer; they never
//! know how the principal was established.

pub mod acl;
pub mod acl_filter;
pub mod acl_index;
pub mod acl_store;
pub mod authenticate;
pub mod authorizer;
pub mod credentials;
pub mod flock;
pub mod listener;
pub mod pid_owners;
pub mod sasl;
pub mod session;
pub mod tls;

pub use acl::{Operation, ResourceType};
pub use authorizer::Authorizer;
pub use session::{Principal, Session};

/// Authentication settings.
#[derive(Debug, Clone)]
pub struct SecurityConfig {
    /// connection.failed.authentication.delay.ms.
    pub failed_authentication_delay: std::time::Duration,
    /// connections.max.reauth.ms (zero: sessions do not expire).
    pub connections_max_reauth: std::time::Duration,
    /// sasl.server.max.receive.size: the largest frame before authentication.
    pub sasl_max_receive_size: usize,
    /// How long a SASL connection may take to authenticate, and a TLS
    /// connection its handshake.
    pub authentication_timeout: std::time::Duration,
    /// The SASL mechanisms SaslHandshake offers.
    pub sasl_mechanisms: Vec<sasl::Mechanism>,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            failed_authentication_delay: std::time::Duration::from_millis(100),
            connections_max_reauth: std::time::Duration::ZERO,
            sasl_max_receive_size: 524_288,
            authentication_timeout: std::time::Duration::from_secs(10),
            sasl_mechanisms: vec![
                sasl::Mechanism::Plain,
                sasl::Mechanism::Scram(credentials::ScramMechanism::Sha256),
                sasl::Mechanism::Scram(credentials::ScramMechanism::Sha512),
            ],
        }
    }
}
