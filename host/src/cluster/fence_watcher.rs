//! The inbound, polled side of the cross-broker fence ring: reads every peer's fence file in `<data dir>/__cluster/
//! producer_fences/` ([`super::fence_log`]) and hands back each (producer
//! id, epoch) newer than what this broker already applied. Polling is
//! deliberate: inotify does not see another NFS client's writes.
//!
//! [`Applied`] is the memory of what was applied, shared with the push
//! path ([`super::fences`]): a fence either path applied is not applied
//! again by the other, and a higher epoch for the same id fires once more.
//! It is bounded like a fence file ([`super::fence_log::MAX_ENTRIES`],
//! oldest bump dropped first).
//!
//! A torn or garbage file is skipped with a rate-limited warning and read
//! again at the next tick. This module only reads files; applying a fence
//! to partitions is the caller's job.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::fence_log::{self, Fence, FenceTable};

static UNREADABLE: crate::ratelimit::RateLimit =
    crate::ratelimit::RateLimit::new(Duration::from_secs(30));

/// The fences this broker applied, by producer id (bounded).
#[derive(Debug)]
pub struct Applied {
    table: Mutex<FenceTable>,
}

impl Default for Applied {
    fn default() -> Self {
        Self::new(fence_log::MAX_ENTRIES)
    }
}

impl Applied {
    pub fn new(cap: usize) -> Self {
        Applied {
            table: Mutex::new(FenceTable::new(cap)),
        }
    }

    /// Records `fence` for `pid` if it is newer than what was applied;
    /// true when it is (the caller applies it then).
    pub fn offer(&self, pid: i64, fence: Fence) -> bool {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .raise(pid, fence)
    }

    /// Every remembered fence: (producer id, epoch).
    pub fn snapshot(&self) -> Vec<(i64, i16)> {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(pid, f)| (pid, f.epoch))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A fence read from a peer's file, not applied before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerFence {
    /// The broker whose file it came from.
    pub from: i32,
    pub pid: i64,
    pub fence: Fence,
}

/// Reads the peers' fence files.
#[derive(Debug)]
pub struct FenceWatcher {
    dir: PathBuf,
    own: i32,
    applied: Arc<Applied>,
}

impl FenceWatcher {
    /// A watcher of the fence directory under the data directory `root`
    /// for broker `own` (whose own file it skips).
    pub fn new(root: &Path, own: i32, applied: Arc<Applied>) -> Self {
        FenceWatcher {
            dir: root.join(fence_log::FENCE_DIR),
            own,
            applied,
        }
    }

    /// One poll (blocking file I/O): every fence in a peer's file newer
    /// than what was applied, now recorded as applied.
    pub fn tick(&self) -> Vec<PeerFence> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                if let Some(suppressed) = UNREADABLE.allow() {
                    tracing::warn!(dir = %self.dir.display(), error = %e, suppressed, "cannot list the fence directory");
                }
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(from) = name.to_str().and_then(fence_log::node_of) else {
                continue;
            };
            if from == self.own {
                continue;
            }
            let path = e.path();
            let fences = match fence_log::read_file(&path) {
                Ok(f) => f,
                Err(err) => {
                    if let Some(suppressed) = UNREADABLE.allow() {
                        tracing::warn!(file = %path.display(), error = %err, suppressed, "skipping an unreadable peer fence file");
                    }
                    continue;
                }
            };
            for (pid, fence) in fences {
                if self.applied.offer(pid, fence) {
                    out.push(PeerFence { from, pid, fence });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn write(root: &Path, node: i32, json: &str) {
        let dir = root.join(fence_log::FENCE_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(fence_log::file_name(node)), json).unwrap();
    }

    fn seen(v: &[PeerFence]) -> BTreeSet<(i32, i64, i16)> {
        v.iter().map(|f| (f.from, f.pid, f.fence.epoch)).collect()
    }

    #[tokio::test]
    async fn applies_peer_fences() {
        let dir = tempfile::tempdir().unwrap();
        // Broker 2 writes through its fence log; broker 3's file by hand.
        let peer = fence_log::FenceLog::open(dir.path(), 2).unwrap();
        peer.append_at(10, 1, 5);
        peer.append_at(11, 4, 6);
        peer.flush().await.unwrap();
        write(dir.path(), 3, r#"{"12": {"epoch": 2, "at_ms": 7}}"#);
        let w = FenceWatcher::new(dir.path(), 1, Arc::default());
        assert_eq!(
            seen(&w.tick()),
            BTreeSet::from([(2, 10, 1), (2, 11, 4), (3, 12, 2)])
        );
    }

    #[test]
    fn skips_self_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 1, r#"{"10": {"epoch": 1, "at_ms": 5}}"#);
        write(dir.path(), 2, r#"{"20": {"epoch": 1, "at_ms": 5}}"#);
        let w = FenceWatcher::new(dir.path(), 1, Arc::default());
        assert_eq!(seen(&w.tick()), BTreeSet::from([(2, 20, 1)]));
    }

    #[test]
    fn dedupe_across_ticks() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 2, r#"{"10": {"epoch": 1, "at_ms": 5}}"#);
        let applied = Arc::new(Applied::default());
        let w = FenceWatcher::new(dir.path(), 1, applied.clone());
        assert_eq!(w.tick().len(), 1);
        assert!(w.tick().is_empty(), "the same fence again");
        // Another peer repeating it, or the push path having applied a
        // fence, counts the same.
        write(dir.path(), 3, r#"{"10": {"epoch": 1, "at_ms": 9}}"#);
        assert!(applied.offer(30, Fence { epoch: 2, at_ms: 1 }));
        write(dir.path(), 4, r#"{"30": {"epoch": 2, "at_ms": 1}}"#);
        assert!(w.tick().is_empty());
    }

    #[test]
    fn higher_epoch_after_first_apply_fires_once_more() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 2, r#"{"10": {"epoch": 1, "at_ms": 5}}"#);
        let w = FenceWatcher::new(dir.path(), 1, Arc::default());
        assert_eq!(seen(&w.tick()), BTreeSet::from([(2, 10, 1)]));
        write(dir.path(), 2, r#"{"10": {"epoch": 2, "at_ms": 6}}"#);
        assert_eq!(seen(&w.tick()), BTreeSet::from([(2, 10, 2)]));
        assert!(w.tick().is_empty());
        // A lower epoch from another peer does not fire.
        write(dir.path(), 3, r#"{"10": {"epoch": 1, "at_ms": 7}}"#);
        assert!(w.tick().is_empty());
    }

    #[test]
    fn a_torn_file_is_skipped_and_read_again_once_whole() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 2, r#"{"10": {"epoch": 1, "at_"#);
        write(dir.path(), 3, r#"{"20": {"epoch": 1, "at_ms": 5}}"#);
        std::fs::write(
            dir.path()
                .join(fence_log::FENCE_DIR)
                .join(".from-2.json.tmp"),
            "garbage",
        )
        .unwrap();
        let w = FenceWatcher::new(dir.path(), 1, Arc::default());
        assert_eq!(seen(&w.tick()), BTreeSet::from([(3, 20, 1)]));
        write(dir.path(), 2, r#"{"10": {"epoch": 1, "at_ms": 5}}"#);
        assert_eq!(seen(&w.tick()), BTreeSet::from([(2, 10, 1)]));
    }

    #[test]
    fn no_directory_is_no_fence() {
        let dir = tempfile::tempdir().unwrap();
        let w = FenceWatcher::new(dir.path(), 1, Arc::default());
        assert!(w.tick().is_empty());
    }
}
