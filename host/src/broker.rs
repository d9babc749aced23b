//! The broker's shared state: configuration, the log, the coordinator's
//! state machine with its policy, the producer-id allocator and metrics.
//! Every request handler gets an `Arc<Broker>`.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::BrokerConfig;
use crate::config::PEER_TIMEOUT;
use crate::log::LogManager;
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::txn::shards::TxnShards;

/// Everything a request handler may touch.
#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    pub logs: LogManager,
    /// The transaction coordinator shards open here (the policy decides;
    /// see txn::coordinator and txn::shards).
    pub txn: TxnShards,
    /// Requests to other brokers (cluster mode: markers, verification).
    pub peers: Arc<crate::cluster::peer::Peers>,
    pub producer_ids: crate::pid::ProducerIdAllocator,
    pub metrics: Arc<Metrics>,
    /// Woken whenever a high watermark advances (Fetch long-polls wait on it).
    pub data_ready: Arc<Notify>,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: crate::fetch_sessions::FetchSessions,
    /// Topics by id (Fetch v13+, Metadata v10+, DeleteTopics v6+).
    pub topic_ids: crate::topic_ids::TopicIds,
    /// The group coordinator shards open here: consumer groups and
    /// committed offsets.
    pub groups: crate::group::GroupShards,
    /// Who leads what (see [`crate::cluster`]).
    pub cluster: crate::cluster::Cluster,
    /// This broker itself, for work the control loop starts (a shard's
    /// markers to resume); set once it is shared.
    this: std::sync::OnceLock<std::sync::Weak<Broker>>,
    /// The cross-broker fence ring (see [`crate::cluster::fences`]).
    pub fences: crate::cluster::fences::FenceRing,
    /// Decides what each session may do (see [`crate::security`]).
    pub authz: crate::security::Authorizer,
    /// Producer ids bound to principals; None when the authorizer is
    /// disabled (no file, no check).
    pub pid_owners: Option<crate::security::pid_owners::PidOwners>,
    /// SASL mechanisms and the SCRAM credentials they check.
    pub sasl: crate::security::sasl::Sasl,
    /// What the log cleaner has done (on /metrics).
    pub cleaner_stats: Arc<crate::log::cleaner::CleanerStats>,
    /// Client quotas: the configured table and per-entity measurements
    /// (see [`crate::quota`]).
    pub quotas: Arc<crate::quota::Quotas>,
    /// The log cleaner, once started ([`spawn_tasks`]).
    cleaner: std::sync::OnceLock<Arc<crate::log::cleaner::Cleaner>>,
}

impl Broker {
    /// Clean shutdown of the log: the cleaner stops first (its pass in
    /// progress ends), then every partition closes.
    pub fn close_log(&self) -> std::io::Result<()> {
        if let Some(c) = self.cleaner.get() {
            c.stop();
        }
        self.logs.close()
    }

    /// Assembles a broker from an opened log and a loaded policy.
    pub fn new(
        config: BrokerConfig,
        logs: LogManager,
        policy: Arc<Policy>,
    ) -> std::io::Result<Self> {
        let me = crate::cluster::NodeInfo {
            id: config.node_id,
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            incarnation: 0,
            listeners: config.advertised_listeners.clone(),
        };
        Self::with_cluster(config, logs, policy, crate::cluster::Cluster::Local(me))
    }

