//! The authorizer: decides whether a session may perform an operation on a
//! resource, with the semantics of Kafka 3.7's StandardAuthorizer (the
//! rules are in [`super::acl_index`]), audits each decisive denial, and
//! changes the ACL set through its store ([`super::acl_store`]).
//!
//! Disabled (no listener authenticates, `--authorizer none`), it allows
//! everything, as Kafka without `authorizer.class.name` does.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::acl::{AclBinding, Operation, ResourceType};
use super::acl_filter::AclFilter;
use super::acl_index::{AclIndex, HARDCODE};
use super::acl_store::{self, Update};
use super::session::{Principal, Session};
use crate::cluster::etcd::Etcd;

/// Default of `max_acls` (`--max-acls`).
pub const DEFAULT_MAX_ACLS: usize = 100_000;

/// `--authorizer`: whether ACLs are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizerMode {
    /// Enforced when some listener authenticates its clients.
    #[default]
    Auto,
    /// Always enforced.
    Acl,
    /// Never enforced: everything is allowed.
    None,
}

impl std::str::FromStr for AuthorizerMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(AuthorizerMode::Auto),
            "acl" => Ok(AuthorizerMode::Acl),
            "none" => Ok(AuthorizerMode::None),
            _ => Err(format!("{s:?}: expected auto, acl or none")),
        }
    }
}

/// Authorizer settings.
#[derive(Debug, Clone)]
pub struct AuthorizerConfig {
    /// Enforce ACLs at all (what [`Self::resolve`] made of `mode`).
    pub enabled: bool,
    /// `--authorizer`.
    pub mode: AuthorizerMode,
    /// `--super-user User:NAME`: allowed everything, no ACL consulted.
    pub super_users: BTreeSet<Principal>,
    /// allow.everyone.if.no.acl.found: an action on a resource no ACL
    /// names at all is allowed.
    pub allow_everyone_if_no_acl_found: bool,
    /// `--max-acls`: most ACLs the broker (the cluster) holds.
    pub max_acls: usize,
}

impl Default for AuthorizerConfig {
    fn default() -> Self {
        AuthorizerConfig {
            enabled: false,
            mode: AuthorizerMode::Auto,
            super_users: BTreeSet::new(),
            allow_everyone_if_no_acl_found: false,
            max_acls: DEFAULT_MAX_ACLS,
        }
    }
}

impl AuthorizerConfig {
    /// Settles `enabled` from `mode`: `auto` enforces ACLs exactly when
    /// some listener authenticates (SASL, or TLS with client certificates).
    pub fn resolve(&mut self, any_listener_authenticates: bool) {
        self.enabled = match self.mode {
            AuthorizerMode::Auto => any_listener_authenticates,
            AuthorizerMode::Acl => true,
            AuthorizerMode::None => false,
        };
    }
}

/// Why a change to the ACLs was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclChangeError {
    #[error(
        "the broker holds the most ACLs it may ({0}, --max-acls); delete some before creating more"
    )]
    Limit(usize),
    #[error("the ACLs could not be stored: {0}")]
    Store(String),
}

/// Where the ACLs are kept.
#[derive(Debug)]
enum Backend {
    /// Nowhere (tests).
    Memory,
    /// Single-node mode: this file.
    File(PathBuf),
    /// Cluster mode: etcd.
    Etcd(Arc<Etcd>),
}

/// At most ten audit lines a second; the rest are counted in the next
/// line's `suppressed` (and all of them in `kaas_authorization_denied_total`).
static AUDIT: crate::ratelimit::RateLimit =
    crate::ratelimit::RateLimit::new(Duration::from_millis(100));

/// What the follower starts from: the ACLs by etcd key and the revision read.
type Loaded = (HashMap<Vec<u8>, AclBinding>, i64);

/// The broker's authorizer.
#[derive(Debug)]
pub struct Authorizer {
    config: AuthorizerConfig,
    acls: RwLock<AclIndex>,
    backend: Backend,
    /// Serializes changes, so each is stored whole before the next.
    writer: Mutex<()>,
    /// Cluster mode: false until the ACLs were read from etcd; until then
    /// only super users are allowed anything.
    loaded: AtomicBool,
    /// Cluster mode: the first read, until the follower takes it.
    initial: Mutex<Option<Loaded>>,
    /// Decisive denials so far.
    denied: AtomicU64,
}

