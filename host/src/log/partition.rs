//! One partition's log: its segments, offsets (log start, end, high
//! watermark), producer state and the append/read paths. Knows nothing of
//! the wire or the coordinator; it stores batches.
//!
//! Files in the partition directory: `<base>.log/.index/.timeindex` per
//! segment, `log-start-offset`, `producer.snapshot` (clean shutdown and
//! roll), `.kaas-clean` (present after a clean shutdown until the first
//! write after the next open; see [`Partition::close`]) and
//! `leader-epoch-checkpoint` (the leader-epoch history, [`super::epochs`]:
//! every batch written here carries the current epoch).
//!
//! With a write-ahead log attached ([`super::wal`]), a small append is
//! written to the segment and framed into the shared log, and the caller
//! syncs the shared log's file; the segment is synced by the next
//! checkpoint ([`Partition::checkpoint`]). After a crash the partition
//! takes back whatever its segments lost ([`Partition::recover_from_wal`]).
//!
//! Cluster mode: another broker takes a partition over on the
//! shared volume with [`Partition::take_over`], which seals what the old
//! leader left ([`seal`]); a write gate ([`Partition::with_gate`]) stops
//! every write once this broker may no longer lead.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::atomic_file::write_atomically;
use super::batch::{self, BatchHeader};
use super::epochs::LeaderEpochs;
use super::open_files::OpenFiles;
use super::producer::{ProducerError, ProducerTable, Verdict};
use super::segment::Segment;
use super::wal::{self, PartitionKey, Wal};
use crate::invariant::invariant;
use crate::lease_gate::LeaseGate;

mod compaction;
#[cfg(test)]
mod compaction_tests;
#[cfg(test)]
mod compression_tests;
#[cfg(test)]
mod gap_tests;
pub mod open;
mod read;
mod recovery;
mod retention;
pub mod seal;
mod state_files;
#[cfg(test)]
mod takeover_tests;
#[cfg(test)]
mod tests;
mod wal_io;

use recovery::{first_record_at_or_after, replay_batch, stamp_epoch};
pub use state_files::AbortedTxn;
use state_files::write_snapshot;

use seal::History;

/// Per-topic log settings (Kafka topic configs of the same names).
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// segment.bytes
    pub segment_bytes: u64,
    /// max.message.bytes
    pub max_message_bytes: usize,
    /// retention.ms (-1 = forever)
    pub retention_ms: i64,
    /// retention.bytes (-1 = unbounded)
    pub retention_bytes: i64,
    /// segment.ms: the active segment rolls once a batch's timestamp is
    /// this far past the segment's first batch (Kafka's rule) and the
    /// segment has been open this long (kaas's bound on time rolls).
    pub segment_ms: i64,
    /// cleanup.policy includes `compact` (parsed once, read per append).
    pub compact: bool,
    /// cleanup.policy includes `delete` (retention applies).
    pub delete: bool,
    /// delete.retention.ms: how long a tombstone (and a transaction marker
    /// whose records are gone) stays after compaction first saw it.
    pub delete_retention_ms: i64,
    /// min.compaction.lag.ms: a record stays uncompacted at least this long.
    pub min_compaction_lag_ms: i64,
    /// max.compaction.lag.ms: a record is compacted at most this late.
    pub max_compaction_lag_ms: i64,
    /// min.cleanable.dirty.ratio: the dirty share of the log that makes a
    /// partition worth cleaning.
    pub min_cleanable_dirty_ratio: f64,
    /// message.timestamp.type=LogAppendTime: the broker stamps each batch
    /// with its append time.
    pub log_append_time: bool,
    /// message.timestamp.before.max.ms (or the deprecated
    /// difference.max.ms): how far in the past a record's timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// message.timestamp.after.max.ms (or difference.max.ms): how far in
    /// the future.
    pub timestamp_after_max_ms: i64,
    /// compression.type: the Kafka codec every client batch is stored
    /// with (0 uncompressed, 1 gzip, 2 snappy, 3 lz4, 4 zstd), a batch
    /// in another codec re-encoded on append; None (`producer`): stored as
    /// the producer compressed it.
    pub compression: Option<i16>,
    /// min.insync.replicas: an acks=all Produce needs this many replicas
    /// in sync (the log stores it; the Produce handler applies it, as only
    /// the cluster knows the ISR).
    pub min_insync_replicas: i32,
}

