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
//!
//! Topics:
//! - [`topics`]: a topic and its partitions open here, its metadata record, name checks;
//!   creating, growing and deleting topics on disk, all or nothing.
//! - [`config`]: topic configs: Kafka 3.7's table, the broker-level defaults by Kafka's
//!   names, the static and dynamic defaults, changing a running topic's configs.
//! - [`takeover`]: cluster mode: partitions taken over, released and abandoned.
//!
//! One partition:
//! - [`partition`]: a partition's log: segments, offsets, producer state, append and read.
//! - [`segment`]: one segment: a file of batches with its offset and time indexes.
//! - [`batch`]: record batches: parsing, validation, offset assignment, control batches.
//! - [`producer`]: idempotent-producer state: epoch, dedupe window, open transaction.
//! - [`epochs`]: the leader-epoch history (KIP-101), the partition's fencing token.
//! - [`refusals`]: cluster mode: batches refused as not leader, kept from being overtaken.
//!
//! Durability and files:
//! - [`sync`]: when an append may be acknowledged: group-committed fdatasync.
//! - [`wal`]: the shared write-ahead log: one fdatasync for small appends to many partitions.
//! - [`writeback`]: starting the write-out of a file range without waiting for it.
//! - [`zero_tail`]: zero-filled space kept ahead of an append-only file's end.
//! - [`atomic_file`]: small files replaced whole (temporary file, fsync, rename).
//! - [`open_files`]: the bounded cache of open segment files every partition shares.
//!
//! Compaction:
//! - [`cleaner`]: the log cleaner thread: compacts `compact` partitions, dirtiest first.
//! - [`offset_map`]: the cleaner's bounded offset map and I/O pace.

pub mod atomic_file;
pub mod batch;
pub mod cleaner;
pub mod config;
pub mod epochs;
pub mod offset_map;
pub mod open_files;
pub mod partition;
pub mod producer;
pub mod refusals;
pub mod segment;
pub mod sync;
mod takeover;
#[cfg(test)]
mod tests;
pub mod topics;
pub mod wal;
pub mod writeback;
pub mod zero_tail;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

pub use partition::open::{At, Opening};
pub use partition::{LogConfig, Partition};

/// Cluster mode: the write-ahead logs, one directory per broker lease.
pub const CLUSTER_WAL_DIR: &str = "__cluster/wal";
use config::defaults;
pub use sync::{FsyncMode, GroupCommit};
use topics::topic::new_topic_id;
pub use topics::topic::{
    CreateError, Topic, TopicLimits, TopicMeta, parse_configs, parse_id, parse_stored_configs,
    valid_topic_name,
};

/// Every topic of the data directory.
#[derive(Debug)]
pub struct LogManager {
    root: PathBuf,
    /// The defaults topics start from: the static ones and the cluster-wide
    /// dynamic layer over them ([`defaults`]).
    defaults: RwLock<defaults::Defaults>,
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
    /// Moves on every change of the topic map ([`Self::topics_version`]).
    topics_version: std::sync::atomic::AtomicU64,
    /// The open-file cache every segment file goes through
    /// ([`open_files`]): what bounds this broker's descriptors, whatever
    /// its partition count.
    files: Arc<open_files::OpenFiles>,
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
        let files = open_files::OpenFiles::new(open_files::DEFAULT_MAX_OPEN);
        Self::open_with_files(root, defaults, group_commit, files)
    }

    /// [`Self::open`] with segment files going through `files`.
    pub fn open_with_files(
        root: &Path,
        defaults: LogConfig,
        group_commit: Arc<GroupCommit>,
        files: Arc<open_files::OpenFiles>,
    ) -> io::Result<Self> {
        fs::create_dir_all(root.join("__topics"))?;
        let layered = defaults::Defaults::stored(root, defaults);
        let defaults = layered.effective.clone();
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
            let config = parse_stored_configs(&m.name, &defaults, &m.configs);
            let dir = root.join(Partition::dir_name(&m.name, p));
            let how = if dir.exists() {
                Opening::Reopen
            } else {
                Opening::Create
            };
            let at = At {
                files: &files,
                root,
                topic: &m.name,
                id: p,
                config,
                immediate_hw: immediate,
            };
            let part = Partition::open(at, how)?;
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
            let config = parse_stored_configs(&m.name, &defaults, &m.configs);
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
            defaults: RwLock::new(layered),
            group_commit,
            topics: RwLock::new(topics),
            wal: RwLock::new(wal),
            clustered: false,
            abandoned: Default::default(),
            abandoned_at_rotation: Default::default(),
            limits: TopicLimits::default(),
            creating: Mutex::new(BTreeMap::new()),
            topics_version: Default::default(),
            files,
        })
    }

    /// Sets the bounds on topic creation.
    pub fn with_limits(mut self, limits: TopicLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Segment files of partitions opened from now on go through `files`
    /// (cluster mode, whose partitions open after construction).
    pub fn with_open_files(mut self, files: Arc<open_files::OpenFiles>) -> Self {
        self.files = files;
        self
    }

    /// The open-file cache segment files go through.
    pub fn open_files(&self) -> &Arc<open_files::OpenFiles> {
        &self.files
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

    /// The log settings a topic without overrides has now.
    pub fn defaults(&self) -> LogConfig {
        self.defaults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .effective
            .clone()
    }

    /// The topic map for a change: every change moves [`Self::topics_version`].
    pub(super) fn topics_write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Topic>>> {
        let guard = self.topics.write().unwrap_or_else(|p| p.into_inner());
        self.topics_version
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        guard
    }

    /// Changes whenever a topic is created, deleted, grown or reconfigured
    /// (consumer groups recompute their subscriptions when it moves).
    pub fn topics_version(&self) -> u64 {
        self.topics_version
            .load(std::sync::atomic::Ordering::Acquire)
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

    /// Producer-state expiry on every partition open here
    /// (`producer.id.expiration.ms`): returns how many (partition, producer
    /// id) entries were dropped.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.topics()
            .iter()
            .flat_map(|t| t.open_partitions())
            .map(|p| p.expire_producers(now_ms, expiration_ms))
            .sum()
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
        // Partitions whose files the open-file cache holds go first: by
        // the time a partition's file must be reopened (to trim it), the
        // files it evicts belong to partitions already closed, clean, so
        // no partition is synced twice. Closing is mostly fdatasyncs of
        // different files, which the device and the journal overlap:
        // several threads, interleaved over that order.
        let mut parts: Vec<Arc<Partition>> = self
            .topics()
            .iter()
            .flat_map(|t| t.open_partitions())
            .collect();
        parts.sort_by_key(|p| !p.files_open());
        let failures: Vec<io::Error> = strided(&parts, CLOSE_THREADS, |p| p.close().err())
            .into_iter()
            .flatten()
            .collect();
        if let Some(e) = failures.into_iter().next() {
            return Err(e);
        }
        if let Some(w) = self.wal() {
            w.close()?;
        }
        Ok(())
    }
}

/// Runs `f` over `items` on up to 8 threads, keeping order.
/// Threads closing partitions at a clean shutdown (I/O-bound: more than
/// the cores).
const CLOSE_THREADS: usize = 8;

/// `f` over `items` on `threads` threads, thread `k` taking items `k`,
/// `k + threads`, ... (so every thread works through the order given);
/// results in no particular order.
fn strided<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || {
                    items
                        .iter()
                        .skip(k)
                        .step_by(threads)
                        .map(f)
                        .collect::<Vec<R>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect::<Vec<R>>()
    })
}

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