/// Operations meaningful on each resource type (for the
/// `*_authorized_operations` bitfields), as Kafka lists them.
pub fn supported_operations(rt: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match rt {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
    }
}

impl Authorizer {
    /// Allows everything.
    pub fn disabled() -> Self {
        Self::in_memory(AuthorizerConfig::default(), Vec::new())
    }

    /// An authorizer over `acls`, not backed by any store (tests).
    pub fn in_memory(config: AuthorizerConfig, acls: Vec<AclBinding>) -> Self {
        Self::with_backend(config, AclIndex::new(acls), Backend::Memory, true)
    }

    fn with_backend(
        config: AuthorizerConfig,
        acls: AclIndex,
        backend: Backend,
        loaded: bool,
    ) -> Self {
        Authorizer {
            config,
            acls: RwLock::new(acls),
            backend,
            writer: Mutex::new(()),
            loaded: AtomicBool::new(loaded),
            initial: Mutex::new(None),
            denied: AtomicU64::new(0),
        }
    }

    /// The broker's authorizer over its store: single-node mode reads the
    /// ACL file of the data directory (a corrupt file is an error); cluster
    /// mode starts empty and closed until [`Self::load`] has read etcd.
    pub fn open(
        settings: AuthorizerConfig,
        data_dir: &std::path::Path,
        etcd: Option<&std::sync::Arc<crate::cluster::etcd::Etcd>>,
    ) -> std::io::Result<Self> {
        match etcd {
            Some(etcd) => Ok(Self::with_backend(
                settings,
                AclIndex::default(),
                Backend::Etcd(etcd.clone()),
                false,
            )),
            None => {
                let path = acl_store::file_path(data_dir);
                let acls = acl_store::load_file(&path)?;
                if !acls.is_empty() {
                    tracing::info!(acls = acls.len(), file = %path.display(), "ACLs loaded");
                }
                Ok(Self::with_backend(
                    settings,
                    AclIndex::new(acls),
                    Backend::File(path),
                    true,
                ))
            }
        }
    }

    /// Cluster mode: reads the ACLs from etcd (at start, before requests
    /// are served). Nothing to do in single-node mode.
    pub async fn load(&self) -> std::io::Result<()> {
        let Backend::Etcd(etcd) = &self.backend else {
            return Ok(());
        };
        let (by_key, revision) = acl_store::load_etcd(etcd)
            .await
            .map_err(|e| std::io::Error::other(format!("reading the ACLs from etcd: {e}")))?;
        tracing::info!(acls = by_key.len(), revision, "ACLs loaded from etcd");
        *self.index_mut() = AclIndex::new(by_key.values().cloned());
        *self.initial.lock().unwrap_or_else(|p| p.into_inner()) = Some((by_key, revision));
        self.loaded.store(true, Ordering::Release);
        Ok(())
    }

    /// Cluster mode: applies every ACL change made on any broker, for ever
    /// (an etcd watch of the ACL keys; see [`acl_store::follow`]). Returns
    /// at once in single-node mode, or before [`Self::load`].
    pub async fn follow(&self) {
        let Backend::Etcd(etcd) = &self.backend else {
            return;
        };
        let Some((by_key, revision)) = self
            .initial
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        acl_store::follow(etcd.clone(), by_key, revision + 1, |u| self.apply(u)).await;
    }

    fn apply(&self, u: Update) {
        let mut idx = self.index_mut();
        match u {
            Update::Reset(all) => *idx = AclIndex::new(all),
            Update::Put(b) => {
                idx.insert(b);
            }
            Update::Remove(b) => {
                idx.remove(&b);
            }
        }
    }

