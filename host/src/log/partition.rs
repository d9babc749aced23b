//! One partition's log: its segments, offsets (log start, end, high
//! watermark), producer state and the append/read paths. Knows nothing of
//! the wire or the coordinator; it stores batches.
//!
//! Files in the partition directory: `<base>.log/.index/.timeindex` per
//! segment, `log-start-offset`, `producer.snapshot` (clean shutdown and
//! roll), `.kaas-clean` (present only after a clean shutdown) and
//! `leader-epoch-checkpoint` (the leader-epoch history, [`super::epochs`]:
//! every batch written here carries the current epoch).
//!
//! With a write-ahead log attached ([`super::wal`]), a small append is
//! written to the segment and framed into the shared log, and the caller
//! syncs the shared log's file; the segment is synced by the next
//! checkpoint ([`Partition::checkpoint`]). After a crash the partition
//! takes back whatever its segments lost ([`Partition::recover_from_wal`]).
//!
//! Cluster mode (issue 14): another broker takes a partition over on the
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
use super::producer::{ProducerError, ProducerTable, Verdict};
use super::segment::Segment;
use super::wal::{self, PartitionKey, Wal};

#[cfg(test)]
mod gap_tests;
pub mod seal;
#[cfg(test)]
mod takeover_tests;

use seal::History;

/// Per-topic log settings (Kafka topic configs of the same names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// segment.bytes
    pub segment_bytes: u64,
    /// max.message.bytes
    pub max_message_bytes: usize,
    /// retention.ms (-1 = forever)
    pub retention_ms: i64,
    /// retention.bytes (-1 = unbounded)
    pub retention_bytes: i64,
    /// cleanup.policy (only `delete` is implemented)
    pub cleanup_policy: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            max_message_bytes: 1_048_588,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            cleanup_policy: "delete".into(),
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

/// The payload of the io::Error a closed write gate fails a file write
/// with (see [`is_not_leader`]).
#[derive(Debug, thiserror::Error)]
#[error("this broker no longer leads the partition")]
pub struct NotLeader;

/// The error of a write the gate refused.
pub fn not_leader() -> io::Error {
    io::Error::other(NotLeader)
}

/// Whether `e` is a write the gate refused (this broker lost the lead).
pub fn is_not_leader(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<NotLeader>())
}

/// Whether this broker may still write and acknowledge: true while its
/// lease is valid (cluster mode); always true alone.
pub type WriteGate = Arc<dyn Fn() -> bool + Send + Sync>;

/// The write gate and the abandoned flag of a partition, and the producer
/// batches refused through them ([`super::refusals`]).
#[derive(Default)]
struct Gate {
    check: Option<WriteGate>,
    abandoned: std::sync::atomic::AtomicBool,
    refusals: Arc<super::refusals::Refusals>,
}

impl Gate {
    fn open(&self) -> bool {
        !self.abandoned.load(Ordering::Acquire) && self.check.as_ref().is_none_or(|g| g())
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
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
}

/// An aborted transaction as Fetch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
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
}

impl State {
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
    config: LogConfig,
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
    gate: Gate,
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

