//! The offsets journal: the one durable file of a group coordinator shard,
//! `<data dir>/__groups/offsets.log` in single-node mode (format in
//! [`super::record`]). In cluster mode a shard's journal is a sequence of
//! generations `offsets-<g>.log` under `__groups/shard-<n>/`, sealed on each
//! open ([`Journal::open_sealed`]), and every write first checks the
//! shard's write gate ([`LeaseGate`]).
//!
//! Appends go to the end of the file under the coordinator's lock (a page
//! cache write); the caller makes them durable through the log's
//! [`GroupCommit`](crate::log::GroupCommit), so concurrent commits share
//! one fdatasync. [`Live`] is what replaying the file yields, kept up to
//! date on every append; it is what a compaction writes out. The file keeps
//! a zero-filled tail ahead of its end ([`crate::log::zero_tail`]) so a
//! commit's fdatasync does not also write the inode.
//!
//! Opening replays the file. A torn or corrupt frame ends the journal: the
//! file is truncated there (a crash mid-append leaves exactly that; zeros
//! after the last frame are the tail, cut quietly). A frame
//! of an unknown kind refuses the open instead, so a newer format is never
//! truncated away.
//!
//! Compaction rewrites the live state when the file has grown past
//! `compact_bytes` and holds four times more than the live records. It runs
//! in three steps so the lock is held only briefly: [`Journal::begin_compaction`]
//! snapshots the live records (appends made from then on are also kept
//! aside), [`write_snapshot`] writes and syncs a temporary file without the
//! lock, and [`Journal::finish_compaction`] appends what was kept aside,
//! syncs, renames over the journal and syncs the directory. Until the
//! rename, the old file keeps every record, so a crash at any step loses
//! nothing.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::os::unix::fs::FileExt;

pub use super::live::{Live, LiveGroup, OffsetKey};
use super::record::{FrameError, MAGIC, Record};
use crate::lease_gate::LeaseGate;
use crate::log::sync::sync_dir;
use crate::log::zero_tail::{CHUNK, ZeroTail};

/// Journal file name inside the coordinator's directory (single-node
/// mode).
pub const FILE: &str = "offsets.log";
/// Suffix of a compaction's temporary file (after the journal's name).
const COMPACT_SUFFIX: &str = ".compact";
#[cfg(test)]
const TMP: &str = "offsets.log.compact";
/// A sharded journal's generation files: `offsets-<generation>.log`.
const GENERATION_PREFIX: &str = "offsets-";
const GENERATION_SUFFIX: &str = ".log";
/// Suffix of a generation being written by a seal.
const SEAL_SUFFIX: &str = ".seal";

/// A compaction in progress: the snapshot to write and where.
#[derive(Debug)]
pub struct Compaction {
    pub tmp: PathBuf,
    pub snapshot: Vec<u8>,
}

/// The open journal.
pub struct Journal {
    dir: PathBuf,
    /// The journal's file name in `dir`.
    name: String,
    /// A compaction's temporary file name in `dir`.
    compact_tmp: String,
    /// Checked before every write.
    gate: LeaseGate,
    file: Arc<File>,
    len: u64,
    /// Zeros kept ahead of `len`.
    tail: ZeroTail,
    next_seq: u64,
    live: Live,
    /// Frames appended since a compaction began (None when none runs).
    aside: Option<Vec<u8>>,
    /// Set when a failed append could not be undone: the file's tail is
    /// unknown, so nothing more is appended.
    broken: Option<String>,
    /// Test builds: the next append fails as a failed write would
    /// ([`Journal::fail_next_append`]).
    fail_next: bool,
    compact_bytes: u64,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.dir)
            .field("name", &self.name)
            .field("len", &self.len)
            .field("next_seq", &self.next_seq)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

/// What opening found.
#[derive(Debug)]
pub struct Opened {
    pub journal: Journal,
    /// Bytes dropped from a torn tail (0 for a clean file).
    pub truncated: u64,
    pub records: u64,
}

