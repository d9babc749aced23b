//! One broker's settings ([`BrokerConfig`]) and their defaults, under the
//! names the command line and Kafka give them. Plain data: the parts of the
//! broker take the fields they use from it, and nothing here reaches the
//! running broker.

use std::path::{Path, PathBuf};

use crate::log::LogConfig;

/// Settings of one broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// This broker's id in Metadata.
    pub node_id: i32,
    /// Host clients should connect to.
    pub advertised_host: String,
    /// Port clients should connect to.
    pub advertised_port: i32,
    /// Cluster id in Metadata.
    pub cluster_id: String,
    /// Metadata creates unknown topics when the client allows it.
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic.
    pub default_partitions: i32,
    /// Replication factor of a topic created without one (Kafka's
    /// `default.replication.factor`; auto-created topics too).
    pub default_replication_factor: i16,
    /// Largest request frame accepted; bigger ones close the connection.
    pub max_request_bytes: usize,
    /// Most concurrent connections.
    pub max_connections: usize,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Topic defaults (the built-in ones under `log_overrides`).
    pub log: LogConfig,
    /// The static broker-level topic defaults as set (`--override`, by
    /// Kafka's broker names), for DescribeConfigs.
    pub log_overrides: crate::log::config::broker_defaults::Layer,
    /// The log cleaner (compaction).
    pub cleaner: crate::log::cleaner::CleanerConfig,
    /// Group coordinator settings (consumer groups).
    pub groups: crate::group::GroupConfig,
    /// Cluster mode's group sharding: groups map onto 50 shards, none open
    /// at start; the cluster module opens those this broker coordinates
    /// (`group::shards`). False: one shard holding every group, as a
    /// single node has always had.
    pub sharded_groups: bool,
    /// transactional.id.expiration.ms: idle transactional ids are removed
    /// after this long (docs/txn-semantics.md §2.7).
    pub transactional_id_expiration_ms: i64,
    /// producer.id.expiration.ms: a producer id with no write to a partition
    /// for this long (and no open transaction there) loses its state there.
    pub producer_id_expiration_ms: i64,
    /// producer.id.expiration.check.interval.ms: how often that is checked.
    pub producer_id_expiration_check: std::time::Duration,
    /// transaction.max.timeout.ms: the longest transaction timeout a
    /// producer may ask for; the policy is configured with it (through its
    /// limits) and refuses a longer one with INVALID_TRANSACTION_TIMEOUT.
    pub transaction_max_timeout_ms: i32,
    /// `--tenant-class`: the tenant class of each transactional id.
    pub tenant_classes: crate::txn::tenant::TenantClasses,
    /// A write-ahead log file holding data this old is checkpointed
    /// (`--fsync always`; see log::wal).
    pub wal_checkpoint_interval: std::time::Duration,
    // Topic creation limits (against hostile admin requests):
    /// Most partitions on this broker; a topic creation past it is refused
    /// (`--max-partitions`).
    pub max_partitions: usize,
    /// Most segment files open at once, over all partitions
    /// (`--max-open-segment-files`, see log::open_files).
    pub max_open_segment_files: usize,
    /// Most partitions one CreateTopics may ask for, summed over its topics
    /// (Kafka's controller refuses a request over 10,000 in the same way).
    pub max_partitions_per_request: usize,
    /// Most topics one Metadata request auto-creates; the others are
    /// answered LEADER_NOT_AVAILABLE and created when the client asks again.
    pub max_auto_created_topics_per_request: usize,
    // Hostile clients: connection and frame bounds.
    /// connections.max.idle.ms: a connection with no request in flight that
    /// has received and sent nothing for this long is closed.
    pub connections_max_idle: std::time::Duration,
    /// A request frame whose first byte has arrived must be complete within
    /// this long (its body: within this long of the budget being granted),
    /// and each response must be written within this long.
    pub request_timeout: std::time::Duration,
    /// queued.max.request.bytes: bytes of request frames (above
    /// `server::SMALL_FRAME`) being read, decoded or dispatched at once.
    pub queued_max_request_bytes: usize,
    /// fetch.max.bytes: most record bytes in one Fetch response (only its
    /// first batch may exceed it).
    pub fetch_max_bytes: usize,
    /// max.incremental.fetch.session.cache.slots: fetch sessions kept (KIP-227).
    pub fetch_session_slots: usize,
    // Cluster mode:
    /// etcd endpoints (`--etcd`); empty: single-node mode.
    pub etcd: Vec<String>,
    /// TTL of the broker's etcd lease (`--lease-ttl-ms`).
    pub lease_ttl: std::time::Duration,
    // The cross-broker fence ring (cluster::fences):
    /// How often peers' fence files are read (`--fence-poll-ms`).
    pub fence_poll: std::time::Duration,
    /// Bumps also go through etcd (`--fence-push`).
    pub fence_push: bool,
    /// Single-node mode writes the outbound fence file too (tests).
    pub fence_log: bool,
    // Security:
    /// Whether ACLs are enforced, super users, the no-ACL default.
    pub authorizer: crate::security::authorizer::AuthorizerConfig,
    /// ACLs the authorizer starts with (tests; the ACL store adds its own).
    pub acls: Vec<crate::security::acl::AclBinding>,
    /// Most producer-id bindings kept in memory (see
    /// `security::pid_owners`).
    pub max_bound_producer_ids: usize,
    /// SASL and TLS settings.
    pub security: crate::security::SecurityConfig,
    /// Each listener's advertised address (empty: only
    /// `advertised_host:advertised_port`).
    pub advertised_listeners: Vec<crate::cluster::keys::Endpoint>,
    /// SASL PLAIN user and password this broker logs in with on other
    /// brokers' inter-broker (first) listener when it is SASL_PLAINTEXT.
    pub inter_broker_login: Option<(String, String)>,
    /// Client quotas: the rate windows (quota.window.num,
    /// quota.window.size.seconds) and the bound on tracked entities.
    pub quotas: crate::quota::QuotaSettings,
}