    /// Creates a new, empty partition.
    pub fn create(
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> io::Result<Self> {
        let dir = root.join(Self::dir_name(topic, id));
        fs::create_dir_all(&dir)?;
        let seg = Segment::create(&dir, 0, 0, chunk(&config))?;
        let epochs = LeaderEpochs::load(&dir)?;
        let mut segments = BTreeMap::new();
        segments.insert(0, seg);
        Ok(Partition {
            topic: topic.into(),
            id,
            dir,
            config,
            state: Mutex::new(State {
                segments,
                log_start: 0,
                producers: ProducerTable::default(),
                aborted: Vec::new(),
                wal_dirty: false,
                direct: false,
                appends: 0,
                written_out: (0, 0),
                epochs,
            }),
            high_watermark: AtomicI64::new(0),
            immediate_hw,
            wal: None,
            generation: 0,
            gate: Gate::default(),
        })
    }

    /// Opens a partition, recovering after a crash if it was not shut down
    /// cleanly (by this directory's current generation: a clean marker of
    /// an older one, a zombie's, is not trusted).
    pub fn open(
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> io::Result<Self> {
        let dir = root.join(Self::dir_name(topic, id));
        let history = History::read(&dir)?;
        let generation = history.generation();
        let marker = dir.join(seal::clean_name(generation));
        let clean = marker.exists();
        let _ = fs::remove_file(&marker);
        let mut state = recover_dir(&dir, &config, &history, clean)?;
        // The active segment is this generation's own: a generation whose
        // taker died before creating its first file starts it now.
        let foreign = state
            .segments
            .values()
            .next_back()
            .is_none_or(|s| s.generation != generation);
        if foreign {
            let end = state.log_end();
            state
                .segments
                .insert(end, Segment::create(&dir, end, generation, chunk(&config))?);
            super::sync::sync_dir(&dir)?;
        }
        let end = state.log_end();
        Ok(Partition {
            topic: topic.into(),
            id,
            dir,
            config,
            high_watermark: AtomicI64::new(end),
            state: Mutex::new(state),
            immediate_hw,
            wal: None,
            generation,
            gate: Gate::default(),
        })
    }

    /// Takes over a partition another broker led (cluster mode): opens its
    /// directory as after a crash (never trusting a clean marker), replays
    /// the dead leader's write-ahead log frames that continue the log
    /// (`replay`, from [`wal::frames_for`]; only those its generation may
    /// still contribute, [`History::frame_bound`]), and seals: publishes
    /// the next generation's seal, which bounds the old leader's active
    /// segment at its recovered length, then starts a new segment file of
    /// its own at the log end, holding the replayed batches, synced.
    /// Whatever the old leader writes afterwards is never read.
    ///
    /// Fails with `AlreadyExists` if another taker sealed this generation
    /// first (this broker must not lead the partition).
    pub fn take_over(
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
        replay: &[wal::Frame],
    ) -> io::Result<Self> {
        let dir = root.join(Self::dir_name(topic, id));
        fs::create_dir_all(&dir)?;
        let mut history = History::read(&dir)?;
        let generation = history.generation() + 1;
        let mut state = recover_dir(&dir, &config, &history, false)?;
        let next_offset = state.log_end();
        let batches = replayable(&history, replay, next_offset, topic, id);
        let replay_end = batches
            .last()
            .map_or(next_offset, |(h, _)| h.last_offset() + 1);
        let sealed = state.segments.values().next_back().map(|s| seal::Sealed {
            base: s.base_offset,
            generation: s.generation,
            length: s.size,
        });
        let new_seal = seal::Seal {
            generation,
            sealed,
            next_offset,
            replay_end,
            log_start: state.log_start,
        };
        seal::publish(&dir, &new_seal)?;
        history.push(new_seal);
        remove_strays(&dir, &history);
        let first = Segment::create(&dir, next_offset, generation, chunk(&config))?;
        super::sync::sync_dir(&dir)?;
        // An empty sealed segment at the same base gives way.
        state.segments.insert(next_offset, first);
        let part = Partition {
            topic: topic.into(),
            id,
            dir,
            config,
            high_watermark: AtomicI64::new(next_offset),
            state: Mutex::new(state),
            immediate_hw,
            wal: None,
            generation,
            gate: Gate::default(),
        };
        {
            let mut st = part.lock();
            for (h, bytes) in &batches {
                part.maybe_roll(&mut st, bytes.len() as u64)?;
                st.active()?.append(bytes, h)?;
                let State {
                    producers, aborted, ..
                } = &mut *st;
                replay_batch(h, || Ok(bytes.clone()), producers, aborted)?;
            }
            st.active()?.file.sync_data()?;
            let end = st.log_end();
            write_snapshot(&part.dir, generation, end, &st.producers, &st.aborted)?;
            part.advance_high_watermark(end);
            tracing::info!(
                topic,
                partition = id,
                generation,
                sealed_at = next_offset,
                replayed = batches.len(),
                log_end = end,
                "partition taken over"
            );
        }
        Ok(part)
    }

    /// Lets this partition write only while `gate` says so (cluster mode:
    /// while this broker's lease is valid). Every file write checks it
    /// under the partition lock just before writing.
    pub fn with_gate(mut self, gate: WriteGate) -> Self {
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

    /// [`Self::check_gate`] for a client batch `h`: a refusal is
    /// remembered, so that no batch behind it gets through before it comes
    /// again ([`super::refusals`]).
    fn check_gate_for(&self, st: &State, h: &BatchHeader) -> Result<(), AppendError> {
        if self.gate.open() {
            return Ok(());
        }
        self.gate.refusals.refused(h, Some(&st.producers));
        Err(AppendError::NotLeader)
    }

    /// Makes small appends durable through `wal`, where this partition's
    /// topic has id `topic_id`.
    pub fn with_wal(mut self, wal: Arc<Wal>, topic_id: [u8; 16]) -> Self {
        self.wal = Some((wal, (topic_id, self.id)));
        self
    }

    /// After a crash: appends the batches of the write-ahead log that the
    /// segments lost (those at or past the recovered log end, in order),
    /// rebuilding producer state and the aborted-transaction index as the
    /// original appends did, and syncs them. Returns how many it appended.
    pub fn recover_from_wal(&self, batches: &[Vec<u8>]) -> io::Result<usize> {
        let mut st = self.lock();
        self.check_gate()?;
        let mut n = 0;
        for bytes in batches {
            let Some(h) = batch::parse_header(bytes).filter(|h| h.size == bytes.len()) else {
                tracing::error!(topic = %self.topic, partition = self.id, "a write-ahead log frame holds no whole batch; skipped");
                continue;
            };
            let end = st.log_end();
            if h.last_offset() < end {
                continue; // the segment kept it
            }
            if h.base_offset != end {
                tracing::error!(topic = %self.topic, partition = self.id, log_end = end, batch_offset = h.base_offset, "the write-ahead log does not continue the segment; its later batches are not replayed");
                break;
            }
            self.maybe_roll(&mut st, bytes.len() as u64)?;
            st.active()?.append(bytes, &h)?;
            let State {
                producers, aborted, ..
            } = &mut *st;
            replay_batch(&h, || Ok(bytes.clone()), producers, aborted)?;
            n += 1;
        }
        if n > 0 {
            st.active()?.file.sync_data()?;
            self.advance_high_watermark(st.log_end());
            tracing::info!(topic = %self.topic, partition = self.id, batches = n, log_end = st.log_end(), "batches taken back from the write-ahead log");
        }
        Ok(n)
    }

    /// The file whose fdatasync makes a batch just written to the active
    /// segment durable: the write-ahead log's when the batch was framed
    /// there, else the segment's.
    fn durable_file(&self, st: &mut State, bytes: &[u8]) -> io::Result<Arc<fs::File>> {
        st.appends += 1;
        if let Some((log, key)) = &self.wal {
            if !st.direct && bytes.len() <= wal::MAX_FRAMED_BATCH {
                match log.append_as(*key, self.generation, bytes) {
                    Ok(f) => {
                        st.wal_dirty = true;
                        return Ok(f);
                    }
                    Err(e) => {
                        tracing::warn!(topic = %self.topic, partition = self.id, error = %e, "writing to the write-ahead log failed; syncing the segment instead");
                    }
                }
            }
            st.direct = true;
        }
        Ok(st.active()?.file.clone())
    }

    /// A checkpoint's step (after the write-ahead log rotated): syncs the
    /// active segment if anything since the last checkpoint relied on the
    /// old files, and lets appends use the new file again.
    ///
    /// A partition in direct mode is synced under its lock (its appends'
    /// own fdatasyncs keep that cheap), so no direct append slips between
    /// the sync and leaving direct mode. Otherwise the sync runs without the
    /// lock, so appends go on meanwhile, and the segment counts as synced
    /// only if none came: one that did relies on the new file (or is
    /// direct), and the next checkpoint syncs it.
    pub fn checkpoint(&self) -> io::Result<()> {
        let (file, appends) = {
            let mut st = self.lock();
            if st.direct {
                st.active()?.file.sync_data()?;
                st.direct = false;
                st.wal_dirty = false;
                return Ok(());
            }
            if !st.wal_dirty {
                return Ok(());
            }
            (st.active()?.file.clone(), st.appends)
        };
        file.sync_data()?;
        let mut st = self.lock();
        if st.appends == appends {
            st.wal_dirty = false;
        }
        Ok(())
    }

    /// Starts writing out the active segment's bytes that only the
    /// write-ahead log has made durable, once at least `min` of them are
    /// waiting ([`super::writeback`]); returns how many bytes it started.
    pub fn start_writeback(&self, min: u64) -> io::Result<u64> {
        let (file, from, to) = {
            let mut st = self.lock();
            if !st.wal_dirty {
                return Ok(0);
            }
            let seg = st.active()?;
            let (base, to, file) = (seg.base_offset, seg.size, seg.file.clone());
            let from = match st.written_out {
                (b, pos) if b == base && pos <= to => pos,
                _ => 0,
            };
            if to - from < min {
                return Ok(0);
            }
            st.written_out = (base, to);
            (file, from, to)
        };
        super::writeback::start(&file, from, to - from)?;
        Ok(to - from)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Validates and appends a client's batch.
    pub fn append(&self, mut bytes: Vec<u8>) -> Result<Appended, AppendError> {
        let mut h = batch::validate_client_batch(&bytes, self.config.max_message_bytes)?;
        let mut st = self.lock();
        let verdict = st.producers.check(&h);
        if let Ok(Verdict::Duplicate(meta)) = verdict {
            // Written already: answered as such (possibly written, by the
            // caller, when the gate has closed meanwhile).
            return Ok(Appended {
                base_offset: meta.base_offset,
                duplicate: true,
                end_offset: st.log_end(),
                file: None,
            });
        }
        // Not leading comes before any producer-state error (as in Kafka):
        // an OUT_OF_ORDER_SEQUENCE_NUMBER for the batch behind one refused
        // as not leader is a gap the client did not make.
        self.check_gate_for(&st, &h)?;
        if self.gate.refusals.holds_back(&h, &st.producers) {
            return Err(AppendError::NotLeader);
        }
        verdict.map_err(AppendError::Producer)?;
        let base = st.log_end();
        let leader_epoch = stamp_epoch(&mut st, base)?;
        batch::assign_offset(&mut bytes, base, leader_epoch);
        h.base_offset = base;
        self.check_gate_for(&st, &h)?;
        self.maybe_roll(&mut st, bytes.len() as u64)?;
        st.active()?.append(&bytes, &h)?;
        let file = self.durable_file(&mut st, &bytes)?;
        st.producers.record(&h);
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

    /// Appends a COMMIT/ABORT marker for a producer (spec §2.9, §3.4): a
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
        let mut st = self.lock();
        self.check_gate()?;
        st.producers
            .check_marker(producer_id, epoch, coordinator_epoch)
            .map_err(AppendError::Producer)?;
        let mut bytes =
            batch::control_batch(producer_id, epoch, commit, coordinator_epoch, timestamp);
        let mut h = batch::parse_header(&bytes)
            .ok_or_else(|| AppendError::Io(io::Error::other("control batch header")))?;
        let base = st.log_end();
        let leader_epoch = stamp_epoch(&mut st, base)?;
        batch::assign_offset(&mut bytes, base, leader_epoch);
        h.base_offset = base;
        self.check_gate()?;
        self.maybe_roll(&mut st, bytes.len() as u64)?;
        st.active()?.append(&bytes, &h)?;
        let file = self.durable_file(&mut st, &bytes)?;
        if let Some(done) =
            st.producers
                .record_marker(producer_id, epoch, coordinator_epoch, base, !commit)
            && done.aborted
        {
            st.aborted.push(AbortedTxn {
                producer_id,
                first_offset: done.first_offset,
                last_offset: base,
            });
        }
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
        })
    }

    /// Rolls to a new segment if `incoming` bytes would overflow the active one.
    fn maybe_roll(&self, st: &mut State, incoming: u64) -> io::Result<()> {
        let active = st.active()?;
        if active.size == 0 || active.size + incoming <= self.config.segment_bytes {
            return Ok(());
        }
        self.check_gate()?;
        let active = st.active()?;
        active.trim()?;
        active.file.sync_data()?;
        active.write_indexes()?;
        let base = st.log_end();
        write_snapshot(&self.dir, self.generation, base, &st.producers, &st.aborted)?;
        st.segments.insert(
            base,
            Segment::create(&self.dir, base, self.generation, chunk(&self.config))?,
        );
        Ok(())
    }

    /// Raises the high watermark (after the data up to `offset` is durable).
    pub fn advance_high_watermark(&self, offset: i64) {
        self.high_watermark.fetch_max(offset, Ordering::AcqRel);
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
        self.lock()
            .producers
            .first_unstable_offset()
            .map_or(hw, |f| f.min(hw))
    }

    /// Forgets the state of producer ids at or above `first`, which were
    /// never handed out (see `pid::ProducerIdAllocator::issued`): only a
    /// forged batch can have made it. Returns how many were dropped.
    pub fn forget_producers_from(&self, first: i64) -> usize {
        self.lock().producers.forget_from(first)
    }

    /// Fences a producer id at `epoch` (the in-process fence ring).
    pub fn fence_producer(&self, producer_id: i64, epoch: i16) -> bool {
        self.lock().producers.fence(producer_id, epoch)
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

    /// Reads batches from `offset`, at most about `max_bytes` (at least one
    /// whole batch), below the HW, or below the LSO when `read_committed`.
    /// (Tests; Fetch uses [`Self::read_limited`].)
    #[cfg(test)]
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<ReadResult, ReadError> {
        self.read_limited(offset, max_bytes, true, read_committed)
    }

    /// Reads whole batches from `offset` within `max_bytes`, below the HW,
    /// or below the LSO when `read_committed`. With `min_one` the first
    /// batch is returned whole even if it alone exceeds `max_bytes` (Kafka
    /// allows that for the first batch of a response, so a consumer makes
    /// progress); without it such a read returns no records.
    pub fn read_limited(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        read_committed: bool,
    ) -> Result<ReadResult, ReadError> {
        let hw = self.high_watermark();
        let st = self.lock();
        let lso = st
            .producers
            .first_unstable_offset()
            .map_or(hw, |f| f.min(hw));
        let end = st.log_end();
        if offset < st.log_start || offset > end {
            return Err(ReadError::OutOfRange {
                offset,
                start: st.log_start,
                end,
            });
        }
        let upper = if read_committed { lso } else { hw };
        let mut result = ReadResult {
            records: Vec::new(),
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: st.log_start,
            aborted: Vec::new(),
        };
        if offset >= upper {
            return Ok(result);
        }
        for (_, seg) in st
            .segments
            .range(..=offset)
            .next_back()
            .into_iter()
            .chain(st.segments.range(offset + 1..))
        {
            if seg.next_offset <= offset {
                continue;
            }
            if let Some(pos) = seg.position_of(offset)? {
                result.records = seg.read(pos, max_bytes, min_one, upper)?;
                break;
            }
        }
        if read_committed {
            let last = batch::parse_header(&result.records).map(|_| offset);
            if last.is_some() {
                result.aborted = st
                    .aborted
                    .iter()
                    .filter(|a| a.last_offset >= offset && a.first_offset < upper)
                    .copied()
                    .collect();
            }
        }
        Ok(result)
    }

    /// ListOffsets by timestamp: the first offset whose record timestamp is
    /// ≥ `ts`, with that timestamp. The batch is located under the lock
    /// ([`Partition::locate_timestamp`]) and scanned without it.
    pub fn offset_for_timestamp(&self, ts: i64) -> io::Result<Option<(i64, i64)>> {
        match self.locate_timestamp(ts)? {
            Some(probe) => probe.scan(ts).map(Some),
            None => Ok(None),
        }
    }

    /// The first batch whose max timestamp is ≥ `ts`, found from the time
    /// index under the partition lock (headers only). Scanning its records
    /// ([`TimestampProbe::scan`], up to [`batch::MAX_SCAN_BYTES`] of
    /// decompression) needs no lock, so appends go on meanwhile.
    pub fn locate_timestamp(&self, ts: i64) -> io::Result<Option<TimestampProbe>> {
        let hw = self.high_watermark();
        let st = self.lock();
        for seg in st.segments.values() {
            if seg.max_timestamp < ts {
                continue;
            }
            if let Some((pos, h)) = seg.position_for_timestamp(ts)? {
                if h.base_offset >= hw {
                    return Ok(None);
                }
                return Ok(Some(TimestampProbe {
                    file: seg.file.clone(),
                    pos,
                    header: h,
                }));
            }
        }
        Ok(None)
    }

    /// The largest timestamp and its offset (ListOffsets -3).
    pub fn max_timestamp(&self) -> (i64, i64) {
        let st = self.lock();
        st.segments
            .values()
            .filter(|s| s.max_timestamp >= 0)
            .map(|s| (s.max_timestamp, s.next_offset - 1))
            .max()
            .unwrap_or((-1, -1))
    }

    /// DeleteRecords: moves the log start offset (never past the HW) and
    /// drops whole segments below it.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, ReadError> {
        let hw = self.high_watermark();
        let mut st = self.lock();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(ReadError::OutOfRange {
                offset,
                start: st.log_start,
                end: hw,
            });
        }
        if target > st.log_start {
            self.check_gate()?;
            write_atomically(
                &self.dir.join(seal::log_start_name(self.generation)),
                target.to_string().as_bytes(),
            )?;
            st.log_start = target;
            self.drop_segments_below(&mut st, target)?;
        }
        Ok(st.log_start)
    }

    fn drop_segments_below(&self, st: &mut State, offset: i64) -> io::Result<()> {
        let doomed: Vec<i64> = st
            .segments
            .iter()
            .filter(|(_, s)| s.next_offset <= offset)
            .map(|(b, _)| *b)
            .filter(|b| Some(b) != st.segments.keys().next_back())
            .collect();
        for b in doomed {
            self.check_gate()?;
            if let Some(s) = st.segments.remove(&b) {
                s.delete()?;
            }
        }
        Ok(())
    }

    /// Retention by time and size: deletes whole old segments, never the active one.
    pub fn apply_retention(&self, now_ms: i64) -> io::Result<usize> {
        let mut st = self.lock();
        let mut removed = 0;
        loop {
            if st.segments.len() <= 1 {
                break;
            }
            let total: u64 = st.segments.values().map(|s| s.size).sum();
            let Some((&base, oldest)) = st.segments.iter().next() else {
                break;
            };
            let by_time = self.config.retention_ms >= 0
                && oldest.max_timestamp >= 0
                && oldest.max_timestamp < now_ms - self.config.retention_ms;
            let by_size = self.config.retention_bytes >= 0
                && total - oldest.size >= self.config.retention_bytes as u64;
            if !(by_time || by_size) {
                break;
            }
            let next = oldest.next_offset;
            self.check_gate()?;
            if let Some(s) = st.segments.remove(&base) {
                s.delete()?;
            }
            if next > st.log_start {
                self.check_gate()?;
                st.log_start = next;
                write_atomically(
                    &self.dir.join(seal::log_start_name(self.generation)),
                    next.to_string().as_bytes(),
                )?;
            }
            removed += 1;
        }
        Ok(removed)
    }

    /// Bytes on disk.
    pub fn size_bytes(&self) -> u64 {
        self.lock().segments.values().map(|s| s.size).sum()
    }

    /// Clean shutdown: sync, write indexes and the producer snapshot, leave
    /// the marker (this generation's). Refused once the gate is closed.
    pub fn close(&self) -> io::Result<()> {
        let mut st = self.lock();
        self.check_gate()?;
        for s in st.segments.values_mut() {
            s.trim()?;
            s.file.sync_data()?;
            s.write_indexes()?;
        }
        let end = st.log_end();
        write_snapshot(&self.dir, self.generation, end, &st.producers, &st.aborted)?;
        self.check_gate()?;
        write_atomically(
            &self.dir.join(seal::clean_name(self.generation)),
            end.to_string().as_bytes(),
        )
    }

    /// Removes the partition's directory (DeleteTopics).
    pub fn destroy(&self) -> io::Result<()> {
        fs::remove_dir_all(&self.dir)
    }
}

/// Recovers a partition directory's valid segments (per `history`: a
/// zombie's files are skipped, sealed segments read to their seal), its
/// log start and its producer state. `clean`: the current generation shut
/// down cleanly, so indexes are trusted; otherwise the last segment is
/// verified batch by batch. Creates no file.
fn recover_dir(
    dir: &Path,
    config: &LogConfig,
    history: &History,
    clean: bool,
) -> io::Result<State> {
    let generation = history.generation();
    let epochs = LeaderEpochs::load(dir)?;
    let log_start = fs::read_to_string(dir.join(seal::log_start_name(generation)))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .or_else(|| history.latest().map(|s| s.log_start))
        .unwrap_or(0);
    let mut files: Vec<(i64, u64)> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(super::segment::parse_name))
        .filter(|&(base, g)| history.segment_valid(base, g))
        .collect();
    files.sort_unstable();

