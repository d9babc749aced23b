//! Producer ids bound to principals (beyond Kafka).
//!
//! Kafka authorizes a produce by its topic (and transactional id) alone: a
//! principal allowed to write a topic may send batches under any producer
//! id and epoch it can guess, and so poison or reorder another principal's
//! idempotent or transactional sequence. kaas binds every producer id it
//! hands out (InitProducerId, idempotent or transactional) to the session's
//! principal, durably, before the answer leaves; Produce and the
//! transaction APIs then refuse a producer id bound to someone else (or
//! issued but bound to no one).
//!
//! Storage: an append-only file `pid-owners.log` in this broker's own
//! directory (`__security/` of the data dir; in cluster mode
//! `__cluster/node-<id>/__security/` on the shared volume), one record per
//! binding, fsynced before InitProducerId answers, replayed at start (a torn
//! tail record, never acknowledged, is cut off), and rewritten with only the
//! live bindings when it grows past twice their size. Cluster mode: a
//! producer id another broker handed out is looked up in that broker's
//! file, read incrementally on a miss (coalesced, at most once per
//! [`REFRESH_EVERY`]).
//!
//! Memory is bounded: at most `max_entries` bindings are kept; past it the
//! least recently used sixteenth is dropped, and their producers get the
//! "not yours" answer and re-initialise (a fresh id, bound again).
//!
//! Touches only its own files; knows nothing of how principals are
//! established.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::session::Principal;

/// The binding file's name in its directory.
pub const FILE: &str = "pid-owners.log";
/// The directory (under a broker's own directory) holding [`FILE`].
pub const DIR: &str = "__security";
/// Default of the binding cap (about 64 bytes each in memory).
pub const DEFAULT_MAX_ENTRIES: usize = 1_000_000;
/// Cluster mode: the least time between two reads of the other brokers'
/// files.
pub const REFRESH_EVERY: Duration = Duration::from_millis(20);
/// The file is compacted only past this size.
const COMPACT_MIN_BYTES: u64 = 1 << 20;
/// Record format version (first byte of a record's body).
const VERSION: u8 = 1;
/// Longest principal text a record holds.
const MAX_PRINCIPAL_BYTES: usize = 4096;

/// Whose a producer id is, for a principal asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Bound to the asking principal.
    Mine,
    /// Bound to another principal.
    Other,
    /// Bound to no one known (yet).
    Unbound,
}

#[derive(Debug)]
struct Entry {
    epoch: i16,
    principal: Arc<Principal>,
    /// Written by this broker (kept by compaction).
    own: bool,
    /// Recency for eviction: the use counter at the last bind or lookup.
    used: AtomicU64,
}

#[derive(Debug, Default)]
struct Bindings {
    by_pid: BTreeMap<i64, Entry>,
    interned: HashMap<Principal, Arc<Principal>>,
}

impl Bindings {
    fn intern(&mut self, p: &Principal) -> Arc<Principal> {
        if let Some(a) = self.interned.get(p) {
            return a.clone();
        }
        let a = Arc::new(p.clone());
        self.interned.insert(p.clone(), a.clone());
        a
    }

    /// Records a binding: this broker's own always wins (it is the newest
    /// for its id); another broker's only with a higher epoch than known.
    fn apply(&mut self, pid: i64, epoch: i16, principal: &Principal, own: bool, used: u64) -> bool {
        if !own
            && let Some(e) = self.by_pid.get(&pid)
            && e.epoch >= epoch
        {
            return false;
        }
        let principal = self.intern(principal);
        self.by_pid.insert(
            pid,
            Entry {
                epoch,
                principal,
                own,
                used: AtomicU64::new(used),
            },
        );
        true
    }

    /// Drops the least recently used sixteenth when over `max`; how many.
    fn evict(&mut self, max: usize) -> usize {
        if self.by_pid.len() <= max {
            return 0;
        }
        let drop_n = (self.by_pid.len() - max).max(max / 16).max(1);
        let mut ages: Vec<(u64, i64)> = self
            .by_pid
            .iter()
            .map(|(pid, e)| (e.used.load(Ordering::Relaxed), *pid))
            .collect();
        let n = drop_n.min(ages.len());
        if n < ages.len() {
            ages.select_nth_unstable(n);
        }
        for (_, pid) in ages.iter().take(n) {
            self.by_pid.remove(pid);
        }
        let live: std::collections::HashSet<&Principal> =
            self.by_pid.values().map(|e| &*e.principal).collect();
        self.interned.retain(|p, _| live.contains(p));
        n
    }
}

