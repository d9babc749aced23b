//! Who is asking, and what they may do (issue 16): the per-connection
//! [`session::Session`] (principal, listener, client address), the
//! authorizer with Kafka's ACL semantics ([`authorizer`], [`acl`]), and the
//! pieces that establish a principal (listeners, TLS, SASL, credentials).
//!
//! Handlers see only a `Session` and ask the broker's authorizer; they never
//! know how the principal was established.

pub mod acl;
pub mod authorizer;
pub mod pid_owners;
pub mod session;

pub use acl::{Operation, ResourceType};
pub use authorizer::Authorizer;
pub use session::{Principal, Session};
