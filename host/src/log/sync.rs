//! Durability: when an append may be acknowledged.
//!
//! With `--fsync always` every acknowledged append is on disk first. One
//! fdatasync costs milliseconds, so appends are group-committed: whoever
//! needs durability queues its file and waits; a single flusher takes
//! everything queued, syncs each distinct file once, wakes every waiter, and
//! loops while more arrived meanwhile. Concurrent produces share one
//! fdatasync. `interval` syncs in the background; `never` leaves it to the OS.
//!
//! Two refinements, both measured in BENCHMARKS.md ("Transactions"):
//! - A lone caller on a fast disk flushes on its own thread. Handing a
//!   0.1 ms flush to the flusher thread and back costs two thread wake-ups,
//!   as much again as the flush. It only happens while no round is running,
//!   no caller has found one running for [`CONTENDED_FOR`] (under
//!   concurrent load a blocked runtime worker costs more than the wake-ups
//!   save) and recent flushes were short ([`INLINE_SYNC_MAX_NANOS`]; a
//!   slow disk's flush must not block a worker for milliseconds).
//! - A flush nobody waits for (a transaction's markers) rides along with
//!   the next round that syncs the same file instead of costing the disk a
//!   flush of its own ([`GroupCommit::sync_lazily`]).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// When appends are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FsyncMode {
    /// Acknowledge only after fdatasync (group-committed).
    Always,
    /// fdatasync dirty files every `--fsync-interval-ms`; acknowledge at once.
    Interval,
    /// Never fdatasync on the produce path.
    Never,
}

/// fdatasync statistics for /metrics and benchmarks.
#[derive(Debug, Default)]
pub struct SyncStats {
    pub syncs: AtomicU64,
    pub sync_nanos: AtomicU64,
    pub waiters: AtomicU64,
    /// fdatasyncs a caller ran on its own thread (the fast path).
    pub inline_syncs: AtomicU64,
    /// Moving average of recent fdatasync durations, in nanoseconds.
    pub recent_sync_nanos: AtomicU64,
}

/// A caller syncs inline only while recent fdatasyncs averaged under this:
/// blocking a runtime worker that long is cheaper than two thread
/// wake-ups; a slower disk's flushes go to the flusher thread.
const INLINE_SYNC_MAX_NANOS: u64 = 500_000;

/// How long flushes stay off the caller's thread after a caller found a
/// round running.
const CONTENDED_FOR: Duration = Duration::from_millis(10);

/// The shortest a lazy sync waits for a round to ride along with.
const LAZY_PATIENCE_MIN: Duration = Duration::from_millis(2);

/// The longest a lazy sync waits for a round to ride along with, however
/// slow recent flushes were. Consumers see a transaction's markers only
/// after their flush, so on an idle broker this (plus one flush) is how
/// late they see them; without the bound one 24 s fdatasync of a throttled
/// disk made the patience 12 s, and an idle broker's COMMIT marker stayed
/// invisible that long. Under load a round comes within
/// about one flush, so riding along still saves the flush.
const LAZY_PATIENCE_MAX: Duration = Duration::from_millis(10);

struct Waiter {
    file: Arc<File>,
    done: oneshot::Sender<Result<(), String>>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    /// Lazy waiters ([`GroupCommit::sync_lazily`]): completed by the next
    /// round that syncs their file, without starting one.
    riders: Vec<Waiter>,
    /// Files written since the last interval sync, by address (a lookup
    /// per append, not a scan: with thousands of partitions written in one
    /// interval the scan was quadratic).
    dirty: std::collections::HashMap<usize, Arc<File>>,
    running: bool,
    /// Until when flushes are not run inline: a caller found a round
    /// running, so callers are not coming one at a time.
    contended_until: Option<Instant>,
}