    let snapshot = read_snapshot(dir, generation);
    let snap_offset = snapshot.as_ref().map(|(o, _, _)| *o);
    let (mut producers, snapshot_aborted) = snapshot.map(|(_, t, a)| (t, a)).unwrap_or_default();
    let replay_from = snap_offset.unwrap_or(i64::MIN);
    let mut segments: BTreeMap<i64, Segment> = BTreeMap::new();
    let last = files.last().copied();
    for &(base, g) in &files {
        let limit = history.segment_limit(base, g);
        let seg = if clean && limit.is_none() {
            match Segment::open_clean(dir, base, g, chunk(config)) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), base, error = %e, "index unusable; rescanning the segment");
                    Segment::open(dir, base, g, true, chunk(config), None)?
                }
            }
        } else {
            let verify = Some((base, g)) == last && limit.is_none();
            Segment::open(dir, base, g, verify, chunk(config), limit)?
        };
        // An empty segment sealed at the base its successor starts at
        // gives way to it.
        if segments.get(&base).is_some_and(|s| s.size > 0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: two segments start at offset {base}", dir.display()),
            ));
        }
        segments.insert(base, seg);
    }
    let mut state = State {
        segments,
        log_start,
        producers: ProducerTable::default(),
        aborted: Vec::new(),
        wal_dirty: false,
        direct: false,
        appends: 0,
        written_out: (0, 0),
        epochs,
    };
    let end = state.log_end();
    // Producer state: the snapshot if it is not ahead of the log, then
    // the batch headers after it.
    let from = if snap_offset.is_some_and(|o| o <= end) {
        replay_from
    } else {
        producers = ProducerTable::default();
        i64::MIN
    };
    let mut aborted = if from == i64::MIN {
        Vec::new()
    } else {
        snapshot_aborted
    };
    for seg in state.segments.values() {
        if seg.next_offset > from {
            replay_segment(seg, from, &mut producers, &mut aborted)?;
        }
    }
    state.aborted = aborted;
    state.producers = producers;
    Ok(state)
}

