//! Per-policy counters: decisions by call and kind, traps by kind,
//! host-check violations and a latency histogram per call.
//!
//! Why it exists: an operator must see what the loaded policy decides, how
//! often it traps and why, and what a decision costs, per policy, so that
//! after a hot swap the old policy's figures stay apart from the new one's.
//! [`StatsRegistry`] keeps the stats of every policy a runtime loaded;
//! `metrics.rs` renders them.
//!
//! It may touch only atomics on the decision path: every update is a
//! relaxed load and store made under the policy's existing instance lock (no
//! lock of its own, no allocation). It knows nothing of wasmtime: the trap
//! classifier lives next to `describe_trap` in `mod.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::PolicyIdentity;
use super::types::DecisionKind;
use crate::ratelimit::RateLimit;

/// The policy functions the host calls (the WIT names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    InitProducerId,
    AddPartitions,
    VerifyPartitions,
    EndTxn,
    CompleteTransaction,
    Reap,
    Describe,
}

impl Call {
    /// Every call, in the order metrics list them.
    pub const ALL: [Call; 7] = [
        Call::InitProducerId,
        Call::AddPartitions,
        Call::VerifyPartitions,
        Call::EndTxn,
        Call::CompleteTransaction,
        Call::Reap,
        Call::Describe,
    ];

