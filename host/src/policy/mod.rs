//! The policy runtime: loads a transaction-coordinator policy component into
//! a wasmtime sandbox and calls it.
//!
//! It owns the engine configuration (fuel, epoch deadline, memory cap, small
//! wasm stack, no concurrency support), the precompiled-artifact cache and
//! the instance lifecycle (instantiate once from an `InstancePre`, replace a
//! trapped instance). The only WASI it grants is a bounded stderr and an
//! empty environment ([`wasi`]): any other import a component declares is
//! defined as a trap. It checks every decision with [`check`] before
//! returning it, and counts decisions, traps, violations and latencies per
//! policy ([`stats`]). It persists nothing and knows no protocol.
//!
//! - [`types`]: the coordinator's natural types for policy calls, and their ABI mapping.
//! - [`bindings`]: the host-side bindings generated from `policy-wit/` (the call's wire format).
//! - [`check`]: the host's own invariants over a policy's decision.
//! - [`features`]: the protocol features a policy finalizes, checked at load and served.
//! - [`exposition`]: the policies' lines of the Prometheus page.
//! - [`cache`]: the precompiled-artifact cache (keyed by engine hash and wasm sha256).
//! - [`slot`]: the policy slot: where the running broker's current policy lives.
//! - [`stats`]: per-policy counters: decisions, traps, violations, latency histograms.
//! - [`wasi`]: the only WASI a policy gets: a bounded stderr and an empty environment.

mod bindings;
pub mod cache;
pub mod check;
pub mod exposition;
pub mod features;
pub mod slot;
pub mod stats;
#[cfg(test)]
mod tests;
pub mod types;
mod wasi;

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};

use bindings::{TxnPolicy, TxnPolicyPre};
pub use bindings::{WIT_EXPORT, WIT_PACKAGE, WIT_VERSION};
pub use cache::ArtifactCache;
pub use check::{Api, Violation};
pub use slot::{Features, PolicySlot};
pub use stats::{Call, PolicyStats, StatsRegistry, TrapKind};
pub use types::{
    AddPartitionsRequest, AddSource, Claim, Decision, DecisionKind, EndTxnRequest, Entry,
    InitRequest, Limits, PolicyInfo, ProtocolFeature, Reply, TopicPartition, TxnState, may_follow,
};
pub use wasi::STDERR_CAPACITY;

/// Kafka's display name of a coordinator state (admin APIs, metrics, diffs).
pub fn state_name(s: TxnState) -> &'static str {
    match s {
        TxnState::Empty => "Empty",
        TxnState::Ongoing => "Ongoing",
        TxnState::PrepareCommit => "PrepareCommit",
        TxnState::PrepareAbort => "PrepareAbort",
        TxnState::CompleteCommit => "CompleteCommit",
        TxnState::CompleteAbort => "CompleteAbort",
        TxnState::Dead => "Dead",
    }
}

/// Resource bounds for every call into a policy.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    /// Fuel (roughly wasm instructions) one call may burn.
    pub fuel_per_call: u64,
    /// Wall-clock bound of one call, enforced by epoch interruption.
    pub deadline: Duration,
    /// Linear memory cap per instance, in bytes.
    pub memory_bytes: usize,
    /// Maximum wasm stack, in bytes.
    pub max_wasm_stack: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            fuel_per_call: 20_000_000,
            deadline: Duration::from_millis(100),
            memory_bytes: 32 << 20,
            max_wasm_stack: 256 << 10,
        }
    }
}

/// How often the epoch ticker advances the engine's epoch.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Why a call into a policy produced no usable decision.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The component trapped: a panic, running out of fuel or time, memory.
    /// The cause ends with what the guest wrote to stderr, if anything.
    #[error("policy {policy} trapped in {func}: {cause}")]
    Trap {
        policy: String,
        func: &'static str,
        kind: TrapKind,
        cause: String,
    },
    /// The decision broke one of the host's invariants.
    #[error("policy {policy} returned an illegal decision from {func}: {violation}")]
    Illegal {
        policy: String,
        func: &'static str,
        violation: Violation,
    },
}

