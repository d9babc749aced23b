//! The log: topics, their partitions, and durability.
//!
//! [`LogManager`] owns the data directory: one directory per partition
//! (`<topic>-<n>/`, see [`partition`]) and one metadata file per topic
//! (`__topics/<topic>.json`: partition count, topic id, configs). It opens
//! everything at start (recovering partitions that were not closed
//! cleanly, in parallel), creates and deletes topics, and closes cleanly.
//! Creation is bounded ([`TopicLimits`]: partitions on the broker, and the
//! open-file budget of [`crate::fd_budget`]) and all or nothing: a topic
//! whose creation fails or is refused leaves no directory behind.
//! With `--fsync always` it also owns the shared write-ahead log
//! (`__wal/`, see [`wal`]): it hands the log to every partition, replays it
//! into the partitions at open, and runs its checkpoints. It knows nothing
//! of coordinators or framing.

pub mod atomic_file;
pub mod batch;
pub mod epochs;
pub mod partition;
pub mod producer;
pub mod refusals;
pub mod segment;
pub mod sync;
pub mod wal;
pub mod writeback;
pub mod zero_tail;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

pub use partition::{LogConfig, Partition};

/// Cluster mode: the write-ahead logs, one directory per broker lease.
pub const CLUSTER_WAL_DIR: &str = "__cluster/wal";
pub use sync::{FsyncMode, GroupCommit};

/// A topic and the partitions of it this broker has open.
#[derive(Debug)]
pub struct Topic {
    pub name: String,
    /// 16 bytes, stable for the topic's life (Metadata v10+).
    pub id: [u8; 16],
    /// Partitions of the topic, open here or not.
    pub partition_count: i32,
    /// One slot per partition: the partition when this broker has it open
    /// (single-node mode: always; cluster mode: while it leads it).
    slots: Vec<RwLock<Option<Arc<Partition>>>>,
    /// One per slot: the producer batches refused there, shared by every
    /// partition opened in the slot ([`refusals`]).
    refusals: Vec<Arc<refusals::Refusals>>,
    pub config: LogConfig,
    /// The configs as given (DescribeConfigs shows them as dynamic).
    pub overrides: BTreeMap<String, String>,
}

impl Topic {
    fn new(
        name: &str,
        id: [u8; 16],
        count: i32,
        config: LogConfig,
        overrides: BTreeMap<String, String>,
        mut open: Vec<Option<Arc<Partition>>>,
        mut refused: Vec<Arc<refusals::Refusals>>,
    ) -> Topic {
        let n = usize::try_from(count).unwrap_or(0);
        open.resize(n, None);
        refused.resize_with(n, Default::default);
        Topic {
            name: name.into(),
            id,
            partition_count: count,
            slots: open.into_iter().map(RwLock::new).collect(),
            refusals: refused,
            config,
            overrides,
        }
    }

    /// Partition `id` if it is open on this broker.
    pub fn partition(&self, id: i32) -> Option<Arc<Partition>> {
        let slot = self.slots.get(usize::try_from(id).ok()?)?;
        slot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The partitions open on this broker, by id.
    pub fn open_partitions(&self) -> Vec<Arc<Partition>> {
        self.slots
            .iter()
            .filter_map(|s| s.read().unwrap_or_else(|p| p.into_inner()).clone())
            .collect()
    }

    /// The refusals of slot `id` (a fresh set for an id out of range).
    fn refusals(&self, id: i32) -> Arc<refusals::Refusals> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.refusals.get(i))
            .cloned()
            .unwrap_or_default()
    }

    fn take(&self, id: i32) -> Option<Arc<Partition>> {
        let slot = self.slots.get(usize::try_from(id).ok()?)?;
        slot.write().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn put(&self, id: i32, p: Arc<Partition>) -> bool {
        let Some(slot) = usize::try_from(id).ok().and_then(|i| self.slots.get(i)) else {
            return false;
        };
        *slot.write().unwrap_or_else(|p| p.into_inner()) = Some(p);
        true
    }
}

/// A topic's durable description: `__topics/<name>.json` in single-node
/// mode, `topics/<name>` in etcd in cluster mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: i32,
    pub id: String,
    pub configs: BTreeMap<String, String>,
}

/// Why a topic could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("topic {0} already exists")]
    Exists(String),
    #[error("invalid topic name {0:?}")]
    InvalidName(String),
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("storage: {0}")]
    Io(#[from] io::Error),
    #[error(
        "{requested} more partitions would take the broker past its limit of {max} \
         ({existing} exist; --max-partitions)"
    )]
    PartitionLimit {
        requested: usize,
        existing: usize,
        max: usize,
    },
    #[error(transparent)]
    FdBudget(#[from] crate::fd_budget::Shortfall),
}

/// What topic creation may take (issue 13 item 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicLimits {
    /// Most partitions on this broker.
    pub max_partitions: usize,
    /// Open files left free after a creation (see
    /// [`crate::fd_budget::check`]).
    pub fd_reserve: u64,
}

impl Default for TopicLimits {
    fn default() -> Self {
        TopicLimits {
            max_partitions: 10_000,
            fd_reserve: crate::fd_budget::reserve_for(1024),
        }
    }
}