/// The batches of a dead leader's write-ahead log a takeover appends: each
/// frame whole, below its generation's bound (a frame written after the
/// takeover that ended its generation never comes back), in offset order,
/// continuing the log end `end` exactly; replay stops at a gap.
fn replayable(
    history: &History,
    frames: &[wal::Frame],
    mut end: i64,
    topic: &str,
    id: i32,
) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut candidates: Vec<(BatchHeader, &[u8])> = frames
        .iter()
        .filter_map(|f| {
            let h = batch::parse_header(&f.batch).filter(|h| h.size == f.batch.len());
            if h.is_none() {
                tracing::error!(
                    topic,
                    partition = id,
                    "a write-ahead log frame holds no whole batch; skipped"
                );
            }
            let h = h?;
            (h.last_offset() < history.frame_bound(f.generation)).then_some((h, &f.batch[..]))
        })
        .collect();
    candidates.sort_by_key(|(h, _)| h.base_offset);
    let mut out = Vec::new();
    for (h, bytes) in candidates {
        if h.last_offset() < end {
            continue;
        }
        if h.base_offset != end {
            tracing::error!(
                topic,
                partition = id,
                log_end = end,
                batch_offset = h.base_offset,
                "the write-ahead log does not continue the log; its later batches are not replayed"
            );
            break;
        }
        end = h.last_offset() + 1;
        out.push((h, bytes.to_vec()));
    }
    out
}