impl LogConfig {
    /// Whether the cleanup policy includes `compact`.
    pub fn compacted(&self) -> bool {
        self.compact
    }
    /// Whether the cleanup policy includes `delete` (retention applies).
    pub fn deletes(&self) -> bool {
        self.delete
    }
    /// What a client's batch must satisfy at `now_ms` (Kafka checks
    /// timestamps only on CreateTime topics).
    pub fn rules(&self, now_ms: i64) -> batch::TopicRules {
        let bounded =
            self.timestamp_before_max_ms != i64::MAX || self.timestamp_after_max_ms != i64::MAX;
        batch::TopicRules {
            max_message_bytes: self.max_message_bytes,
            compacted: self.compacted(),
            timestamps: (bounded && !self.log_append_time).then(|| {
                (
                    now_ms.saturating_sub(self.timestamp_before_max_ms),
                    now_ms.saturating_add(self.timestamp_after_max_ms),
                )
            }),
        }
    }

    /// cleanup.policy as Kafka spells it (`compact,delete` when both).
    pub fn cleanup_policy(&self) -> String {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            (false, true) => "delete",
            (false, false) => "",
        }
        .to_string()
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            max_message_bytes: 1_048_588,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            segment_ms: 7 * 24 * 3600 * 1000,
            compact: false,
            delete: true,
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            compression: None,
            min_insync_replicas: 1,
        }
    }
}

/// Why an append was refused.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Batch(#[from] batch::BatchError),
    #[error("producer state: {0:?}")]
    Producer(ProducerError),
    /// The write gate is closed: this broker may no longer write the
    /// partition (NOT_LEADER_OR_FOLLOWER on the wire).
    #[error("this broker no longer leads the partition")]
    NotLeader,
    #[error("storage: {0}")]
    Io(io::Error),
}

impl From<io::Error> for AppendError {
    fn from(e: io::Error) -> Self {
        if is_not_leader(&e) {
            AppendError::NotLeader
        } else {
            AppendError::Io(e)
        }
    }
}

/// The error of a write the partition's lease gate refused.
pub fn not_leader() -> io::Error {
    crate::lease_gate::closed("writing the partition")
}

/// Whether `e` is a write a closed lease gate refused (this broker lost
/// the lead); see [`crate::lease_gate`].
pub fn is_not_leader(e: &io::Error) -> bool {
    crate::lease_gate::is_closed(e)
}

/// The write gate and the abandoned flag of a partition, and the producer
/// batches refused through them ([`super::refusals`]).
#[derive(Default)]
struct WriteState {
    check: Option<LeaseGate>,
    abandoned: std::sync::atomic::AtomicBool,
    /// Closed cleanly: nothing (an append, a cleaner's swap) may change the
    /// files after the indexes and the clean marker were written.
    closed: std::sync::atomic::AtomicBool,
    refusals: Arc<super::refusals::Refusals>,
}

impl WriteState {
    fn open(&self) -> bool {
        !self.abandoned.load(Ordering::Acquire)
            && !self.closed.load(Ordering::Acquire)
            && self.check.as_ref().is_none_or(|g| g())
    }
}

impl std::fmt::Debug for WriteState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteState")
            .field("gated", &self.check.is_some())
            .field("abandoned", &self.abandoned.load(Ordering::Relaxed))
            .finish()
    }
}

/// A successful append.
#[derive(Debug, Clone)]
pub struct Appended {
    /// Base offset of the batch (the original one for a duplicate).
    pub base_offset: i64,
    /// Whether the batch was a retry already in the log.
    pub duplicate: bool,
    /// Log end offset after the append.
    pub end_offset: i64,
    /// The file to make durable before acknowledging (None for a duplicate).
    pub file: Option<Arc<fs::File>>,
    /// The time the broker stamped the batch with (LogAppendTime topics),
    /// else -1 (Produce's log_append_time_ms).
    pub log_append_time: i64,
}

/// What a read returns.
#[derive(Debug, Clone, Default)]
pub struct ReadResult {
    pub records: Vec<u8>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub aborted: Vec<AbortedTxn>,
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("offset {offset} is outside [{start}, {end}]")]
    OutOfRange { offset: i64, start: i64, end: i64 },
    #[error("storage: {0}")]
    Io(#[from] io::Error),
}