/// One record: `[u32 body length][u32 crc32c of body][body]`, body =
/// `[u8 version][i64 pid][i16 epoch][principal as Type:name UTF-8]`.
fn encode(pid: i64, epoch: i16, principal: &Principal, out: &mut Vec<u8>) {
    let text = principal.to_string();
    let mut body = Vec::with_capacity(11 + text.len());
    body.push(VERSION);
    body.extend_from_slice(&pid.to_be_bytes());
    body.extend_from_slice(&epoch.to_be_bytes());
    body.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
}

/// The valid records at the start of `buf` and the length they span (a
/// torn or corrupt record ends the scan).
fn decode_all(buf: &[u8]) -> (Vec<(i64, i16, Principal)>, usize) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some((rec, len)) = buf.get(at..).and_then(decode_one) {
        out.push(rec);
        at += len;
    }
    (out, at)
}

/// The record at the start of `buf` and its length, if it is whole and
/// valid.
fn decode_one(buf: &[u8]) -> Option<((i64, i16, Principal), usize)> {
    let len = u32::from_be_bytes(buf.get(0..4)?.try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(buf.get(4..8)?.try_into().ok()?);
    if !(11..=11 + MAX_PRINCIPAL_BYTES).contains(&len) {
        return None;
    }
    let body = buf.get(8..8 + len)?;
    if crc32c::crc32c(body) != crc || body.first() != Some(&VERSION) {
        return None;
    }
    let pid = i64::from_be_bytes(body.get(1..9)?.try_into().ok()?);
    let epoch = i16::from_be_bytes(body.get(9..11)?.try_into().ok()?);
    let principal = Principal::parse(std::str::from_utf8(body.get(11..)?).ok()?)?;
    Some(((pid, epoch, principal), 8 + len))
}

#[derive(Debug)]
struct Writer {
    file: File,
    /// Bytes in the file.
    len: u64,
}

/// Cluster mode: the other brokers' binding files, read incrementally.
#[derive(Debug)]
struct Peers {
    /// `__cluster` of the shared volume (node directories under it).
    root: PathBuf,
    /// This broker's node directory name (`node-<id>`), skipped.
    own: String,
    state: tokio::sync::Mutex<PeerState>,
}

#[derive(Debug, Default)]
struct PeerState {
    /// Per file: (inode, bytes of valid records read so far).
    files: HashMap<PathBuf, (u64, u64)>,
    /// When the last refresh began.
    last: Option<Instant>,
}

/// The producer-id bindings of one broker (see the module docs).
#[derive(Debug)]
pub struct PidOwners {
    path: PathBuf,
    max_entries: usize,
    writer: Mutex<Writer>,
    map: RwLock<Bindings>,
    /// Counts binds: the recency of a binding's last use.
    clock: AtomicU64,
    /// The file is compacted only past this size.
    compact_min: u64,
    peers: Option<Peers>,
}

impl PidOwners {
    /// Opens (or creates) the binding file in `dir`, replaying it.
    /// `cluster`: (the shared `__cluster` directory, this broker's node
    /// directory name), to look up ids other brokers handed out.
    pub fn open(
        dir: &Path,
        cluster: Option<(PathBuf, String)>,
        max_entries: usize,
    ) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        if !existed {
            file.sync_all()?;
            crate::log::sync::sync_dir(dir)?;
        }
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        let (records, valid) = decode_all(&buf);
        if valid < buf.len() {
            tracing::warn!(
                file = %path.display(),
                cut = buf.len() - valid,
                "cutting a torn record off the producer-id bindings"
            );
            file.set_len(valid as u64)?;
            file.sync_all()?;
        }
        let mut map = Bindings::default();
        let clock = records.len() as u64;
        for (i, (pid, epoch, principal)) in records.iter().enumerate() {
            map.apply(*pid, *epoch, principal, true, i as u64);
        }
        map.evict(max_entries.max(1));
        file.seek(SeekFrom::End(0))?;
        let peers = cluster.map(|(root, own)| Peers {
            root,
            own,
            state: tokio::sync::Mutex::new(PeerState::default()),
        });
        Ok(PidOwners {
            path,
            max_entries: max_entries.max(1),
            writer: Mutex::new(Writer {
                file,
                len: valid as u64,
            }),
            map: RwLock::new(map),
            clock: AtomicU64::new(clock),
            compact_min: COMPACT_MIN_BYTES,
            peers,
        })
    }

    /// Bindings held in memory.
    pub fn len(&self) -> usize {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .by_pid
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Binds `pid` (at `epoch`) to `principal`, durably (blocking: write
    /// and fsync; run it off the async runtime). A re-bind moves the id.
    pub fn bind(&self, pid: i64, epoch: i16, principal: &Principal) -> io::Result<()> {
        let mut rec = Vec::new();
        encode(pid, epoch, principal, &mut rec);
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.file.write_all(&rec)?;
        w.file.sync_data()?;
        w.len += rec.len() as u64;
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let evicted = {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            map.apply(pid, epoch, principal, true, used);
            map.evict(self.max_entries)
        };
        if evicted > 0 {
            tracing::info!(
                evicted,
                max = self.max_entries,
                "dropped the least recently used producer-id bindings"
            );
        }
        self.maybe_compact(&mut w)
    }

    /// Rewrites the file with only the own live bindings when it holds
    /// more than twice their size.
    fn maybe_compact(&self, w: &mut Writer) -> io::Result<()> {
        if w.len < self.compact_min {
            return Ok(());
        }
        let mut out = Vec::new();
        {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            for (pid, e) in map.by_pid.iter().filter(|(_, e)| e.own) {
                encode(*pid, e.epoch, &e.principal, &mut out);
            }
        }
        if (out.len() as u64).saturating_mul(2) > w.len {
            return Ok(());
        }
        let tmp = self.path.with_extension("compact");
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&out)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            crate::log::sync::sync_dir(dir)?;
        }
        let mut file = OpenOptions::new().append(true).open(&self.path)?;
        file.seek(SeekFrom::End(0))?;
        tracing::debug!(
            from = w.len,
            to = out.len(),
            "compacted the producer-id bindings"
        );
        *w = Writer {
            file,
            len: out.len() as u64,
        };
        Ok(())
    }

    /// Whose `pid` is, for `principal` (no I/O).
    pub fn owner(&self, pid: i64, principal: &Principal) -> Owner {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        match map.by_pid.get(&pid) {
            None => Owner::Unbound,
            Some(e) => {
                e.used
                    .store(self.clock.load(Ordering::Relaxed), Ordering::Relaxed);
                if *e.principal == *principal {
                    Owner::Mine
                } else {
                    Owner::Other
                }
            }
        }
    }

    /// Cluster mode: when any of `pids` is not known bound to `principal`
    /// (unknown here, or bound to another principal by what may be an
    /// outdated binding: another broker may have re-initialised it since),
    /// reads what the other brokers bound since the last read (one read
    /// serves every caller that missed before it began; at most one per
    /// [`REFRESH_EVERY`]). Single-node mode: nothing to read.
    pub async fn refresh_on_miss(&self, pids: &[i64], principal: &Principal) {
        let Some(peers) = &self.peers else {
            return;
        };
        let missing = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            pids.iter()
                .any(|p| map.by_pid.get(p).is_none_or(|e| *e.principal != *principal))
        };
        if !missing {
            return;
        }
        let asked = Instant::now();
        let mut st = peers.state.lock().await;
        if st.last.is_some_and(|l| l >= asked) {
            return; // a read that began after the miss has finished
        }
        if let Some(l) = st.last {
            let next = l + REFRESH_EVERY;
            let now = Instant::now();
            if next > now {
                tokio::time::sleep(next - now).await;
            }
        }
        st.last = Some(Instant::now());
        if let Err(e) = self.read_peers(peers, &mut st) {
            static FAILED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();
            if let Some(suppressed) = FAILED.allow() {
                tracing::warn!(error = %e, suppressed, "cannot read other brokers' producer-id bindings");
            }
        }
    }

    /// Reads the new records of every other broker's file.
    fn read_peers(&self, peers: &Peers, st: &mut PeerState) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let entries = match fs::read_dir(&peers.root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut applied = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            // Node directories only (the shared directory holds others).
            if name == peers.own.as_str()
                || !name.starts_with("node-")
                || !entry.file_type()?.is_dir()
            {
                continue;
            }
            let path = entry.path().join(DIR).join(FILE);
            let mut f = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let meta = f.metadata()?;
            let (ino, mut from) = st.files.get(&path).copied().unwrap_or((meta.ino(), 0));
            // Compacted (a new file) or cut: read it again from the start.
            if ino != meta.ino() || meta.len() < from {
                from = 0;
            }
            if meta.len() == from {
                st.files.insert(path, (meta.ino(), from));
                continue;
            }
            f.seek(SeekFrom::Start(from))?;
            let mut buf = Vec::new();
            f.take(meta.len() - from).read_to_end(&mut buf)?;
            let (records, valid) = decode_all(&buf);
            applied.extend(records);
            st.files.insert(path, (meta.ino(), from + valid as u64));
        }
        if !applied.is_empty() {
            let used = self.clock.fetch_add(1, Ordering::Relaxed);
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            for (pid, epoch, principal) in &applied {
                map.apply(*pid, *epoch, principal, false, used);
            }
            map.evict(self.max_entries);
        }
        Ok(())
    }
}

