//! The durable transaction state log: every coordinator transition is one
//! framed [`StateRecord`] appended to `__transaction_state/state.log` and
//! made durable (group-committed by its own flusher) before
//! the machine applies it and anyone is answered.
//!
//! Frame: `u32 length | u32 crc32c(record) | record`. Opening replays every
//! frame (the latest record per transactional.id wins; a tombstone removes
//! it); a torn or corrupt tail is truncated. The log is compacted (one
//! record per live entry, written to a temp file, fsynced, renamed) when it
//! is opened and whenever it grows past a multiple of its live size.
//! Touches only its own directory.
//!
//! One exception to "durable before applied": the CompleteCommit /
//! CompleteAbort record ([`TxnStore::append_unsynced`]). Nobody waits for an
//! answer on it, and losing it in a crash leaves the PrepareCommit /
//! PrepareAbort record, whose markers are written again at load (a marker
//! written twice changes nothing). Its markers are either durable before it
//! is written (transactions with consumer offsets) or listed in it as
//! unsynced (`record::UnsyncedMarkers`), to be checked at load. The next
//! synced record of the log, which is the next transition of any entry,
//! makes it durable too. This takes the completion's fdatasync off the
//! path between a client's transactions.
//!
//! The file keeps a zero-filled tail ahead of its last frame
//! ([`crate::log::zero_tail`]) so an append's fdatasync does not also write
//! the inode; a zero length field ends the replay like the end of the file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::record::StateRecord;
use crate::lease_gate::LeaseGate;
use crate::log::GroupCommit;
use crate::log::zero_tail::{CHUNK, ZeroTail};

/// Compact when the file exceeds this many bytes and 4× the live size.
const COMPACT_MIN_BYTES: u64 = 8 << 20;

#[derive(Debug)]
struct Inner {
    file: Arc<File>,
    size: u64,
    tail: ZeroTail,
}

impl Inner {
    /// Writes a frame at the end (not synced).
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.size)?;
        self.size += bytes.len() as u64;
        // Without zeros ahead the next append only costs an inode write.
        if let Err(e) = self
            .tail
            .after_write(&self.file, self.size, bytes.len() as u64)
        {
            tracing::warn!(error = %e, "zero-filling ahead of the state log's end failed");
        }
        Ok(())
    }
}

