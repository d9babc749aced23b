//! The policy runtime: loads a transaction-coordinator policy component into
//! a wasmtime sandbox and calls it.
//!
//! It owns the engine configuration (fuel, epoch deadline, memory cap, small
//! wasm stack, no concurrency support), the precompiled-artifact cache and
//! the instance lifecycle (instantiate once from an `InstancePre`, replace a
//! trapped instance). It grants no WASI capability: any import a component
//! declares is defined as a trap. It checks every decision with [`check`]
//! before returning it. It persists nothing and knows no protocol.

mod bindings;
pub mod cache;
pub mod check;
pub mod slot;
pub mod types;

use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};

use bindings::{TxnPolicy, TxnPolicyPre, wit};
pub use bindings::{WIT_EXPORT, WIT_PACKAGE, WIT_VERSION};
pub use cache::ArtifactCache;
pub use check::{Api, Violation};
pub use slot::PolicySlot;
pub use types::{
    AddPartitionsRequest, Claim, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest, Limits,
    PolicyInfo, Reply, TopicPartition, TxnState,
};

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
    #[error("policy {policy} trapped in {func}: {cause}")]
    Trap {
        policy: String,
        func: &'static str,
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

/// Per-instance store data: only the resource limiter.
struct HostState {
    /// Memory/instance/table caps for this store.
    limits: StoreLimits,
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
        })
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
        let wit_version = check_wit_version(&self.engine, &component)?;

        let mut linker: Linker<HostState> = Linker::new(&self.engine);
        // No capabilities: every import (a std guest's `wasi:*`) traps if called.
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
        let info = live
            .bindings
            .kaas_txn_policy_policy()
            .call_describe(&mut live.store)
            .map_err(|e| anyhow::anyhow!("describe() failed: {e:#}"))?;
        let identity = PolicyIdentity {
            name: info.name,
            version: info.version,
            features: info.features,
            wit_version,
            sha256,
        };
        let policy = Policy {
            identity,
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

/// Finds the component's `kaas:txn-policy/policy@X.Y.Z` export and refuses a
/// major version this host does not speak.
fn check_wit_version(engine: &Engine, component: &Component) -> anyhow::Result<String> {
    let prefix = format!("{WIT_PACKAGE}/policy@");
    let ty = component.component_type();
    let mut names = Vec::new();
    for (name, item) in ty.exports(engine) {
        names.push(name.to_string());
        let _ = item;
        if let Some(version) = name.strip_prefix(&prefix) {
            let major = |v: &str| v.split('.').next().map(str::to_owned);
            if major(version) != major(WIT_VERSION) {
                anyhow::bail!(
                    "this policy was built for {WIT_PACKAGE}@{version}, but this kaas speaks \
                     {WIT_PACKAGE}@{WIT_VERSION} (major {}); rebuild the policy against policy-wit {}.x",
                    major(WIT_VERSION).unwrap_or_default(),
                    major(WIT_VERSION).unwrap_or_default(),
                );
            }
            return Ok(version.to_string());
        }
    }
    anyhow::bail!(
        "not a kaas transaction policy: it does not export {WIT_EXPORT} (its exports: {names:?})"
    )
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

    /// Runs `f` against a live instance under fresh fuel and deadline, after
    /// configuring the instance with `limits` if it does not have them yet; a
    /// trap discards the instance so the next call gets a clean one.
    fn call<R>(
        &self,
        func: &'static str,
        limits: Option<Limits>,
        f: impl Fn(&TxnPolicy, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PolicyError> {
        let trap = |cause: String| PolicyError::Trap {
            policy: self.identity.to_string(),
            func,
            cause,
        };
        let mut guard = self
            .live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A deadline trap after almost no work means the thread was
        // descheduled mid-call (a loaded machine), not a slow policy: the
        // policy is pure, so one retry on a fresh instance is safe.
        let mut retried = false;
        loop {
            if guard.is_none() {
                *guard = Some(
                    Live::new(&self.engine, &self.pre, &self.limits)
                        .map_err(|e| trap(format!("{e:#}")))?,
                );
            }
            let Some(live) = guard.as_mut() else {
                return Err(trap("no instance".into()));
            };
            live.arm(&self.limits);
            let result = live
                .configure(limits)
                .and_then(|()| f(&live.bindings, &mut live.store));
            match result {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let used = self.limits.fuel_per_call - live.store.get_fuel().unwrap_or(0);
                    let interrupted = matches!(
                        e.downcast_ref::<wasmtime::Trap>(),
                        Some(wasmtime::Trap::Interrupt)
                    );
                    *guard = None;
                    if interrupted && !retried && used < self.limits.fuel_per_call / 100 {
                        retried = true;
                        tracing::warn!(policy = %self.identity, func, fuel_used = used, "deadline hit after little work; retrying once");
                        continue;
                    }
                    return Err(trap(describe_trap(&e)));
                }
            }
        }
    }

    /// The raw InitProducerId call: the ABI's decision, unchecked.
    fn call_init_producer_id(
        &self,
        current: Option<&Entry>,
        req: &InitRequest,
        limits: Limits,
    ) -> Result<wit::Decision, PolicyError> {
        let current = current.map(types::view);
        let req = types::init_request(req);
        self.call("init-producer-id", Some(limits), |b, s| {
            b.kaas_txn_policy_policy()
                .call_init_producer_id(s, current, req)
        })
    }

    /// InitProducerId, checked.
    pub fn init_producer_id(
        &self,
        current: Option<&Entry>,
        req: &InitRequest,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let d = self.call_init_producer_id(current, req, limits)?;
        let cx = types::Context {
            before: current,
            transactional_id: req.transactional_id.as_deref().unwrap_or(""),
            added: &[],
            now_ms: req.now_ms,
        };
        let d = types::decision(&cx, d);
        self.checked(
            "init-producer-id",
            check::init_producer_id(current, req, &d).map(|()| d),
        )
    }

    /// The bare cost of an InitProducerId call, for benchmarks: the same
    /// sandboxed call as [`Policy::init_producer_id`] (same lock, fuel and
    /// deadline re-arm, argument lowering, result lifting, trap handling) but
    /// without completing the decided entry and the host's invariant check.
    /// It hands back only the decision's kind, never the decision, so an
    /// unchecked decision cannot reach the coordinator through it.
    #[doc(hidden)]
    pub fn init_producer_id_call_cost(
        &self,
        current: Option<&Entry>,
        req: &InitRequest,
        limits: Limits,
    ) -> Result<DecisionKind, PolicyError> {
        Ok(self.call_init_producer_id(current, req, limits)?.kind)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (VerifyOnly included), checked.
    pub fn add_partitions(
        &self,
        current: Option<&Entry>,
        req: &AddPartitionsRequest,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = current.map(types::view);
        let facts = types::add_partitions_request(current, req);
        let d = if req.verify_only {
            let in_transaction = types::in_transaction(current, req);
            let d = self.call("verify-partitions", Some(limits), |b, s| {
                b.kaas_txn_policy_policy()
                    .call_verify_partitions(s, cur, facts, &in_transaction)
            })?;
            types::verify_decision(d)
        } else {
            let d = self.call("add-partitions", Some(limits), |b, s| {
                b.kaas_txn_policy_policy()
                    .call_add_partitions(s, cur, facts)
            })?;
            let cx = types::Context {
                before: current,
                transactional_id: &req.transactional_id,
                added: &req.partitions,
                now_ms: req.now_ms,
            };
            types::decision(&cx, d)
        };
        self.checked(
            "add-partitions",
            check::add_partitions(current, req, &d).map(|()| d),
        )
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
        let d = self.call("end-txn", Some(limits), |b, s| {
            b.kaas_txn_policy_policy().call_end_txn(s, cur, facts)
        })?;
        let cx = types::Context {
            before: current,
            transactional_id: &req.transactional_id,
            added: &[],
            now_ms: req.now_ms,
        };
        let d = types::decision(&cx, d);
        self.checked("end-txn", check::end_txn(current, req, &d).map(|()| d))
    }

    /// Completion after markers, checked.
    pub fn complete_transaction(
        &self,
        current: &Entry,
        now_ms: i64,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = types::view(current);
        let d = self.call("complete-transaction", Some(limits), |b, s| {
            b.kaas_txn_policy_policy().call_complete_transaction(s, cur)
        })?;
        let d = types::decision(&types::Context::of(current, now_ms), d);
        self.checked(
            "complete-transaction",
            check::complete_transaction(current, &d).map(|()| d),
        )
    }

    /// The timeout reaper's decision, checked.
    pub fn reap(
        &self,
        current: &Entry,
        now_ms: i64,
        limits: Limits,
    ) -> Result<Decision, PolicyError> {
        let cur = types::view(current);
        let start = current.start_timestamp_ms;
        let d = self.call("reap", Some(limits), |b, s| {
            b.kaas_txn_policy_policy().call_reap(s, cur, start, now_ms)
        })?;
        let d = types::decision(&types::Context::of(current, now_ms), d);
        self.checked("reap", check::reap(current, &d).map(|()| d))
    }

    /// `describe()` again (the benchmark's lightest call).
    pub fn describe(&self) -> Result<PolicyInfo, PolicyError> {
        self.call("describe", None, |b, s| {
            b.kaas_txn_policy_policy().call_describe(s)
        })
    }

    fn checked(
        &self,
        func: &'static str,
        r: Result<Decision, Violation>,
    ) -> Result<Decision, PolicyError> {
        r.map_err(|violation| PolicyError::Illegal {
            policy: self.identity.to_string(),
            func,
            violation,
        })
    }

    /// Replaces the instance with a fresh one already configured with
    /// `limits` (hot swap, issue 17): the first decision after the policy
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

/// A one-line cause for a trap: out of fuel, deadline, memory, or the
/// guest's own trap code.
fn describe_trap(e: &wasmtime::Error) -> String {
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        let what = match trap {
            wasmtime::Trap::OutOfFuel => {
                "ran out of fuel (too much work for one decision)".to_string()
            }
            wasmtime::Trap::Interrupt => "exceeded its wall-clock deadline".to_string(),
            wasmtime::Trap::StackOverflow => "overflowed its wasm stack".to_string(),
            wasmtime::Trap::AllocationTooLarge => "exceeded its memory limit".to_string(),
            other => format!("trapped: {other}"),
        };
        return what;
    }
    let text = format!("{e:#}");
    if let Some(rest) = text.split("unknown import: `").nth(1) {
        let import = rest.split('`').next().unwrap_or(rest);
        return format!(
            "called `{import}`, a capability kaas does not grant (a std guest's panic or I/O ends up here)"
        );
    }
    if text.contains("memory") && text.contains("limit")
        || text.contains("forcing trap when growing memory")
    {
        return format!("exceeded its memory limit ({text})");
    }
    text
}
