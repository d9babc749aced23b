//! The log cleaner: one background thread that compacts the partitions
//! whose cleanup.policy includes `compact`, dirtiest first, off the request
//! path, with a bounded offset map (`log.cleaner.dedupe.buffer.size`) and
//! at a bounded I/O rate (`log.cleaner.io.max.bytes.per.second`). What a
//! pass keeps is the partition's business ([`super::partition`]'s
//! compaction); this module decides when and where, and counts.
//!
//! It touches the partitions through [`Partition::dirtiness`] and
//! [`Partition::clean`] only. In cluster mode the log manager holds only the
//! partitions this broker leads, and every swap is behind the write gate.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub use super::offset_map::{OffsetMap, Throttle};
use super::{LogManager, Partition};

/// Where the cleaner finds its work: the compacted partitions this broker
/// writes now (cluster mode: those it leads).
pub trait Compacted: Send + Sync {
    fn compacted_partitions(&self) -> Vec<Arc<Partition>>;
}

impl Compacted for LogManager {
    fn compacted_partitions(&self) -> Vec<Arc<Partition>> {
        self.topics()
            .iter()
            .flat_map(|t| t.open_partitions())
            .filter(|p| p.config().compacted())
            .collect()
    }
}

/// The cleaner's settings, under Kafka's broker config names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    /// log.cleaner.enable
    pub enable: bool,
    /// log.cleaner.dedupe.buffer.size: bytes of offset map (24 per key, as
    /// Kafka counts: a 16-byte key digest and an offset).
    pub dedupe_buffer_size: u64,
    /// log.cleaner.io.max.bytes.per.second (None: unbounded, Kafka's default).
    pub io_max_bytes_per_second: Option<f64>,
    /// log.cleaner.backoff.ms: the pause when no partition needs cleaning.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            dedupe_buffer_size: 128 << 20,
            io_max_bytes_per_second: None,
            backoff_ms: 15_000,
        }
    }
}

/// What the cleaner has done (on /metrics).
#[derive(Debug, Default)]
pub struct CleanerStats {
    pub passes: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub records_removed: AtomicU64,
    pub failures: AtomicU64,
    /// When the last pass ended (wall clock, ms; 0 before any).
    pub last_run_ms: AtomicI64,
    /// How long the last pass took (ms).
    pub last_duration_ms: AtomicU64,
    /// A pass is running now.
    pub cleaning: AtomicBool,
}

/// The running cleaner: its thread and how to stop it.
#[derive(Debug)]
pub struct Cleaner {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub stats: Arc<CleanerStats>,
    running: AtomicBool,
}

impl Cleaner {
    /// Starts the cleaner over `logs`, counting into `stats` (nothing runs
    /// when disabled).
    pub fn start(
        logs: std::sync::Weak<dyn Compacted>,
        config: CleanerConfig,
        stats: Arc<CleanerStats>,
    ) -> Arc<Cleaner> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let cleaner = Arc::new(Cleaner {
            stop: stop.clone(),
            thread: Mutex::new(None),
            stats: stats.clone(),
            running: AtomicBool::new(config.enable),
        });
        if config.enable {
            let handle = std::thread::Builder::new()
                .name("kaas-log-cleaner".into())
                .spawn(move || {
                    lower_priority();
                    run(&logs, config, &stats, &stop)
                });
            match handle {
                Ok(h) => *cleaner.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
                Err(e) => {
                    tracing::error!(error = %e, "the log cleaner did not start");
                    cleaner.running.store(false, Ordering::Release);
                }
            }
        }
        cleaner
    }

    /// Whether the cleaner thread runs.
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Stops the thread, waiting for the pass in progress (before the log
    /// closes: a swap after the close would outdate its indexes).
    pub fn stop(&self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        self.running.store(false, Ordering::Release);
    }
}

/// The cleaner's thread yields the CPU to the request path: a pass is
/// CPU-bound (every record decoded), and on a small machine it would
/// otherwise take a core the produce path's threads wait for (nice 10,
/// this thread only; Linux gives each thread its own nice value).
fn lower_priority() {
    // SAFETY: plain syscalls on this thread's own id; no memory is shared.
    #[allow(unsafe_code)]
    let r = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10)
    };
    if r != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "the log cleaner keeps its priority");
    }
}