/// The transaction state log.
pub struct TxnStore {
    /// The log file (`state.log`, or `state-<epoch>.log` for a shard).
    path: PathBuf,
    inner: Mutex<Inner>,
    group_commit: Arc<GroupCommit>,
    /// Cluster mode: whether this broker may still write the shard.
    gate: Option<LeaseGate>,
    /// Set when this broker stops coordinating the shard.
    retired: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for TxnStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The name of a shard's state log written under leader epoch `epoch`.
fn generation_file(epoch: i32) -> String {
    format!("state-{epoch}.log")
}

/// The epoch in a shard state log's file name.
fn generation_of(name: &str) -> Option<i32> {
    name.strip_prefix("state-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// The error a closed gate turns a write into.
fn gate_closed() -> io::Error {
    crate::lease_gate::closed("writing the transaction shard's state log")
}

fn frame(record: &StateRecord) -> Vec<u8> {
    let body = record.encode();
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads every intact frame; returns the records and the intact length.
fn replay(bytes: &[u8]) -> (Vec<StateRecord>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let len =
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        if len == 0 {
            break; // the zero-filled tail: no frame is empty
        }
        let crc = u32::from_be_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let Some(body) = bytes.get(at + 8..at + 8 + len) else {
            break;
        };
        if crc32c::crc32c(body) != crc {
            break;
        }
        match StateRecord::decode(body) {
            Ok(r) => records.push(r),
            Err(e) => {
                tracing::error!(offset = at, error = %e, "undecodable transaction state record; truncating here");
                break;
            }
        }
        at += 8 + len;
    }
    (records, at)
}

/// The latest record of every live transactional.id in a log's bytes.
fn live_records(bytes: &[u8]) -> Vec<StateRecord> {
    let (records, intact) = replay(bytes);
    if bytes[intact..].iter().any(|&b| b != 0) {
        tracing::warn!(
            kept = intact,
            dropped = bytes.len() - intact,
            "truncating a torn transaction state log tail"
        );
    }
    let mut latest: BTreeMap<String, StateRecord> = BTreeMap::new();
    for r in records {
        match &r {
            StateRecord::Tombstone { transactional_id } => {
                latest.remove(transactional_id);
            }
            StateRecord::Upsert { .. } => {
                latest.insert(r.transactional_id().to_owned(), r);
            }
        }
    }
    latest.into_values().collect()
}

fn read_all(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(bytes)
}

impl TxnStore {
    /// Opens (or creates) the log under `data_dir`, returning the store and
    /// the latest record of every live transactional.id.
    pub fn open(data_dir: &Path) -> io::Result<(Self, Vec<StateRecord>)> {
        let dir = data_dir.join("__transaction_state");
        fs::create_dir_all(&dir)?;
        let path = dir.join("state.log");
        let live = live_records(&read_all(&path)?);
        // The state log is always fsynced, whatever the data logs' mode,
        // and by its own flusher: queued behind a round of partition files
        // (a transaction's markers, other producers' data), a coordinator
        // write would wait for flushes it does not need (BENCHMARKS.md,
        // "Transactions": +30–50% for 8 producers on 8 partitions).
        Self::compacted(
            path,
            live,
            None,
            GroupCommit::new(crate::log::FsyncMode::Always),
        )
    }

    /// Cluster mode: opens the state log of one coordinator shard, in
    /// `shard_dir` on the shared volume, as its leader at `epoch`.
    ///
    /// Each leader writes a file of its own, named by its epoch: this one
    /// reads the newest earlier file, writes its live records to
    /// `state-<epoch>.log` (synced, then renamed into place, then the
    /// directory synced) and removes the older files. A file with a higher
    /// epoch than another seals it: nobody reads the older one again, so
    /// what a paused former leader appends to its own file after this
    /// takeover is never seen. A file for `epoch` or a later one existing
    /// already is an error (epochs are handed out once, by etcd).
    /// The shards of one broker share `group_commit` (always fsynced).
    pub fn open_shard(
        shard_dir: &Path,
        epoch: i32,
        gate: LeaseGate,
        group_commit: Arc<GroupCommit>,
    ) -> io::Result<(Self, Vec<StateRecord>)> {
        fs::create_dir_all(shard_dir)?;
        let mut generations: Vec<(i32, PathBuf)> = fs::read_dir(shard_dir)?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                generation_of(&name).map(|g| (g, e.path()))
            })
            .collect();
        generations.sort();
        if let Some((newest, _)) = generations.last()
            && *newest >= epoch
        {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} holds a state log of epoch {newest}, not older than this leader's {epoch}",
                    shard_dir.display()
                ),
            ));
        }
        let live = match generations.last() {
            Some((_, path)) => live_records(&read_all(path)?),
            None => Vec::new(),
        };
        if !gate() {
            return Err(gate_closed());
        }
        let opened = Self::compacted(
            shard_dir.join(generation_file(epoch)),
            live,
            Some(gate),
            group_commit,
        )?;
        File::open(shard_dir)?.sync_all()?;
        for (_, old) in generations {
            if let Err(e) = fs::remove_file(&old) {
                tracing::warn!(file = %old.display(), error = %e, "removing an old transaction state log failed");
            }
        }
        Ok(opened)
    }

    /// Writes `live` as the whole log at `path` and opens it for appends.
    fn compacted(
        path: PathBuf,
        live: Vec<StateRecord>,
        gate: Option<LeaseGate>,
        group_commit: Arc<GroupCommit>,
    ) -> io::Result<(Self, Vec<StateRecord>)> {
        // Compact on open: the file holds exactly the live records afterwards.
        let mut compacted = Vec::new();
        for r in &live {
            compacted.extend_from_slice(&frame(r));
        }
        crate::log::atomic_file::write_atomically(&path, &compacted)?;
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let store = TxnStore {
            path,
            gate,
            retired: std::sync::atomic::AtomicBool::new(false),
            inner: Mutex::new(Inner {
                file: Arc::new(file),
                size: compacted.len() as u64,
                tail: ZeroTail::new(compacted.len() as u64, CHUNK),
            }),
            group_commit,
        };
        Ok((store, live))
    }

    /// The state log's flusher.
    pub fn group_commit(&self) -> &Arc<GroupCommit> {
        &self.group_commit
    }

    /// fdatasync statistics of the state log (for /metrics).
    pub fn sync_stats(&self) -> &Arc<crate::log::sync::SyncStats> {
        self.group_commit.stats()
    }

    /// Appends a record and returns once it is durable.
    pub async fn append(&self, record: &StateRecord) -> io::Result<()> {
        let bytes = frame(record);
        let file = {
            let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            self.check_gate()?;
            st.write(&bytes)?;
            st.file.clone()
        };
        self.group_commit.sync(file).await?;
        // Durable while the lease held, or maybe not before another
        // broker read the file: then it must not be answered.
        self.check_gate()
    }

    /// Every later write fails (the shard moved to another broker).
    pub fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`Self::retire`] was called.
    pub fn is_retired(&self) -> bool {
        self.retired.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Err when this broker no longer coordinates the shard.
    fn check_gate(&self) -> io::Result<()> {
        if self.is_retired() {
            return Err(gate_closed());
        }
        match &self.gate {
            Some(g) if !g() => Err(gate_closed()),
            _ => Ok(()),
        }
    }

    /// Appends a record without waiting for it to be durable (see the
    /// module docs for the one record this is for).
    pub fn append_unsynced(&self, record: &StateRecord) -> io::Result<()> {
        let bytes = frame(record);
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.check_gate()?;
        st.write(&bytes)
    }

    /// Whether the log is big enough that compaction may pay off; cheap, so
    /// callers ask before gathering the live records.
    pub fn compaction_worth_checking(&self) -> bool {
        self.size() >= COMPACT_MIN_BYTES
    }

    /// Rewrites the log with only `live` records when it has outgrown them.
    pub fn maybe_compact(&self, live: &[StateRecord]) -> io::Result<bool> {
        let bytes: Vec<u8> = live.iter().flat_map(frame).collect();
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if st.size < COMPACT_MIN_BYTES || st.size < 4 * (bytes.len() as u64).max(1) {
            return Ok(false);
        }
        self.check_gate()?;
        crate::log::atomic_file::write_atomically(&self.path, &bytes)?;
        st.file = Arc::new(OpenOptions::new().read(true).write(true).open(&self.path)?);
        st.size = bytes.len() as u64;
        st.tail = ZeroTail::new(st.size, CHUNK);
        Ok(true)
    }

    /// Bytes in the log file.
    pub fn size(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).size
    }
}