/// The group-commit flusher.
pub struct GroupCommit {
    mode: FsyncMode,
    queue: Mutex<Queue>,
    stats: Arc<SyncStats>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl GroupCommit {
    pub fn new(mode: FsyncMode) -> Arc<Self> {
        Arc::new(GroupCommit {
            mode,
            queue: Mutex::new(Queue::default()),
            stats: Arc::new(SyncStats::default()),
        })
    }

    pub fn mode(&self) -> FsyncMode {
        self.mode
    }

    pub fn stats(&self) -> &Arc<SyncStats> {
        &self.stats
    }

    /// Makes everything written to `file` so far durable (per the mode).
    pub async fn sync(self: &Arc<Self>, file: Arc<File>) -> io::Result<()> {
        self.sync_all(vec![file]).await
    }

    /// Makes everything written to these files so far durable, in one
    /// group-commit round.
    pub async fn sync_all(self: &Arc<Self>, files: Vec<Arc<File>>) -> io::Result<()> {
        self.sync_files(files, true).await
    }

    /// Makes everything written to these files so far durable, without a
    /// flush of its own if it can: the waiter rides along with the next
    /// round that syncs the same file (the next produce into the shared
    /// write-ahead log, say), and only when none has within its patience
    /// (four recent flushes, within 2–10 ms) does it start one. For writes no client is waiting
    /// on (transaction markers): each would otherwise cost the disk one more
    /// flush, and a flush competes with the ones clients are waiting for.
    pub async fn sync_lazily(self: &Arc<Self>, files: Vec<Arc<File>>) -> io::Result<()> {
        if self.mode != FsyncMode::Always {
            return self.sync_files(files, false).await;
        }
        let (riders, receivers) = waiters_for(files.clone());
        self.queue().riders.extend(riders);
        match tokio::time::timeout(self.lazy_patience(), await_rounds(receivers)).await {
            Ok(r) => r,
            // Nobody synced these files meanwhile: sync them now (that
            // round also takes this call's riders off the queue).
            Err(_) => self.sync_files(files, false).await,
        }
    }

    /// How long a lazy sync waits for a round to ride along with: four
    /// recent flushes (under load the next round comes within about one),
    /// at least [`LAZY_PATIENCE_MIN`] and at most [`LAZY_PATIENCE_MAX`].
    fn lazy_patience(&self) -> Duration {
        let recent = self.stats.recent_sync_nanos.load(Ordering::Relaxed);
        Duration::from_nanos(recent.saturating_mul(4)).clamp(LAZY_PATIENCE_MIN, LAZY_PATIENCE_MAX)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `inline`: the caller may take the fast path (module docs): when no
    /// round is running, none was found running within [`CONTENDED_FOR`]
    /// and recent flushes were short, it runs the round itself.
    async fn sync_files(self: &Arc<Self>, files: Vec<Arc<File>>, inline: bool) -> io::Result<()> {
        match self.mode {
            FsyncMode::Never => Ok(()),
            FsyncMode::Interval => {
                let mut q = self.queue();
                for file in files {
                    q.dirty.entry(Arc::as_ptr(&file) as usize).or_insert(file);
                }
                Ok(())
            }
            FsyncMode::Always => {
                let (waiters, receivers) = waiters_for(files);
                let fast = inline
                    && self.stats.recent_sync_nanos.load(Ordering::Relaxed)
                        <= INLINE_SYNC_MAX_NANOS;
                // Some(batch): this caller runs the round itself.
                let own_round = {
                    let mut q = self.queue();
                    if q.running {
                        q.contended_until = Some(Instant::now() + CONTENDED_FOR);
                        q.waiting.extend(waiters);
                        None
                    } else if fast && q.contended_until.is_none_or(|t| Instant::now() >= t) {
                        q.running = true;
                        Some(with_riders(&mut q, waiters))
                    } else {
                        q.running = true;
                        q.waiting.extend(waiters);
                        drop(q);
                        self.spawn_flusher();
                        None
                    }
                };
                if let Some(batch) = own_round {
                    self.stats.inline_syncs.fetch_add(1, Ordering::Relaxed);
                    self.run_round(batch);
                    // Callers that queued meanwhile go to the flusher thread.
                    let more = {
                        let mut q = self.queue();
                        q.running = !q.waiting.is_empty();
                        q.running
                    };
                    if more {
                        self.spawn_flusher();
                    }
                }
                await_rounds(receivers).await
            }
        }
    }

    /// Runs [`flush_loop`](Self::flush_loop) on a blocking thread; the
    /// caller has set `running`.
    fn spawn_flusher(self: &Arc<Self>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.flush_loop());
    }

    /// Syncs what is queued until the queue stays empty.
    fn flush_loop(&self) {
        loop {
            let batch = {
                let mut q = self.queue();
                if q.waiting.is_empty() {
                    q.running = false;
                    return;
                }
                let waiting = std::mem::take(&mut q.waiting);
                with_riders(&mut q, waiting)
            };
            self.run_round(batch);
        }
    }

    /// One round: syncs each distinct file of `batch` once, then completes
    /// every waiter with the result.
    fn run_round(&self, batch: Vec<Waiter>) {
        let mut files: Vec<&Arc<File>> = Vec::new();
        for w in &batch {
            if !files.iter().any(|f| Arc::ptr_eq(f, &w.file)) {
                files.push(&w.file);
            }
        }
        let mut result = Ok(());
        for f in files {
            if let Err(e) = self.timed_sync(f) {
                result = Err(e.to_string());
            }
        }
        self.stats
            .waiters
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        for w in batch {
            let _ = w.done.send(result.clone());
        }
    }

    fn timed_sync(&self, f: &File) -> io::Result<()> {
        let t = Instant::now();
        let r = f.sync_data();
        #[cfg(feature = "fault-injection")]
        slow_disk::pause();
        let nanos = t.elapsed().as_nanos() as u64;
        self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        self.stats.sync_nanos.fetch_add(nanos, Ordering::Relaxed);
        // Moving average over about the last 8 flushes (racy updates only
        // blur it): what decides whether the next flush may run inline.
        let recent = self.stats.recent_sync_nanos.load(Ordering::Relaxed);
        self.stats
            .recent_sync_nanos
            .store(recent - recent / 8 + nanos / 8, Ordering::Relaxed);
        r
    }

    /// Background loop for `interval` mode.
    pub async fn run_interval(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let dirty = std::mem::take(&mut self.queue().dirty);
            if dirty.is_empty() {
                continue;
            }
            let me = self.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for f in dirty.into_values() {
                    if let Err(e) = me.timed_sync(&f) {
                        tracing::error!(error = %e, "interval fdatasync failed");
                    }
                }
            })
            .await;
        }
    }
}