/// A batch located for a timestamp lookup: its segment file (kept open,
/// so a segment deleted meanwhile still reads, or fails cleanly), its
/// position and header.
#[derive(Debug, Clone)]
pub struct TimestampProbe {
    file: Arc<fs::File>,
    pos: u64,
    header: BatchHeader,
}

impl TimestampProbe {
    /// Reads the batch and finds its first record with timestamp ≥ `ts`;
    /// the batch itself when none is found or its records cannot be read.
    /// Blocking (a read and up to [`batch::MAX_SCAN_BYTES`] of
    /// decompression): run it off the async runtime.
    pub fn scan(&self, ts: i64) -> io::Result<(i64, i64)> {
        use std::os::unix::fs::FileExt;
        let h = &self.header;
        if self.pos + h.size as u64 > self.file.metadata()?.len() {
            return Err(io::Error::other(
                "a timestamp lookup's batch lies past its segment's end",
            ));
        }
        let mut bytes = vec![0u8; h.size];
        self.file.read_exact_at(&mut bytes, self.pos)?;
        if batch::parse_header(&bytes).as_ref() != Some(h) {
            return Err(io::Error::other(
                "the batch changed under a timestamp lookup",
            ));
        }
        Ok(first_record_at_or_after(&bytes, h, ts))
    }
}

#[derive(Debug)]
struct State {
    segments: BTreeMap<i64, Segment>,
    log_start: i64,
    producers: ProducerTable,
    aborted: Vec<AbortedTxn>,
    /// The active segment holds appends made durable only in the
    /// write-ahead log; the next checkpoint syncs it.
    wal_dirty: bool,
    /// An append since the last checkpoint was made durable by syncing the
    /// segment instead (too large to frame); until the checkpoint every
    /// append is, so no durable frame ever follows a batch that is not
    /// (the write-ahead log's rule 3).
    direct: bool,
    /// Appends so far (a checkpoint that synced without the lock clears
    /// `wal_dirty` only if none came meanwhile).
    appends: u64,
    /// (segment base, position): the active segment's write-out was
    /// started up to here ([`Partition::start_writeback`]).
    written_out: (i64, u64),
    /// The leader-epoch history; its last epoch is stamped into every
    /// batch written.
    epochs: LeaderEpochs,
    /// The cleaner checkpoint: below it the log is compacted.
    clean_upto: i64,
    /// This generation's clean marker is on disk and the files still are
    /// as it describes them: opened after a clean shutdown and not written
    /// since, or closed. The first write removes the marker, durably,
    /// before it changes a file ([`Partition::unmark_clean`]); a clean
    /// close of a partition still marked has nothing to do.
    marked_clean: bool,
    /// Producer state changed without a write (a fence, an expiry): a
    /// clean close writes the snapshot even if the partition is marked.
    producers_changed: bool,
}

impl State {
    /// Drops the aborted-transaction entries whose ABORT marker lies below
    /// the log start (`Partition::move_log_start` says why).
    fn forget_aborted_below_log_start(&mut self) {
        let start = self.log_start;
        self.aborted.retain(|a| a.last_offset >= start);
    }

    /// The segment appends go to. There is always one (create, open and
    /// retention keep it); its absence is reported as a storage error
    /// rather than trusted.
    fn active(&mut self) -> io::Result<&mut Segment> {
        self.segments
            .values_mut()
            .next_back()
            .ok_or_else(|| io::Error::other("the partition has no active segment"))
    }
    fn log_end(&self) -> i64 {
        self.segments
            .values()
            .next_back()
            .map_or(self.log_start, |s| s.next_offset)
    }
}

/// One partition.
#[derive(Debug)]
pub struct Partition {
    pub topic: String,
    pub id: i32,
    dir: PathBuf,
    /// The topic's log settings; AlterConfigs replaces them while the
    /// partition runs ([`Partition::set_config`]).
    config: std::sync::RwLock<Arc<LogConfig>>,
    state: Mutex<State>,
    /// Offset up to which data is durable (per the fsync mode) and readable.
    high_watermark: AtomicI64,
    /// Whether appends advance the high watermark at once (fsync not `always`).
    immediate_hw: bool,
    /// The shared write-ahead log and this partition's name in it.
    wal: Option<(Arc<Wal>, PartitionKey)>,
    /// The directory's generation this partition writes ([`seal`]).
    generation: u64,
    /// Checked under the lock before every file write.
    gate: WriteState,
    /// The broker's open-file cache, which every segment file of this
    /// partition goes through ([`super::open_files`]).
    files: Arc<OpenFiles>,
}

