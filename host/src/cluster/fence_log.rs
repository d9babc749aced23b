//! The outbound side of the cross-broker fence ring: this
//! broker's file of producer-epoch bumps on the shared volume,
//! `<data dir>/__cluster/producer_fences/from-<broker>.json`, which every
//! peer polls ([`super::fence_watcher`]) and applies to the partitions it
//! leads.
//!
//! The file is one JSON object, producer id → `{"epoch": e, "at_ms": t}`
//! (the newest epoch this broker's coordinator bumped the id to, and the
//! wall-clock time of that bump in ms). An append of an epoch no higher than
//! the stored one changes nothing; a higher one replaces the entry.
//!
//! Writes are coalesced: [`FenceLog::append`] only changes memory and wakes a
//! writer thread, which rewrites the whole file atomically (a temporary
//! file, fsync, rename, fsync of the directory) once per burst, so a reader
//! sees the old file or the new one, never a torn one. [`FenceLog::flush`]
//! waits for the rewrite that covers every append made before it.
//!
//! Bounded: at most [`MAX_ENTRIES`] producer ids; past that the entry with
//! the oldest bump (smallest `at_ms`, then smallest id) is dropped. A
//! producer whose last bump is that old has long been fenced on every
//! partition that was open then; see docs/design.md.
//!
//! It touches only its own file and that file's temporary sibling.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ratelimit::Backoff;

/// The directory of fence files, under the data directory.
pub const FENCE_DIR: &str = "__cluster/producer_fences";

/// Most producer ids one fence file (and the set of applied fences) holds.
pub const MAX_ENTRIES: usize = 100_000;

/// How long the writer waits before trying a failed rewrite again.
const RETRY: Backoff = Backoff::fixed(Duration::from_secs(1));

static WRITE_FAILED: crate::ratelimit::RateLimit =
    crate::ratelimit::RateLimit::new(Duration::from_secs(10));

/// One producer id's newest bump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    pub epoch: i16,
    /// Wall-clock time of the bump, ms since the Unix epoch.
    pub at_ms: i64,
}

/// The file name of broker `node`'s outbound fences.
pub fn file_name(node: i32) -> String {
    format!("from-{node}.json")
}

/// The broker id a fence file's name carries (`from-<id>.json`).
pub fn node_of(name: &str) -> Option<i32> {
    name.strip_prefix("from-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

/// Decodes a fence file.
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<i64, Fence>, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Reads a fence file; a missing file holds nothing.
pub fn read_file(path: &Path) -> io::Result<BTreeMap<i64, Fence>> {
    match std::fs::read(path) {
        Ok(bytes) => parse(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("reading {}: {e}", path.display()),
        )),
    }
}

/// Producer id → newest fence, bounded by `cap`: past it the oldest bump
/// goes first.
#[derive(Debug, Clone)]
pub struct FenceTable {
    by_pid: HashMap<i64, Fence>,
    /// (at_ms, pid) of every entry: the eviction order.
    by_age: BTreeSet<(i64, i64)>,
    cap: usize,
}

impl FenceTable {
    pub fn new(cap: usize) -> Self {
        FenceTable {
            by_pid: HashMap::new(),
            by_age: BTreeSet::new(),
            cap: cap.max(1),
        }
    }

    /// Records `fence` for `pid` if its epoch is higher than the one held
    /// (or none is); true when it was.
    pub fn raise(&mut self, pid: i64, fence: Fence) -> bool {
        if let Some(old) = self.by_pid.get(&pid) {
            if old.epoch >= fence.epoch {
                return false;
            }
            self.by_age.remove(&(old.at_ms, pid));
        }
        self.by_pid.insert(pid, fence);
        self.by_age.insert((fence.at_ms, pid));
        while self.by_pid.len() > self.cap {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.by_pid.remove(&oldest);
        }
        true
    }

    pub fn get(&self, pid: i64) -> Option<Fence> {
        self.by_pid.get(&pid).copied()
    }

    pub fn len(&self) -> usize {
        self.by_pid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, Fence)> + '_ {
        self.by_pid.iter().map(|(p, f)| (*p, *f))
    }
}

/// What the writer last did: the version it wrote (or tried to) and
/// whether that worked.
#[derive(Debug, Clone, Copy)]
struct Written {
    version: u64,
    ok: bool,
}

