//! Who is asking, and what they may do: the per-connection
//! [`session::Session`] (principal, listener, client address), the
//! authorizer with Kafka's ACL semantics ([`authorizer`], [`acl`]), and the
//! pieces that establish a principal (listeners, TLS, SASL, credentials).
//!
//! Handlers see only a `Session` and ask the broker's authorizer; they never
//! know how the principal was established.
//!
//! Who is asking:
//! - [`session`]: the identity a connection's requests are decided for.
//! - [`listener`]: listener definitions (`--listener NAME=PROTOCOL://HOST:PORT`).
//! - [`tls`]: TLS for SSL and SASL_SSL listeners, and the principal a client certificate names.
//! - [`authenticate`]: one connection's SASL state (handshake, tokens, re-authentication).
//! - [`sasl`]: one SASL exchange on the server side: PLAIN and SCRAM-SHA-256/512.
//! - [`credentials`]: SCRAM credentials as Kafka keeps them (salt, iterations, keys).
//!
//! What they may do:
//! - [`authorizer`]: decides each operation, audits denials, changes the ACLs through its store.
//! - [`acl`]: Kafka's ACL vocabulary and wire codes, and one ACL binding.
//! - [`acl_index`]: the ACL engine: the indexed set and StandardAuthorizer's rules. Pure.
//! - [`acl_filter`]: CreateAcls' and Describe/DeleteAcls' fields, checked, as bindings and filters.
//! - [`acl_store`]: where ACLs live between restarts: a file, or etcd keys watched by all.
//! - [`pid_owners`]: producer ids bound to principals (beyond Kafka).
//! - [`flock`]: the file lock for the stores' read-modify-write on the shared volume.

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