/// Zeros kept ahead of the active segment's end: a chunk, but never more
/// than a segment holds.
fn chunk(config: &LogConfig) -> u64 {
    super::zero_tail::CHUNK.min(config.segment_bytes.max(1))
}

impl Partition {
    /// The partition directory name.
    pub fn dir_name(topic: &str, id: i32) -> String {
        format!("{topic}-{id}")
    }

    /// Lets this partition write only while `gate` says so (cluster mode:
    /// while this broker's lease is valid). Every file write checks it
    /// under the partition lock just before writing.
    pub fn with_gate(mut self, gate: LeaseGate) -> Self {
        self.gate.check = Some(gate);
        self
    }

    /// Shares `refusals` with the other partitions opened in this slot,
    /// before and after this one (cluster mode: see [`super::refusals`]).
    pub fn with_refusals(mut self, refusals: Arc<super::refusals::Refusals>) -> Self {
        self.gate.refusals = refusals;
        self
    }

    /// Whether an append made durable may be acknowledged: the write gate,
    /// asked again after the data is durable and before the answer.
    pub fn may_acknowledge(&self) -> bool {
        self.gate.open()
    }

    /// Gives the partition up without writing anything more (no trim, no
    /// indexes, no snapshot, no clean marker): for a broker that lost its
    /// lease. Every later write fails as [`AppendError::NotLeader`].
    pub fn abandon(&self) {
        self.gate.abandoned.store(true, Ordering::Release);
    }

    /// The generation of the directory this partition writes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Fails with [`not_leader`] once the gate is closed.
    fn check_gate(&self) -> io::Result<()> {
        if self.gate.open() {
            Ok(())
        } else {
            Err(not_leader())
        }
    }