/// Kafka's topic-name rule: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Applies topic config overrides to the broker defaults.
pub fn parse_configs(
    defaults: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, String> {
    let mut c = defaults.clone();
    for (k, v) in overrides {
        let num = |v: &str| {
            v.parse::<i64>()
                .map_err(|_| format!("{k}={v} is not a number"))
        };
        match k.as_str() {
            "segment.bytes" => {
                let n = num(v)?;
                if n < 1024 {
                    return Err(format!("segment.bytes={n} is below 1024"));
                }
                c.segment_bytes = n as u64;
            }
            "max.message.bytes" => {
                let n = num(v)?;
                if n < 0 {
                    return Err(format!("max.message.bytes={n}"));
                }
                c.max_message_bytes = n as usize;
            }
            "retention.ms" => c.retention_ms = num(v)?,
            "retention.bytes" => c.retention_bytes = num(v)?,
            "cleanup.policy" => {
                if v != "delete" {
                    return Err(format!("cleanup.policy={v} is not supported (only delete)"));
                }
                c.cleanup_policy = v.clone();
            }
            // Accepted and reported back, without effect on this broker.
            "min.insync.replicas"
            | "compression.type"
            | "message.timestamp.type"
            | "unclean.leader.election.enable" => {}
            other => return Err(format!("unknown topic config {other}")),
        }
    }
    Ok(c)
}

/// Every topic of the data directory.
#[derive(Debug)]
pub struct LogManager {
    root: PathBuf,
    defaults: LogConfig,
    group_commit: Arc<GroupCommit>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// The shared write-ahead log (`--fsync always` only). In cluster mode
    /// replaced at each new lease ([`Self::use_wal_dir`]).
    wal: RwLock<Option<Arc<wal::Wal>>>,
    /// Cluster mode: partitions open only while this broker leads them.
    clustered: bool,
    /// Partitions abandoned so far (cluster mode; see `checkpoint_wal`).
    abandoned: std::sync::atomic::AtomicU64,
    /// `abandoned` at the last write-ahead log rotation.
    abandoned_at_rotation: std::sync::atomic::AtomicU64,
    /// Bounds on topic creation.
    limits: TopicLimits,
    /// Topics being created, with their partition counts (reserved against
    /// the limits while their files are made outside the `topics` lock),
    /// and topics being deleted (0: the name only).
    creating: Mutex<BTreeMap<String, usize>>,
}

/// A topic name reserved in [`LogManager::creating`] while its files are
/// made or removed; given back when dropped, however the work ends.
struct Reserved<'a>(&'a LogManager, &'a str);

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        let mut creating = self.0.creating.lock().unwrap_or_else(|p| p.into_inner());
        creating.remove(self.1);
    }
}