/// Who a loaded policy is.
#[derive(Debug, Clone)]
pub struct PolicyIdentity {
    /// From `describe()`.
    pub name: String,
    /// From `describe()`.
    pub version: String,
    /// From `describe()`.
    pub features: Vec<String>,
    /// From `describe()`: the protocol features it finalizes (checked at load).
    pub protocol_features: Vec<ProtocolFeature>,
    /// The WIT package version the component exports.
    pub wit_version: String,
    /// sha256 of the component bytes.
    pub sha256: String,
}

impl fmt::Display for PolicyIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{} (sha256 {})",
            self.name,
            self.version,
            &self.sha256[..12.min(self.sha256.len())]
        )
    }
}

/// Per-instance store data: the resource limiter and the guest's stderr.
struct HostState {
    /// Memory/instance/table caps for this store.
    limits: StoreLimits,
    /// What the guest wrote to stderr during the current call.
    stderr: wasi::GuestStderr,
}

impl wasi::HasStderr for HostState {
    fn stderr(&mut self) -> &mut wasi::GuestStderr {
        &mut self.stderr
    }
}

/// The engine shared by every policy of a process, and its epoch ticker.
#[derive(Clone)]
pub struct PolicyRuntime {
    /// Configured once; cheap to clone.
    engine: Engine,
    /// Bounds applied to every call.
    limits: SandboxLimits,
    /// Where precompiled artifacts go; none disables caching.
    cache: Option<ArtifactCache>,
    /// The counters of every policy loaded through this runtime.
    registry: StatsRegistry,
}

impl fmt::Debug for PolicyRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyRuntime")
            .field("limits", &self.limits)
            .field("cache", &self.cache)
            .finish()
    }
}

/// Timings of one load, for the benchmark and the startup log.
#[derive(Debug, Clone, Copy)]
pub struct LoadStats {
    /// Whether the precompiled artifact came from the cache.
    pub from_cache: bool,
    /// Compile-or-deserialize time.
    pub load: Duration,
    /// Time of the first instantiation.
    pub instantiate: Duration,
}

impl PolicyRuntime {
    /// An engine configured for sandboxed policy calls, with an epoch ticker.
    pub fn new(limits: SandboxLimits, cache: Option<ArtifactCache>) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(limits.max_wasm_stack)
            .concurrency_support(false)
            .wasm_backtrace_max_frames(None);
        let engine =
            Engine::new(&config).map_err(|e| anyhow::anyhow!("configuring wasmtime: {e:#}"))?;
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("kaas-policy-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })?;
        Ok(PolicyRuntime {
            engine,
            limits,
            cache,
            registry: StatsRegistry::default(),
        })
    }

    /// The counters of every policy loaded through this runtime, in load
    /// order (also reachable from each of them: [`Policy::loaded_policies`]).
    pub fn loaded_policies(&self) -> Vec<Arc<PolicyStats>> {
        self.registry.all()
    }

