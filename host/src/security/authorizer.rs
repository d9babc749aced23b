//! The authorizer: decides whether a session may perform an operation on a
//! resource, with the semantics of Kafka 3.7's StandardAuthorizer, and
//! audits each decisive denial.
//!
//! Disabled (no listener authenticates, `--authorizer none`), it allows
//! everything, as Kafka without `authorizer.class.name` does.

use std::collections::BTreeSet;
use std::sync::RwLock;

use kafka_protocol::messages::ApiKey;

use super::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use super::session::{Principal, Session};

/// Authorizer settings.
#[derive(Debug, Clone, Default)]
pub struct AuthorizerConfig {
    /// Enforce ACLs at all.
    pub enabled: bool,
    /// `--super-user User:NAME`: allowed everything, no ACL consulted.
    pub super_users: BTreeSet<Principal>,
    /// allow.everyone.if.no.acl.found.
    pub allow_everyone_if_no_acl_found: bool,
}

/// The broker's authorizer.
#[derive(Debug)]
pub struct Authorizer {
    config: AuthorizerConfig,
    acls: RwLock<BTreeSet<AclBinding>>,
}

impl Authorizer {
    /// Allows everything.
    pub fn disabled() -> Self {
        Self::in_memory(AuthorizerConfig::default(), Vec::new())
    }

    /// An authorizer over `acls`, not backed by any store (tests).
    pub fn in_memory(config: AuthorizerConfig, acls: Vec<AclBinding>) -> Self {
        Authorizer {
            config,
            acls: RwLock::new(acls.into_iter().collect()),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.config.enabled
    }

    /// The decisive check for one action of `api`: a denial is audited.
    pub fn authorize(
        &self,
        session: &Session,
        api: ApiKey,
        op: Operation,
        resource: ResourceType,
        name: &str,
    ) -> bool {
        let allowed = self.probe(session, op, resource, name);
        if !allowed {
            tracing::info!(target: "kaas::audit", principal = %session.principal, listener = %session.listener, host = %session.client_ip, api = ?api, operation = ?op, resource = ?resource, name, "denied");
        }
        allowed
    }

    /// A check whose denial is not audited (Kafka's logIfDenied=false
    /// probes, e.g. Cluster CREATE before per-topic CREATE).
    pub fn probe(
        &self,
        session: &Session,
        op: Operation,
        resource: ResourceType,
        name: &str,
    ) -> bool {
        if !self.config.enabled || self.config.super_users.contains(&session.principal) {
            return true;
        }
        // Placeholder engine (literal ALLOW only); replaced by the full
        // StandardAuthorizer semantics.
        let acls = self.acls.read().unwrap_or_else(|p| p.into_inner());
        acls.iter().any(|a| {
            a.resource_type == resource
                && a.pattern_type == PatternType::Literal
                && a.resource_name == name
                && a.principal == session.principal
                && a.permission == Permission::Allow
                && (a.operation == op || a.operation == Operation::All)
        })
    }

    /// KIP-679: may `session` perform `op` on at least one resource of
    /// `resource` type (idempotent InitProducerId: WRITE on any topic).
    pub fn authorize_by_resource_type(
        &self,
        session: &Session,
        op: Operation,
        resource: ResourceType,
    ) -> bool {
        if !self.config.enabled || self.config.super_users.contains(&session.principal) {
            return true;
        }
        let acls = self.acls.read().unwrap_or_else(|p| p.into_inner());
        acls.iter().any(|a| {
            a.resource_type == resource
                && a.principal == session.principal
                && a.permission == Permission::Allow
                && (a.operation == op || a.operation == Operation::All)
        })
    }
}