/// The coordinator's port onto this store.
impl super::port::StateLog for TxnStore {
    fn append<'a>(&'a self, record: &'a StateRecord) -> super::port::BoxFuture<'a, io::Result<()>> {
        Box::pin(TxnStore::append(self, record))
    }

    fn append_unsynced(&self, record: &StateRecord) -> io::Result<()> {
        TxnStore::append_unsynced(self, record)
    }

    fn retire(&self) {
        TxnStore::retire(self);
    }

    fn is_retired(&self) -> bool {
        TxnStore::is_retired(self)
    }

    fn compaction_worth_checking(&self) -> bool {
        TxnStore::compaction_worth_checking(self)
    }

    fn maybe_compact(&self, live: &[StateRecord]) -> io::Result<bool> {
        TxnStore::maybe_compact(self, live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Entry, TxnState};

    fn entry(id: &str, epoch: i16) -> Entry {
        Entry {
            transactional_id: id.into(),
            producer_id: 7,
            producer_epoch: epoch,
            last_producer_id: 7,
            last_producer_epoch: epoch - 1,
            state: TxnState::Empty,
            partitions: vec![],
            timeout_ms: 60_000,
            start_timestamp_ms: -1,
            last_update_timestamp_ms: 1,
            next_producer_id: -1,
            client_transaction_version: 0,
            has_failed_epoch_fence: false,
        }
    }

    #[tokio::test]
    async fn records_survive_reopen_and_the_latest_per_id_wins() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let (store, live) = TxnStore::open(dir.path()).expect("open");
            assert!(live.is_empty());
            for e in 0..5 {
                store
                    .append(&StateRecord::upsert(&entry("a", e), Some("p")))
                    .await
                    .expect("append");
            }
            store
                .append(&StateRecord::upsert(&entry("b", 1), None))
                .await
                .expect("append");
            store
                .append(&StateRecord::Tombstone {
                    transactional_id: "b".into(),
                })
                .await
                .expect("append");
        }
        let (_, live) = TxnStore::open(dir.path()).expect("reopen");
        assert_eq!(live.len(), 1);
        let StateRecord::Upsert { entry: e, .. } = &live[0] else {
            panic!("an upsert")
        };
        assert_eq!(
            (
                e.transactional_id.as_str(),
                e.producer_epoch,
                e.last_producer_epoch
            ),
            ("a", 4, 3)
        );
    }

    #[tokio::test]
    async fn a_torn_tail_is_dropped_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("tmp");
        let end = {
            let (store, _) = TxnStore::open(dir.path()).expect("open");
            store
                .append(&StateRecord::upsert(&entry("a", 1), None))
                .await
                .expect("append");
            store
                .append(&StateRecord::upsert(&entry("a", 2), None))
                .await
                .expect("append");
            store.size() as usize
        };
        let path = dir.path().join("__transaction_state/state.log");
        let mut bytes = fs::read(&path).expect("read");
        assert!(
            bytes.len() > end && bytes[end..].iter().all(|&b| b == 0),
            "zeros follow the last frame"
        );
        bytes.truncate(end - 5);
        fs::write(&path, &bytes).expect("write");
        let (_, live) = TxnStore::open(dir.path()).expect("reopen");
        let StateRecord::Upsert { entry: e, .. } = &live[0] else {
            panic!("an upsert")
        };
        assert_eq!(
            e.producer_epoch, 1,
            "the torn second record is gone, the first kept"
        );
    }

    fn open_gate() -> LeaseGate {
        Arc::new(|| true)
    }

    fn flusher() -> Arc<GroupCommit> {
        GroupCommit::new(crate::log::FsyncMode::Always)
    }

    fn epoch_of(live: &[StateRecord], id: &str) -> Option<i16> {
        live.iter().find_map(|r| match r {
            StateRecord::Upsert { entry, .. } if entry.transactional_id == id => {
                Some(entry.producer_epoch)
            }
            _ => None,
        })
    }

    #[tokio::test]
    async fn a_former_leaders_appends_after_a_takeover_are_never_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let shard = dir.path().join("shard-3");
        let (zombie, _) = TxnStore::open_shard(&shard, 0, open_gate(), flusher()).expect("open 0");
        zombie
            .append(&StateRecord::upsert(&entry("a", 1), None))
            .await
            .expect("append");
        let (next, live) = TxnStore::open_shard(&shard, 1, open_gate(), flusher()).expect("open 1");
        assert_eq!(
            epoch_of(&live, "a"),
            Some(1),
            "the takeover reads what was durable"
        );
        // The paused former leader wakes up and writes on.
        zombie
            .append(&StateRecord::upsert(&entry("a", 7), None))
            .await
            .expect("the zombie's own file still takes bytes");
        zombie
            .append(&StateRecord::upsert(&entry("z", 1), None))
            .await
            .expect("append");
        next.append(&StateRecord::upsert(&entry("a", 2), None))
            .await
            .expect("append");
        let (_, live) = TxnStore::open_shard(&shard, 2, open_gate(), flusher()).expect("open 2");
        assert_eq!(epoch_of(&live, "a"), Some(2));
        assert_eq!(
            epoch_of(&live, "z"),
            None,
            "the zombie's late record is not read"
        );
    }

    #[tokio::test]
    async fn a_shard_log_is_not_opened_at_an_epoch_it_already_has() {
        let dir = tempfile::tempdir().expect("tmp");
        let shard = dir.path().join("shard-0");
        drop(TxnStore::open_shard(&shard, 4, open_gate(), flusher()).expect("open 4"));
        let err = TxnStore::open_shard(&shard, 4, open_gate(), flusher()).expect_err("same epoch");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(TxnStore::open_shard(&shard, 3, open_gate(), flusher()).is_err());
    }

    #[tokio::test]
    async fn a_closed_gate_refuses_the_append_and_its_answer() {
        let dir = tempfile::tempdir().expect("tmp");
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = open.clone();
        let gate: LeaseGate = Arc::new(move || flag.load(std::sync::atomic::Ordering::SeqCst));
        let (store, _) =
            TxnStore::open_shard(&dir.path().join("s"), 0, gate, flusher()).expect("open");
        store
            .append(&StateRecord::upsert(&entry("a", 1), None))
            .await
            .expect("open gate");
        open.store(false, std::sync::atomic::Ordering::SeqCst);
        let err = store
            .append(&StateRecord::upsert(&entry("a", 2), None))
            .await
            .expect_err("closed gate");
        assert!(crate::lease_gate::is_closed(&err), "{err}");
        open.store(true, std::sync::atomic::Ordering::SeqCst);
        store.retire();
        assert!(
            store
                .append(&StateRecord::upsert(&entry("a", 3), None))
                .await
                .is_err()
        );
    }
}