impl BrokerConfig {
    /// Defaults for a broker on `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        BrokerConfig {
            node_id: 1,
            advertised_host: "127.0.0.1".into(),
            advertised_port: 9092,
            cluster_id: "kaas-cluster".into(),
            auto_create_topics: true,
            default_partitions: 4,
            default_replication_factor: 1,
            max_request_bytes: 100 << 20,
            max_connections: 1024,
            data_dir: data_dir.to_path_buf(),
            log: LogConfig::default(),
            log_overrides: Default::default(),
            cleaner: Default::default(),
            groups: crate::group::GroupConfig::default(),
            sharded_groups: false,
            transactional_id_expiration_ms: DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check: std::time::Duration::from_millis(600_000),
            transaction_max_timeout_ms: crate::txn::machine::DEFAULT_MAX_TIMEOUT_MS,
            tenant_classes: Default::default(),
            wal_checkpoint_interval: WAL_CHECKPOINT_AGE,
            max_partitions: DEFAULT_MAX_PARTITIONS,
            max_open_segment_files: crate::log::open_files::DEFAULT_MAX_OPEN,
            max_partitions_per_request: DEFAULT_MAX_PARTITIONS_PER_REQUEST,
            max_auto_created_topics_per_request: DEFAULT_MAX_AUTO_CREATED_TOPICS_PER_REQUEST,
            connections_max_idle: std::time::Duration::from_millis(600_000),
            request_timeout: std::time::Duration::from_millis(30_000),
            queued_max_request_bytes: 256 << 20,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            fetch_session_slots: crate::fetch_sessions::DEFAULT_SLOTS,
            etcd: Vec::new(),
            lease_ttl: DEFAULT_LEASE_TTL,
            fence_poll: std::time::Duration::from_millis(2_000),
            fence_push: true,
            fence_log: false,
            authorizer: Default::default(),
            acls: Vec::new(),
            max_bound_producer_ids: crate::security::pid_owners::DEFAULT_MAX_ENTRIES,
            security: Default::default(),
            advertised_listeners: Vec::new(),
            inter_broker_login: None,
            quotas: Default::default(),
        }
    }
}

/// Default of `max_partitions` (partitions no longer take a descriptor
/// each: their files go through the open-file cache, so more are a
/// matter of memory and start-up time; `--max-partitions 50000` is tested
/// on a 20,000-descriptor limit).
pub const DEFAULT_MAX_PARTITIONS: usize = 10_000;
/// Default of `max_partitions_per_request`: Kafka's own per-request cap.
pub const DEFAULT_MAX_PARTITIONS_PER_REQUEST: usize = 10_000;
/// Default of `max_auto_created_topics_per_request`.
pub const DEFAULT_MAX_AUTO_CREATED_TOPICS_PER_REQUEST: usize = 100;
/// Default of `lease_ttl`.
pub const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a request to another broker may take (markers, verification).
pub const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Kafka's transactional.id.expiration.ms default: 7 days.
pub const DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 7 * 24 * 3600 * 1000;
/// Kafka's default fetch.max.bytes (55 MiB).
pub const DEFAULT_FETCH_MAX_BYTES: usize = 57_671_680;

/// The default of `wal_checkpoint_interval`: a write-ahead log file whose
/// first frame is this old is checkpointed, which bounds what a restart
/// replays and how long old files stay (`broker` also checkpoints a file
/// once it holds 64 MiB).
pub const WAL_CHECKPOINT_AGE: std::time::Duration = std::time::Duration::from_secs(10);