impl LogManager {
    /// Opens (or initialises) the data directory and every topic in it.
    pub fn open(
        root: &Path,
        defaults: LogConfig,
        group_commit: Arc<GroupCommit>,
    ) -> io::Result<Self> {
        fs::create_dir_all(root.join("__topics"))?;
        let mut metas = Vec::new();
        for e in fs::read_dir(root.join("__topics"))? {
            let path = e?.path();
            if path.extension().is_some_and(|x| x == "json") {
                let meta: TopicMeta = serde_json::from_slice(&fs::read(&path)?).map_err(|err| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: {err}", path.display()),
                    )
                })?;
                metas.push(meta);
            }
        }
        let immediate = group_commit.mode() != FsyncMode::Always;
        // Whatever the fsync mode now, batches a crash left only in the
        // write-ahead log go back into their partitions.
        let wal_dir = root.join(wal::DIR);
        let recovered = wal::recover(&wal_dir)?;
        let jobs: Vec<(usize, i32)> = metas
            .iter()
            .enumerate()
            .flat_map(|(t, m)| (0..m.partitions).map(move |p| (t, p)))
            .collect();
        let opened: Vec<io::Result<(usize, Partition)>> = parallel_map(&jobs, |&(t, p)| {
            let m = &metas[t];
            let config = parse_configs(&defaults, &m.configs).map_err(io::Error::other)?;
            let dir = root.join(Partition::dir_name(&m.name, p));
            let part = if dir.exists() {
                Partition::open(root, &m.name, p, config, immediate)?
            } else {
                Partition::create(root, &m.name, p, config, immediate)?
            };
            if let Some(batches) = recovered.batches.get(&(parse_id(&m.id), p)) {
                part.recover_from_wal(batches)?;
            }
            Ok((t, part))
        });
        let wal = if immediate {
            None
        } else {
            Some(wal::Wal::create(&wal_dir, recovered.next_seq, Vec::new())?)
        };
        let mut parts: Vec<Vec<Arc<Partition>>> = metas.iter().map(|_| Vec::new()).collect();
        for r in opened {
            let (t, mut p) = r?;
            if let Some(w) = &wal {
                p = p.with_wal(w.clone(), parse_id(&metas[t].id));
            }
            parts[t].push(Arc::new(p));
        }
        // Every partition synced what it took back: the old files are done
        // (kept for recycling while the write-ahead log is in use).
        match &wal {
            Some(w) => w.release(&recovered.files)?,
            None => {
                for f in recovered.files.iter().chain(&wal::free_files(&wal_dir)?) {
                    fs::remove_file(f)?;
                }
            }
        }
        let mut topics = BTreeMap::new();
        for (m, mut ps) in metas.into_iter().zip(parts) {
            ps.sort_by_key(|p| p.id);
            let config = parse_configs(&defaults, &m.configs).map_err(io::Error::other)?;
            let id = parse_id(&m.id);
            let open = ps.into_iter().map(Some).collect();
            topics.insert(
                m.name.clone(),
                Arc::new(Topic::new(
                    &m.name,
                    id,
                    m.partitions,
                    config,
                    m.configs,
                    open,
                    Vec::new(),
                )),
            );
        }
        Ok(LogManager {
            root: root.to_path_buf(),
            defaults,
            group_commit,
            topics: RwLock::new(topics),
            wal: RwLock::new(wal),
            clustered: false,
            abandoned: Default::default(),
            abandoned_at_rotation: Default::default(),
            limits: TopicLimits::default(),
            creating: Mutex::new(BTreeMap::new()),
        })
    }

    /// Cluster mode: a log on the shared data directory with no partition
    /// open; the control loop opens those this broker leads
    /// ([`Self::take_over`]) once [`Self::use_wal_dir`] gave it a
    /// write-ahead log of its own.
    pub fn open_clustered(
        root: &Path,
        defaults: LogConfig,
        group_commit: Arc<GroupCommit>,
    ) -> io::Result<Self> {
        fs::create_dir_all(root.join(CLUSTER_WAL_DIR))?;
        Ok(LogManager {
            root: root.to_path_buf(),
            defaults,
            group_commit,
            topics: RwLock::new(BTreeMap::new()),
            wal: RwLock::new(None),
            clustered: true,
            abandoned: Default::default(),
            abandoned_at_rotation: Default::default(),
            limits: TopicLimits::default(),
            creating: Mutex::new(BTreeMap::new()),
        })
    }

    /// Whether partitions open only while this broker leads them.
    pub fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Cluster mode: appends from now on are framed into a new write-ahead
    /// log in `<data dir>/__cluster/wal/<name>/` (one per lease: the old
    /// one stays, untouched, for whoever takes over what it covers).
    pub fn use_wal_dir(&self, name: &str) -> io::Result<()> {
        if self.group_commit.mode() != FsyncMode::Always {
            return Ok(());
        }
        let dir = self.root.join(CLUSTER_WAL_DIR).join(name);
        fs::create_dir_all(&dir)?;
        let w = wal::Wal::create(&dir, 0, Vec::new())?;
        *self.wal.write().unwrap_or_else(|p| p.into_inner()) = Some(w);
        Ok(())
    }

    /// The directory of write-ahead log `name` (see [`Self::use_wal_dir`]).
    pub fn cluster_wal_dir(&self, name: &str) -> PathBuf {
        self.root.join(CLUSTER_WAL_DIR).join(name)
    }

    /// Cluster mode: makes the topic list `metas` (etcd's). New topics
    /// come with no partition open; a grown one keeps its open partitions;
    /// a topic gone (or re-created under a new id) has its open partitions
    /// destroyed. Returns the partitions of deleted topics that were open.
    pub fn sync_topics(&self, metas: &BTreeMap<String, TopicMeta>) -> usize {
        let mut dropped = Vec::new();
        {
            let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
            topics.retain(|name, t| {
                let keep = metas
                    .get(name)
                    .is_some_and(|m| parse_id(&m.id) == t.id && m.partitions >= t.partition_count);
                if !keep {
                    dropped.push(t.clone());
                }
                keep
            });
            for (name, m) in metas {
                let current = topics.get(name).map(|t| t.partition_count);
                if current == Some(m.partitions) {
                    continue;
                }
                let Ok(config) = parse_configs(&self.defaults, &m.configs) else {
                    tracing::error!(topic = %name, "topic configs in etcd do not parse; topic skipped");
                    continue;
                };
                let open = topics
                    .get(name)
                    .map(|t| {
                        t.slots
                            .iter()
                            .map(|s| s.write().unwrap_or_else(|p| p.into_inner()).take())
                            .collect()
                    })
                    .unwrap_or_default();
                let refused = topics
                    .get(name)
                    .map(|t| t.refusals.clone())
                    .unwrap_or_default();
                let t = Topic::new(
                    name,
                    parse_id(&m.id),
                    m.partitions,
                    config,
                    m.configs.clone(),
                    open,
                    refused,
                );
                topics.insert(name.clone(), Arc::new(t));
            }
        }
        let mut n = 0;
        for t in dropped {
            // A topic re-created under the same name keeps going under the new
            // entry; only one whose name is gone loses its files.
            let gone = !metas.contains_key(&t.name);
            for i in 0..t.partition_count {
                if let Some(p) = t.take(i) {
                    n += 1;
                    let r = if gone { p.destroy() } else { p.close() };
                    if let Err(e) = r {
                        tracing::error!(topic = %t.name, partition = i, error = %e, "closing a partition of a deleted topic failed");
                    }
                }
            }
        }
        n
    }

    /// Cluster mode: opens partition `p` of `topic` as its leader at
    /// `epoch`, taking back first what the write-ahead logs in `replay`
    /// (directory names, oldest first) hold for it. Writes go through
    /// `gate`.
    pub fn take_over(
        &self,
        topic: &str,
        p: i32,
        epoch: i32,
        replay: &[String],
        gate: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> io::Result<Arc<Partition>> {
        let t = self
            .topic(topic)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no topic {topic}")))?;
        if p < 0 || p >= t.partition_count {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no partition {topic}-{p}"),
            ));
        }
        let mut batches = Vec::new();
        for name in replay {
            let dir = self.cluster_wal_dir(name);
            if dir.exists() {
                batches.extend(wal::frames_for(&dir, (t.id, p))?);
            }
        }
        let immediate = self.group_commit.mode() != FsyncMode::Always;
        let mut part =
            Partition::take_over(&self.root, topic, p, t.config.clone(), immediate, &batches)?
                .with_gate(gate)
                .with_refusals(t.refusals(p));
        if let Some(w) = self.wal() {
            part = part.with_wal(w, t.id);
        }
        part.become_leader(epoch)?;
        let part = Arc::new(part);
        if !t.put(p, part.clone()) {
            return Err(io::Error::other("partition slot vanished"));
        }
        Ok(part)
    }

    /// Cluster mode: a client batch for partition `p` of `topic`, which is
    /// not held here, was refused as not leader; remembered for when this
    /// broker leads it again ([`refusals`]).
    pub fn refused_unheld(&self, topic: &str, p: i32, batch: &[u8]) {
        if let (Some(t), Some(h)) = (self.topic(topic), batch::parse_header(batch))
            && (0..t.partition_count).contains(&p)
        {
            t.refusals(p).refused(&h, None);
        }
    }

    /// Cluster mode: closes a partition this broker gives up.
    pub fn release(&self, topic: &str, p: i32) {
        if let Some(part) = self.topic(topic).and_then(|t| t.take(p))
            && let Err(e) = part.close()
        {
            tracing::error!(topic, partition = p, error = %e, "closing a partition handed over failed");
        }
    }

    /// Cluster mode: drops a partition without writing anything more (the
    /// lease is lost: another broker may own its files already).
    pub fn abandon(&self, topic: &str, p: i32) {
        if let Some(part) = self.topic(topic).and_then(|t| t.take(p)) {
            self.abandoned
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            part.abandon();
        }
    }

    /// Checks a topic creation (name, partition count, configs, limits)
    /// without creating anything; returns the description to agree on.
    pub fn plan_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: &BTreeMap<String, String>,
        existing: usize,
    ) -> Result<TopicMeta, CreateError> {
        if !valid_topic_name(name) {
            return Err(CreateError::InvalidName(name.into()));
        }
        if !(1..=10_000).contains(&partitions) {
            return Err(CreateError::InvalidPartitions(partitions));
        }
        parse_configs(&self.defaults, overrides).map_err(CreateError::InvalidConfig)?;
        let count = partitions as usize;
        if existing.saturating_add(count) > self.limits.max_partitions {
            return Err(CreateError::PartitionLimit {
                requested: count,
                existing,
                max: self.limits.max_partitions,
            });
        }
        Ok(TopicMeta {
            name: name.into(),
            partitions,
            id: hex::encode(new_topic_id(name)),
            configs: overrides.clone(),
        })
    }

    /// Sets the bounds on topic creation.
    pub fn with_limits(mut self, limits: TopicLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Partitions on this broker.
    pub fn partition_count(&self) -> usize {
        self.topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|t| usize::try_from(t.partition_count).unwrap_or(0))
            .sum()
    }

    /// The shared write-ahead log, if appends use one.
    pub fn wal(&self) -> Option<Arc<wal::Wal>> {
        self.wal.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A write-ahead log checkpoint: rotates to a new file, syncs every
    /// segment that relied on the old ones, then frees them (one is kept
    /// for recycling, see `wal`). Returns whether there was a log to
    /// checkpoint.
    pub fn checkpoint_wal(&self) -> io::Result<bool> {
        let Some(wal) = self.wal() else {
            return Ok(false);
        };
        let _one = wal.checkpoint_guard();
        // Frames in the files this rotation retires were written since the
        // last rotation: by partitions open now (synced below) or abandoned
        // since (not synced: see below).
        let abandoned = self.abandoned_at_rotation.swap(
            self.abandoned.load(std::sync::atomic::Ordering::Acquire),
            std::sync::atomic::Ordering::AcqRel,
        );
        let retired = wal.rotate()?;
        // Listed after the rotation: a topic created later writes only to
        // the new file.
        for t in self.topics() {
            for p in &t.open_partitions() {
                p.checkpoint()?;
            }
        }
        // Cluster mode: a partition abandoned meanwhile was not synced, and
        // its next leader replays it from these files: they stay.
        if self.abandoned.load(std::sync::atomic::Ordering::Acquire) != abandoned {
            tracing::info!(
                "a partition was abandoned during a checkpoint; its write-ahead log files stay for its next leader"
            );
            wal.keep_retired(&retired);
            return Ok(true);
        }
        wal.delete_retired(&retired)?;
        Ok(true)
    }

    pub fn group_commit(&self) -> &Arc<GroupCommit> {
        &self.group_commit
    }

    pub fn defaults(&self) -> &LogConfig {
        &self.defaults
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub fn partition(&self, topic: &str, id: i32) -> Option<Arc<Partition>> {
        self.topic(topic)?.partition(id)
    }

    /// The fence loop: raises `producer_id`'s epoch to `epoch` and clears
    /// its dedupe window on every partition open here, so a zombie's
    /// batches are refused even where the new session never wrote.
    /// Returns how many partitions changed.
    pub fn fence_producer(&self, producer_id: i64, epoch: i16) -> usize {
        self.topics()
            .iter()
            .flat_map(|t| t.open_partitions())
            .filter(|p| p.fence_producer(producer_id, epoch))
            .count()
    }

    /// Starts the write-out of segment bytes the write-ahead log covers,
    /// per partition once `min` of them wait (between checkpoints, so a
    /// checkpoint does not write them all at once). Returns the bytes
    /// started.
    pub fn start_writeback(&self, min: u64) -> u64 {
        if self.wal().is_none() {
            return 0;
        }
        let mut started = 0;
        for t in self.topics() {
            for p in &t.open_partitions() {
                match p.start_writeback(min) {
                    Ok(n) => started += n,
                    Err(e) => {
                        tracing::warn!(topic = %t.name, partition = p.id, error = %e, "starting a segment's write-out failed");
                    }
                }
            }
        }
        started
    }

    /// Creates a topic (validate_only checks without creating). Refused
    /// when its partitions would take the broker past
    /// [`TopicLimits::max_partitions`] or its files past the open-file
    /// budget. All or nothing: if any partition or the metadata file cannot
    /// be created, what was created is removed before the error returns.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, CreateError> {
        if !valid_topic_name(name) {
            return Err(CreateError::InvalidName(name.into()));
        }
        if !(1..=10_000).contains(&partitions) {
            return Err(CreateError::InvalidPartitions(partitions));
        }
        let count = partitions as usize;
        let config =
            parse_configs(&self.defaults, &overrides).map_err(CreateError::InvalidConfig)?;
        // The checks and the reservation happen under `creating`; the
        // partitions are made without any lock the produce and fetch paths
        // take (creating thousands of them takes seconds).
        let mut creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        let (exists, existing) = {
            let topics = self.topics.read().unwrap_or_else(|p| p.into_inner());
            (
                topics.contains_key(name) || creating.contains_key(name),
                topics
                    .values()
                    .map(|t| usize::try_from(t.partition_count).unwrap_or(0))
                    .sum::<usize>()
                    + creating.values().sum::<usize>(),
            )
        };
        if exists {
            return Err(CreateError::Exists(name.into()));
        }
        if existing.saturating_add(count) > self.limits.max_partitions {
            return Err(CreateError::PartitionLimit {
                requested: count,
                existing,
                max: self.limits.max_partitions,
            });
        }
        // One file per partition, and one while the metadata is written;
        // creations under way may not have opened theirs yet.
        let in_flight: usize = creating.values().sum();
        let wanted = (count.saturating_add(in_flight) as u64)
            .saturating_mul(crate::fd_budget::FDS_PER_PARTITION)
            .saturating_add(1);
        crate::fd_budget::check(wanted, self.limits.fd_reserve)?;
        let id = new_topic_id(name);
        if validate_only {
            return Ok(Arc::new(Topic::new(
                name,
                id,
                partitions,
                config,
                overrides,
                Vec::new(),
                Vec::new(),
            )));
        }
        creating.insert(name.into(), count);
        drop(creating);
        let _reserved = Reserved(self, name);
        let ps = self.create_partitions(name, id, count, &config)?;
        let meta = TopicMeta {
            name: name.into(),
            partitions,
            id: hex::encode(id),
            configs: overrides.clone(),
        };
        let meta_path = self.root.join("__topics").join(format!("{name}.json"));
        let written = serde_json::to_vec_pretty(&meta)
            .map_err(io::Error::other)
            .and_then(|bytes| atomic_file::write_atomically(&meta_path, &bytes));
        if let Err(e) = written {
            let _ = fs::remove_file(meta_path.with_extension("tmp"));
            self.remove_partition_dirs(name, count);
            return Err(e.into());
        }
        let open = ps.into_iter().map(Some).collect();
        let t = Arc::new(Topic::new(
            name,
            id,
            partitions,
            config,
            overrides,
            open,
            Vec::new(),
        ));
        self.topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.into(), t.clone());
        Ok(t)
    }

    /// Creates partitions `0..count` of a new topic; on a failure removes
    /// the directories of those already made (and of the one that failed)
    /// and returns the error.
    fn create_partitions(
        &self,
        name: &str,
        id: [u8; 16],
        count: usize,
        config: &LogConfig,
    ) -> io::Result<Vec<Arc<Partition>>> {
        let immediate = self.group_commit.mode() != FsyncMode::Always;
        let mut ps = Vec::with_capacity(count);
        for p in 0..count {
            let created = i32::try_from(p)
                .map_err(io::Error::other)
                .and_then(|index| {
                    // A directory of that name is a leftover of a creation
                    // a crash interrupted (the topic has no metadata): its
                    // old files must not come back as this topic's data.
                    let dir = self.root.join(Partition::dir_name(name, index));
                    if dir.exists() {
                        fs::remove_dir_all(&dir)?;
                    }
                    if fault_in_creation(p, count) {
                        return Err(io::Error::other("fault injection: create-partition"));
                    }
                    Partition::create(&self.root, name, index, config.clone(), immediate)
                });
            match created {
                Ok(mut part) => {
                    if let Some(w) = self.wal() {
                        part = part.with_wal(w, id);
                    }
                    ps.push(Arc::new(part));
                }
                Err(e) => {
                    drop(ps);
                    self.remove_partition_dirs(name, p + 1);
                    tracing::warn!(topic = name, partition = p, error = %e, "creating a partition failed; the topic's partitions created so far were removed");
                    return Err(e);
                }
            }
        }
        Ok(ps)
    }

    /// Removes the directories of partitions `0..count` of `name`, where
    /// they exist (the undo of a failed creation; failures are logged).
    fn remove_partition_dirs(&self, name: &str, count: usize) {
        for p in 0..count {
            let Ok(p) = i32::try_from(p) else { break };
            let dir = self.root.join(Partition::dir_name(name, p));
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::error!(dir = %dir.display(), error = %e, "removing a partition of a failed creation failed")
                }
            }
        }
    }

    /// Single-node mode: grows topic `name` to `count` partitions (the
    /// caller checked the count and the limits). The new partitions are
    /// created before the metadata file names them, so a crash between
    /// leaves directories the next creation of that name removes.
    pub fn add_partitions(&self, name: &str, count: i32) -> io::Result<()> {
        let _one = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        let t = self
            .topic(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no topic {name}")))?;
        if count <= t.partition_count {
            return Ok(());
        }
        let immediate = self.group_commit.mode() != FsyncMode::Always;
        let mut open: Vec<Option<Arc<Partition>>> =
            (0..t.partition_count).map(|i| t.partition(i)).collect();
        for i in t.partition_count..count {
            let dir = self.root.join(Partition::dir_name(name, i));
            if dir.exists() {
                fs::remove_dir_all(&dir)?;
            }
            let mut part = Partition::create(&self.root, name, i, t.config.clone(), immediate)?;
            if let Some(w) = self.wal() {
                part = part.with_wal(w, t.id);
            }
            open.push(Some(Arc::new(part)));
        }
        let meta = TopicMeta {
            name: name.into(),
            partitions: count,
            id: hex::encode(t.id),
            configs: t.overrides.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&meta).map_err(io::Error::other)?;
        atomic_file::write_atomically(
            &self.root.join("__topics").join(format!("{name}.json")),
            &bytes,
        )?;
        let grown = Topic::new(
            name,
            t.id,
            count,
            t.config.clone(),
            t.overrides.clone(),
            open,
            t.refusals.clone(),
        );
        self.topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.into(), Arc::new(grown));
        Ok(())
    }

    /// Deletes a topic and its data; false if it did not exist.
    pub fn delete_topic(&self, name: &str) -> io::Result<bool> {
        // While its directories go, the name stays reserved: a topic of
        // the same name created meanwhile would lose its own directories.
        let t = {
            let mut creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
            let removed = self
                .topics
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(name);
            if removed.is_some() {
                creating.insert(name.into(), 0);
            }
            removed
        };
        let Some(t) = t else {
            return Ok(false);
        };
        let _reserved = Reserved(self, name);
        fs::remove_file(self.root.join("__topics").join(format!("{name}.json")))?;
        for p in &t.open_partitions() {
            p.destroy()?;
        }
        Ok(true)
    }

    /// Runs retention over every partition.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        let mut n = 0;
        for t in self.topics() {
            for p in &t.open_partitions() {
                match p.apply_retention(now_ms) {
                    Ok(k) => n += k,
                    Err(e) => {
                        tracing::error!(topic = %t.name, partition = p.id, error = %e, "retention failed")
                    }
                }
            }
        }
        n
    }

    /// Clean shutdown of every partition (then the write-ahead log, which
    /// nothing needs once every segment is synced).
    pub fn close(&self) -> io::Result<()> {
        for t in self.topics() {
            for p in &t.open_partitions() {
                p.close()?;
            }
        }
        if let Some(w) = self.wal() {
            w.close()?;
        }
        Ok(())
    }
}