    /// [`Self::check_gate`] for batch `h`: a client batch's refusal is
    /// remembered, so that no batch behind it gets through before it comes
    /// again ([`super::refusals`]); a marker (a control batch) is in no
    /// client's pipeline.
    fn check_gate_for(&self, st: &State, h: &BatchHeader) -> Result<(), AppendError> {
        if self.gate.open() {
            return Ok(());
        }
        if !h.is_control() {
            self.gate.refusals.refused(h, Some(&st.producers));
        }
        Err(AppendError::NotLeader)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The log settings in force now (a snapshot: a change made meanwhile
    /// applies from the next call).
    pub fn config(&self) -> Arc<LogConfig> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the log settings (a topic config change): the next append,
    /// roll, retention check and cleaning pass use them.
    pub fn set_config(&self, config: LogConfig) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }

    /// Validates and appends a client's batch.
    pub fn append(&self, mut bytes: Vec<u8>) -> Result<Appended, AppendError> {
        let config = self.config();
        let now = crate::clock::now_ms();
        let mut h = batch::validate_for_topic(&bytes, config.rules(now))?;
        // compression.type other than `producer`: a batch in another codec
        // is re-encoded (Kafka's LogValidator); otherwise stored as sent.
        if let Some(codec) = config.compression
            && let Some(rebuilt) =
                batch::recompress::recompress(&bytes, &h, codec, config.max_message_bytes)?
        {
            bytes = rebuilt;
            h.size = bytes.len();
            h.attributes = (h.attributes & !batch::ATTR_COMPRESSION_MASK) | codec;
        }
        let log_append_time = if config.log_append_time {
            batch::stamp_log_append_time(&mut bytes, now);
            h.attributes |= batch::ATTR_LOG_APPEND_TIME;
            h.max_timestamp = now;
            now
        } else {
            -1
        };
        let admit = |st: &mut State, h: &BatchHeader| -> Result<_, AppendError> {
            let verdict = st.producers.check(h);
            if let Ok(Verdict::Duplicate(meta)) = verdict {
                // Written already: answered as such (possibly written, by
                // the caller, when the gate has closed meanwhile).
                return Ok(Some(Appended {
                    base_offset: meta.base_offset,
                    duplicate: true,
                    end_offset: st.log_end(),
                    file: None,
                    log_append_time: -1,
                }));
            }
            // Not leading comes before any producer-state error (as in
            // Kafka): an OUT_OF_ORDER_SEQUENCE_NUMBER for the batch behind
            // one refused as not leader is a gap the client did not make.
            self.check_gate_for(st, h)?;
            if self.gate.refusals.holds_back(h, &st.producers) {
                return Err(AppendError::NotLeader);
            }
            verdict.map_err(AppendError::Producer)?;
            Ok(None)
        };
        self.write(bytes, h, log_append_time, admit, |st, h| {
            st.producers.record(h)
        })
    }

    /// The write path of [`Self::append`] and [`Self::append_marker`].
    /// Under the partition lock, `admit` decides on batch `h` (Ok(Some):
    /// answered so, without a write); then the batch gets the next offset
    /// and the current leader epoch, is written to the active segment
    /// (rolled first when due) and framed into the write-ahead log (or its
    /// segment file is the one to sync), and `record` updates the producer
    /// state with its header. The gate is checked again before the write;
    /// the high watermark follows at once unless fsync waits hold it.
    fn write(
        &self,
        mut bytes: Vec<u8>,
        mut h: BatchHeader,
        log_append_time: i64,
        admit: impl FnOnce(&mut State, &BatchHeader) -> Result<Option<Appended>, AppendError>,
        record: impl FnOnce(&mut State, &BatchHeader),
    ) -> Result<Appended, AppendError> {
        let mut st = self.lock();
        if let Some(answer) = admit(&mut st, &h)? {
            return Ok(answer);
        }
        self.unmark_clean(&mut st)?;
        let base = st.log_end();
        let leader_epoch = stamp_epoch(&mut st, base)?;
        batch::assign_offset(&mut bytes, base, leader_epoch);
        h.base_offset = base;
        self.check_gate_for(&st, &h)?;
        self.maybe_roll(&mut st, bytes.len() as u64, h.max_timestamp)?;
        st.active()?.append(&bytes, &h)?;
        let file = self.durable_file(&mut st, &bytes)?;
        record(&mut st, &h);
        let end = st.log_end();
        drop(st);
        if self.immediate_hw {
            self.advance_high_watermark(end);
        }
        Ok(Appended {
            base_offset: base,
            duplicate: false,
            end_offset: end,
            file: Some(file),
            log_append_time,
        })
    }

    /// Every producer's state on this partition (DescribeProducers).
    pub fn producers(&self) -> Vec<(i64, super::producer::ProducerEntry)> {
        self.lock()
            .producers
            .entries
            .iter()
            .map(|(pid, e)| (*pid, e.clone()))
            .collect()
    }

    /// Whether `producer_id` has an open transaction on this partition.
    pub fn has_open_txn(&self, producer_id: i64) -> bool {
        self.lock()
            .producers
            .entries
            .get(&producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some())
    }

    /// Appends a COMMIT/ABORT marker for a producer (docs/txn-semantics.md §2.9, §3.4): a
    /// lower epoch is refused, and so is a coordinator epoch lower than the
    /// producer's last marker's ([`ProducerError::CoordinatorFenced`]); a
    /// higher epoch raises the partition's epoch (fencing a zombie); an
    /// abort is added to the aborted-transaction index.
    pub fn append_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Result<Appended, AppendError> {
        let bytes = batch::control_batch(producer_id, epoch, commit, coordinator_epoch, timestamp);
        let h = batch::parse_header(&bytes)
            .ok_or_else(|| AppendError::Io(io::Error::other("control batch header")))?;
        let admit = |st: &mut State, _: &BatchHeader| -> Result<_, AppendError> {
            self.check_gate()?;
            st.producers
                .check_marker(producer_id, epoch, coordinator_epoch)
                .map_err(AppendError::Producer)?;
            Ok(None)
        };
        let record = |st: &mut State, h: &BatchHeader| {
            let base = h.base_offset;
            if let Some(done) = st.producers.record_marker(
                producer_id,
                epoch,
                coordinator_epoch,
                base,
                !commit,
                timestamp,
            ) && done.aborted
            {
                st.aborted.push(AbortedTxn {
                    producer_id,
                    first_offset: done.first_offset,
                    last_offset: base,
                });
            }
        };
        self.write(bytes, h, -1, admit, record)
    }

    /// Before the first change to the partition's files since a clean open
    /// (or close): removes the clean marker and makes the removal durable,
    /// so a crash after the change never finds a marker vouching for
    /// indexes and a snapshot that no longer match. Nothing when unmarked.
    fn unmark_clean(&self, st: &mut State) -> io::Result<()> {
        if !st.marked_clean {
            return Ok(());
        }
        match fs::remove_file(self.dir.join(seal::clean_name(self.generation))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        super::sync::sync_dir(&self.dir)?;
        st.marked_clean = false;
        Ok(())
    }

    /// Rolls to a new segment if `incoming` bytes would overflow the active one.
    /// Rolls the active segment before a batch of `incoming` bytes whose
    /// max timestamp is `incoming_ts`. A non-empty segment rolls when the
    /// batch would take it past segment.bytes, or by time as Kafka's
    /// `LogSegment.shouldRoll` decides (the batch's timestamp is more than
    /// segment.ms past the segment's first batch; without timestamps, the
    /// segment has been open that long), and only once the segment has also
    /// been open segment.ms by the wall clock: producer timestamps alone
    /// cannot make a new segment (and an open file) per batch.
    fn maybe_roll(&self, st: &mut State, incoming: u64, incoming_ts: i64) -> io::Result<()> {
        let active = st.active()?;
        if active.size == 0 {
            return Ok(());
        }
        let config = self.config();
        let full = active.size + incoming > config.segment_bytes;
        let open_for = crate::clock::now_ms().saturating_sub(active.created_ms);
        let waited = if active.first_max_timestamp >= 0 {
            incoming_ts.saturating_sub(active.first_max_timestamp)
        } else {
            open_for
        };
        let timed_out = waited > config.segment_ms && open_for >= config.segment_ms;
        if !full && !timed_out {
            return Ok(());
        }
        self.check_gate()?;
        let active = st.active()?;
        active.trim()?;
        active.sync()?;
        active.write_indexes()?;
        let base = st.log_end();
        write_snapshot(&self.dir, self.generation, base, &st.producers, &st.aborted)?;
        st.segments.insert(
            base,
            Segment::create(
                &self.files,
                &self.dir,
                base,
                self.generation,
                chunk(&config),
            )?,
        );
        Ok(())
    }

    /// Raises the high watermark (after the data up to `offset` is durable).
    /// `offset` is a log end an append returned, so the high watermark never
    /// passes the log end (which never moves back); without the lock this
    /// cannot see the log end, so [`Self::check_offsets`] asserts it where
    /// the high watermark is read under the lock.
    pub fn advance_high_watermark(&self, offset: i64) {
        self.high_watermark.fetch_max(offset, Ordering::AcqRel);
    }

    /// Asserts the order of the offsets readers rely on: last stable offset
    /// ≤ high watermark ≤ log end. `hw` may be loaded before `st` was locked:
    /// the log end never moves back.
    fn check_offsets(&self, st: &State, lso: i64, hw: i64) {
        let end = st.log_end();
        invariant!(
            lso <= hw && hw <= end,
            "{}-{}: last stable offset {lso} ≤ high watermark {hw} ≤ log end {end} broken",
            self.topic,
            self.id
        );
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.lock().log_start
    }

    pub fn log_end_offset(&self) -> i64 {
        self.lock().log_end()
    }

    /// Last stable offset: below the first open transaction, at most the HW.
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        let st = self.lock();
        let lso = st
            .producers
            .first_unstable_offset()
            .map_or(hw, |f| f.min(hw));
        self.check_offsets(&st, lso, hw);
        lso
    }

    /// Forgets the state of producer ids at or above `first`, which were
    /// never handed out (see `pid::ProducerIdAllocator::issued`): only a
    /// forged batch can have made it. Returns how many were dropped.
    pub fn forget_producers_from(&self, first: i64) -> usize {
        let mut st = self.lock();
        let n = st.producers.forget_from(first);
        st.producers_changed |= n > 0;
        n
    }

    /// Producer-state expiry (`producer.id.expiration.ms`, see
    /// [`ProducerTable::expire`]): returns how many producer ids were
    /// dropped. The next snapshot leaves them out; recovery replays them
    /// back and the broker expires them again before it serves.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let mut st = self.lock();
        let n = st.producers.expire(now_ms, expiration_ms);
        st.producers_changed |= n > 0;
        n
    }