    /// The engine (for benchmarks that need to compare against it).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads a policy component from a file.
    pub fn load_file(&self, path: &Path) -> anyhow::Result<Policy> {
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("reading policy {}: {e}", path.display()))?;
        self.load_bytes(&bytes)
            .map_err(|e| anyhow::anyhow!("policy {}: {e:#}", path.display()))
    }

    /// Loads a policy component from bytes.
    pub fn load_bytes(&self, wasm: &[u8]) -> anyhow::Result<Policy> {
        self.load_with_stats(wasm).map(|(p, _)| p)
    }

    /// Loads a policy and reports how long compile/deserialize and the first
    /// instantiation took.
    pub fn load_with_stats(&self, wasm: &[u8]) -> anyhow::Result<(Policy, LoadStats)> {
        let sha256 = hex::encode(Sha256::digest(wasm));
        let started = std::time::Instant::now();
        let (component, from_cache) = match &self.cache {
            Some(cache) => cache.load(&self.engine, wasm, &sha256)?,
            None => (
                Component::new(&self.engine, wasm)
                    .map_err(|e| anyhow::anyhow!("compiling the policy: {e:#}"))?,
                false,
            ),
        };
        let load = started.elapsed();
        let wit_version = bindings::check_wit_version(&self.engine, &component)?;

        let mut linker: Linker<HostState> = Linker::new(&self.engine);
        // A bounded stderr and an empty environment; every other import (a
        // std guest's `wasi:*`) traps if called.
        wasi::link(&mut linker, &self.engine, &component)
            .map_err(|e| anyhow::anyhow!("linking the policy's stderr: {e:#}"))?;
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(|e| anyhow::anyhow!("linking the policy's imports: {e:#}"))?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow::anyhow!("preparing the policy: {e:#}"))?;
        let pre =
            TxnPolicyPre::new(pre).map_err(|e| anyhow::anyhow!("the policy's exports: {e:#}"))?;

        let started = std::time::Instant::now();
        let mut live = Live::new(&self.engine, &pre, &self.limits)?;
        let instantiate = started.elapsed();
        live.arm(&self.limits);
        let described = live
            .bindings
            .kaas_txn_policy_policy()
            .call_describe(&mut live.store);
        let stderr = live.store.data_mut().stderr.take();
        let info = described.map_err(|e| {
            anyhow::anyhow!(
                "describe() failed: {}",
                with_stderr(describe_trap(&e), stderr.as_deref())
            )
        })?;
        features::check(&info.protocol_features).map_err(|e| {
            anyhow::anyhow!("describe() declares protocol features this kaas refuses: {e}")
        })?;
        let identity = PolicyIdentity {
            name: info.name,
            version: info.version,
            features: info.features,
            protocol_features: info.protocol_features,
            wit_version,
            sha256,
        };
        if let Some(text) = stderr {
            tracing::warn!(policy = %identity, func = "describe", stderr = %text, "policy wrote to stderr");
        }
        let stats = self.registry.register(&identity);
        let policy = Policy {
            identity,
            stats,
            registry: self.registry.clone(),
            engine: self.engine.clone(),
            pre,
            limits: self.limits.clone(),
            live: Mutex::new(Some(live)),
        };
        Ok((
            policy,
            LoadStats {
                from_cache,
                load,
                instantiate,
            },
        ))
    }
}

/// One live instance and its store.
struct Live {
    /// Store with fuel, epoch deadline and memory limiter.
    store: Store<HostState>,
    /// Typed handle on the instance's exports.
    bindings: TxnPolicy,
    /// The limits this instance was given by `configure`, if any yet.
    configured: Option<Limits>,
}

impl Live {
    fn new(
        engine: &Engine,
        pre: &TxnPolicyPre<HostState>,
        limits: &SandboxLimits,
    ) -> anyhow::Result<Self> {
        let state = HostState {
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .instances(16)
                .memories(4)
                .tables(16)
                .trap_on_grow_failure(true)
                .build(),
            stderr: wasi::GuestStderr::default(),
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limits);
        store
            .set_fuel(limits.fuel_per_call)
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        let bindings = pre
            .instantiate(&mut store)
            .map_err(|e| anyhow::anyhow!("instantiating the policy: {e:#}"))?;
        Ok(Live {
            store,
            bindings,
            configured: None,
        })
    }

    /// Gives the instance `limits` unless it already has them (ABI 2.0
    /// passes limits once per instance, not on every call).
    fn configure(&mut self, limits: Option<Limits>) -> wasmtime::Result<()> {
        let Some(limits) = limits else {
            return Ok(());
        };
        if self.configured != Some(limits) {
            self.bindings
                .kaas_txn_policy_policy()
                .call_configure(&mut self.store, limits)?;
            self.configured = Some(limits);
        }
        Ok(())
    }