    /// Assembles a broker of `cluster`.
    pub fn with_cluster(
        config: BrokerConfig,
        logs: LogManager,
        policy: Arc<Policy>,
        cluster: crate::cluster::Cluster,
    ) -> std::io::Result<Self> {
        let fetch_session_slots = config.fetch_session_slots;
        let producer_ids = match cluster.etcd() {
            None => crate::pid::ProducerIdAllocator::open(&config.data_dir.join("__producer_ids"))?,
            Some(etcd) => crate::pid::ProducerIdAllocator::from_etcd(etcd.clone()),
        };
        // Cluster mode keeps what only one broker may write (the idempotent
        // InitProducerId's coordinator, which never writes) under a
        // directory of this broker's own.
        let own_dir = if cluster.is_local() {
            config.data_dir.clone()
        } else {
            config
                .data_dir
                .join("__cluster")
                .join(format!("node-{}", config.node_id))
        };
        // A fresh producer id starts with no state on any partition: state
        // under ids never handed out can only come from forged batches
        // accepted before Produce refused them.
        let forged: usize = logs
            .topics()
            .iter()
            .flat_map(|t| t.open_partitions())
            .map(|p| p.forget_producers_from(producer_ids.next()))
            .sum();
        if forged > 0 {
            tracing::warn!(
                entries = forged,
                first_unissued = producer_ids.next(),
                "dropped producer state under producer ids never handed out"
            );
        }
        let slot = crate::policy::PolicySlot::new(policy);
        let limits = crate::txn::machine::limits(config.transaction_max_timeout_ms);
        let tenants = Arc::new(config.tenant_classes.clone());
        let txn = if cluster.is_local() {
            TxnShards::single(
                &own_dir,
                slot,
                limits,
                tenants,
                config.transactional_id_expiration_ms,
            )?
        } else {
            TxnShards::cluster(
                &config.data_dir,
                &own_dir,
                slot,
                limits,
                tenants,
                config.transactional_id_expiration_ms,
            )?
        };
        let mut peers = crate::cluster::peer::Peers::new(
            &format!("kaas-broker-{}", config.node_id),
            PEER_TIMEOUT,
        );
        if let Some((user, password)) = &config.inter_broker_login {
            peers = peers.with_login(user, password);
        }
        let peers = Arc::new(peers);
        let groups = if config.sharded_groups || !cluster.is_local() {
            crate::group::GroupShards::cluster(
                &config.data_dir,
                config.groups.clone(),
                logs.group_commit().clone(),
            )
        } else {
            crate::group::GroupShards::single(
                &own_dir,
                config.groups.clone(),
                logs.group_commit().clone(),
                |topic| logs.topic(topic).is_some(),
            )?
        };
        let fences = crate::cluster::fences::FenceRing::open(
            &crate::cluster::fences::RingSettings {
                data_dir: config.data_dir.clone(),
                node_id: config.node_id,
                poll: config.fence_poll,
                push: config.fence_push,
                outbound_file: config.fence_log,
            },
            !cluster.is_local(),
        )?;
        let authz = crate::security::Authorizer::open(
            config.authorizer.clone(),
            &config.data_dir,
            cluster.etcd(),
        )?;
        // ACLs given in the configuration (tests) are created at start.
        if !config.acls.is_empty() && cluster.is_local() {
            for r in authz.create(config.acls.clone()) {
                r.map_err(|e| std::io::Error::other(format!("creating a configured ACL: {e:?}")))?;
            }
        }
        let pid_owners = if config.authorizer.enabled {
            let peers = (!cluster.is_local()).then(|| {
                (
                    config.data_dir.join("__cluster"),
                    format!("node-{}", config.node_id),
                )
            });
            Some(crate::security::pid_owners::PidOwners::open(
                &own_dir.join(crate::security::pid_owners::DIR),
                peers,
                config.max_bound_producer_ids,
            )?)
        } else {
            None
        };
        let credentials = crate::security::credentials::Credentials::open(&config.data_dir)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let sasl = crate::security::sasl::Sasl::new(
            config.security.sasl_mechanisms.clone(),
            Arc::new(credentials),
        )
        .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let quota_table = match cluster.etcd() {
            None => crate::quota::store::load(&crate::quota::store::file_path(&config.data_dir))?,
            Some(etcd) => etcd.view().client_quotas.clone().unwrap_or_default(),
        };
        let quotas = Arc::new(crate::quota::Quotas::new(
            config.quotas.clone(),
            quota_table,
        ));
        Ok(Broker {
            quotas,
            cleaner_stats: Default::default(),
            cleaner: std::sync::OnceLock::new(),
            sasl,
            authz,
            pid_owners,
            fences,
            groups,
            txn,
            peers,
            producer_ids,
            logs,
            config,
            metrics: Arc::new(Metrics::default()),
            data_ready: Arc::new(Notify::new()),
            fetch_sessions: crate::fetch_sessions::FetchSessions::new(
                fetch_session_slots,
                crate::fetch_sessions::DEFAULT_MAX_PARTITIONS,
            ),
            topic_ids: Default::default(),
            cluster,
            this: std::sync::OnceLock::new(),
        })
    }

    /// The shared handle of this broker (None before [`Self::share`]).
    pub fn shared(&self) -> Option<Arc<Broker>> {
        self.this.get().and_then(std::sync::Weak::upgrade)
    }

    /// Shares the broker, remembering the handle for [`Self::shared`].
    pub fn share(self) -> Arc<Broker> {
        let b = Arc::new(self);
        let _ = b.this.set(Arc::downgrade(&b));
        b
    }