fn stopped(stop: &(Mutex<bool>, Condvar)) -> bool {
    *stop.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// The cleaner loop: the dirtiest due partition, cleaned; when none is
/// due, a pause of `backoff_ms` (cut short by a stop).
fn run(
    logs: &std::sync::Weak<dyn Compacted>,
    config: CleanerConfig,
    stats: &CleanerStats,
    stop: &(Mutex<bool>, Condvar),
) {
    let mut map = OffsetMap::new(config.dedupe_buffer_size);
    while !stopped(stop) {
        let now = crate::clock::now_ms();
        // The broker gone (a test's), the cleaner ends.
        let Some(logs) = logs.upgrade() else { return };
        let candidate = logs
            .compacted_partitions()
            .into_iter()
            .map(|p| {
                let d = p.dirtiness(now);
                (p, d)
            })
            .filter(|(p, d)| d.due(&p.config()))
            .max_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio));
        drop(logs);
        let progress = match candidate {
            Some((part, _)) => clean_one(&part, &mut map, config, stats),
            None => false,
        };
        if !progress {
            let (lock, cv) = stop;
            let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
            if !*guard {
                let _ = cv.wait_timeout(guard, Duration::from_millis(config.backoff_ms.max(1)));
            }
        }
    }
}

/// One pass over `part`, counted; whether it moved the checkpoint on.
pub fn clean_one(
    part: &Partition,
    map: &mut OffsetMap,
    config: CleanerConfig,
    stats: &CleanerStats,
) -> bool {
    let started = Instant::now();
    stats.cleaning.store(true, Ordering::Relaxed);
    let mut throttle = Throttle::new(config.io_max_bytes_per_second);
    let mut progress = false;
    match part.clean(map, &mut throttle, crate::clock::now_ms()) {
        Ok(Some(c)) => {
            progress = c.advanced;
            stats.bytes_read.fetch_add(c.bytes_read, Ordering::Relaxed);
            stats
                .bytes_written
                .fetch_add(c.bytes_written, Ordering::Relaxed);
            stats
                .records_removed
                .fetch_add(c.records_removed, Ordering::Relaxed);
            tracing::info!(
                topic = %part.topic,
                partition = part.id,
                segments = c.segments,
                read = c.bytes_read,
                written = c.bytes_written,
                removed = c.records_removed,
                clean_upto = c.clean_upto,
                ms = started.elapsed().as_millis() as u64,
                "log cleaned"
            );
        }
        Ok(None) => {}
        Err(e) if super::partition::is_not_leader(&e) => {}
        Err(e) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(topic = %part.topic, partition = part.id, error = %e, "cleaning failed");
        }
    }
    stats.cleaning.store(false, Ordering::Relaxed);
    stats.passes.fetch_add(1, Ordering::Relaxed);
    stats
        .last_run_ms
        .store(crate::clock::now_ms(), Ordering::Relaxed);
    stats
        .last_duration_ms
        .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    progress
}

/// The cleaner's lines of /metrics: its counters, the last pass, and each
/// compacted partition's dirty ratio.
pub fn render(stats: &CleanerStats, logs: &dyn Compacted, out: &mut String) {
    use std::fmt::Write as _;
    let counters = [
        ("kaas_log_cleaner_passes_total", &stats.passes),
        ("kaas_log_cleaner_bytes_read_total", &stats.bytes_read),
        ("kaas_log_cleaner_bytes_written_total", &stats.bytes_written),
        (
            "kaas_log_cleaner_records_removed_total",
            &stats.records_removed,
        ),
        ("kaas_log_cleaner_failures_total", &stats.failures),
    ];
    for (name, v) in counters {
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {}", v.load(Ordering::Relaxed));
    }
    let _ = writeln!(out, "# TYPE kaas_log_cleaner_last_run_timestamp_ms gauge");
    let _ = writeln!(
        out,
        "kaas_log_cleaner_last_run_timestamp_ms {}",
        stats.last_run_ms.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "# TYPE kaas_log_cleaner_last_duration_ms gauge");
    let _ = writeln!(
        out,
        "kaas_log_cleaner_last_duration_ms {}",
        stats.last_duration_ms.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "# TYPE kaas_log_cleaner_cleaning gauge");
    let _ = writeln!(
        out,
        "kaas_log_cleaner_cleaning {}",
        u8::from(stats.cleaning.load(Ordering::Relaxed))
    );
    let _ = writeln!(out, "# TYPE kaas_log_dirty_ratio gauge");
    let now = crate::clock::now_ms();
    for p in logs.compacted_partitions() {
        let _ = writeln!(
            out,
            "kaas_log_dirty_ratio{{topic=\"{}\",partition=\"{}\"}} {:.4}",
            p.topic,
            p.id,
            p.dirtiness(now).ratio
        );
    }
}