/// Opened for positional writes (not O_APPEND: appends go to the logical
/// end, before the zero-filled tail).
fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// What replaying a journal's bytes yields (no file is changed).
struct Replayed {
    live: Live,
    next_seq: u64,
    records: u64,
    /// End of the last whole frame; 0 when the file has no magic yet (new,
    /// or torn while its magic was written).
    valid_end: usize,
    /// Bytes of a torn tail past `valid_end` (0 for zeros or a clean end).
    truncated: u64,
}

/// Replays `bytes` (the contents of `path`). Refuses a file that is not a
/// kaas offsets journal, a newer format version and unknown frame kinds.
fn replay(path: &Path, bytes: &[u8]) -> io::Result<Replayed> {
    let mut out = Replayed {
        live: Live::default(),
        next_seq: 1,
        records: 0,
        valid_end: 0,
        truncated: 0,
    };
    let Some(head) = bytes.get(..MAGIC.len()) else {
        if !bytes.is_empty() && !MAGIC.starts_with(bytes) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a kaas offsets journal", path.display()),
            ));
        }
        return Ok(out);
    };
    if head != MAGIC {
        let what = if head[..MAGIC.len() - 1] == MAGIC[..MAGIC.len() - 1] {
            format!(
                "format version {} (this kaas reads 1)",
                head[MAGIC.len() - 1]
            )
        } else {
            "no kaas offsets journal magic".to_string()
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        ));
    }
    let mut at = MAGIC.len();
    while let Some(rest) = bytes.get(at..).filter(|r| !r.is_empty()) {
        match Record::decode(rest) {
            Ok((rec, n)) => {
                out.live.apply(&rec, out.next_seq);
                out.next_seq += 1;
                out.records += 1;
                at += n;
            }
            Err(FrameError::Torn(why)) => {
                if rest.iter().all(|&b| b == 0) {
                    tracing::debug!(file = %path.display(), at, "offsets journal: cutting the zero-filled tail");
                } else {
                    out.truncated = rest.len() as u64;
                    tracing::warn!(
                        file = %path.display(),
                        at,
                        dropped = out.truncated,
                        reason = %why,
                        "offsets journal: truncating a torn tail"
                    );
                }
                break;
            }
            Err(e @ FrameError::Unknown(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} at byte {at}: {e}", path.display()),
                ));
            }
        }
    }
    out.valid_end = at;
    Ok(out)
}

/// The name of a sharded journal's generation `generation`.
pub fn generation_file(generation: u64) -> String {
    format!("{GENERATION_PREFIX}{generation}{GENERATION_SUFFIX}")
}

/// The generation a directory entry names, if it is a generation file.
fn generation_of(name: &str) -> Option<u64> {
    name.strip_prefix(GENERATION_PREFIX)?
        .strip_suffix(GENERATION_SUFFIX)?
        .parse()
        .ok()
}

/// The generation a leftover temporary file (a seal or a compaction that
/// never finished) belongs to.
fn leftover_generation(name: &str) -> Option<u64> {
    let base = name
        .strip_suffix(SEAL_SUFFIX)
        .or_else(|| name.strip_suffix(COMPACT_SUFFIX))?;
    generation_of(base)
}

/// The newest generation in `dir`, if any.
pub fn newest_generation(dir: &Path) -> io::Result<Option<u64>> {
    let mut newest = None;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(g) = entry.file_name().to_str().and_then(generation_of) {
            newest = newest.max(Some(g));
        }
    }
    Ok(newest)
}

pub use crate::lease_gate::always_open;

