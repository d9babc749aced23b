//! A bounded cache of open segment files, shared by every partition.
//!
//! Why: a partition used to hold one descriptor per segment for its whole
//! life, so a broker could not hold more partitions than the process may
//! open files (5,000 partitions held 5,018 descriptors, and at
//! ~18,800 the open-file budget refused creation on a 20,000 limit). Now a
//! segment holds a [`CachedFile`]: its path, whether it has writes not yet
//! synced through this handle, and, while the cache admits it, the open
//! file. At most [`OpenFiles::max`] handles hold a file (plus those being
//! opened by concurrent callers at that moment); a read or an append of an
//! evicted one opens the file again.
//!
//! Eviction is second-chance (CLOCK): an access sets the handle's
//! `referenced` bit without any shared lock, and an admission past the
//! bound sweeps the ring of open handles, clearing bits, and closes the
//! first one not referenced since the last sweep, preferring clean ones
//! (a dirty victim costs an fdatasync) within one turn of the ring.
//!
//! Durability is unchanged: a handle is marked dirty after every write
//! ([`CachedFile::mark_dirty`]), and an evicted dirty file is synced
//! (fdatasync) before it is closed; when that sync fails the file stays
//! open and dirty (the bound is exceeded rather than a write forgotten).
//! Flushes on the request path keep going to the descriptor they were given
//! (an `Arc<File>` the group commit holds until its round is done), and
//! fdatasync through any descriptor of a file writes all its dirty pages,
//! so a file reopened after an eviction is synced by [`CachedFile::sync`]
//! whatever descriptor wrote it.
//!
//! Touches only the files of the handles it is given.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// The default bound on open segment files (`--max-open-segment-files`).
pub const DEFAULT_MAX_OPEN: usize = 2048;

/// The smallest bound the cache accepts (a roll holds two files of a
/// partition, a cleaner pass a few more).
pub const MIN_MAX_OPEN: usize = 8;

/// Counters for /metrics and tests.
#[derive(Debug, Default)]
pub struct OpenFileStats {
    /// Files opened (first opens and reopens after an eviction).
    pub opens: AtomicU64,
    /// Files closed to stay within the bound.
    pub evictions: AtomicU64,
    /// Evicted files that had unsynced writes and were synced first.
    pub eviction_syncs: AtomicU64,
}

/// Appends the cache's figures to a Prometheus page: files open now and
/// the bound, opens, evictions, and evictions that had to sync first (each
/// an fdatasync on the thread that needed a file; many of them mean the
/// bound is below the set of partitions written between syncs).
pub fn render(files: &OpenFiles, out: &mut String) {
    use crate::metrics::sample;
    sample(out, "kaas_open_segment_files", "gauge", files.open_count());
    sample(out, "kaas_open_segment_files_max", "gauge", files.max());
    let st = files.stats();
    for (name, counter) in [
        ("kaas_segment_file_opens_total", &st.opens),
        ("kaas_segment_file_evictions_total", &st.evictions),
        ("kaas_segment_file_eviction_syncs_total", &st.eviction_syncs),
    ] {
        sample(out, name, "counter", counter.load(Ordering::Relaxed));
    }
}

/// The cache: a bound and the ring of handles that hold an open file.
#[derive(Debug)]
pub struct OpenFiles {
    /// How many handles may hold an open file at once.
    max: usize,
    /// Handles holding a file, in admission order (the CLOCK hand is the
    /// front). Entries of handles since dropped are skipped and removed.
    ring: Mutex<Ring>,
    stats: OpenFileStats,
}

#[derive(Debug, Default)]
struct Ring {
    entries: VecDeque<Weak<CachedFile>>,
    /// Live handles in `entries` holding a file.
    open: usize,
}

