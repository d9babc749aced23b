//! The broker's lease and the write gate derived from it.
//!
//! A broker may write partition files and acknowledge while its lease is
//! surely alive in etcd. It cannot ask etcd at every write, so it keeps a
//! local deadline: each keep-alive that etcd answers with a TTL of `ttl`
//! moves the deadline to `sent + ttl * SAFE_FRACTION`, where `sent` is when
//! the keep-alive left this process (monotonic clock). etcd resets the
//! lease's expiry to its own receive time plus `ttl`, which is after `sent`;
//! so as long as neither clock runs more than 20 % fast or slow against real
//! time, the local deadline comes before etcd can expire the lease (the
//! timing argument in docs/design.md, "Cluster mode", "Safety argument").
//!
//! The gate also carries a generation: when the lease is lost, the
//! generation moves on, and every gate handed out under the old one stays
//! closed even after a new lease is granted, so a request that held a
//! partition across the loss can never write or acknowledge with it.

use crate::lease_gate::LeaseGate;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Share of the TTL a keep-alive answer makes usable: the rest is the
/// safety margin for clock rates and scheduling.
pub const SAFE_FRACTION: f64 = 0.8;

/// The lease state one broker shares between its keep-alive task and its
/// gates.
#[derive(Debug)]
pub struct LeaseState {
    base: Instant,
    /// Nanoseconds after `base` until which writes are allowed (0: never).
    valid_until: AtomicU64,
    /// Bumped when the lease is lost.
    generation: AtomicU64,
    /// The etcd lease id (0: none yet).
    id: AtomicI64,
}

impl Default for LeaseState {
    fn default() -> Self {
        static BASE: OnceLock<Instant> = OnceLock::new();
        LeaseState {
            base: *BASE.get_or_init(Instant::now),
            valid_until: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            id: AtomicI64::new(0),
        }
    }
}

impl LeaseState {
    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether writes are allowed now.
    pub fn valid(&self) -> bool {
        self.nanos(Instant::now()) < self.valid_until.load(Ordering::Acquire)
    }

    /// A keep-alive sent at `sent` was answered with `ttl`.
    pub fn renewed(&self, sent: Instant, ttl: Duration) {
        let until = self.nanos(sent + ttl.mul_f64(SAFE_FRACTION));
        self.valid_until.fetch_max(until, Ordering::AcqRel);
    }

    /// A new lease was granted at (before) `sent`.
    pub fn granted(&self, id: i64, sent: Instant, ttl: Duration) {
        self.id.store(id, Ordering::Release);
        self.valid_until.store(0, Ordering::Release);
        self.renewed(sent, ttl);
    }

    /// The lease is gone: every gate of this generation closes for good.
    pub fn lost(&self) {
        self.valid_until.store(0, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn id(&self) -> i64 {
        self.id.load(Ordering::Acquire)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// How long until the deadline (zero when past).
    pub fn remaining(&self) -> Duration {
        let now = self.nanos(Instant::now());
        Duration::from_nanos(self.valid_until.load(Ordering::Acquire).saturating_sub(now))
    }

    /// A gate for the current generation.
    pub fn gate(self: &Arc<Self>) -> LeaseGate {
        let g = self.generation();
        let me = self.clone();
        Arc::new(move || me.generation() == g && me.valid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_closes_at_the_safe_fraction_of_the_ttl() {
        let l = Arc::new(LeaseState::default());
        let gate = l.gate();
        assert!(!gate(), "no lease yet");
        let sent = Instant::now();
        l.granted(7, sent, Duration::from_millis(200));
        assert!(gate());
        while Instant::now() < sent + Duration::from_millis(161) {
            std::thread::yield_now();
        }
        assert!(!gate(), "closed at 80 % of the TTL after the send");
        l.renewed(Instant::now(), Duration::from_secs(10));
        assert!(gate(), "a renewal reopens the same generation");
    }

    #[test]
    fn a_lost_lease_closes_old_gates_for_good() {
        let l = Arc::new(LeaseState::default());
        l.granted(1, Instant::now(), Duration::from_secs(10));
        let old = l.gate();
        assert!(old());
        l.lost();
        assert!(!old());
        l.granted(2, Instant::now(), Duration::from_secs(10));
        assert!(!old(), "a gate of the lost generation never reopens");
        assert!(l.gate()());
    }
}