fn gate_closed(what: &str) -> io::Error {
    crate::lease_gate::closed(what)
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, replaying it.
    pub fn open(dir: &Path, compact_bytes: u64) -> io::Result<Opened> {
        Self::open_gated(dir, compact_bytes, always_open())
    }

    /// [`Self::open`], every write checking `gate` first.
    pub fn open_gated(dir: &Path, compact_bytes: u64, gate: LeaseGate) -> io::Result<Opened> {
        Self::open_file(dir, FILE, compact_bytes, gate)
    }

    /// Opens a sharded journal (cluster mode) and seals it against the
    /// broker that wrote it last: replays the newest generation as it is
    /// now, without changing it, writes that state as generation + 1
    /// (a temporary file, synced, renamed, directory synced), removes the
    /// older generations, and appends to the new one from then on. Every
    /// opener reads the newest generation only, so whatever a previous
    /// writer still appends to its (older) file is never seen. Every write
    /// checks `gate` first.
    pub fn open_sealed(dir: &Path, compact_bytes: u64, gate: LeaseGate) -> io::Result<Opened> {
        fs::create_dir_all(dir)?;
        let newest = newest_generation(dir)?;
        let (records, truncated, live) = match newest {
            Some(g) => {
                let path = dir.join(generation_file(g));
                let bytes = fs::read(&path)?;
                let r = replay(&path, &bytes)?;
                (r.records, r.truncated, r.live)
            }
            None => (0, 0, Live::default()),
        };
        let next = match newest {
            Some(g) => g.checked_add(1).ok_or_else(|| {
                io::Error::other(format!("{}: journal generations exhausted", dir.display()))
            })?,
            None => 1,
        };
        let name = generation_file(next);
        let tmp = dir.join(format!("{name}{SEAL_SUFFIX}"));
        if !gate() {
            return Err(gate_closed("sealing the offsets journal"));
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(&live.snapshot())?;
        f.sync_data()?;
        drop(f);
        if !gate() {
            let _ = fs::remove_file(&tmp);
            return Err(gate_closed("sealing the offsets journal"));
        }
        fs::rename(&tmp, dir.join(&name))?;
        sync_dir(dir)?;
        for entry in fs::read_dir(dir)?.flatten() {
            let Some(file) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let old = generation_of(&file).or_else(|| leftover_generation(&file));
            if old.is_some_and(|g| g < next)
                && let Err(e) = fs::remove_file(entry.path())
            {
                tracing::warn!(file = %entry.path().display(), error = %e, "removing an old offsets journal generation failed");
            }
        }
        tracing::info!(dir = %dir.display(), generation = next, sealed = ?newest, records, "offsets journal sealed");
        let mut opened = Self::open_file(dir, &name, compact_bytes, gate)?;
        opened.records = records;
        opened.truncated = truncated;
        Ok(opened)
    }

    fn open_file(
        dir: &Path,
        name: &str,
        compact_bytes: u64,
        gate: LeaseGate,
    ) -> io::Result<Opened> {
        fs::create_dir_all(dir)?;
        let compact_tmp = format!("{name}{COMPACT_SUFFIX}");
        let _ = fs::remove_file(dir.join(&compact_tmp));
        let path = dir.join(name);
        let mut file = open_rw(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let r = replay(&path, &bytes)?;
        let valid_end = if r.valid_end == 0 {
            // New, or torn while writing the magic: start over.
            if !gate() {
                return Err(gate_closed("creating the offsets journal"));
            }
            file.set_len(0)?;
            file.write_all_at(MAGIC, 0)?;
            file.sync_data()?;
            sync_dir(dir)?;
            MAGIC.len()
        } else {
            if r.valid_end < bytes.len() {
                file.set_len(r.valid_end as u64)?;
                file.sync_data()?;
            }
            r.valid_end
        };
        Ok(Opened {
            journal: Journal {
                dir: dir.to_path_buf(),
                name: name.to_string(),
                compact_tmp,
                gate,
                file: Arc::new(file),
                len: valid_end as u64,
                tail: ZeroTail::new(valid_end as u64, CHUNK),
                next_seq: r.next_seq,
                live: r.live,
                aside: None,
                broken: None,
                fail_next: false,
                compact_bytes,
            },
            truncated: r.truncated,
            records: r.records,
        })
    }

    /// The file appends go to (to sync it when the shard closes).
    pub fn file(&self) -> Arc<File> {
        self.file.clone()
    }

    pub fn live(&self) -> &Live {
        &self.live
    }

    /// Bytes in the journal file.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len <= MAGIC.len() as u64
    }

    /// Appends records (one write); returns the file to sync and each
    /// record's sequence number. The live state includes them at once.
    pub fn append(&mut self, records: &[Record]) -> io::Result<(Arc<File>, Vec<u64>)> {
        if let Some(why) = &self.broken {
            return Err(io::Error::other(format!(
                "the offsets journal stopped after a failed write: {why}"
            )));
        }
        if !(self.gate)() {
            return Err(gate_closed("appending to the offsets journal"));
        }
        if std::mem::take(&mut self.fail_next) {
            return Err(io::Error::other("injected offsets journal write failure"));
        }
        let mut buf = Vec::with_capacity(records.len() * 64);
        for r in records {
            r.encode_into(&mut buf);
        }
        if let Err(e) = self.file.write_all_at(&buf, self.len) {
            // Undo a partial write so later frames follow a valid one.
            if let Err(e2) = self.tail.trim(&self.file, self.len) {
                self.broken = Some(format!("{e}; truncating back failed: {e2}"));
            }
            return Err(e);
        }
        self.len += buf.len() as u64;
        if let Err(e) = self
            .tail
            .after_write(&self.file, self.len, buf.len() as u64)
        {
            tracing::warn!(error = %e, "zero-filling ahead of the offsets journal's end failed");
        }
        if let Some(aside) = &mut self.aside {
            aside.extend_from_slice(&buf);
        }
        let mut seqs = Vec::with_capacity(records.len());
        for r in records {
            self.live.apply(r, self.next_seq);
            seqs.push(self.next_seq);
            self.next_seq += 1;
        }
        Ok((self.file.clone(), seqs))
    }

    /// Makes the next append fail as a failed write does, nothing written
    /// (test builds: the records-first tests of the group coordinator).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn fail_next_append(&mut self) {
        self.fail_next = true;
    }

    /// Whether the file holds much more than the live state.
    pub fn compaction_due(&self) -> bool {
        self.aside.is_none()
            && self.broken.is_none()
            && self.len >= self.compact_bytes
            && self.len > 4 * (self.live.bytes + MAGIC.len() as u64)
    }

    /// Step 1: snapshot the live state; appends are kept aside from now on.
    pub fn begin_compaction(&mut self) -> Compaction {
        self.aside = Some(Vec::new());
        Compaction {
            tmp: self.dir.join(&self.compact_tmp),
            snapshot: self.live.snapshot(),
        }
    }

    /// Step 3: add what was appended meanwhile, sync, and swap the files.
    pub fn finish_compaction(&mut self, c: &Compaction, mut tmp: File) -> io::Result<()> {
        let aside = self.aside.take().unwrap_or_default();
        let path = self.dir.join(&self.name);
        let gate = self.gate.clone();
        let result = (|| {
            tmp.write_all(&aside)?;
            tmp.sync_data()?;
            drop(tmp);
            if !gate() {
                return Err(gate_closed("finishing a compaction"));
            }
            fs::rename(&c.tmp, &path)?;
            sync_dir(&self.dir)?;
            open_rw(&path)
        })();
        match result {
            Ok(file) => {
                let before = self.len;
                self.file = Arc::new(file);
                self.len = (c.snapshot.len() + aside.len()) as u64;
                self.tail = ZeroTail::new(self.len, CHUNK);
                tracing::info!(before, after = self.len, "offsets journal compacted");
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&c.tmp);
                Err(e)
            }
        }
    }

    /// Gives up a compaction (the old file still holds everything).
    pub fn abort_compaction(&mut self, c: &Compaction) {
        self.aside = None;
        let _ = fs::remove_file(&c.tmp);
    }
}