impl OpenFiles {
    /// A cache holding at most `max` files open (at least [`MIN_MAX_OPEN`]).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(OpenFiles {
            max: max.max(MIN_MAX_OPEN),
            ring: Mutex::new(Ring::default()),
            stats: OpenFileStats::default(),
        })
    }

    /// A cache that never evicts (partitions opened on their own, in tests).
    pub fn unbounded() -> Arc<Self> {
        Self::new(usize::MAX)
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Handles holding an open file now.
    pub fn open_count(&self) -> usize {
        self.ring().open
    }

    pub fn stats(&self) -> &OpenFileStats {
        &self.stats
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates a new file at `path` (O_EXCL) and admits its handle.
    pub fn create_new(self: &Arc<Self>, path: &Path) -> io::Result<Arc<CachedFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        self.stats.opens.fetch_add(1, Ordering::Relaxed);
        let handle = CachedFile::new(self, path);
        handle.slot().file = Some(Arc::new(file));
        self.admit(&handle);
        Ok(handle)
    }

    /// A handle for the existing file at `path`, opened now (so a missing
    /// file fails here, not on first use).
    pub fn open_existing(self: &Arc<Self>, path: &Path) -> io::Result<Arc<CachedFile>> {
        let handle = CachedFile::new(self, path);
        handle.get()?;
        Ok(handle)
    }

    /// Adds a handle that just got its file to the ring, then closes files
    /// past the bound.
    fn admit(&self, handle: &Arc<CachedFile>) {
        let (victims, passed) = {
            let mut ring = self.ring();
            ring.entries.push_back(Arc::downgrade(handle));
            ring.open += 1;
            handle.in_ring.store(true, Ordering::Release);
            self.pick_victims(&mut ring, handle)
        };
        // Dropped without the ring's lock: a handle whose owner let it go
        // meanwhile is dropped here, and its drop takes the lock.
        drop(passed);
        for v in victims {
            v.evict(&self.stats);
        }
    }

    /// Takes handles off the ring until at most `max` hold a file: the
    /// first clean one not referenced since the hand last passed it (the
    /// hand clears the bits it passes), else, after two turns of the ring
    /// (every file dirty), the next one, dirty or not. Never `admitted`,
    /// which its caller is about to use. Returns the victims and the
    /// handles the hand passed, for the caller to drop after the lock.
    fn pick_victims(
        &self,
        ring: &mut Ring,
        admitted: &Arc<CachedFile>,
    ) -> (Vec<Arc<CachedFile>>, Vec<Arc<CachedFile>>) {
        let mut victims = Vec::new();
        let mut passed = Vec::new();
        // Dead entries are dropped as the hand passes them, which it does
        // only past the bound; a ring twice longer than the files it holds
        // open (plus 64) is compacted, so the handles of deleted segments
        // are freed below the bound too (each compaction follows at least
        // `open + 64` admissions: amortized O(1)).
        if ring.entries.len() > ring.open.saturating_mul(2).saturating_add(64) {
            ring.entries.retain(|w| w.strong_count() > 0);
        }
        let mut passes = 0usize;
        while ring.open > self.max {
            let Some(w) = ring.entries.pop_front() else {
                break;
            };
            let Some(h) = w.upgrade() else {
                continue;
            };
            if Arc::ptr_eq(&h, admitted) {
                ring.entries.push_back(w);
                passes += 1;
                passed.push(h);
                if passes > 3 * ring.entries.len() + 3 {
                    break;
                }
                continue;
            }
            let turns = passes / ring.entries.len().max(1);
            let referenced = h.referenced.swap(false, Ordering::Relaxed);
            let dirty = h.dirty.load(Ordering::Acquire);
            let take = (!referenced && !dirty) || turns >= 2;
            if take {
                ring.open -= 1;
                h.in_ring.store(false, Ordering::Release);
                victims.push(h);
            } else {
                ring.entries.push_back(w);
                passes += 1;
                passed.push(h);
            }
        }
        (victims, passed)
    }

    /// A handle dropped while holding a file (its segment deleted or its
    /// partition closed): one fewer open.
    fn forget(&self) {
        let mut ring = self.ring();
        ring.open = ring.open.saturating_sub(1);
    }
}

/// A segment file as the cache knows it: its path, its unsynced writes,
/// and the open file while admitted.
#[derive(Debug)]
pub struct CachedFile {
    path: PathBuf,
    cache: Weak<OpenFiles>,
    /// The open file while admitted (callers may hold clones longer: a
    /// group-commit round, a read in progress).
    slot: Mutex<Slot>,
    /// Accessed since the eviction hand last passed.
    referenced: AtomicBool,
    /// Written since the last sync through this handle began.
    dirty: AtomicBool,
    /// Counted in the ring's `open`.
    in_ring: AtomicBool,
}

#[derive(Debug, Default)]
struct Slot {
    file: Option<Arc<File>>,
}