/// Audits a refused use of a producer id (rate-limited).
pub fn audit_refusal(principal: &Principal, api: &str, producer_id: i64, owner: Owner) {
    static REFUSED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();
    if let Some(suppressed) = REFUSED.allow() {
        tracing::info!(target: "kaas::audit", %principal, api, producer_id, ?owner, suppressed, "denied: the producer id is not bound to this principal");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_survive_reopening_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().expect("tmp");
        let alice = Principal::user("alice");
        let bob = Principal::user("bob");
        {
            let o = PidOwners::open(dir.path(), None, 100).expect("open");
            o.bind(1, 0, &alice).expect("bind");
            o.bind(2, 0, &bob).expect("bind");
            o.bind(1, 1, &bob).expect("rebind moves the id");
        }
        // A torn record at the end, as a crash mid-write leaves it.
        let path = dir.path().join(FILE);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(&[0, 0, 0, 40, 1, 2]).expect("write");
        drop(f);
        let o = PidOwners::open(dir.path(), None, 100).expect("reopen");
        assert_eq!(o.owner(1, &bob), Owner::Mine);
        assert_eq!(o.owner(1, &alice), Owner::Other);
        assert_eq!(o.owner(2, &bob), Owner::Mine);
        assert_eq!(o.owner(3, &bob), Owner::Unbound);
        o.bind(3, 0, &alice).expect("append after the cut");
        drop(o);
        let o = PidOwners::open(dir.path(), None, 100).expect("reopen");
        assert_eq!(o.owner(3, &alice), Owner::Mine);
    }

    #[test]
    fn memory_stays_under_the_cap() {
        let dir = tempfile::tempdir().expect("tmp");
        let alice = Principal::user("alice");
        let o = PidOwners::open(dir.path(), None, 64).expect("open");
        for pid in 0..300 {
            o.bind(pid, 0, &alice).expect("bind");
            assert!(o.len() <= 64, "{} bindings", o.len());
        }
        assert_eq!(o.owner(299, &alice), Owner::Mine, "the newest is kept");
        assert_eq!(o.owner(0, &alice), Owner::Unbound, "the oldest went");
    }

    #[test]
    fn the_file_is_compacted_to_the_live_bindings() {
        let dir = tempfile::tempdir().expect("tmp");
        let alice = Principal::user("alice");
        let mut o = PidOwners::open(dir.path(), None, 100).expect("open");
        o.compact_min = 1024;
        // One id re-bound over and over: the file would grow without end.
        for epoch in 0..200i16 {
            o.bind(7, epoch, &alice).expect("bind");
        }
        let len = fs::metadata(dir.path().join(FILE)).expect("stat").len();
        assert!(len <= 1024 + 64, "{len} bytes");
        drop(o);
        let o = PidOwners::open(dir.path(), None, 100).expect("reopen");
        assert_eq!(o.owner(7, &alice), Owner::Mine);
    }

    #[tokio::test]
    async fn an_id_another_broker_bound_is_found_on_a_miss() {
        let root = tempfile::tempdir().expect("tmp");
        let a_dir = root.path().join("node-1").join(DIR);
        let b_dir = root.path().join("node-2").join(DIR);
        let cluster = |own: &str| Some((root.path().to_path_buf(), own.to_string()));
        let a = PidOwners::open(&a_dir, cluster("node-1"), 100).expect("a");
        let b = PidOwners::open(&b_dir, cluster("node-2"), 100).expect("b");
        let alice = Principal::user("alice");
        a.bind(5000, 0, &alice).expect("bind");
        assert_eq!(b.owner(5000, &alice), Owner::Unbound);
        b.refresh_on_miss(&[5000], &alice).await;
        assert_eq!(b.owner(5000, &alice), Owner::Mine);
        // Re-initialised on b by bob: b's own binding wins; a sees it after
        // its next miss only if the epoch is higher.
        let bob = Principal::user("bob");
        b.bind(5000, 1, &bob).expect("rebind");
        a.bind(6000, 0, &alice).expect("bind");
        // a's own binding (alice) is outdated: bob's use of the id makes
        // it read b's file.
        assert_eq!(a.owner(5000, &bob), Owner::Other);
        a.refresh_on_miss(&[5000], &bob).await;
        assert_eq!(a.owner(5000, &bob), Owner::Mine, "the higher epoch wins");
    }
}