    fn index(&self) -> std::sync::RwLockReadGuard<'_, AclIndex> {
        self.acls.read().unwrap_or_else(|p| p.into_inner())
    }

    fn index_mut(&self) -> std::sync::RwLockWriteGuard<'_, AclIndex> {
        self.acls.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_enabled(&self) -> bool {
        self.config.enabled
    }

    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// Decisive denials so far (`kaas_authorization_denied_total`).
    pub fn denied_total(&self) -> u64 {
        self.denied.load(Ordering::Relaxed)
    }

    /// How many ACLs there are.
    pub fn acl_count(&self) -> usize {
        self.index().len()
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
            self.denied.fetch_add(1, Ordering::Relaxed);
            if let Some(suppressed) = AUDIT.allow() {
                tracing::warn!(
                    target: "kaas::audit",
                    principal = %session.principal,
                    listener = %session.listener,
                    host = %session.client_ip,
                    api = ?api,
                    operation = ?op,
                    resource_type = ?resource,
                    name,
                    suppressed,
                    "authorization denied"
                );
            }
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
        if !self.loaded.load(Ordering::Acquire) {
            return false;
        }
        self.decide(&session.principal, session.client_ip, op, resource, name)
    }

    fn decide(
        &self,
        who: &Principal,
        ip: IpAddr,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        self.index()
            .decide(who, ip, op, rt, name)
            .unwrap_or(self.config.allow_everyone_if_no_acl_found)
    }

    /// KIP-679: may `session` perform `op` on at least one resource of
    /// `resource` type (idempotent InitProducerId: WRITE on any topic).
    pub fn authorize_by_resource_type(
        &self,
        session: &Session,
        op: Operation,
        resource: ResourceType,
    ) -> bool {
        // Super users, the no-ACL default and ACLs matching the dummy name.
        if self.probe(session, op, resource, HARDCODE) {
            return true;
        }
        if !self.loaded.load(Ordering::Acquire) {
            return false;
        }
        self.index()
            .any_of_type(&session.principal, session.client_ip, op, resource)
    }

    /// The `*_authorized_operations` bitfield of a resource: bit `code` set
    /// for each of its type's operations `session` may perform (all of them
    /// when the authorizer is disabled).
    pub fn authorized_operations(
        &self,
        session: &Session,
        resource: ResourceType,
        name: &str,
    ) -> i32 {
        supported_operations(resource)
            .iter()
            .filter(|&&op| self.probe(session, op, resource, name))
            .fold(0, |bits, op| bits | (1i32 << op.code()))
    }

    /// The ACLs `filter` selects (DescribeAcls), in canonical order.
    pub fn describe(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.index()
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    /// Creates ACLs (CreateAcls), one result per binding in order: an ACL
    /// that exists already is a success with nothing written; past
    /// `max_acls` a creation is refused. The new ACLs are stored before
    /// they apply. Blocking (file writes, etcd): call off the async
    /// runtime's workers.
    pub fn create(&self, bindings: Vec<AclBinding>) -> Vec<Result<(), AclChangeError>> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut results = Vec::with_capacity(bindings.len());
        let mut fresh: BTreeSet<AclBinding> = BTreeSet::new();
        let mut fresh_at: Vec<usize> = Vec::new();
        {
            let idx = self.index();
            for (i, b) in bindings.into_iter().enumerate() {
                if idx.contains(&b) || fresh.contains(&b) {
                    results.push(Ok(()));
                } else if idx.len().saturating_add(fresh.len()) >= self.config.max_acls {
                    results.push(Err(AclChangeError::Limit(self.config.max_acls)));
                } else {
                    fresh.insert(b);
                    fresh_at.push(i);
                    results.push(Ok(()));
                }
            }
        }
        if fresh.is_empty() {
            return results;
        }
        let fresh: Vec<AclBinding> = fresh.into_iter().collect();
        if let Err(e) = self.store(&fresh, &[]) {
            for i in fresh_at {
                if let Some(r) = results.get_mut(i) {
                    *r = Err(e.clone());
                }
            }
            return results;
        }
        let mut idx = self.index_mut();
        for b in fresh {
            idx.insert(b);
        }
        results
    }

    /// Deletes the ACLs each filter selects (DeleteAcls): per filter, the
    /// ACLs it removed. Blocking, as [`Self::create`].
    pub fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclChangeError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let per_filter: Vec<Vec<AclBinding>> = {
            let idx = self.index();
            filters
                .iter()
                .map(|f| idx.iter().filter(|b| f.matches(b)).cloned().collect())
                .collect()
        };
        let gone: BTreeSet<&AclBinding> = per_filter.iter().flatten().collect();
        if gone.is_empty() {
            return Ok(per_filter);
        }
        let gone: Vec<AclBinding> = gone.into_iter().cloned().collect();
        self.store(&[], &gone)?;
        let mut idx = self.index_mut();
        for b in &gone {
            idx.remove(b);
        }
        drop(idx);
        Ok(per_filter)
    }

    /// Makes a change durable (the caller holds `writer`).
    fn store(&self, created: &[AclBinding], deleted: &[AclBinding]) -> Result<(), AclChangeError> {
        match &self.backend {
            Backend::Memory => Ok(()),
            Backend::File(path) => {
                let idx = self.index();
                let gone: BTreeSet<&AclBinding> = deleted.iter().collect();
                let mut all: BTreeSet<&AclBinding> =
                    idx.iter().filter(|b| !gone.contains(b)).collect();
                all.extend(created.iter());
                acl_store::save_file(path, all.into_iter())
                    .map_err(|e| AclChangeError::Store(e.to_string()))
            }
            Backend::Etcd(etcd) => {
                let h = tokio::runtime::Handle::try_current()
                    .map_err(|e| AclChangeError::Store(e.to_string()))?;
                h.block_on(acl_store::write_etcd(etcd, created, deleted))
                    .map_err(|e| AclChangeError::Store(format!("etcd: {e}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{PatternType, Permission};
    use std::net::Ipv4Addr;

    fn session(name: &str) -> Session {
        Session {
            principal: Principal::user(name),
            listener: Arc::from("SASL_PLAINTEXT"),
            client_ip: IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2)),
        }
    }

    fn enabled() -> AuthorizerConfig {
        AuthorizerConfig {
            enabled: true,
            ..Default::default()
        }
    }

    fn topic_acl(name: &str, who: &str, op: Operation, perm: Permission) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: Principal::parse(who).unwrap(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn a_disabled_authorizer_allows_everything() {
        let a = Authorizer::in_memory(
            AuthorizerConfig::default(),
            vec![topic_acl(
                "t",
                "User:alice",
                Operation::Read,
                Permission::Deny,
            )],
        );
        assert!(a.authorize(
            &session("alice"),
            ApiKey::Fetch,
            Operation::Read,
            ResourceType::Topic,
            "t"
        ));
        assert_eq!(a.denied_total(), 0);
    }

    #[test]
    fn a_super_user_is_allowed_despite_a_deny() {
        let mut cfg = enabled();
        cfg.super_users.insert(Principal::user("admin"));
        let a = Authorizer::in_memory(
            cfg,
            vec![topic_acl("t", "User:*", Operation::All, Permission::Deny)],
        );
        assert!(a.probe(
            &session("admin"),
            Operation::Write,
            ResourceType::Topic,
            "t"
        ));
        assert!(!a.probe(
            &session("alice"),
            Operation::Write,
            ResourceType::Topic,
            "t"
        ));
        assert!(a.authorize_by_resource_type(
            &session("admin"),
            Operation::Write,
            ResourceType::Topic
        ));
    }

    #[test]
    fn a_super_user_entry_of_the_wildcard_user_is_no_wildcard() {
        let mut cfg = enabled();
        cfg.super_users.insert(Principal::parse("User:*").unwrap());
        let a = Authorizer::in_memory(cfg, vec![]);
        assert!(!a.probe(
            &session("alice"),
            Operation::Write,
            ResourceType::Topic,
            "t"
        ));
    }

    #[test]
    fn with_no_acl_on_a_resource_the_default_decides() {
        let a = Authorizer::in_memory(
            enabled(),
            vec![topic_acl(
                "other",
                "User:alice",
                Operation::Read,
                Permission::Allow,
            )],
        );
        assert!(!a.probe(&session("alice"), Operation::Read, ResourceType::Topic, "t"));
        let a = Authorizer::in_memory(
            AuthorizerConfig {
                allow_everyone_if_no_acl_found: true,
                ..enabled()
            },
            vec![topic_acl(
                "other",
                "User:alice",
                Operation::Read,
                Permission::Allow,
            )],
        );
        assert!(a.probe(&session("bob"), Operation::Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn an_acl_for_someone_else_on_the_resource_denies_even_with_allow_everyone() {
        let a = Authorizer::in_memory(
            AuthorizerConfig {
                allow_everyone_if_no_acl_found: true,
                ..enabled()
            },
            vec![topic_acl(
                "t",
                "User:bob",
                Operation::Read,
                Permission::Allow,
            )],
        );
        assert!(!a.probe(&session("alice"), Operation::Read, ResourceType::Topic, "t"));
        assert!(a.probe(&session("bob"), Operation::Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn a_decisive_denial_is_counted_and_a_probe_is_not() {
        let a = Authorizer::in_memory(enabled(), vec![]);
        assert!(!a.probe(&session("alice"), Operation::Read, ResourceType::Topic, "t"));
        assert_eq!(a.denied_total(), 0);
        assert!(!a.authorize(
            &session("alice"),
            ApiKey::Fetch,
            Operation::Read,
            ResourceType::Topic,
            "t"
        ));
        assert!(!a.authorize(
            &session("alice"),
            ApiKey::Fetch,
            Operation::Read,
            ResourceType::Topic,
            "t"
        ));
        assert_eq!(a.denied_total(), 2);
    }

    #[test]
    fn by_resource_type_honours_allow_everyone_through_the_dummy_name() {
        let a = Authorizer::in_memory(
            AuthorizerConfig {
                allow_everyone_if_no_acl_found: true,
                ..enabled()
            },
            vec![],
        );
        assert!(a.authorize_by_resource_type(
            &session("alice"),
            Operation::Write,
            ResourceType::Topic
        ));
        let a = Authorizer::in_memory(enabled(), vec![]);
        assert!(!a.authorize_by_resource_type(
            &session("alice"),
            Operation::Write,
            ResourceType::Topic
        ));
        let a = Authorizer::in_memory(
            enabled(),
            vec![topic_acl(
                "x",
                "User:alice",
                Operation::Write,
                Permission::Allow,
            )],
        );
        assert!(a.authorize_by_resource_type(
            &session("alice"),
            Operation::Write,
            ResourceType::Topic
        ));
        assert!(!a.authorize_by_resource_type(
            &session("bob"),
            Operation::Write,
            ResourceType::Topic
        ));
    }

    #[test]
    fn authorized_operations_sets_the_bit_of_each_allowed_operation() {
        let a = Authorizer::in_memory(
            enabled(),
            vec![topic_acl(
                "t",
                "User:alice",
                Operation::Write,
                Permission::Allow,
            )],
        );
        let bits = a.authorized_operations(&session("alice"), ResourceType::Topic, "t");
        assert_eq!(
            bits,
            (1 << 4) | (1 << 8),
            "WRITE and the DESCRIBE it implies"
        );
        assert_eq!(
            a.authorized_operations(&session("bob"), ResourceType::Topic, "t"),
            0
        );
        let all =
            Authorizer::disabled().authorized_operations(&session("bob"), ResourceType::Group, "g");
        assert_eq!(all, (1 << 3) | (1 << 8) | (1 << 6));
    }

    #[test]
    fn creating_past_max_acls_is_refused_per_creation_and_duplicates_are_free() {
        let a = Authorizer::in_memory(
            AuthorizerConfig {
                max_acls: 2,
                ..enabled()
            },
            vec![],
        );
        let r = a.create(vec![
            topic_acl("a", "User:x", Operation::Read, Permission::Allow),
            topic_acl("a", "User:x", Operation::Read, Permission::Allow),
            topic_acl("b", "User:x", Operation::Read, Permission::Allow),
            topic_acl("c", "User:x", Operation::Read, Permission::Allow),
        ]);
        assert_eq!(r[..3], [Ok(()), Ok(()), Ok(())]);
        assert_eq!(r[3], Err(AclChangeError::Limit(2)));
        assert_eq!(a.acl_count(), 2);
        assert_eq!(
            a.create(vec![topic_acl(
                "a",
                "User:x",
                Operation::Read,
                Permission::Allow
            )]),
            [Ok(())]
        );
    }

    #[test]
    fn the_file_store_keeps_acls_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let a = Authorizer::open(enabled(), dir.path(), None).unwrap();
        let keep = topic_acl("t", "User:alice", Operation::Read, Permission::Allow);
        let drop = topic_acl("u", "User:alice", Operation::Read, Permission::Allow);
        assert_eq!(a.create(vec![keep.clone(), drop.clone()]), [Ok(()), Ok(())]);
        let mut f = AclFilter::any();
        f.resource_name = Some("u".into());
        assert_eq!(a.delete(&[f]).unwrap(), vec![vec![drop]]);
        let b = Authorizer::open(enabled(), dir.path(), None).unwrap();
        assert_eq!(b.describe(&AclFilter::any()), vec![keep]);
        assert!(b.probe(&session("alice"), Operation::Read, ResourceType::Topic, "t"));
    }
}