/// After a seal: removes the segment files `history` no longer counts
/// (a zombie's rolls) and the older generations' snapshots, log-start
/// files and clean markers. Best effort: a file left behind is ignored by
/// every later open anyway; one a zombie creates later is removed by the
/// next takeover.
fn remove_strays(dir: &Path, history: &History) {
    let generation = history.generation();
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let stray = match super::segment::parse_name(name) {
            Some((base, g)) => !history.segment_valid(base, g),
            None => seal::aux_generation(name).is_some_and(|g| g < generation),
        };
        if !stray {
            continue;
        }
        let stem = name.strip_suffix(".log");
        let paths: Vec<PathBuf> = match stem {
            Some(stem) => ["log", "index", "timeindex"]
                .iter()
                .map(|ext| dir.join(format!("{stem}.{ext}")))
                .collect(),
            None => vec![e.path()],
        };
        for p in paths {
            match fs::remove_file(&p) {
                Ok(()) => {
                    tracing::info!(file = %p.display(), "removed a file of an older generation")
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    tracing::warn!(file = %p.display(), error = %err, "removing a file of an older generation failed")
                }
            }
        }
    }
}

/// The epoch to stamp into a batch about to be written at `base`, after
/// making sure the history has the current epoch start no later than
/// `base` (it may start past a tail a crash lost).
fn stamp_epoch(st: &mut State, base: i64) -> io::Result<i32> {
    st.epochs.settle(base)?;
    Ok(st.epochs.current())
}