    /// The answer for a partition this broker does not have open:
    /// NOT_LEADER_OR_FOLLOWER when the topic has it (in cluster mode
    /// another broker leads it, or none does yet: the client refreshes its
    /// metadata and moves), else UNKNOWN_TOPIC_OR_PARTITION.
    pub fn not_here(&self, topic: &str, p: i32) -> i16 {
        if !self.cluster.is_local() && self.has_partition(topic, p) {
            crate::codes::NOT_LEADER_OR_FOLLOWER
        } else {
            crate::codes::UNKNOWN_TOPIC_OR_PARTITION
        }
    }

    /// Whether the topic has partition `p`, wherever it is led (offset
    /// commits name partitions the group coordinator need not lead).
    pub fn has_partition(&self, topic: &str, p: i32) -> bool {
        match self.cluster.topics() {
            Some(all) => all
                .get(topic)
                .is_some_and(|m| (0..m.partitions).contains(&p)),
            None => self.logs.partition(topic, p).is_some(),
        }
    }

    /// The policy deciding coordinator requests now.
    pub fn policy(&self) -> Arc<Policy> {
        self.txn.policy()
    }

    /// The slot every coordinator reads its policy from (hot swap: see
    /// [`crate::swap`]).
    pub fn policy_slot(&self) -> &Arc<crate::policy::PolicySlot> {
        self.txn.policy_slot()
    }
}

/// Opens the data directory and assembles a broker (recovering the log).
pub fn open(
    config: BrokerConfig,
    fsync: crate::log::FsyncMode,
    policy: Arc<Policy>,
) -> std::io::Result<Arc<Broker>> {
    let group_commit = crate::log::GroupCommit::new(fsync);
    let files = crate::log::open_files::OpenFiles::new(config.max_open_segment_files);
    let logs =
        LogManager::open_with_files(&config.data_dir, config.log.clone(), group_commit, files)?
            .with_limits(crate::log::TopicLimits {
                max_partitions: config.max_partitions,
                fd_reserve: crate::fd_budget::reserve_for(config.max_connections),
            });
    let broker = Broker::new(config, logs, policy)?.share();
    // Shards opened later drop offsets of topics deleted meanwhile.
    let weak = Arc::downgrade(&broker);
    broker.groups.set_topic_exists(Arc::new(move |topic| {
        weak.upgrade().is_none_or(|b| b.logs.topic(topic).is_some())
    }));
    Ok(broker)
}

/// Cluster mode: connects to etcd and assembles a broker on the shared
/// data directory with nothing open; [`spawn_tasks`] starts the control
/// loop that opens what it leads.
pub async fn open_clustered(
    config: BrokerConfig,
    fsync: crate::log::FsyncMode,
    policy: Arc<Policy>,
) -> std::io::Result<Arc<Broker>> {
    let etcd =
        crate::cluster::etcd::Etcd::connect(&config.etcd, &config.cluster_id, config.lease_ttl)
            .await
            .map_err(std::io::Error::other)?;
    let me = crate::cluster::NodeInfo {
        id: config.node_id,
        host: config.advertised_host.clone(),
        port: config.advertised_port,
        incarnation: 0,
        listeners: config.advertised_listeners.clone(),
    };
    let group_commit = crate::log::GroupCommit::new(fsync);
    let files = crate::log::open_files::OpenFiles::new(config.max_open_segment_files);
    let logs = LogManager::open_clustered(&config.data_dir, config.log.clone(), group_commit)?
        .with_open_files(files)
        .with_limits(crate::log::TopicLimits {
            max_partitions: config.max_partitions,
            fd_reserve: crate::fd_budget::reserve_for(config.max_connections),
        });
    let cluster = crate::cluster::Cluster::Etcd { etcd, me };
    let broker = Broker::with_cluster(config, logs, policy, cluster)?.share();
    // Every broker reads the ACLs before it serves a request.
    broker.authz.load().await?;
    let weak = Arc::downgrade(&broker);
    broker.groups.set_topic_exists(Arc::new(move |topic| {
        weak.upgrade()
            .is_none_or(|b| b.cluster.topics().is_none_or(|all| all.contains_key(topic)))
    }));
    Ok(broker)
}