/// Runs `f` over `items` on up to 8 threads, keeping order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Test-only: with the `fault-injection` feature and
/// `KAAS_FAULT=create-partition`, the creation of the middle partition of
/// the first topic created with more than one partition fails, once.
fn fault_in_creation(p: usize, count: usize) -> bool {
    count > 1 && p == count / 2 && crate::fault::once("create-partition")
}

fn new_topic_id(name: &str) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let d = Sha256::digest(format!("{name}/{nanos}/{}", std::process::id()));
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    id
}

pub fn parse_id(s: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(b) = hex::decode(s)
        && b.len() == 16
    {
        id.copy_from_slice(&b);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{self, data_batch};

    fn open(dir: &Path) -> LogManager {
        LogManager::open(
            dir,
            LogConfig::default(),
            GroupCommit::new(FsyncMode::Always),
        )
        .expect("open")
    }

    fn segment(dir: &Path, topic: &str, p: i32) -> PathBuf {
        dir.join(Partition::dir_name(topic, p))
            .join(format!("{:020}.log", 0))
    }

    /// A power cut's effect on a segment whose pages were never written
    /// back: it ends where its last fdatasync left it.
    fn lose_segment_pages_after(path: &Path, kept: u64) {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open segment")
            .set_len(kept)
            .expect("truncate");
    }

    fn small(value: &[u8], producer: Option<(i64, i16, i32)>, txn: bool) -> Vec<u8> {
        data_batch(&[(None, value)], 1, producer, txn)
    }

    fn durable_file(p: &Partition, bytes: Vec<u8>) -> Arc<fs::File> {
        p.append(bytes)
            .expect("append")
            .file
            .expect("a file to sync")
    }

    /// Write-ahead log files in use (free files kept for recycling are
    /// not counted: nothing reads them).
    fn wal_files(dir: &Path) -> usize {
        let wal_dir = dir.join(wal::DIR);
        let all = fs::read_dir(&wal_dir).expect("wal dir").count();
        all - wal::free_files(&wal_dir).expect("free files").len()
    }

    /// Cluster mode: a log with one topic `t` of 2 partitions, both led
    /// here at epoch 0, appending through write-ahead log `wal`.
    fn clustered(dir: &Path, wal: &str) -> LogManager {
        let logs = LogManager::open_clustered(
            dir,
            LogConfig::default(),
            GroupCommit::new(FsyncMode::Always),
        )
        .expect("open");
        logs.use_wal_dir(wal).expect("wal");
        let meta = TopicMeta {
            name: "t".into(),
            partitions: 2,
            id: hex::encode([7u8; 16]),
            configs: BTreeMap::new(),
        };
        logs.sync_topics(&BTreeMap::from([("t".to_string(), meta)]));
        for p in 0..2 {
            logs.take_over("t", p, 0, &[], Arc::new(|| true))
                .expect("take over");
        }
        logs
    }

    #[test]
    fn a_batch_refused_while_the_partition_was_not_held_holds_back_its_producer_after_the_takeover()
    {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = clustered(dir.path(), "1-a");
        let batch = |seq| small(format!("v{seq}").as_bytes(), Some((9, 0, seq)), false);
        durable_file(&logs.partition("t", 0).expect("p0"), batch(0))
            .sync_data()
            .expect("sync");
        logs.abandon("t", 0);
        // The lease was lost: a pipelined batch finds the partition gone,
        // NOT_LEADER (not written) ...
        logs.refused_unheld("t", 0, &batch(1));
        // ... and the one behind it arrives once the partition is back.
        let p = logs
            .take_over("t", 0, 1, &["1-a".to_string()], Arc::new(|| true))
            .expect("take over again");
        assert_eq!(p.log_end_offset(), 1);
        let behind = p.append(batch(2));
        assert!(
            matches!(behind, Err(partition::AppendError::NotLeader)),
            "the batch behind the refused one: NOT_LEADER, got {behind:?}"
        );
        p.append(batch(1)).expect("the refused batch again");
        p.append(batch(2)).expect("then the one behind it");
        assert_eq!(p.log_end_offset(), 3);
    }

    #[test]
    fn an_abandoned_partitions_frames_outlive_the_next_checkpoint() {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = clustered(dir.path(), "1-a");
        let p0 = logs.partition("t", 0).expect("p0");
        let p1 = logs.partition("t", 1).expect("p1");
        durable_file(&p0, small(b"only-in-the-wal", None, false))
            .sync_data()
            .expect("sync");
        durable_file(&p1, small(b"other", None, false));
        drop(p0);
        logs.abandon("t", 0);
        assert!(logs.partition("t", 0).is_none(), "abandoned: not open here");
        assert!(logs.checkpoint_wal().expect("checkpoint"));
        assert!(logs.checkpoint_wal().expect("checkpoint"));
        let frames = wal::frames_for(&logs.cluster_wal_dir("1-a"), ([7u8; 16], 0)).expect("frames");
        assert_eq!(
            frames.len(),
            1,
            "the next leader of t-0 can still replay what only the write-ahead log held"
        );
    }

    #[test]
    fn a_taker_replays_what_another_lease_wrote_and_continues_the_log() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = clustered(dir.path(), "1-a");
        let pa = a.partition("t", 0).expect("p0");
        durable_file(&pa, small(b"acked-by-a", None, false))
            .sync_data()
            .expect("sync");
        let end = pa.log_end_offset();
        drop(pa);
        // A dies without a checkpoint; B takes t-0 over at epoch 1.
        std::mem::forget(a);
        let b = LogManager::open_clustered(
            dir.path(),
            LogConfig::default(),
            GroupCommit::new(FsyncMode::Always),
        )
        .expect("open");
        b.use_wal_dir("2-b").expect("wal");
        let meta = TopicMeta {
            name: "t".into(),
            partitions: 2,
            id: hex::encode([7u8; 16]),
            configs: BTreeMap::new(),
        };
        b.sync_topics(&BTreeMap::from([("t".to_string(), meta)]));
        let pb = b
            .take_over("t", 0, 1, &["1-a".to_string()], Arc::new(|| true))
            .expect("take over");
        assert_eq!(
            pb.log_end_offset(),
            end,
            "nothing acknowledged by A is lost"
        );
        assert_eq!(pb.leader_epoch(), 1);
        let next = durable_file(&pb, small(b"by-b", None, false));
        next.sync_data().expect("sync");
        assert_eq!(pb.log_end_offset(), end + 1);
    }

    #[test]
    fn small_appends_to_every_partition_share_one_file_to_sync() {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 3, BTreeMap::new(), false)
            .expect("create");
        let files: Vec<_> = t
            .open_partitions()
            .iter()
            .map(|p| durable_file(p, small(b"v", None, false)))
            .collect();
        assert!(files.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])));
    }

    #[test]
    fn batches_a_crash_took_from_the_segments_come_back_from_the_write_ahead_log() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let logs = open(dir.path());
            let t = logs
                .create_topic("t", 2, BTreeMap::new(), false)
                .expect("create");
            for seq in 0..3 {
                durable_file(
                    &t.partition(0).unwrap(),
                    small(format!("v{seq}").as_bytes(), Some((7, 0, seq)), false),
                );
            }
            durable_file(
                &t.partition(1).unwrap(),
                small(b"aborted", Some((9, 0, 0)), true),
            );
            t.partition(1)
                .unwrap()
                .append_marker(9, 0, false, 0, 2)
                .expect("abort marker");
            // Dropped without a clean close: the process died.
        }
        for p in 0..2 {
            lose_segment_pages_after(&segment(dir.path(), "t", p), 0);
        }
        let logs = open(dir.path());
        let p0 = logs.partition("t", 0).expect("t-0");
        assert_eq!((p0.log_end_offset(), p0.high_watermark()), (3, 3));
        let retry = p0
            .append(small(b"v2", Some((7, 0, 2)), false))
            .expect("retry");
        assert!(
            retry.duplicate,
            "the producer's sequence state came back too"
        );
        let p1 = logs.partition("t", 1).expect("t-1");
        let r = p1.read(0, 1 << 20, true).expect("read_committed");
        assert_eq!(
            r.aborted,
            vec![partition::AbortedTxn {
                producer_id: 9,
                first_offset: 0,
                last_offset: 1
            }]
        );
        assert_eq!(r.last_stable_offset, 2, "the marker closed the transaction");
        assert_eq!(wal_files(dir.path()), 1, "the replayed file is done with");
    }

    #[test]
    fn after_a_checkpoint_only_later_batches_are_replayed() {
        let dir = tempfile::tempdir().expect("tmp");
        let kept;
        {
            let logs = open(dir.path());
            let t = logs
                .create_topic("t", 1, BTreeMap::new(), false)
                .expect("create");
            let p = &t.partition(0).unwrap();
            let before = durable_file(p, small(b"a", None, false));
            assert!(logs.checkpoint_wal().expect("checkpoint"));
            assert_eq!(wal_files(dir.path()), 1, "the old file is done with");
            kept = fs::metadata(segment(dir.path(), "t", 0))
                .expect("meta")
                .len();
            let after = durable_file(p, small(b"b", None, false));
            assert!(
                !Arc::ptr_eq(&before, &after),
                "a new file after the checkpoint"
            );
        }
        // The checkpoint synced "a" (and the zeros after it); "b" is lost
        // from the segment.
        let seg = segment(dir.path(), "t", 0);
        let bytes = fs::read(&seg).expect("read");
        let a_len = batch::parse_header(&bytes).expect("batch a").size as u64;
        assert!(a_len < kept);
        lose_segment_pages_after(&seg, a_len);
        let logs = open(dir.path());
        let p = logs.partition("t", 0).expect("t-0");
        assert_eq!(p.log_end_offset(), 2);
        let records = p.read(0, 1 << 20, false).expect("read").records;
        let first = batch::parse_header(&records).expect("first");
        let second = batch::parse_header(&records[first.size..]).expect("second");
        assert_eq!((first.base_offset, second.base_offset), (0, 1));
    }

    #[test]
    fn batches_in_a_recycled_file_come_back_and_its_earlier_frames_do_not() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let logs = open(dir.path());
            let t = logs
                .create_topic("t", 1, BTreeMap::new(), false)
                .expect("create");
            let p = &t.partition(0).unwrap();
            let first = durable_file(p, small(b"batch-a", None, false));
            assert!(logs.checkpoint_wal().expect("checkpoint"));
            durable_file(p, small(b"batch-b", None, false));
            assert!(logs.checkpoint_wal().expect("checkpoint"));
            // The second rotation took the first file back: "a"'s frame is
            // still in its bytes, behind where "c" goes.
            let third = durable_file(p, small(b"batch-c", None, false));
            use std::os::unix::fs::MetadataExt;
            let ino = |f: &std::fs::File| f.metadata().expect("meta").ino();
            assert_eq!(ino(&first), ino(&third), "the first file was recycled");
        }
        // The checkpoints synced "a" and "b"; "c" is lost from the segment.
        let seg = segment(dir.path(), "t", 0);
        let bytes = fs::read(&seg).expect("read");
        let a = batch::parse_header(&bytes).expect("batch a").size;
        let b = batch::parse_header(&bytes[a..]).expect("batch b").size;
        lose_segment_pages_after(&seg, (a + b) as u64);
        let logs = open(dir.path());
        let p = logs.partition("t", 0).expect("t-0");
        assert_eq!(
            p.log_end_offset(),
            3,
            "c came back, a was not replayed again"
        );
        let records = p.read(0, 1 << 20, false).expect("read").records;
        let mut at = 0;
        let mut batches = Vec::new();
        while at < records.len() {
            let h = batch::parse_header(&records[at..]).expect("batch");
            batches.push((h.base_offset, &records[at..at + h.size]));
            at += h.size;
        }
        let offsets: Vec<i64> = batches.iter().map(|b| b.0).collect();
        assert_eq!(offsets, vec![0, 1, 2]);
        let holds = |b: &[u8], v: &[u8]| b.windows(v.len()).any(|w| w == v);
        assert!(holds(batches[0].1, b"batch-a") && holds(batches[2].1, b"batch-c"));
    }

    #[test]
    fn a_checkpoint_that_died_after_rotating_leaves_both_files_to_replay() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let logs = open(dir.path());
            let t = logs
                .create_topic("t", 2, BTreeMap::new(), false)
                .expect("create");
            for p in &t.open_partitions() {
                durable_file(p, small(b"before the rotation", None, false));
            }
            // The checkpoint rotated, then the process died before it synced
            // any segment or deleted the old file.
            logs.wal()
                .expect("a write-ahead log")
                .rotate()
                .expect("rotate");
            for p in &t.open_partitions() {
                durable_file(p, small(b"after the rotation", None, false));
            }
        }
        assert_eq!(wal_files(dir.path()), 2);
        for p in 0..2 {
            lose_segment_pages_after(&segment(dir.path(), "t", p), 0);
        }
        let logs = open(dir.path());
        for p in 0..2 {
            let part = logs.partition("t", p).expect("partition");
            assert_eq!(part.log_end_offset(), 2, "partition {p}");
            let records = part.read(0, 1 << 20, false).expect("read").records;
            let last = b"after the rotation";
            assert!(records.windows(last.len()).any(|w| w == last));
        }
        assert_eq!(
            wal_files(dir.path()),
            1,
            "both replayed files are done with"
        );
        let free = wal::free_files(&dir.path().join(wal::DIR)).expect("free");
        assert_eq!(
            free.len(),
            1,
            "one of them is kept for recycling, the other deleted"
        );
    }

    #[test]
    fn a_large_append_keeps_its_partition_off_the_write_ahead_log_until_a_checkpoint() {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 2, BTreeMap::new(), false)
            .expect("create");
        let (p0, p1) = (&t.partition(0).unwrap(), &t.partition(1).unwrap());
        let wal_file = durable_file(p0, small(b"small", None, false));
        let big = vec![7u8; wal::MAX_FRAMED_BATCH + 1];
        let large = durable_file(p0, small(&big, None, false));
        assert!(
            !Arc::ptr_eq(&large, &wal_file),
            "a large batch syncs its segment"
        );
        let next = durable_file(p0, small(b"small again", None, false));
        assert!(Arc::ptr_eq(&next, &large), "so does everything after it");
        assert!(Arc::ptr_eq(
            &durable_file(p1, small(b"other", None, false)),
            &wal_file
        ));
        logs.checkpoint_wal().expect("checkpoint");
        let back = durable_file(p0, small(b"after the checkpoint", None, false));
        assert!(!Arc::ptr_eq(&back, &large));
        assert!(Arc::ptr_eq(
            &back,
            &durable_file(p1, small(b"other", None, false))
        ));
    }

    #[test]
    fn frames_of_a_deleted_topic_are_not_replayed_into_its_successor() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let logs = open(dir.path());
            let old = logs
                .create_topic("t", 1, BTreeMap::new(), false)
                .expect("create");
            durable_file(&old.partition(0).unwrap(), small(b"old-0", None, false));
            durable_file(&old.partition(0).unwrap(), small(b"old-1", None, false));
            assert!(logs.delete_topic("t").expect("delete"));
            let new = logs
                .create_topic("t", 1, BTreeMap::new(), false)
                .expect("create again");
            durable_file(&new.partition(0).unwrap(), small(b"new-0", None, false));
        }
        lose_segment_pages_after(&segment(dir.path(), "t", 0), 0);
        let logs = open(dir.path());
        let p = logs.partition("t", 0).expect("t-0");
        assert_eq!(p.log_end_offset(), 1);
        let records = p.read(0, 1 << 20, false).expect("read").records;
        let needle = b"new-0";
        assert!(records.windows(needle.len()).any(|w| w == needle));
    }

    #[test]
    fn segment_bytes_only_the_log_covers_are_written_out_once_until_a_checkpoint() {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create");
        let p = &t.partition(0).unwrap();
        let value = vec![1u8; 1000];
        for _ in 0..40 {
            durable_file(p, small(&value, None, false));
        }
        assert_eq!(logs.start_writeback(64 << 10), 0, "under the minimum");
        let started = logs.start_writeback(1);
        assert!(started > 40_000, "{started}");
        assert_eq!(logs.start_writeback(1), 0, "already started");
        durable_file(p, small(&value, None, false));
        let more = logs.start_writeback(1);
        assert!((1000..2000).contains(&more), "only the new batch: {more}");
        durable_file(p, small(&value, None, false));
        logs.checkpoint_wal().expect("checkpoint");
        assert_eq!(logs.start_writeback(1), 0, "the checkpoint synced it all");
    }

    #[test]
    fn a_topic_created_over_a_leftover_directory_starts_empty() {
        let dir = tempfile::tempdir().expect("tmp");
        // A creation a crash interrupted left t-0 with an old segment and
        // no topic metadata.
        let stale = dir.path().join(Partition::dir_name("t", 0));
        fs::create_dir_all(&stale).expect("mkdir");
        fs::write(stale.join(format!("{:020}.log", 100)), b"old bytes").expect("write");
        {
            let logs = open(dir.path());
            let t = logs
                .create_topic("t", 1, BTreeMap::new(), false)
                .expect("create");
            assert_eq!(t.partition(0).unwrap().log_end_offset(), 0);
            logs.close().expect("close");
        }
        assert!(!stale.join(format!("{:020}.log", 100)).exists());
        let logs = open(dir.path());
        assert_eq!(logs.partition("t", 0).expect("t-0").log_end_offset(), 0);
    }

    #[test]
    fn a_topic_past_the_partition_limit_is_refused_and_validate_only_checks_it_too() {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = open(dir.path()).with_limits(TopicLimits {
            max_partitions: 4,
            ..TopicLimits::default()
        });
        logs.create_topic("a", 3, BTreeMap::new(), false)
            .expect("fits");
        for validate_only in [true, false] {
            let e = logs
                .create_topic("b", 2, BTreeMap::new(), validate_only)
                .expect_err("past the limit");
            assert!(matches!(
                e,
                CreateError::PartitionLimit {
                    requested: 2,
                    existing: 3,
                    max: 4
                }
            ));
        }
        assert!(!dir.path().join(Partition::dir_name("b", 0)).exists());
        assert_eq!(logs.partition_count(), 3);
    }

    #[test]
    fn a_clean_close_leaves_nothing_to_replay() {
        let dir = tempfile::tempdir().expect("tmp");
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create");
        durable_file(&t.partition(0).unwrap(), small(b"v", None, false));
        logs.close().expect("close");
        let r = wal::recover(&dir.path().join(wal::DIR)).expect("recover");
        assert!(r.batches.is_empty());
        assert_eq!(r.files.len(), 1, "only the fresh, empty file");
    }
}