impl CachedFile {
    fn new(cache: &Arc<OpenFiles>, path: &Path) -> Arc<Self> {
        Arc::new(CachedFile {
            path: path.to_path_buf(),
            cache: Arc::downgrade(cache),
            slot: Mutex::new(Slot::default()),
            referenced: AtomicBool::new(true),
            dirty: AtomicBool::new(false),
            in_ring: AtomicBool::new(false),
        })
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, opened again if it was evicted.
    pub fn get(self: &Arc<Self>) -> io::Result<Arc<File>> {
        self.referenced.store(true, Ordering::Relaxed);
        if let Some(f) = &self.slot().file {
            return Ok(f.clone());
        }
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
        let file = {
            let mut slot = self.slot();
            if let Some(f) = &slot.file {
                // Another caller opened it meanwhile; ours closes here.
                return Ok(f.clone());
            }
            let f = Arc::new(opened);
            slot.file = Some(f.clone());
            f
        };
        if let Some(cache) = self.cache.upgrade() {
            cache.stats.opens.fetch_add(1, Ordering::Relaxed);
            cache.admit(self);
        }
        Ok(file)
    }

    /// The open file if the cache holds it now (no reopen).
    pub fn if_open(&self) -> Option<Arc<File>> {
        self.slot().file.clone()
    }

    /// Records a write through this handle (call it after the write): the
    /// next [`Self::sync`], or the eviction, flushes it.
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Whether writes since the last sync began are unsynced.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// fdatasync when written since the last sync began (reopening an
    /// evicted file whose writes came after its eviction).
    pub fn sync(self: &Arc<Self>) -> io::Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let done = self.get().and_then(|f| f.sync_data());
        if done.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        done
    }

    /// fdatasync whether or not writes are recorded (the file's own
    /// bookkeeping, e.g. after truncating it).
    pub fn sync_always(self: &Arc<Self>) -> io::Result<()> {
        self.dirty.store(false, Ordering::Release);
        let done = self.get().and_then(|f| f.sync_data());
        if done.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        done
    }

    /// Closes the file (the cache's reference to it), syncing it first if
    /// it is dirty. A failed sync keeps it open and dirty, back in the ring.
    fn evict(self: &Arc<Self>, stats: &OpenFileStats) {
        let mut slot = self.slot();
        let Some(file) = slot.file.take() else {
            return;
        };
        if self.dirty.swap(false, Ordering::AcqRel) {
            stats.eviction_syncs.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = file.sync_data() {
                tracing::warn!(file = %self.path.display(), error = %e, "syncing a segment file before closing it failed; it stays open");
                self.dirty.store(true, Ordering::Release);
                slot.file = Some(file);
                drop(slot);
                if let Some(cache) = self.cache.upgrade() {
                    let mut ring = cache.ring();
                    ring.entries.push_back(Arc::downgrade(self));
                    ring.open += 1;
                    self.in_ring.store(true, Ordering::Release);
                }
                return;
            }
        }
        stats.evictions.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        if self.in_ring.load(Ordering::Acquire)
            && let Some(cache) = self.cache.upgrade()
        {
            cache.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn open_fds_under(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .expect("fds")
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|p| p.starts_with(dir))
            .count()
    }

    #[test]
    fn at_most_the_bound_is_open_and_evicted_files_reopen() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(8);
        let handles: Vec<_> = (0..40)
            .map(|i| {
                cache
                    .create_new(&dir.path().join(format!("{i}.log")))
                    .expect("create")
            })
            .collect();
        assert_eq!(cache.open_count(), 8);
        assert_eq!(open_fds_under(dir.path()), 8);
        for (i, h) in handles.iter().enumerate() {
            h.get()
                .expect("reopen")
                .write_all_at(&[i as u8; 4], 0)
                .expect("write");
            h.mark_dirty();
        }
        assert!(open_fds_under(dir.path()) <= 8);
        for (i, h) in handles.iter().enumerate() {
            let mut b = [0u8; 4];
            h.get()
                .expect("reopen")
                .read_exact_at(&mut b, 0)
                .expect("read");
            assert_eq!(b, [i as u8; 4]);
        }
        assert!(cache.stats().evictions.load(Ordering::Relaxed) >= 32);
        drop(handles);
        assert_eq!(cache.open_count(), 0);
        assert_eq!(open_fds_under(dir.path()), 0);
    }