/// Starts the broker's background work: finishing markers of transactions
/// found Prepare* at load, the transaction timeout reaper, write-ahead log
/// checkpoints and, in cluster mode, the control loop.
pub fn spawn_tasks(broker: &Arc<Broker>, reaper_every: std::time::Duration) {
    let host = broker.coordinator_ports();
    for c in broker.txn.all() {
        c.resume(&host);
    }
    tokio::spawn(run_reaper(broker.clone(), reaper_every));
    // Producer ids that expired while the broker was down (recovery
    // replayed them) go before the first request, then on a timer.
    expire_producers(broker);
    tokio::spawn(run_producer_expiry(broker.clone()));
    let cleaner = crate::log::cleaner::Cleaner::start(
        {
            let weak: std::sync::Weak<Broker> = Arc::downgrade(broker);
            weak as std::sync::Weak<dyn crate::log::cleaner::Compacted>
        },
        broker.config.cleaner,
        broker.cleaner_stats.clone(),
    );
    let _ = broker.cleaner.set(cleaner);
    if let crate::cluster::Cluster::Etcd { etcd, me } = &broker.cluster {
        let host: Arc<dyn crate::cluster::reconcile::ControlLoopPorts> = broker.clone();
        tokio::spawn(crate::cluster::reconcile::run(
            etcd.clone(),
            me.clone(),
            host,
        ));
        crate::cluster::fences::spawn(broker.clone(), etcd.clone());
        // ACLs created or deleted on any broker apply here too.
        let b = broker.clone();
        tokio::spawn(async move { b.authz.follow().await });
    }
    if broker.logs.wal().is_some() || broker.logs.is_clustered() {
        tokio::spawn(run_wal_checkpoints(broker.clone()));
    }
}

/// Runs every open shard's transaction reaper every `every` until the
/// process ends.
async fn run_reaper(broker: Arc<Broker>, every: std::time::Duration) {
    let host = broker.coordinator_ports();
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let mut n = 0;
        for c in broker.txn.all() {
            n += c.reap(&host).await;
        }
        if n > 0 {
            tracing::info!(aborted = n, "timed-out transactions aborted");
        }
    }
}

/// Producer-state expiry now (`producer.id.expiration.ms`).
fn expire_producers(broker: &Broker) {
    let n = broker.logs.expire_producers(
        crate::clock::now_ms(),
        broker.config.producer_id_expiration_ms,
    );
    if n > 0 {
        tracing::info!(entries = n, "expired producer state");
    }
}

/// Runs producer-state expiry every
/// `producer.id.expiration.check.interval.ms`, off the runtime's threads.
async fn run_producer_expiry(broker: Arc<Broker>) {
    let every = broker
        .config
        .producer_id_expiration_check
        .max(std::time::Duration::from_millis(10));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let b = broker.clone();
        let _ = tokio::task::spawn_blocking(move || expire_producers(&b)).await;
    }
}

/// A write-ahead log file is checkpointed once it holds this much, or once
/// its first frame is `wal_checkpoint_interval` old.
const WAL_CHECKPOINT_BYTES: u64 = 64 << 20;

/// How long a failed checkpoint waits before the next try.
pub const WAL_CHECKPOINT_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Segment bytes the write-ahead log covers are written out once this many
/// wait in a partition.
const WRITEBACK_MIN: u64 = 256 << 10;

/// Keeps the write-ahead log short: every tick starts the write-out of
/// segment bytes it covers, and runs a checkpoint when one is due. A failed
/// checkpoint keeps the old files (they are replayed at the next start) and
/// is tried again after [`WAL_CHECKPOINT_RETRY`].
async fn run_wal_checkpoints(broker: Arc<Broker>) {
    let max_age = broker.config.wal_checkpoint_interval;
    let every = (max_age / 4).clamp(
        std::time::Duration::from_millis(10),
        std::time::Duration::from_millis(100),
    );
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // After a failure (a full disk, say) the next try waits this long, so
    // the log does not fill with the same error ten times a second.
    let mut not_before = tokio::time::Instant::now();
    let mut retry = crate::ratelimit::Backoff::fixed(WAL_CHECKPOINT_RETRY);
    loop {
        tick.tick().await;
        // Cluster mode replaces the log at each new lease.
        let Some(wal) = broker.logs.wal() else {
            continue;
        };
        let (bytes, age) = wal.pending();
        let due = (bytes >= WAL_CHECKPOINT_BYTES || age.is_some_and(|a| a >= max_age))
            && tokio::time::Instant::now() >= not_before;
        let b = broker.clone();
        let done = tokio::task::spawn_blocking(move || {
            b.logs.start_writeback(WRITEBACK_MIN);
            if due {
                b.logs.checkpoint_wal().map(|_| ())
            } else {
                Ok(())
            }
        })
        .await;
        let failure = match done {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(format!("the task failed: {e}")),
        };
        if let Some(error) = failure {
            wal.note_failed_checkpoint();
            let wait = retry.failed();
            tracing::error!(%error, retry_in_s = wait.as_secs(), "write-ahead log checkpoint failed; the old files stay and are replayed if the broker stops first");
            not_before = tokio::time::Instant::now() + wait;
        }
    }
}