    /// Refills fuel and restarts the wall-clock deadline before a call.
    fn arm(&mut self, limits: &SandboxLimits) {
        // Setting fuel cannot fail on an engine with fuel enabled.
        let _ = self.store.set_fuel(limits.fuel_per_call);
        self.store
            .set_epoch_deadline(deadline_ticks(limits.deadline));
    }
}

fn deadline_ticks(deadline: Duration) -> u64 {
    (deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
}

/// A loaded policy. Calls are serialized on one instance (a decision takes
/// a few hundred nanoseconds); a trapped instance is replaced on the next call.
pub struct Policy {
    /// Who this policy is (from `describe()` and the file's hash).
    identity: PolicyIdentity,
    /// Its counters (shared with the runtime's registry).
    stats: Arc<PolicyStats>,
    /// The counters of every policy its runtime loaded (for /metrics).
    registry: StatsRegistry,
    /// For re-instantiation.
    engine: Engine,
    /// Linked and type-checked once; instantiation is cheap from here.
    pre: TxnPolicyPre<HostState>,
    /// Bounds for each call.
    limits: SandboxLimits,
    /// The current instance; `None` after a trap until the next call.
    live: Mutex<Option<Live>>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Name, version, features, WIT version, sha256.
    pub fn identity(&self) -> &PolicyIdentity {
        &self.identity
    }

    /// This policy's counters.
    pub fn stats(&self) -> &Arc<PolicyStats> {
        &self.stats
    }

    /// The counters of every policy loaded by the runtime that loaded this
    /// one (this one included), in load order: after a hot swap the old
    /// policy's figures stay listed.
    pub fn loaded_policies(&self) -> Vec<Arc<PolicyStats>> {
        self.registry.all()
    }

    /// Runs `f` against a live instance under fresh fuel and deadline, after
    /// configuring the instance with `limits` if it does not have them yet; a
    /// trap discards the instance so the next call gets a clean one. Not
    /// counted (the benchmark's bare call).
    fn call<R>(
        &self,
        call: Call,
        limits: Option<Limits>,
        f: impl Fn(&TxnPolicy, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PolicyError> {
        let mut guard = self.lock();
        self.call_locked(&mut guard, call, limits, f)
    }

    /// [`Self::call`], then `finish` (mapping and checking the decision),
    /// counted: the decision of kind `kind(..)` or the error, and (for one
    /// call in [`stats::LATENCY_SAMPLE_EVERY`], the first included) its
    /// latency in the policy, lock wait excluded. The counters are updated under the instance lock, which
    /// serializes every call of this policy, so they need no atomic
    /// read-modify-write (see [`PolicyStats`]).
    fn counted<W, R>(
        &self,
        call: Call,
        limits: Option<Limits>,
        f: impl Fn(&TxnPolicy, &mut Store<HostState>) -> wasmtime::Result<W>,
        finish: impl FnOnce(W) -> Result<R, PolicyError>,
        kind: impl FnOnce(&R) -> Option<DecisionKind>,
    ) -> Result<R, PolicyError> {
        let mut guard = self.lock();
        // One call in LATENCY_SAMPLE_EVERY is timed (two clock reads cost
        // ~15% of a checked decision; BENCHMARKS.md "Policy observability").
        let started = self.stats.sample(call).then(Instant::now);
        let outcome = self
            .call_locked(&mut guard, call, limits, f)
            .and_then(finish);
        if let Some(started) = started {
            self.stats.observe(call, started.elapsed());
        }
        match &outcome {
            Ok(r) => {
                if let Some(kind) = kind(r) {
                    self.stats.decided(call, kind);
                }
            }
            Err(e) => self.count_error(call, e),
        }
        drop(guard);
        outcome
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Live>> {
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The body of [`Self::call`], on the locked instance slot.
    fn call_locked<R>(
        &self,
        guard: &mut Option<Live>,
        call: Call,
        limits: Option<Limits>,
        f: impl Fn(&TxnPolicy, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PolicyError> {
        let func = call.name();
        let trap = |kind: TrapKind, cause: String| PolicyError::Trap {
            policy: self.identity.to_string(),
            func,
            kind,
            cause,
        };
        // A deadline trap after almost no work means the thread was
        // descheduled mid-call (a loaded machine), not a slow policy: the
        // policy is pure, so one retry on a fresh instance is safe.
        let mut retried = false;
        loop {
            if guard.is_none() {
                *guard = Some(
                    Live::new(&self.engine, &self.pre, &self.limits)
                        .map_err(|e| trap(TrapKind::Other, format!("{e:#}")))?,
                );
            }
            let Some(live) = guard.as_mut() else {
                return Err(trap(TrapKind::Other, "no instance".into()));
            };
            live.arm(&self.limits);
            let result = live
                .configure(limits)
                .and_then(|()| f(&live.bindings, &mut live.store));
            match result {
                Ok(r) => {
                    if !live.store.data().stderr.is_empty() {
                        self.log_stderr(func, &mut live.store.data_mut().stderr);
                    }
                    return Ok(r);
                }
                Err(e) => {
                    let used = self.limits.fuel_per_call - live.store.get_fuel().unwrap_or(0);
                    let stderr = live.store.data_mut().stderr.take();
                    let kind = classify_trap(&e);
                    *guard = None;
                    if kind == TrapKind::Deadline
                        && !retried
                        && used < self.limits.fuel_per_call / 100
                    {
                        retried = true;
                        if let Some(suppressed) = DEADLINE_RETRY_LOG.allow() {
                            tracing::warn!(policy = %self.identity, func, fuel_used = used, suppressed, "deadline hit after little work; retrying once");
                        }
                        continue;
                    }
                    return Err(trap(
                        kind,
                        with_stderr(describe_trap(&e), stderr.as_deref()),
                    ));
                }
            }
        }
    }

    /// Logs what a call that did not trap wrote to stderr (a trap's goes
    /// into its error instead), rate-limited per policy.
    #[cold]
    fn log_stderr(&self, func: &'static str, stderr: &mut wasi::GuestStderr) {
        let Some(text) = stderr.take() else {
            return;
        };
        if let Some(suppressed) = self.stats.may_log() {
            tracing::warn!(policy = %self.identity, func, stderr = %text, suppressed, "policy wrote to stderr");
        }
    }

    #[cold]
    fn count_error(&self, call: Call, e: &PolicyError) {
        match e {
            PolicyError::Trap { kind, .. } => self.stats.trapped(call, *kind),
            PolicyError::Illegal { .. } => self.stats.violated(call),
        }
    }

    /// InitProducerId, checked.
    pub fn init_producer_id(
        &self,
        current: Option<&Entry>,
        req: &InitRequest,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let view = current.map(types::view);
        let facts = types::init_request(req);
        self.counted(
            Call::InitProducerId,
            Some(limits),
            |b, s| {
                b.kaas_txn_policy_policy()
                    .call_init_producer_id(s, view, facts)
            },
            |d| {
                let cx = types::Context {
                    before: current,
                    transactional_id: req.transactional_id.as_deref().unwrap_or(""),
                    added: &[],
                    now_ms: req.now_ms,
                };
                let d = types::decision(&cx, d);
                self.checked(
                    Call::InitProducerId,
                    check::init_producer_id(current, req, &d).map(|()| d),
                )
            },
            |d| Some(d.kind),
        )
    }

    /// The bare cost of an InitProducerId call, for benchmarks: the same
    /// sandboxed call as [`Policy::init_producer_id`] (same lock, fuel and
    /// deadline re-arm, argument lowering, result lifting, trap handling) but
    /// without completing the decided entry, the host's invariant check and
    /// the counters. It hands back only the decision's kind, never the
    /// decision, so an unchecked decision cannot reach the coordinator
    /// through it.
    #[doc(hidden)]
    pub fn init_producer_id_call_cost(
        &self,
        current: Option<&Entry>,
        req: &InitRequest,
        limits: Limits,
    ) -> Result<DecisionKind, PolicyError> {
        let current = current.map(types::view);
        let req = types::init_request(req);
        let d = self.call(Call::InitProducerId, Some(limits), |b, s| {
            b.kaas_txn_policy_policy()
                .call_init_producer_id(s, current, req)
        })?;
        Ok(d.kind)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (VerifyOnly included), checked.
    pub fn add_partitions(
        &self,
        current: Option<&Entry>,
        req: &AddPartitionsRequest,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = current.map(types::view);
        let check = |call: Call, d: Decision| {
            self.checked(call, check::add_partitions(current, req, &d).map(|()| d))
        };
        if req.verify_only {
            let facts = types::verify_request(req);
            let in_transaction = types::in_transaction(current, req);
            self.counted(
                Call::VerifyPartitions,
                Some(limits),
                |b, s| {
                    b.kaas_txn_policy_policy().call_verify_partitions(
                        s,
                        cur,
                        facts,
                        &in_transaction,
                    )
                },
                |d| check(Call::VerifyPartitions, types::verify_decision(d)),
                |d| Some(d.kind),
            )
        } else {
            let facts = types::add_partitions_request(current, req);
            self.counted(
                Call::AddPartitions,
                Some(limits),
                |b, s| {
                    b.kaas_txn_policy_policy()
                        .call_add_partitions(s, cur, facts)
                },
                |d| {
                    let cx = types::Context {
                        before: current,
                        transactional_id: &req.transactional_id,
                        added: &req.partitions,
                        now_ms: req.now_ms,
                    };
                    check(Call::AddPartitions, types::decision(&cx, d))
                },
                |d| Some(d.kind),
            )
        }
    }

    /// EndTxn, checked.
    pub fn end_txn(
        &self,
        current: Option<&Entry>,
        req: &EndTxnRequest,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = current.map(types::view);
        let facts = types::end_txn_request(req);
        self.counted(
            Call::EndTxn,
            Some(limits),
            |b, s| b.kaas_txn_policy_policy().call_end_txn(s, cur, facts),
            |d| {
                let cx = types::Context {
                    before: current,
                    transactional_id: &req.transactional_id,
                    added: &[],
                    now_ms: req.now_ms,
                };
                let d = types::decision(&cx, d);
                self.checked(Call::EndTxn, check::end_txn(current, req, &d).map(|()| d))
            },
            |d| Some(d.kind),
        )
    }

    /// Completion after markers, checked.
    pub fn complete_transaction(
        &self,
        current: &Entry,
        now_ms: i64,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = types::view(current);
        self.counted(
            Call::CompleteTransaction,
            Some(limits),
            |b, s| b.kaas_txn_policy_policy().call_complete_transaction(s, cur),
            |d| {
                let d = types::decision(&types::Context::of(current, now_ms), d);
                self.checked(
                    Call::CompleteTransaction,
                    check::complete_transaction(current, &d).map(|()| d),
                )
            },
            |d| Some(d.kind),
        )
    }

    /// The timeout reaper's decision, checked. `candidate`: a fresh
    /// producer id for a rotation (-1 when the host offers none).
    pub fn reap(
        &self,
        current: &Entry,
        now_ms: i64,
        candidate: i64,
        tenant: u8,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = types::view(current);
        let start = current.start_timestamp_ms;
        self.counted(
            Call::Reap,
            Some(limits),
            |b, s| {
                b.kaas_txn_policy_policy()
                    .call_reap(s, cur, start, now_ms, candidate, tenant)
            },
            |d| {
                let d = types::decision(&types::Context::of(current, now_ms), d);
                self.checked(Call::Reap, check::reap(current, candidate, &d).map(|()| d))
            },
            |d| Some(d.kind),
        )
    }

    /// `describe()` again (the benchmark's lightest call).
    pub fn describe(&self) -> Result<PolicyInfo, PolicyError> {
        self.counted(
            Call::Describe,
            None,
            |b, s| b.kaas_txn_policy_policy().call_describe(s),
            Ok,
            |_| None,
        )
    }

    fn checked(&self, call: Call, r: Result<Decision, Violation>) -> Result<Decision, PolicyError> {
        r.map_err(|violation| PolicyError::Illegal {
            policy: self.identity.to_string(),
            func: call.name(),
            violation,
        })
    }

    /// Replaces the instance with a fresh one already configured with
    /// `limits` (hot swap): the first decision after the policy
    /// takes over then costs what any decision costs, and no guest state
    /// left by the smoke vectors survives into real decisions.
    pub fn renew_instance(&self, limits: Limits) -> anyhow::Result<()> {
        let mut live = Live::new(&self.engine, &self.pre, &self.limits)?;
        live.arm(&self.limits);
        live.configure(Some(limits))
            .map_err(|e| anyhow::anyhow!("configure() failed: {}", describe_trap(&e)))?;
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
        Ok(())
    }

    /// Instantiates a fresh instance (for the benchmark's instantiation time).
    pub fn instantiate_fresh(&self) -> anyhow::Result<Duration> {
        let started = std::time::Instant::now();
        let live = Live::new(&self.engine, &self.pre, &self.limits)?;
        let took = started.elapsed();
        drop(live);
        Ok(took)
    }
}

/// At most one "retrying once" line a second, process-wide (the retry is a
/// loaded machine's symptom, not one policy's).
static DEADLINE_RETRY_LOG: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();

/// Which [`TrapKind`] a call's error is: the one place traps are
/// classified (the counters and [`describe_trap`] agree through it).
pub fn classify_trap(e: &wasmtime::Error) -> TrapKind {
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        return match trap {
            wasmtime::Trap::OutOfFuel => TrapKind::Fuel,
            wasmtime::Trap::Interrupt => TrapKind::Deadline,
            wasmtime::Trap::StackOverflow => TrapKind::Stack,
            wasmtime::Trap::AllocationTooLarge => TrapKind::Memory,
            // A Rust panic ends in `unreachable` (after its message went to
            // stderr); other wasm faults are the guest's own bugs too.
            _ => TrapKind::Panic,
        };
    }
    let text = format!("{e:#}");
    if text.contains("unknown import: `") {
        TrapKind::Capability
    } else if text.contains("memory") && text.contains("limit")
        || text.contains("forcing trap when growing memory")
    {
        TrapKind::Memory
    } else {
        TrapKind::Other
    }
}

/// A one-line cause for a trap: out of fuel, deadline, memory, a panic, a
/// capability not granted, or the guest's own trap code.
fn describe_trap(e: &wasmtime::Error) -> String {
    let kind = classify_trap(e);
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        return match (kind, trap) {
            (TrapKind::Fuel, _) => "ran out of fuel (too much work for one decision)".to_string(),
            (TrapKind::Deadline, _) => "exceeded its wall-clock deadline".to_string(),
            (TrapKind::Stack, _) => "overflowed its wasm stack".to_string(),
            (TrapKind::Memory, _) => "exceeded its memory limit".to_string(),
            (_, wasmtime::Trap::UnreachableCodeReached) => {
                "panicked (wasm `unreachable`)".to_string()
            }
            (_, other) => format!("trapped: {other}"),
        };
    }
    let text = format!("{e:#}");
    match kind {
        TrapKind::Capability => {
            let rest = text.split("unknown import: `").nth(1).unwrap_or(&text);
            let import = rest.split('`').next().unwrap_or(rest);
            format!(
                "called `{import}`, a capability kaas does not grant (only a bounded stderr and \
                 an empty environment are)"
            )
        }
        TrapKind::Memory => format!("exceeded its memory limit ({text})"),
        _ => text,
    }
}

/// `cause`, then what the guest wrote to stderr before it, if anything.
fn with_stderr(cause: String, stderr: Option<&str>) -> String {
    match stderr {
        Some(text) => format!("{cause}; its stderr: {text}"),
        None => cause,
    }
}