    /// Producer ids with state here.
    pub fn producer_count(&self) -> usize {
        self.lock().producers.entries.len()
    }

    /// Fences a producer id at `epoch` (the in-process fence ring).
    pub fn fence_producer(&self, producer_id: i64, epoch: i16) -> bool {
        let mut st = self.lock();
        let fenced = st.producers.fence(producer_id, epoch);
        st.producers_changed |= fenced;
        fenced
    }

    /// The current leader epoch (the last of the history; 0 for a
    /// partition that never had another).
    pub fn leader_epoch(&self) -> i32 {
        self.lock().epochs.current()
    }

    /// This broker leads the partition at `epoch` from now on: a newer
    /// epoch than the current one begins at the log end, durably, before
    /// any batch of it is written; a lower or equal one changes nothing.
    pub fn become_leader(&self, epoch: i32) -> io::Result<()> {
        let mut st = self.lock();
        let end = st.log_end();
        if st.epochs.begin(epoch, end)? {
            tracing::info!(topic = %self.topic, partition = self.id, epoch, start_offset = end, "leader epoch begins");
        }
        Ok(())
    }

    /// OffsetForLeaderEpoch (KIP-101): the largest epoch at or below
    /// `epoch` and where it ended (the next epoch's start offset, or the
    /// log end for the current epoch); (-1, -1) when there is no answer
    /// (see [`LeaderEpochs::end_offset_for`]).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let st = self.lock();
        st.epochs.end_offset_for(epoch, st.log_end())
    }

    /// The leader epoch of the batch holding `offset` (ListOffsets): from
    /// the history below the log end, the current epoch at or past it (the
    /// epoch the next batch gets); -1 for a negative offset or one before
    /// the history.
    pub fn epoch_at(&self, offset: i64) -> i32 {
        let st = self.lock();
        if offset < 0 {
            -1
        } else if offset >= st.log_end() {
            st.epochs.current()
        } else {
            st.epochs.epoch_at(offset)
        }
    }

    /// Bytes on disk.
    pub fn size_bytes(&self) -> u64 {
        self.lock().segments.values().map(|s| s.size).sum()
    }

    /// Clean shutdown: sync, write indexes and the producer snapshot, leave
    /// the marker (this generation's). Refused once the gate is closed.
    ///
    /// A partition still marked clean (not written since a clean open) has
    /// nothing to do but, if producer state changed without a write, its
    /// snapshot (the marker stays valid: the log end is the same); so a
    /// clean shutdown costs the partitions written since start, not all.
    pub fn close(&self) -> io::Result<()> {
        let mut st = self.lock();
        self.check_gate()?;
        if st.marked_clean {
            if st.producers_changed {
                let end = st.log_end();
                write_snapshot(&self.dir, self.generation, end, &st.producers, &st.aborted)?;
                st.producers_changed = false;
            }
            self.gate.closed.store(true, Ordering::Release);
            return Ok(());
        }
        // Only what changed is touched: a segment without zeros ahead of
        // its end is not trimmed, one synced since its last write is not
        // synced (nor opened again if the cache closed it), indexes that
        // match the files on disk are not rewritten.
        for s in st.segments.values_mut() {
            s.trim()?;
            s.sync()?;
            s.write_indexes()?;
        }
        let end = st.log_end();
        write_snapshot(&self.dir, self.generation, end, &st.producers, &st.aborted)?;
        self.check_gate()?;
        write_atomically(
            &self.dir.join(seal::clean_name(self.generation)),
            end.to_string().as_bytes(),
        )?;
        st.marked_clean = true;
        st.producers_changed = false;
        self.gate.closed.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the open-file cache holds the active segment's file now (a
    /// clean close then need not reopen it).
    pub fn files_open(&self) -> bool {
        self.lock()
            .segments
            .values()
            .next_back()
            .is_some_and(|s| s.file.if_open().is_some())
    }

    /// Removes the partition's directory (DeleteTopics).
    pub fn destroy(&self) -> io::Result<()> {
        fs::remove_dir_all(&self.dir)
    }
}