/// Step 2 (without the lock): writes and syncs the snapshot.
pub fn write_snapshot(c: &Compaction) -> io::Result<File> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&c.tmp)?;
    f.write_all(&c.snapshot)?;
    f.sync_data()?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::record::Committed;

    fn commit(group: &str, topic: &str, partition: i32, offset: i64) -> Record {
        Record::Commit {
            group: group.into(),
            topic: topic.into(),
            partition,
            committed: Committed {
                offset,
                leader_epoch: 0,
                metadata: format!("m{offset}"),
                commit_ms: offset,
                expire_ms: None,
            },
        }
    }

    fn offset_of(live: &Live, group: &str, topic: &str, partition: i32) -> Option<i64> {
        live.groups
            .get(group)
            .and_then(|g| g.offsets.get(&(topic.to_string(), partition)))
            .map(|(_, c)| c.offset)
    }

    #[test]
    fn replay_yields_the_last_record_per_key_and_honours_deletes() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let mut j = Journal::open(dir.path(), u64::MAX).expect("open").journal;
            j.append(&[commit("g", "t", 0, 1), commit("g", "t", 0, 5)])
                .expect("append");
            j.append(&[commit("g", "u", 1, 7), commit("h", "t", 0, 9)])
                .expect("append");
            j.append(&[Record::DeleteTopic { topic: "u".into() }])
                .expect("append");
            j.append(&[Record::DeleteGroup { group: "h".into() }])
                .expect("append");
        }
        let o = Journal::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(o.records, 6);
        assert_eq!(o.truncated, 0);
        let live = o.journal.live();
        assert_eq!(offset_of(live, "g", "t", 0), Some(5));
        assert_eq!(offset_of(live, "g", "u", 1), None);
        assert!(!live.groups.contains_key("h"));
    }

    #[test]
    fn the_zero_filled_tail_is_cut_quietly_and_every_frame_kept() {
        let dir = tempfile::tempdir().expect("tmp");
        let good = {
            let mut j = Journal::open(dir.path(), u64::MAX).expect("open").journal;
            j.append(&[commit("g", "t", 0, 1)]).expect("append");
            j.append(&[commit("g", "t", 1, 7)]).expect("append");
            j.len()
        };
        let path = dir.path().join(FILE);
        assert!(fs::metadata(&path).expect("meta").len() > good);
        let o = Journal::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!((o.records, o.truncated), (2, 0), "zeros are no torn tail");
        assert_eq!(fs::metadata(&path).expect("meta").len(), good);
        assert_eq!(offset_of(o.journal.live(), "g", "t", 1), Some(7));
    }

    #[test]
    fn a_torn_tail_is_truncated_and_appends_continue_after_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let good = {
            let mut j = Journal::open(dir.path(), u64::MAX).expect("open").journal;
            j.append(&[commit("g", "t", 0, 1)]).expect("append");
            j.len()
        };
        let path = dir.path().join(FILE);
        assert!(
            fs::metadata(&path).expect("meta").len() > good,
            "zeros follow the last frame"
        );
        // A crash mid-append: part of a frame over the zeros.
        let torn = commit("g", "t", 0, 2).encode();
        let f = OpenOptions::new().write(true).open(&path).expect("open");
        f.write_all_at(&torn[..torn.len() - 3], good)
            .expect("write");
        drop(f);
        {
            let o = Journal::open(dir.path(), u64::MAX).expect("reopen");
            assert!(o.truncated >= torn.len() as u64 - 3, "{}", o.truncated);
            assert_eq!(fs::metadata(&path).expect("meta").len(), good);
            let mut j = o.journal;
            j.append(&[commit("g", "t", 0, 3)]).expect("append");
        }
        let o = Journal::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(offset_of(o.journal.live(), "g", "t", 0), Some(3));
    }

    #[test]
    fn an_unknown_format_version_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(FILE);
        fs::write(&path, b"KAASGRP\x02rest").expect("write");
        let err = Journal::open(dir.path(), u64::MAX).expect_err("refused");
        assert!(err.to_string().contains("format version 2"), "{err}");
        assert_eq!(fs::read(&path).expect("read"), b"KAASGRP\x02rest");
    }

    #[test]
    fn compaction_keeps_the_live_state_and_what_was_appended_during_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut j = Journal::open(dir.path(), 1024).expect("open").journal;
        for i in 0..200 {
            j.append(&[commit("g", "t", i % 4, i64::from(i))])
                .expect("append");
        }
        assert!(j.compaction_due());
        let before = j.len();
        let c = j.begin_compaction();
        let tmp = write_snapshot(&c).expect("snapshot");
        // Appended between the snapshot and the swap.
        j.append(&[commit("g", "t", 9, 999)]).expect("append");
        j.finish_compaction(&c, tmp).expect("finish");
        assert!(j.len() < before / 4, "{} vs {before}", j.len());
        j.append(&[commit("g", "t", 10, 1000)]).expect("append");
        drop(j);
        let o = Journal::open(dir.path(), 1024).expect("reopen");
        let live = o.journal.live();
        for p in 0..4 {
            assert_eq!(offset_of(live, "g", "t", p), Some(196 + i64::from(p)));
        }
        assert_eq!(offset_of(live, "g", "t", 9), Some(999));
        assert_eq!(offset_of(live, "g", "t", 10), Some(1000));
        assert!(!dir.path().join(TMP).exists());
    }

    fn txn_commit(group: &str, pid: i64, partition: i32, offset: i64) -> Record {
        Record::TxnCommit {
            group: group.into(),
            producer_id: pid,
            producer_epoch: 0,
            topic: "t".into(),
            partition,
            committed: Committed {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_ms: offset,
                expire_ms: None,
            },
        }
    }

    fn txn_end(group: &str, pid: i64, commit: bool) -> Record {
        Record::TxnEnd {
            group: group.into(),
            producer_id: pid,
            commit,
        }
    }

    #[test]
    fn txn_offsets_stay_pending_until_their_end_and_a_later_plain_commit_wins() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut j = Journal::open(dir.path(), u64::MAX).expect("open").journal;
        j.append(&[txn_commit("g", 7, 0, 10), txn_commit("g", 8, 1, 11)])
            .expect("append");
        assert_eq!(offset_of(j.live(), "g", "t", 0), None);
        assert!(j.live().groups["g"].has_pending(&("t".into(), 0)));
        // A plain commit of partition 1 after pid 8's transactional one.
        j.append(&[commit("g", "t", 1, 50)]).expect("append");
        j.append(&[txn_end("g", 7, true), txn_end("g", 8, true)])
            .expect("append");
        assert_eq!(offset_of(j.live(), "g", "t", 0), Some(10));
        assert_eq!(offset_of(j.live(), "g", "t", 1), Some(50));
        j.append(&[txn_commit("g", 7, 0, 20), txn_end("g", 7, false)])
            .expect("append");
        assert_eq!(offset_of(j.live(), "g", "t", 0), Some(10));
        assert!(j.live().groups["g"].pending.is_empty());
        drop(j);
        let o = Journal::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(offset_of(o.journal.live(), "g", "t", 0), Some(10));
        assert_eq!(offset_of(o.journal.live(), "g", "t", 1), Some(50));
    }

    #[test]
    fn compaction_keeps_pending_txn_offsets_in_their_order() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut j = Journal::open(dir.path(), 1024).expect("open").journal;
        for i in 0..100 {
            j.append(&[commit("g", "t", 0, i)]).expect("append");
        }
        // Pending for partition 1, then a plain commit of partition 1 after it.
        j.append(&[txn_commit("g", 9, 1, 5), commit("g", "t", 1, 6)])
            .expect("append");
        // And pending for partition 2 after its plain commit.
        j.append(&[commit("g", "t", 2, 1), txn_commit("g", 9, 2, 2)])
            .expect("append");
        assert!(j.compaction_due());
        let c = j.begin_compaction();
        let tmp = write_snapshot(&c).expect("snapshot");
        j.finish_compaction(&c, tmp).expect("finish");
        drop(j);
        let mut j = Journal::open(dir.path(), 1024).expect("reopen").journal;
        assert!(j.live().groups["g"].has_pending(&("t".into(), 2)));
        j.append(&[txn_end("g", 9, true)]).expect("append");
        assert_eq!(offset_of(j.live(), "g", "t", 1), Some(6));
        assert_eq!(offset_of(j.live(), "g", "t", 2), Some(2));
        assert_eq!(offset_of(j.live(), "g", "t", 0), Some(99));
    }
}