    #[test]
    fn evicting_a_dirty_file_syncs_it_first() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(MIN_MAX_OPEN);
        let first = cache.create_new(&dir.path().join("a.log")).expect("create");
        first
            .get()
            .expect("open")
            .write_all_at(b"data", 0)
            .expect("write");
        first.mark_dirty();
        // Every other file is dirty too: the oldest goes once the hand has
        // gone round twice.
        let others: Vec<_> = (0..3 * MIN_MAX_OPEN)
            .map(|i| {
                let h = cache
                    .create_new(&dir.path().join(format!("{i}.o")))
                    .expect("create");
                h.mark_dirty();
                h
            })
            .collect();
        assert!(first.if_open().is_none(), "the dirty file was evicted");
        assert!(!first.is_dirty(), "and synced");
        assert!(cache.stats().eviction_syncs.load(Ordering::Relaxed) >= 1);
        assert!(cache.open_count() <= MIN_MAX_OPEN);
        drop(others);
    }

    #[test]
    fn clean_files_go_before_dirty_ones() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(MIN_MAX_OPEN);
        let dirty = cache.create_new(&dir.path().join("d.log")).expect("create");
        dirty.mark_dirty();
        let clean: Vec<_> = (0..MIN_MAX_OPEN - 1)
            .map(|i| {
                cache
                    .create_new(&dir.path().join(format!("{i}.c")))
                    .expect("create")
            })
            .collect();
        let _one_more = cache.create_new(&dir.path().join("x.c")).expect("create");
        assert!(dirty.if_open().is_some(), "a clean file went instead");
        assert!(dirty.is_dirty());
        assert_eq!(cache.stats().eviction_syncs.load(Ordering::Relaxed), 0);
        drop(clean);
    }

    #[test]
    fn a_reopened_file_appends_at_the_position_its_owner_keeps() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(MIN_MAX_OPEN);
        let h = cache.create_new(&dir.path().join("s.log")).expect("create");
        h.get()
            .expect("open")
            .write_all_at(b"abc", 0)
            .expect("write");
        h.mark_dirty();
        h.sync().expect("sync");
        let _churn: Vec<_> = (0..4 * MIN_MAX_OPEN)
            .map(|i| {
                cache
                    .create_new(&dir.path().join(format!("{i}.o")))
                    .expect("create")
            })
            .collect();
        assert!(h.if_open().is_none());
        h.get()
            .expect("reopen")
            .write_all_at(b"def", 3)
            .expect("write");
        h.mark_dirty();
        h.sync().expect("sync");
        assert!(!h.is_dirty());
        assert_eq!(std::fs::read(h.path()).expect("read"), b"abcdef");
    }

    #[test]
    fn a_write_after_an_eviction_is_synced_by_the_next_sync() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(MIN_MAX_OPEN);
        let h = cache.create_new(&dir.path().join("s.log")).expect("create");
        // A caller still holds the descriptor the cache has closed.
        let held = h.get().expect("open");
        let _churn: Vec<_> = (0..4 * MIN_MAX_OPEN)
            .map(|i| {
                cache
                    .create_new(&dir.path().join(format!("{i}.o")))
                    .expect("create")
            })
            .collect();
        assert!(h.if_open().is_none());
        held.write_all_at(b"late", 0).expect("write");
        h.mark_dirty();
        h.sync().expect("sync reopens");
        assert!(!h.is_dirty());
        assert_eq!(std::fs::read(h.path()).expect("read"), b"late");
    }

    #[test]
    fn threads_opening_writing_and_dropping_handles_stay_within_the_bound() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(MIN_MAX_OPEN);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (cache, dir) = (&cache, dir.path());
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..200 {
                        let h = cache
                            .create_new(&dir.join(format!("{t}-{i}.log")))
                            .expect("create");
                        h.get().expect("open").write_all_at(b"x", 0).expect("write");
                        h.mark_dirty();
                        // Some handles are dropped at once (a segment
                        // deleted), others kept and touched again.
                        if i % 3 == 0 {
                            kept.push(h);
                        }
                        if let Some(old) = kept.get(i / 7) {
                            old.get().expect("reopen");
                        }
                    }
                    for h in &kept {
                        h.sync().expect("sync");
                    }
                });
            }
        });
        assert!(cache.open_count() <= MIN_MAX_OPEN);
    }

    /// Segments created and deleted far below the bound (retention under
    /// a generous cache) leave dead ring entries that the hand never
    /// reaches; compaction keeps them to about the live count.
    #[test]
    fn handles_of_deleted_files_do_not_pile_up_below_the_bound() {
        let dir = tempfile::tempdir().expect("tmp");
        let cache = OpenFiles::new(DEFAULT_MAX_OPEN);
        let live: Vec<_> = (0..10)
            .map(|i| {
                cache
                    .create_new(&dir.path().join(format!("live-{i}.log")))
                    .expect("create")
            })
            .collect();
        for i in 0..5000 {
            let path = dir.path().join(format!("gone-{i}.log"));
            drop(cache.create_new(&path).expect("create"));
            std::fs::remove_file(&path).expect("remove");
        }
        let entries = cache.ring().entries.len();
        assert_eq!(cache.open_count(), live.len());
        assert!(
            entries <= 2 * live.len() + 64 + 1,
            "{entries} ring entries for {} open files",
            live.len()
        );
    }
}