#[derive(Debug)]
struct State {
    table: FenceTable,
    /// Bumped by every append that changed the table.
    version: u64,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    state: Mutex<State>,
    wake: Condvar,
    written: tokio::sync::watch::Sender<Written>,
}

/// This broker's outbound fence file.
#[derive(Debug)]
pub struct FenceLog {
    shared: Arc<Shared>,
}

impl FenceLog {
    /// Opens (creating the directory) broker `node`'s fence file under the
    /// data directory `root`, keeping the entries it holds. An unreadable
    /// file's content is dropped with a warning (it is rewritten at the
    /// next append); an I/O error other than a missing file is returned.
    pub fn open(root: &Path, node: i32) -> io::Result<FenceLog> {
        Self::open_with_cap(root, node, MAX_ENTRIES)
    }

    /// [`Self::open`] with another bound (for tests).
    pub fn open_with_cap(root: &Path, node: i32, cap: usize) -> io::Result<FenceLog> {
        let dir = root.join(FENCE_DIR);
        std::fs::create_dir_all(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(file_name(node));
        let mut table = FenceTable::new(cap);
        match read_file(&path) {
            Ok(entries) => {
                for (pid, f) in entries {
                    table.raise(pid, f);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                tracing::warn!(error = %e, "the outbound fence file is unreadable; starting empty");
            }
            Err(e) => return Err(e),
        }
        let (written, _) = tokio::sync::watch::channel(Written {
            version: 0,
            ok: true,
        });
        let shared = Arc::new(Shared {
            path,
            state: Mutex::new(State {
                table,
                version: 0,
                stop: false,
            }),
            wake: Condvar::new(),
            written,
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("kaas-fence-log".into())
            .spawn(move || write_loop(&s))?;
        Ok(FenceLog { shared })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a bump of `pid` to `epoch` now; see [`Self::append_at`].
    pub fn append(&self, pid: i64, epoch: i16) -> bool {
        self.append_at(pid, epoch, crate::clock::now_ms())
    }

    /// Records a bump of `pid` to `epoch` made at `at_ms`: a no-op unless
    /// `epoch` is above the stored one. Returns at once (true when the
    /// entry changed); the file follows shortly.
    pub fn append_at(&self, pid: i64, epoch: i16, at_ms: i64) -> bool {
        let mut s = self.lock();
        if !s.table.raise(pid, Fence { epoch, at_ms }) {
            return false;
        }
        s.version += 1;
        drop(s);
        self.shared.wake.notify_one();
        true
    }

    /// The entry held for `pid`.
    pub fn get(&self, pid: i64) -> Option<Fence> {
        self.lock().table.get(pid)
    }

    /// How many producer ids the file holds.
    pub fn len(&self) -> usize {
        self.lock().table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until the file holds every append made before this call; the
    /// error of that rewrite if it failed.
    pub async fn flush(&self) -> io::Result<()> {
        let target = self.lock().version;
        let mut rx = self.shared.written.subscribe();
        let w = *rx
            .wait_for(|w| w.version >= target)
            .await
            .map_err(|_| io::Error::other("the fence log writer is gone"))?;
        if w.ok {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "rewriting {} failed",
                self.shared.path.display()
            )))
        }
    }

    /// Whether every append so far is in the file.
    pub fn flushed(&self) -> bool {
        let target = self.lock().version;
        let w = *self.shared.written.borrow();
        w.version >= target && w.ok
    }
}

impl Drop for FenceLog {
    fn drop(&mut self) {
        // The writer writes what is pending, then ends.
        self.lock().stop = true;
        self.shared.wake.notify_one();
    }
}

/// The writer thread: one rewrite per burst of appends.
fn write_loop(shared: &Shared) {
    let mut done = 0u64;
    let mut failed = false;
    let mut retry = RETRY;
    loop {
        let (snapshot, version) = {
            let mut s = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            while s.version == done && !s.stop && !failed {
                s = shared.wake.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            // A failed rewrite leaves version above done, so this is a stop
            // with nothing pending.
            if s.version == done {
                return;
            }
            let snapshot: BTreeMap<i64, Fence> = s.table.iter().collect();
            (snapshot, s.version)
        };
        let result = write_atomic(&shared.path, &snapshot);
        failed = result.is_err();
        if let Err(e) = &result
            && let Some(suppressed) = WRITE_FAILED.allow()
        {
            tracing::warn!(error = %e, suppressed, "rewriting the outbound fence file failed; retrying (peers fall back on the push path)");
        }
        if !failed {
            done = version;
        }
        shared.written.send_replace(Written {
            version,
            ok: !failed,
        });
        if failed {
            let s = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            if s.stop {
                return;
            }
            let _ = shared.wake.wait_timeout(s, retry.failed());
        }
    }
}

/// Writes `entries` to `path` through a temporary sibling: write, fsync,
/// rename, fsync of the directory.
fn write_atomic(path: &Path, entries: &BTreeMap<i64, Fence>) -> io::Result<()> {
    let bytes = serde_json::to_vec(entries).map_err(io::Error::other)?;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let ctx = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", tmp.display()))
    };
    let mut f = std::fs::File::create(&tmp).map_err(|e| ctx("creating", e))?;
    f.write_all(&bytes).map_err(|e| ctx("writing", e))?;
    f.sync_all().map_err(|e| ctx("syncing", e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| ctx("renaming", e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io::Error::new(e.kind(), format!("syncing {}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_disk(log: &FenceLog) -> BTreeMap<i64, Fence> {
        read_file(log.path()).unwrap()
    }

    #[tokio::test]
    async fn append_lower_or_equal_epoch_is_noop() {
        let dir = tempfile::tempdir().unwrap();
        let log = FenceLog::open(dir.path(), 1).unwrap();
        assert!(log.append_at(7, 3, 1_000));
        log.flush().await.unwrap();
        assert!(!log.append_at(7, 3, 2_000), "equal epoch");
        assert!(!log.append_at(7, 2, 3_000), "lower epoch");
        log.flush().await.unwrap();
        let want = Fence {
            epoch: 3,
            at_ms: 1_000,
        };
        assert_eq!(log.get(7), Some(want));
        assert_eq!(on_disk(&log), BTreeMap::from([(7, want)]));
    }

    #[tokio::test]
    async fn append_higher_epoch_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let log = FenceLog::open(dir.path(), 1).unwrap();
        assert!(log.append_at(7, 1, 1_000));
        assert!(log.append_at(8, 1, 1_001));
        assert!(log.append_at(7, 2, 1_002));
        log.flush().await.unwrap();
        let want = BTreeMap::from([
            (
                7,
                Fence {
                    epoch: 2,
                    at_ms: 1_002,
                },
            ),
            (
                8,
                Fence {
                    epoch: 1,
                    at_ms: 1_001,
                },
            ),
        ]);
        assert_eq!(on_disk(&log), want);
    }

    #[tokio::test]
    async fn a_reopened_log_keeps_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let log = FenceLog::open(dir.path(), 4).unwrap();
        log.append_at(9, 5, 10);
        log.flush().await.unwrap();
        drop(log);
        let again = FenceLog::open(dir.path(), 4).unwrap();
        assert_eq!(
            again.get(9),
            Some(Fence {
                epoch: 5,
                at_ms: 10
            })
        );
        assert!(!again.append_at(9, 4, 11), "the loaded epoch still counts");
    }

    #[tokio::test]
    async fn past_the_cap_the_oldest_bump_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let log = FenceLog::open_with_cap(dir.path(), 1, 2).unwrap();
        log.append_at(1, 1, 100);
        log.append_at(2, 1, 50);
        log.append_at(1, 2, 300); // pid 1 is now the newest bump
        log.append_at(3, 1, 200);
        log.flush().await.unwrap();
        let ids: Vec<i64> = on_disk(&log).into_keys().collect();
        assert_eq!(ids, vec![1, 3], "pid 2 had the oldest bump");
    }

    #[tokio::test]
    async fn a_garbage_file_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(FENCE_DIR)).unwrap();
        std::fs::write(dir.path().join(FENCE_DIR).join(file_name(2)), b"{\"1\": {").unwrap();
        let log = FenceLog::open(dir.path(), 2).unwrap();
        assert!(log.is_empty());
        log.append_at(1, 1, 1);
        log.flush().await.unwrap();
        assert_eq!(on_disk(&log).len(), 1);
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(node_of(&file_name(12)), Some(12));
        assert_eq!(node_of(".from-12.json.tmp"), None);
        assert_eq!(node_of("from-x.json"), None);
    }
}
