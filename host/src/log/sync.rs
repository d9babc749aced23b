//! Durability: when an append may be acknowledged.
//!
//! With `--fsync always` every acknowledged append is on disk first. One
//! fdatasync costs milliseconds, so appends are group-committed: whoever
//! needs durability queues its file and waits; a single flusher takes
//! everything queued, syncs each distinct file once, wakes every waiter, and
//! loops while more arrived meanwhile. Concurrent produces share one
//! fdatasync. `interval` syncs in the background; `never` leaves it to the OS.

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
}

struct Waiter {
    file: Arc<File>,
    done: oneshot::Sender<Result<(), String>>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    /// Files written since the last interval sync.
    dirty: Vec<Arc<File>>,
    running: bool,
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
        match self.mode {
            FsyncMode::Never => Ok(()),
            FsyncMode::Interval => {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                for file in files {
                    if !q.dirty.iter().any(|f| Arc::ptr_eq(f, &file)) {
                        q.dirty.push(file);
                    }
                }
                Ok(())
            }
            FsyncMode::Always => {
                let mut receivers = Vec::with_capacity(files.len());
                let start = {
                    let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                    for file in files {
                        let (tx, rx) = oneshot::channel();
                        q.waiting.push(Waiter { file, done: tx });
                        receivers.push(rx);
                    }
                    !std::mem::replace(&mut q.running, true)
                };
                if start {
                    let me = self.clone();
                    tokio::task::spawn_blocking(move || me.flush_loop());
                }
                for rx in receivers {
                    match rx.await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return Err(io::Error::other(e)),
                        Err(_) => return Err(io::Error::other("the flusher stopped")),
                    }
                }
                Ok(())
            }
        }
    }

    /// Syncs what is queued until the queue stays empty.
    fn flush_loop(&self) {
        loop {
            let batch = {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                if q.waiting.is_empty() {
                    q.running = false;
                    return;
                }
                std::mem::take(&mut q.waiting)
            };
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
    }

    fn timed_sync(&self, f: &File) -> io::Result<()> {
        let t = Instant::now();
        let r = f.sync_data();
        #[cfg(feature = "fault-injection")]
        slow_disk::pause();
        self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        self.stats
            .sync_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }

    /// Background loop for `interval` mode.
    pub async fn run_interval(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let dirty = {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                std::mem::take(&mut q.dirty)
            };
            if dirty.is_empty() {
                continue;
            }
            let me = self.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for f in dirty {
                    if let Err(e) = me.timed_sync(&f) {
                        tracing::error!(error = %e, "interval fdatasync failed");
                    }
                }
            })
            .await;
        }
    }
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
