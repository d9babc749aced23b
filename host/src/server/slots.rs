//! Connection slots: the open connections as the accept loop sees them, each
//! with its progress stamp, and the eviction that makes room for a new one at
//! `max_connections` (the one owing part of a frame, then the one idle
//! longest, sparing those with a request in flight that still progress).
//! Touches only the metrics' eviction counter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::metrics::Metrics;

/// Milliseconds since the server started: progress stamps fit an atomic.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock(Instant);

impl Clock {
    pub(super) fn now_ms(self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    pub(super) fn at(self, ms: u64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.0 + Duration::from_millis(ms))
    }
}

/// One connection as the accept loop sees it.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) clock: Clock,
    /// When a byte last arrived or a response was last written.
    pub(super) last_progress: AtomicU64,
    /// Requests read whose response has not been written yet.
    pub(super) in_flight: AtomicUsize,
    /// Asks the connection's reader to stop (evicted, or its writer
    /// stopped).
    pub(super) close: Notify,
    /// Evicted: what it still owes its client is dropped, not written.
    pub(super) evicted: AtomicBool,
    /// Owes the broker bytes: connected or started a frame, and not yet
    /// sent all of it. Such connections are evicted before complete ones,
    /// so half-sent frames cannot push out an idle client that did
    /// nothing wrong.
    pub(super) incomplete: AtomicBool,
}

impl Conn {
    pub(super) fn touch(&self) {
        self.last_progress
            .store(self.clock.now_ms(), Ordering::Relaxed);
    }
}

/// The open connections, for eviction at `max_connections`.
#[derive(Debug)]
pub(super) struct Registry {
    pub(super) clock: Clock,
    pub(super) next_id: AtomicU64,
    pub(super) conns: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Woken when the last connection leaves (a shutdown waits for it).
    pub(super) emptied: Notify,
}

impl Registry {
    pub(super) fn new() -> Self {
        Registry {
            clock: Clock(Instant::now()),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            emptied: Notify::new(),
        }
    }

    /// Every connection registered now.
    pub(super) fn all(&self) -> Vec<Arc<Conn>> {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Registers a new connection. At `max` connections one is told to
    /// close and loses its slot: one that owes the broker part of a frame
    /// (or has sent none yet) before one that does not, and among those the
    /// one that has gone longest without progress (the oldest of equals),
    /// sparing those with a request in flight that made progress within
    /// `stuck`; with none to evict the new connection is refused (None).
    pub(super) fn admit(
        &self,
        max: usize,
        stuck: Duration,
        metrics: &Metrics,
    ) -> Option<Arc<Conn>> {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        if conns.len() >= max {
            let now = self.clock.now_ms();
            let stuck = stuck.as_millis() as u64;
            let victim = conns
                .values()
                .filter(|c| {
                    c.in_flight.load(Ordering::Acquire) == 0
                        || now.saturating_sub(c.last_progress.load(Ordering::Relaxed)) >= stuck
                })
                .min_by_key(|c| {
                    (
                        !c.incomplete.load(Ordering::Relaxed),
                        c.last_progress.load(Ordering::Relaxed),
                        c.id,
                    )
                })?
                .clone();
            conns.remove(&victim.id);
            victim.evicted.store(true, Ordering::Release);
            victim.close.notify_one();
            metrics.connections_evicted.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                idle_ms = self
                    .clock
                    .now_ms()
                    .saturating_sub(victim.last_progress.load(Ordering::Relaxed)),
                "connection limit reached: closing the connection idle longest"
            );
        }
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            clock: self.clock,
            last_progress: AtomicU64::new(self.clock.now_ms()),
            in_flight: AtomicUsize::new(0),
            close: Notify::new(),
            evicted: AtomicBool::new(false),
            incomplete: AtomicBool::new(true),
        });
        conns.insert(conn.id, conn.clone());
        Some(conn)
    }
}

/// A connection's slot, given back when its task ends.
pub(super) struct Registered {
    pub(super) registry: Arc<Registry>,
    pub(super) conn: Arc<Conn>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut conns = self
            .registry
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        conns.remove(&self.conn.id);
        if conns.is_empty() {
            self.registry.emptied.notify_waiters();
        }
    }
}