/// The first record of an (optionally compressed) batch with timestamp ≥ ts;
/// the batch itself when none is found or its records cannot be read.
fn first_record_at_or_after(bytes: &[u8], h: &BatchHeader, ts: i64) -> (i64, i64) {
    batch::first_record_at_or_after(bytes, h, ts).unwrap_or((h.base_offset, h.max_timestamp))
}

/// Replays one segment's batches from `from`, in log order: data batches
/// into the producer table, control batches as completed transactions.
fn replay_segment(
    seg: &Segment,
    from: i64,
    producers: &mut ProducerTable,
    aborted: &mut Vec<AbortedTxn>,
) -> io::Result<()> {
    let mut failure = None;
    seg.for_each_header(from.max(seg.base_offset), |pos, h| {
        if h.base_offset < from || failure.is_some() {
            return;
        }
        if let Err(e) = replay_batch(h, || seg.read_batch(pos, h), producers, aborted) {
            failure = Some(e);
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// Replays one batch found in the log: a data batch into the producer
/// table, a control batch as a completed transaction (`read` fetches its
/// bytes; data batches need only the header).
fn replay_batch(
    h: &BatchHeader,
    read: impl FnOnce() -> io::Result<Vec<u8>>,
    producers: &mut ProducerTable,
    aborted: &mut Vec<AbortedTxn>,
) -> io::Result<()> {
    if !h.is_control() {
        producers.record(h);
        return Ok(());
    }
    let bytes = read()?;
    let commit = batch::control_type(&bytes) == Some(1);
    // The coordinator epoch fences older coordinators' markers: it comes
    // back from the marker itself.
    let coordinator_epoch = batch::control_coordinator_epoch(&bytes).unwrap_or(-1);
    if let Some(done) = producers.record_marker(
        h.producer_id,
        h.producer_epoch,
        coordinator_epoch,
        h.base_offset,
        !commit,
    ) && done.aborted
    {
        aborted.push(AbortedTxn {
            producer_id: done.producer_id,
            first_offset: done.first_offset,
            last_offset: done.marker_offset,
        });
    }
    Ok(())
}

type Snapshot = (i64, ProducerTable, Vec<AbortedTxn>);

fn read_snapshot(dir: &Path, generation: u64) -> Option<Snapshot> {
    let b = fs::read(dir.join(seal::snapshot_name(generation))).ok()?;
    if b.len() < 16 {
        return None;
    }
    let mut o = [0u8; 8];
    o.copy_from_slice(&b[..8]);
    let crc = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    if crc32c::crc32c(&b[12..]) != crc {
        return None;
    }
    let table_len = u32::from_be_bytes([b[12], b[13], b[14], b[15]]) as usize;
    let table = ProducerTable::decode(b.get(16..16 + table_len)?)?;
    let rest = b.get(16 + table_len..)?;
    if rest.len() % 24 != 0 {
        return None;
    }
    let aborted = rest
        .chunks_exact(24)
        .map(|c| {
            let n = |i: usize| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&c[i..i + 8]);
                i64::from_be_bytes(a)
            };
            AbortedTxn {
                producer_id: n(0),
                first_offset: n(8),
                last_offset: n(16),
            }
        })
        .collect();
    Some((i64::from_be_bytes(o), table, aborted))
}

fn write_snapshot(
    dir: &Path,
    generation: u64,
    offset: i64,
    table: &ProducerTable,
    aborted: &[AbortedTxn],
) -> io::Result<()> {
    let t = table.encode();
    let mut body = Vec::with_capacity(4 + t.len() + aborted.len() * 24);
    body.extend_from_slice(&(t.len() as u32).to_be_bytes());
    body.extend_from_slice(&t);
    for a in aborted {
        body.extend_from_slice(&a.producer_id.to_be_bytes());
        body.extend_from_slice(&a.first_offset.to_be_bytes());
        body.extend_from_slice(&a.last_offset.to_be_bytes());
    }
    let mut b = Vec::with_capacity(12 + body.len());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    b.extend_from_slice(&body);
    write_atomically(&dir.join(seal::snapshot_name(generation)), &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::data_batch;

    fn small_segments() -> LogConfig {
        LogConfig {
            segment_bytes: 1024,
            ..LogConfig::default()
        }
    }

    fn fill(p: &Partition, n: usize, ts0: i64) {
        for i in 0..n {
            let v = format!("value-{i:04}-{}", "x".repeat(40));
            p.append(data_batch(
                &[(None, v.as_bytes())],
                ts0 + i as i64,
                None,
                false,
            ))
            .expect("append");
        }
    }

    fn values(p: &Partition, from: i64) -> Vec<i64> {
        let mut out = Vec::new();
        let mut offset = from;
        loop {
            let r = p.read(offset, 1 << 20, false).expect("read");
            if r.records.is_empty() {
                return out;
            }
            let mut rest = &r.records[..];
            while let Some(h) = batch::parse_header(rest) {
                out.push(h.base_offset);
                offset = h.last_offset() + 1;
                rest = &rest[h.size..];
            }
        }
    }

    #[test]
    fn appends_roll_segments_and_reads_cross_them() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = Partition::create(dir.path(), "t", 0, small_segments(), true).expect("create");
        fill(&p, 100, 1000);
        assert!(p.lock().segments.len() > 3, "small segments roll");
        assert_eq!(values(&p, 0), (0..100).collect::<Vec<_>>());
        assert_eq!(values(&p, 57).first(), Some(&57));
        assert_eq!(p.offset_for_timestamp(1050).expect("ts"), Some((50, 1050)));
        assert_eq!(p.offset_for_timestamp(5000).expect("ts"), None);
    }

    #[test]
    fn a_torn_tail_is_truncated_on_recovery_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("tmp");
        let good = {
            let p =
                Partition::create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
            fill(&p, 10, 1000);
            p.size_bytes() as usize
            // no close(): a crash
        };
        let seg = dir
            .path()
            .join("t-0")
            .join(format!("{}.log", super::super::segment::stem(0)));
        let mut bytes = std::fs::read(&seg).expect("read segment");
        assert!(bytes.len() > good, "zeros follow the data");
        let half_header = bytes[..40].to_owned();
        bytes[good..good + 40].copy_from_slice(&half_header); // a torn write
        std::fs::write(&seg, &bytes).expect("write");
        let p = Partition::open(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
        assert_eq!(p.log_end_offset(), 10);
        assert_eq!(std::fs::metadata(&seg).expect("meta").len() as usize, good);
        fill(&p, 1, 2000);
        assert_eq!(values(&p, 0), (0..11).collect::<Vec<_>>());
    }

    #[test]
    fn the_zero_filled_tail_is_cut_at_recovery_and_at_a_clean_close() {
        let dir = tempfile::tempdir().expect("tmp");
        let seg = dir
            .path()
            .join("t-0")
            .join(format!("{}.log", super::super::segment::stem(0)));
        let len = || std::fs::metadata(&seg).expect("meta").len();
        let data = {
            let p =
                Partition::create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
            fill(&p, 10, 1000);
            let data = p.size_bytes();
            assert!(len() > data, "zeros follow the data");
            data
            // no close(): a crash with the zeros in place
        };
        let p = Partition::open(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
        assert_eq!(p.log_end_offset(), 10);
        assert_eq!(len(), data, "recovery cut the zeros, kept every batch");
        fill(&p, 1, 2000);
        assert!(len() > p.size_bytes(), "appending zero-fills again");
        p.close().expect("close");
        assert_eq!(len(), p.size_bytes(), "a clean close leaves no zeros");
        drop(p);
        let p = Partition::open(dir.path(), "t", 0, LogConfig::default(), true).expect("reopen");
        assert_eq!(values(&p, 0), (0..11).collect::<Vec<_>>());
    }

    #[test]
    fn a_corrupt_batch_ends_the_recovered_log_there() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let p =
                Partition::create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
            fill(&p, 10, 1000);
        }
        let seg = dir
            .path()
            .join("t-0")
            .join(format!("{}.log", super::super::segment::stem(0)));
        let mut bytes = std::fs::read(&seg).expect("read");
        let h = batch::parse_header(&bytes).expect("first");
        let at = 7 * h.size + 70; // inside the 8th batch's records
        bytes[at] ^= 0xff;
        std::fs::write(&seg, &bytes).expect("write");
        let p = Partition::open(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
        assert_eq!(
            p.log_end_offset(),
            7,
            "batches after the corrupt one are dropped"
        );
    }

    #[test]
    fn retention_by_size_and_time_drops_old_segments_only() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = LogConfig {
            retention_bytes: 2048,
            ..small_segments()
        };
        let p = Partition::create(dir.path(), "t", 0, cfg, true).expect("create");
        fill(&p, 100, 1000);
        let before = p.lock().segments.len();
        assert!(p.apply_retention(2000).expect("retention") > 0);
        let after = p.lock().segments.len();
        assert!(after < before && p.size_bytes() <= 2048 + 1024);
        let start = p.log_start_offset();
        assert!(start > 0);
        assert!(matches!(
            p.read(0, 100, false),
            Err(ReadError::OutOfRange { .. })
        ));
        assert_eq!(values(&p, start).last(), Some(&99));

        let cfg = LogConfig {
            retention_ms: 10,
            ..small_segments()
        };
        let q = Partition::create(dir.path(), "u", 0, cfg, true).expect("create");
        fill(&q, 50, 1000);
        q.apply_retention(1000 + 49 + 10 + 1).expect("retention");
        assert_eq!(
            q.lock().segments.len(),
            1,
            "everything but the active segment expired"
        );
    }

    #[test]
    fn delete_records_moves_the_log_start_and_survives_reopen() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let p = Partition::create(dir.path(), "t", 0, small_segments(), true).expect("create");
            fill(&p, 40, 1000);
            assert_eq!(p.delete_records_before(25).expect("delete"), 25);
            assert!(matches!(
                p.delete_records_before(41),
                Err(ReadError::OutOfRange { .. })
            ));
            p.close().expect("close");
        }
        let p = Partition::open(dir.path(), "t", 0, small_segments(), true).expect("open");
        assert_eq!(p.log_start_offset(), 25);
        assert_eq!(values(&p, 25).first(), Some(&25));
    }

    /// (base offset, partition leader epoch) of every batch from `from`.
    fn epochs_of(p: &Partition, from: i64) -> Vec<(i64, i32)> {
        let mut out = Vec::new();
        let mut offset = from;
        loop {
            let r = p.read(offset, 1 << 20, false).expect("read");
            if r.records.is_empty() {
                return out;
            }
            let mut rest = &r.records[..];
            while let Some(h) = batch::parse_header(rest) {
                out.push((
                    h.base_offset,
                    batch::partition_leader_epoch(rest).expect("epoch"),
                ));
                offset = h.last_offset() + 1;
                rest = &rest[h.size..];
            }
        }
    }

    #[test]
    fn data_and_marker_batches_carry_the_current_leader_epoch() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = Partition::create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
        fill(&p, 1, 1000);
        p.become_leader(3).expect("become leader");
        p.append(data_batch(&[(None, b"tx")], 1001, Some((7, 0, 0)), true))
            .expect("transactional append");
        p.append_marker(7, 0, true, 0, 1002).expect("marker");
        p.become_leader(2).expect("an older epoch is a no-op");
        fill(&p, 1, 1003);
        assert_eq!(p.leader_epoch(), 3);
        assert_eq!(epochs_of(&p, 0), vec![(0, 0), (1, 3), (2, 3), (3, 3)]);
    }

    #[test]
    fn the_epoch_history_survives_reopen_and_answers_end_offsets() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let p = Partition::create(dir.path(), "t", 0, small_segments(), true).expect("create");
            fill(&p, 5, 1000);
            p.become_leader(2).expect("become leader");
            fill(&p, 3, 2000);
            p.close().expect("close");
        }
        let p = Partition::open(dir.path(), "t", 0, small_segments(), true).expect("open");
        assert_eq!(p.leader_epoch(), 2);
        assert_eq!(p.end_offset_for_epoch(0), (0, 5));
        assert_eq!(p.end_offset_for_epoch(1), (0, 5));
        assert_eq!(p.end_offset_for_epoch(2), (2, 8));
        assert_eq!(p.end_offset_for_epoch(3), (-1, -1));
        assert_eq!((p.epoch_at(4), p.epoch_at(5), p.epoch_at(8)), (0, 2, 2));
        assert_eq!(p.epoch_at(-1), -1);
        fill(&p, 1, 3000);
        assert_eq!(epochs_of(&p, 7), vec![(7, 2), (8, 2)]);
    }

    #[test]
    fn batches_taken_back_from_the_wal_keep_the_epoch_they_were_written_with() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = Partition::create(dir.path(), "a", 0, LogConfig::default(), true).expect("create");
        a.become_leader(1).expect("become leader");
        fill(&a, 2, 1000);
        let r = a.read(0, 1 << 20, false).expect("read");
        let mut frames = Vec::new();
        let mut rest = &r.records[..];
        while let Some(h) = batch::parse_header(rest) {
            frames.push(rest[..h.size].to_vec());
            rest = &rest[h.size..];
        }
        let b = Partition::create(dir.path(), "b", 0, LogConfig::default(), true).expect("create");
        b.become_leader(4).expect("become leader");
        assert_eq!(b.recover_from_wal(&frames).expect("recover"), 2);
        assert_eq!(epochs_of(&b, 0), vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn moving_the_log_start_leaves_the_epochs_alone() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = Partition::create(dir.path(), "t", 0, small_segments(), true).expect("create");
        fill(&p, 20, 1000);
        p.become_leader(1).expect("become leader");
        fill(&p, 20, 2000);
        p.delete_records_before(30).expect("delete");
        assert_eq!(p.end_offset_for_epoch(0), (0, 20));
        assert_eq!(p.end_offset_for_epoch(1), (1, 40));
        assert_eq!(p.leader_epoch(), 1);
    }

    #[test]
    fn an_epoch_whose_start_a_crash_lost_restarts_at_the_first_new_batch() {
        let dir = tempfile::tempdir().expect("tmp");
        let seg = dir
            .path()
            .join("t-0")
            .join(format!("{}.log", super::super::segment::stem(0)));
        let kept = {
            let p =
                Partition::create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
            fill(&p, 3, 1000);
            let kept = p.size_bytes();
            fill(&p, 2, 1100);
            p.become_leader(2).expect("become leader");
            fill(&p, 3, 2000);
            kept
            // no close(): a crash that loses everything after offset 3
        };
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .expect("segment")
            .set_len(kept)
            .expect("truncate");
        let p = Partition::open(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
        assert_eq!(p.log_end_offset(), 3);
        assert_eq!(p.leader_epoch(), 2, "the epoch never goes down");
        assert_eq!(p.end_offset_for_epoch(0), (0, 3));
        fill(&p, 4, 3000);
        assert_eq!(p.end_offset_for_epoch(0), (0, 3), "epoch 2 begins at 3 now");
        assert_eq!(p.end_offset_for_epoch(2), (2, 7));
        assert_eq!(
            epochs_of(&p, 2),
            vec![(2, 0), (3, 2), (4, 2), (5, 2), (6, 2)]
        );
    }

    #[test]
    fn the_high_watermark_waits_for_durability_when_fsync_is_always() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = Partition::create(dir.path(), "t", 0, LogConfig::default(), false).expect("create");
        let a = p
            .append(data_batch(&[(None, b"v")], 1, None, false))
            .expect("append");
        assert_eq!((p.high_watermark(), a.end_offset), (0, 1));
        assert!(
            p.read(0, 1000, false).expect("read").records.is_empty(),
            "not readable before durable"
        );
        p.advance_high_watermark(a.end_offset);
        assert!(!p.read(0, 1000, false).expect("read").records.is_empty());
    }
}