/// Waits for the rounds that took these waiters; the first error wins.
async fn await_rounds(receivers: Vec<oneshot::Receiver<Result<(), String>>>) -> io::Result<()> {
    for rx in receivers {
        match rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(io::Error::other(e)),
            Err(_) => return Err(io::Error::other("the flusher stopped")),
        }
    }
    Ok(())
}

/// One waiter per file, and the receivers its round answers.
fn waiters_for(files: Vec<Arc<File>>) -> (Vec<Waiter>, Vec<oneshot::Receiver<Result<(), String>>>) {
    files
        .into_iter()
        .map(|file| {
            let (done, rx) = oneshot::channel();
            (Waiter { file, done }, rx)
        })
        .unzip()
}

/// A round's batch: `batch` plus the riders waiting on any of its files. A
/// round that takes them before it syncs covers everything they wrote.
fn with_riders(q: &mut Queue, mut batch: Vec<Waiter>) -> Vec<Waiter> {
    if !q.riders.is_empty() {
        let (taken, kept): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut q.riders)
            .into_iter()
            .partition(|r| batch.iter().any(|w| Arc::ptr_eq(&w.file, &r.file)));
        q.riders = kept;
        batch.extend(taken);
    }
    batch
}

/// Makes a directory's entries (files created, renamed or removed in it)
/// durable.
pub fn sync_dir(dir: &std::path::Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A slower disk, simulated for benchmarks (test builds only): every
/// fdatasync of the broker takes this much longer. `txn_bench
/// --fsync-extra-us` uses it to show where a transaction's time goes on a
/// disk whose flush dominates everything else.
#[cfg(feature = "fault-injection")]
pub mod slow_disk {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    static EXTRA_US: AtomicU64 = AtomicU64::new(0);

    /// Adds `extra` to every later fdatasync.
    pub fn set(extra: Duration) {
        EXTRA_US.store(extra.as_micros() as u64, Ordering::Relaxed);
    }

    /// Called after each fdatasync.
    pub fn pause() {
        let us = EXTRA_US.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

impl SyncStats {
    /// `<name>_total`, `<name>_seconds_sum` and `<name>_inline_total` of
    /// this flusher, as Prometheus text.
    pub fn render(&self, out: &mut String, name: &str) {
        crate::metrics::sample(
            out,
            &format!("{name}_total"),
            "counter",
            self.syncs.load(Ordering::Relaxed),
        );
        crate::metrics::sample(
            out,
            &format!("{name}_seconds_sum"),
            "counter",
            format_args!(
                "{:.9}",
                self.sync_nanos.load(Ordering::Relaxed) as f64 / 1e9
            ),
        );
        crate::metrics::sample(
            out,
            &format!("{name}_inline_total"),
            "counter",
            self.inline_syncs.load(Ordering::Relaxed),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_in(dir: &std::path::Path) -> Arc<File> {
        use std::io::Write;
        let mut f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("f"))
            .expect("open");
        f.write_all(b"data").expect("write");
        Arc::new(f)
    }

    fn count(a: &AtomicU64) -> u64 {
        a.load(Ordering::Relaxed)
    }

    /// One sync by a lone caller, after the recent flushes averaged
    /// `recent_nanos`: (fdatasyncs, of them inline).
    async fn lone_sync(recent_nanos: u64) -> (u64, u64) {
        let dir = tempfile::tempdir().expect("tmp");
        let gc = GroupCommit::new(FsyncMode::Always);
        gc.stats()
            .recent_sync_nanos
            .store(recent_nanos, Ordering::Relaxed);
        gc.sync(file_in(dir.path())).await.expect("sync");
        (count(&gc.stats().syncs), count(&gc.stats().inline_syncs))
    }

    #[tokio::test]
    async fn a_lone_caller_on_a_fast_disk_flushes_on_its_own_thread() {
        assert_eq!(lone_sync(0).await, (1, 1));
        assert_eq!(lone_sync(100_000).await, (1, 1));
    }

    #[tokio::test]
    async fn after_slow_flushes_the_flusher_thread_takes_them() {
        // As if the last flushes took 2 ms each.
        assert_eq!(lone_sync(2_000_000).await, (1, 0));
    }

    #[tokio::test]
    async fn a_caller_that_finds_a_round_running_stops_the_fast_path_for_a_while() {
        let dir = tempfile::tempdir().expect("tmp");
        let gc = GroupCommit::new(FsyncMode::Always);
        let f = file_in(dir.path());
        // A round in progress (as the flusher thread would mark it).
        gc.queue().running = true;
        let waiting = tokio::spawn({
            let (gc, f) = (gc.clone(), f.clone());
            async move { gc.sync(f).await }
        });
        while gc.queue().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        // The round ends: its flusher picks up the queued caller.
        let flusher = gc.clone();
        tokio::task::spawn_blocking(move || flusher.flush_loop())
            .await
            .expect("flusher");
        waiting.await.expect("task").expect("sync");
        assert_eq!(count(&gc.stats().inline_syncs), 0);
        // Within CONTENDED_FOR of that, a lone caller still queues.
        gc.sync(f).await.expect("sync");
        assert_eq!(count(&gc.stats().syncs), 2);
        assert_eq!(count(&gc.stats().inline_syncs), 0);
    }

    /// A lazy sync of `f` in its own task, once it waits as a rider.
    async fn spawn_lazy(
        gc: &Arc<GroupCommit>,
        f: &Arc<File>,
    ) -> tokio::task::JoinHandle<io::Result<()>> {
        let lazy = tokio::spawn({
            let (gc, f) = (gc.clone(), f.clone());
            async move { gc.sync_lazily(vec![f]).await }
        });
        while gc.queue().riders.is_empty() {
            tokio::task::yield_now().await;
        }
        lazy
    }

    #[tokio::test]
    async fn a_lazy_sync_rides_along_with_the_next_round_of_its_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let gc = GroupCommit::new(FsyncMode::Always);
        let f = file_in(dir.path());
        let lazy = spawn_lazy(&gc, &f).await;
        // A round of the same file, well within the rider's patience (its
        // bound is 10 ms; this round starts microseconds later).
        gc.sync(f).await.expect("sync");
        lazy.await.expect("task").expect("sync");
        assert_eq!(count(&gc.stats().syncs), 1, "one flush served both");
        assert!(gc.queue().riders.is_empty());
    }

    #[tokio::test]
    async fn a_lazy_sync_waits_at_most_its_bound_however_slow_recent_flushes_were() {
        let gc = GroupCommit::new(FsyncMode::Always);
        // As after one 24 s flush: the moving average is 3 s.
        gc.stats()
            .recent_sync_nanos
            .store(3_000_000_000, Ordering::Relaxed);
        assert_eq!(gc.lazy_patience(), LAZY_PATIENCE_MAX);
        gc.stats()
            .recent_sync_nanos
            .store(1_000_000, Ordering::Relaxed);
        assert_eq!(gc.lazy_patience(), Duration::from_millis(4));
        gc.stats().recent_sync_nanos.store(0, Ordering::Relaxed);
        assert_eq!(gc.lazy_patience(), LAZY_PATIENCE_MIN);
    }

    #[tokio::test]
    async fn a_lazy_sync_nobody_comes_by_for_flushes_after_its_patience() {
        let dir = tempfile::tempdir().expect("tmp");
        let gc = GroupCommit::new(FsyncMode::Always);
        let other = {
            let d = dir.path().join("other");
            std::fs::create_dir(&d).expect("dir");
            file_in(&d)
        };
        let f = file_in(dir.path());
        let started = Instant::now();
        let patience = gc.lazy_patience();
        let lazy = spawn_lazy(&gc, &f).await;
        // A round of another file does not take it.
        gc.sync(other).await.expect("sync");
        lazy.await.expect("task").expect("sync");
        assert!(started.elapsed() >= patience);
        assert_eq!(count(&gc.stats().syncs), 2, "its own flush after the wait");
        assert!(gc.queue().riders.is_empty());
    }
}