    /// The WIT function's name (also the `call` label).
    pub const fn name(self) -> &'static str {
        match self {
            Call::InitProducerId => "init-producer-id",
            Call::AddPartitions => "add-partitions",
            Call::VerifyPartitions => "verify-partitions",
            Call::EndTxn => "end-txn",
            Call::CompleteTransaction => "complete-transaction",
            Call::Reap => "reap",
            Call::Describe => "describe",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Why a call trapped, as counted in `kaas_policy_traps_total{kind}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// Out of fuel: too much work for one decision.
    Fuel,
    /// The wall-clock deadline (epoch interruption).
    Deadline,
    /// The linear-memory cap (a failed `memory.grow`, an allocation too large).
    Memory,
    /// The wasm stack overflowed (counted apart from memory: it is a
    /// recursion bound, not the memory cap).
    Stack,
    /// The guest gave up: a Rust panic (`unreachable` after the panic
    /// message went to stderr), or another wasm trap (out-of-bounds access,
    /// division by zero, a bad indirect call).
    Panic,
    /// The guest called an import kaas does not grant (a clock, a file,
    /// random bytes, stdin/stdout, sockets, exit).
    Capability,
    /// Anything else (the host could not instantiate the policy).
    Other,
}

impl TrapKind {
    /// Every kind, in the order metrics list them.
    pub const ALL: [TrapKind; 7] = [
        TrapKind::Fuel,
        TrapKind::Deadline,
        TrapKind::Memory,
        TrapKind::Stack,
        TrapKind::Panic,
        TrapKind::Capability,
        TrapKind::Other,
    ];

    /// The `kind` label.
    pub const fn name(self) -> &'static str {
        match self {
            TrapKind::Fuel => "fuel",
            TrapKind::Deadline => "deadline",
            TrapKind::Memory => "memory",
            TrapKind::Stack => "stack",
            TrapKind::Panic => "panic",
            TrapKind::Capability => "capability",
            TrapKind::Other => "other",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Every decision kind, in WIT order (the `kind` label of decisions). A new
/// WIT kind fails to compile in [`decision_index`] instead of being
/// miscounted.
pub const DECISION_KINDS: [DecisionKind; 12] = [
    DecisionKind::NewProducer,
    DecisionKind::Initialize,
    DecisionKind::Bump,
    DecisionKind::RetryReturnsCurrent,
    DecisionKind::Rotate,
    DecisionKind::FenceAndAbort,
    DecisionKind::AddPartitions,
    DecisionKind::NoChange,
    DecisionKind::PrepareCommit,
    DecisionKind::PrepareAbort,
    DecisionKind::Complete,
    DecisionKind::Reject,
];

/// The WIT name of a decision kind.
pub const fn decision_kind_name(kind: DecisionKind) -> &'static str {
    match kind {
        DecisionKind::NewProducer => "new-producer",
        DecisionKind::Initialize => "initialize",
        DecisionKind::Bump => "bump",
        DecisionKind::RetryReturnsCurrent => "retry-returns-current",
        DecisionKind::Rotate => "rotate",
        DecisionKind::FenceAndAbort => "fence-and-abort",
        DecisionKind::AddPartitions => "add-partitions",
        DecisionKind::NoChange => "no-change",
        DecisionKind::PrepareCommit => "prepare-commit",
        DecisionKind::PrepareAbort => "prepare-abort",
        DecisionKind::Complete => "complete",
        DecisionKind::Reject => "reject",
    }
}

const fn decision_index(kind: DecisionKind) -> usize {
    match kind {
        DecisionKind::NewProducer => 0,
        DecisionKind::Initialize => 1,
        DecisionKind::Bump => 2,
        DecisionKind::RetryReturnsCurrent => 3,
        DecisionKind::Rotate => 4,
        DecisionKind::FenceAndAbort => 5,
        DecisionKind::AddPartitions => 6,
        DecisionKind::NoChange => 7,
        DecisionKind::PrepareCommit => 8,
        DecisionKind::PrepareAbort => 9,
        DecisionKind::Complete => 10,
        DecisionKind::Reject => 11,
    }
}

/// Upper bounds (inclusive, nanoseconds) of the latency histogram's
/// buckets: a decision takes a few hundred nanoseconds, a trap up to the
/// deadline (100 ms); `+Inf` follows.
pub const BUCKET_BOUNDS_NS: [u64; 16] = [
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    10_000_000,
    50_000_000,
    100_000_000,
];

/// The counters of one call of one policy.
#[derive(Debug, Default)]
struct CallStats {
    /// Legal decisions, by kind.
    decisions: [AtomicU64; DECISION_KINDS.len()],
    /// Traps, by kind.
    traps: [AtomicU64; TrapKind::ALL.len()],
    /// Decisions the host check refused.
    violations: AtomicU64,
    /// Calls per latency bucket (not cumulative; the last is `+Inf`).
    buckets: [AtomicU64; BUCKET_BOUNDS_NS.len() + 1],
    /// Total latency of all timed calls.
    sum_nanos: AtomicU64,
    /// Calls so far, timed or not (picks the ones to time).
    seen: AtomicU64,
}

/// The latency histogram times one call in this many, per policy and call
/// (the first call included): two clock reads per call cost about 15% of a
/// checked decision (BENCHMARKS.md), while the decision, trap and violation
/// counters count every call. The histogram's `_count` is the number of
/// timed calls.
pub const LATENCY_SAMPLE_EVERY: u64 = 8;

/// A latency histogram's state, read at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// Cumulative counts per bound of [`BUCKET_BOUNDS_NS`], then `+Inf`
    /// (the total count).
    pub cumulative: Vec<u64>,
    /// Sum of all observed latencies.
    pub sum_nanos: u64,
}

impl Histogram {
    /// Observations in all buckets.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

/// The counters of one loaded policy.
#[derive(Debug)]
pub struct PolicyStats {
    identity: PolicyIdentity,
    calls: [CallStats; Call::ALL.len()],
    /// Lets through at most ten trap/violation/stderr log lines a second
    /// for this policy; the rest are counted in the next line's
    /// `suppressed` (and all of them in the counters).
    log_limit: RateLimit,
}

impl PolicyStats {
    fn new(identity: PolicyIdentity) -> Self {
        PolicyStats {
            identity,
            calls: Default::default(),
            log_limit: RateLimit::new(Duration::from_millis(100)),
        }
    }

    /// Who these counters belong to.
    pub fn identity(&self) -> &PolicyIdentity {
        &self.identity
    }

    /// `name@version`, the `policy` label.
    pub fn label(&self) -> String {
        format!("{}@{}", self.identity.name, self.identity.version)
    }

    /// The first 12 hex digits of the component's sha256 (the `sha256`
    /// label of counters; `kaas_policy_info` carries the whole hash).
    pub fn short_sha256(&self) -> &str {
        &self.identity.sha256[..12.min(self.identity.sha256.len())]
    }

    // The updates below are a relaxed load and a relaxed store, not an
    // atomic read-modify-write: a locked `fetch_add` drains the store
    // buffer, which after a decision costs tens of nanoseconds (measured,
    // BENCHMARKS.md). The policy's instance lock serializes its callers
    // (`Policy::counted`), so no update is lost; readers see each counter
    // whole. Two `Policy` values of the same component (a swap back to the
    // same file) share stats under two locks; an increment racing the swap
    // may then be lost, never torn.

    /// Whether this call of `call` is one to time (the first, then one in
    /// [`LATENCY_SAMPLE_EVERY`]).
    pub(super) fn sample(&self, call: Call) -> bool {
        let seen = &self.calls[call.index()].seen;
        let n = seen.load(Ordering::Relaxed);
        seen.store(n.wrapping_add(1), Ordering::Relaxed);
        n.is_multiple_of(LATENCY_SAMPLE_EVERY)
    }

    /// One call's latency.
    pub(super) fn observe(&self, call: Call, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let c = &self.calls[call.index()];
        let bucket = BUCKET_BOUNDS_NS
            .iter()
            .position(|&bound| nanos <= bound)
            .unwrap_or(BUCKET_BOUNDS_NS.len());
        add(&c.buckets[bucket], 1);
        add(&c.sum_nanos, nanos);
    }

    /// A legal decision of `kind` from `call`.
    pub(super) fn decided(&self, call: Call, kind: DecisionKind) {
        add(&self.calls[call.index()].decisions[decision_index(kind)], 1);
    }

    /// A trap of `kind` in `call`.
    pub(super) fn trapped(&self, call: Call, kind: TrapKind) {
        add(&self.calls[call.index()].traps[kind.index()], 1);
    }

    /// A decision of `call` the host check refused.
    pub(super) fn violated(&self, call: Call) {
        add(&self.calls[call.index()].violations, 1);
    }

    /// Legal decisions of `kind` from `call` so far.
    pub fn decisions(&self, call: Call, kind: DecisionKind) -> u64 {
        self.calls[call.index()].decisions[decision_index(kind)].load(Ordering::Relaxed)
    }

    /// Traps of `kind` in `call` so far.
    pub fn traps(&self, call: Call, kind: TrapKind) -> u64 {
        self.calls[call.index()].traps[kind.index()].load(Ordering::Relaxed)
    }

    /// Refused decisions of `call` so far.
    pub fn violations(&self, call: Call) -> u64 {
        self.calls[call.index()].violations.load(Ordering::Relaxed)
    }

    /// The latency histogram of `call`.
    pub fn histogram(&self, call: Call) -> Histogram {
        let c = &self.calls[call.index()];
        let mut total = 0;
        let cumulative = c
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect();
        Histogram {
            cumulative,
            sum_nanos: c.sum_nanos.load(Ordering::Relaxed),
        }
    }

    /// `Some(suppressed)` when a trap, violation or stderr line of this
    /// policy may be logged now (see [`RateLimit::allow`]).
    pub fn may_log(&self) -> Option<u64> {
        self.log_limit.allow()
    }
}

/// `counter += n` for a counter whose writers are serialized by a lock.
#[inline]
fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// The stats of every policy a runtime loaded, in load order; a component
/// loaded again (same hash, name and version) gets its earlier stats back,
/// so its series stay unique.
#[derive(Debug, Clone, Default)]
pub struct StatsRegistry {
    loaded: Arc<Mutex<Vec<Arc<PolicyStats>>>>,
}

impl StatsRegistry {
    /// The stats of `identity`: the existing ones if it was loaded before.
    pub fn register(&self, identity: &PolicyIdentity) -> Arc<PolicyStats> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = loaded.iter().find(|s| {
            s.identity.sha256 == identity.sha256
                && s.identity.name == identity.name
                && s.identity.version == identity.version
        }) {
            return s.clone();
        }
        let stats = Arc::new(PolicyStats::new(identity.clone()));
        loaded.push(stats.clone());
        stats
    }

    /// Every policy loaded so far, in load order.
    pub fn all(&self) -> Vec<Arc<PolicyStats>> {
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(name: &str, sha256: &str) -> PolicyIdentity {
        PolicyIdentity {
            name: name.into(),
            version: "1.0.0".into(),
            features: Vec::new(),
            protocol_features: Vec::new(),
            wit_version: "3.0.0".into(),
            sha256: sha256.into(),
        }
    }

    #[test]
    fn latencies_land_in_the_first_bucket_whose_bound_they_do_not_exceed() {
        let reg = StatsRegistry::default();
        let s = reg.register(&identity("p", "ab"));
        for nanos in [100, 250, 251, 999, 2_000_000_000] {
            s.observe(Call::EndTxn, Duration::from_nanos(nanos));
        }
        let h = s.histogram(Call::EndTxn);
        assert_eq!(h.cumulative[0], 2, "100 and 250 ns are <= 250 ns");
        assert_eq!(h.cumulative[1], 3, "251 ns is <= 500 ns");
        assert_eq!(h.cumulative[2], 4, "999 ns is <= 1 us");
        assert_eq!(h.cumulative[BUCKET_BOUNDS_NS.len() - 1], 4);
        assert_eq!(h.count(), 5, "2 s counts only in +Inf");
        assert_eq!(h.sum_nanos, 100 + 250 + 251 + 999 + 2_000_000_000);
        assert_eq!(s.histogram(Call::Reap).count(), 0, "calls are apart");
    }

    #[test]
    fn the_first_call_and_then_one_in_eight_is_timed_per_call() {
        let reg = StatsRegistry::default();
        let s = reg.register(&identity("p", "cd"));
        let timed: Vec<usize> = (0..17).filter(|_| s.sample(Call::EndTxn)).collect();
        assert_eq!(timed, vec![0, 8, 16]);
        assert!(s.sample(Call::Reap), "each call keeps its own sequence");
    }

    #[test]
    fn a_policy_loaded_again_keeps_its_counters_and_another_gets_its_own() {
        let reg = StatsRegistry::default();
        let a = reg.register(&identity("a", "aa"));
        a.decided(Call::InitProducerId, DecisionKind::Bump);
        a.trapped(Call::Reap, TrapKind::Fuel);
        a.violated(Call::EndTxn);
        let again = reg.register(&identity("a", "aa"));
        assert!(Arc::ptr_eq(&a, &again));
        let b = reg.register(&identity("a", "bb"));
        assert!(!Arc::ptr_eq(&a, &b), "another hash is another policy");
        assert_eq!(reg.all().len(), 2);
        assert_eq!(again.decisions(Call::InitProducerId, DecisionKind::Bump), 1);
        assert_eq!(again.traps(Call::Reap, TrapKind::Fuel), 1);
        assert_eq!(again.violations(Call::EndTxn), 1);
        assert_eq!(b.decisions(Call::InitProducerId, DecisionKind::Bump), 0);
        assert_eq!(a.traps(Call::Reap, TrapKind::Deadline), 0);
    }

    #[test]
    fn every_decision_kind_has_its_own_counter() {
        let reg = StatsRegistry::default();
        let s = reg.register(&identity("p", "cc"));
        // Kind number i is decided i + 1 times: a shared counter would show.
        for (i, kind) in DECISION_KINDS.iter().enumerate() {
            for _ in 0..=i {
                s.decided(Call::InitProducerId, *kind);
            }
        }
        for (i, kind) in DECISION_KINDS.iter().enumerate() {
            assert_eq!(
                s.decisions(Call::InitProducerId, *kind),
                i as u64 + 1,
                "{}",
                decision_kind_name(*kind)
            );
        }
    }
}
