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
#[derive(Debug)]
pub struct TxnStore {
    dir: PathBuf,
    inner: Mutex<Inner>,
    group_commit: Arc<GroupCommit>,
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

impl TxnStore {
    /// Opens (or creates) the log under `data_dir`, returning the store and
    /// the latest record of every live transactional.id.
    pub fn open(data_dir: &Path) -> io::Result<(Self, Vec<StateRecord>)> {
        let dir = data_dir.join("__transaction_state");
        fs::create_dir_all(&dir)?;
        let path = dir.join("state.log");
        let mut bytes = Vec::new();
        if let Ok(mut f) = File::open(&path) {
            f.read_to_end(&mut bytes)?;
        }
        let (records, intact) = replay(&bytes);
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
        let live: Vec<StateRecord> = latest.into_values().collect();
        // Compact on open: the file holds exactly the live records afterwards.
        let mut compacted = Vec::new();
        for r in &live {
            compacted.extend_from_slice(&frame(r));
        }
        crate::log::partition::write_atomically(&path, &compacted)?;
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        // The state log is always fsynced, whatever the data logs' mode,
        // and by its own flusher: queued behind a round of partition files
        // (a transaction's markers, other producers' data), a coordinator
        // write would wait for flushes it does not need (BENCHMARKS.md,
        // "Transactions": +30–50% for 8 producers on 8 partitions).
        let group_commit = GroupCommit::new(crate::log::FsyncMode::Always);
        let store = TxnStore {
            dir,
            inner: Mutex::new(Inner {
                file: Arc::new(file),
                size: compacted.len() as u64,
                tail: ZeroTail::new(compacted.len() as u64, CHUNK),
            }),
            group_commit,
        };
        Ok((store, live))
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
            st.write(&bytes)?;
            st.file.clone()
        };
        self.group_commit.sync(file).await
    }

    /// Appends a record without waiting for it to be durable (see the
    /// module docs for the one record this is for).
    pub fn append_unsynced(&self, record: &StateRecord) -> io::Result<()> {
        let bytes = frame(record);
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
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
        let path = self.dir.join("state.log");
        crate::log::partition::write_atomically(&path, &bytes)?;
        st.file = Arc::new(OpenOptions::new().read(true).write(true).open(&path)?);
        st.size = bytes.len() as u64;
        st.tail = ZeroTail::new(st.size, CHUNK);
        Ok(true)
    }

    /// Bytes in the log file.
    pub fn size(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).size
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
}
