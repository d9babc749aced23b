//! Policy-decision benchmark: what an InitProducerId decision costs natively,
//! through the wasmtime sandbox, and as a no-op call into a component; how
//! long a policy takes to load (cold, from the precompiled cache) and to
//! instantiate.
//!
//! ```text
//! # from the workspace root; always --release (a debug wasmtime is ~50x slower)
//! cargo build --release --target wasm32-wasip2 --workspace --exclude kaas
//! cargo run --release -p kaas --example policy_bench [-- --iters 200000] [-- --investigate]
//! ```
//!
//! Results and their interpretation: BENCHMARKS.md.
//!
//! How the decision timings are taken (see `--help` for the knobs):
//! - Every case is a closure run `--batch` times between two `Instant::now()`
//!   calls; one sample is that batch's wall time divided by the batch size.
//!   Batching amortises the ~20-30 ns cost of reading the clock, which would
//!   otherwise be a large share of a ~50 ns native decision. Median and p99
//!   are taken over these per-batch means, so the p99 is the p99 of
//!   `--batch`-call averages, not of single calls (use `--batch 1` to see
//!   single calls, timer cost included).
//! - The cases are interleaved in `--rounds` rounds (each round runs every
//!   case for iters/rounds calls), so a burst of noise on this shared machine
//!   is spread over all cases instead of landing on one.
//! - Every timed call asserts its expected outcome (ok, or the noop's
//!   illegal-decision error for `noop checked`), so a run can never quietly
//!   time a trap or an error path instead of a decision.
//! - Inputs are `black_box`ed and outputs are dropped inside the timed loop in
//!   every case (the checked WASM path completes the decided entry into a
//!   full host `Entry` with a fresh transactional.id string, so dropping it
//!   is part of its cost; the native path gets the same treatment).
//!
//! Which calls are compared (the fairness question):
//! - `native`: `kaas_apache37_rules::init_producer_id` on the guest SDK types
//!   (ABI 2.0's fixed-size entry view, copied in as the guest receives it).
//!   No host check.
//! - `wasm checked`: `Policy::init_producer_id` on the apache37 component, the
//!   production path: lock, fuel and deadline re-arm, mapping the host's
//!   entry and request onto ABI 2.0 and lowering them, the guest's rules,
//!   lifting the decision, completing the decided entry with the fields the
//!   host keeps, the host invariant check.
//! - `wasm call`: the same call without completing the entry and without the
//!   host check (`Policy::init_producer_id_call_cost`).
//! - `noop call`: the same unchecked call into the noop component, whose
//!   init-producer-id (the same WIT function, so the same signature shape as
//!   the real hot call) returns the entry it was given. This is the floor:
//!   the full argument and result traffic of a real decision with no logic.
//!   The noop is *not* timed through the checked `Policy::init_producer_id`
//!   for the floor: its decision (kind no-change carrying an entry) breaks the
//!   host's `shape` invariant, so the check bails out after a few comparisons
//!   and then formats a `Violation` string and a `PolicyError` (the policy's
//!   identity) -- an error path the real decision never takes. That row is
//!   still printed (`noop checked`) for reference. The floor is therefore the
//!   unchecked call, the same public method for both components, and the
//!   host check's own cost is measured natively (`host check`) so the
//!   difference between `wasm checked` and `wasm call` can be accounted for.
//! - The target "WASM decision <= 2x no-op" compares `wasm checked` (what
//!   the coordinator pays) against `noop call` (what any component call
//!   pays); `wasm call / noop call` isolates the guest's logic.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;

use kaas::policy::{self as host, ArtifactCache, Policy, PolicyRuntime, SandboxLimits};
use kaas_apache37_rules as rules;
use kaas_policy_sdk as sdk;

#[derive(Debug, Parser)]
#[command(about = "Benchmark kaas policy decisions, loads and instantiation")]
struct Args {
    /// The apache37 policy component.
    #[arg(long)]
    apache37: Option<PathBuf>,
    /// The noop test policy component.
    #[arg(long)]
    noop: Option<PathBuf>,
    /// Timed calls per decision case (split over the rounds).
    #[arg(long, default_value_t = 200_000)]
    iters: usize,
    /// Calls per timed batch.
    #[arg(long, default_value_t = 20)]
    batch: usize,
    /// Interleaved rounds over all cases.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Repetitions of each load measurement (cold ones compile each time).
    #[arg(long, default_value_t = 7)]
    load_reps: usize,
    /// Repetitions of the instantiation measurement.
    #[arg(long, default_value_t = 200)]
    inst_reps: usize,
    /// Also run the investigation: what the no-op floor is made of (argument
    /// size, fuel metering, epoch checks, the runtime's wrapper).
    #[arg(long)]
    investigate: bool,
    /// Time only the decision cases whose name contains this (e.g. "noop
    /// call"), and skip the load measurements: for profiling one case.
    #[arg(long)]
    only: Option<String>,
}

fn default_wasm(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm32-wasip2/release")
        .join(name)
}

// ---------------------------------------------------------------- inputs

/// One scenario's inputs, built from the same numbers for both type worlds.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    state: sdk::TxnState,
    epoch: i16,
    last_pid: i64,
    last_epoch: i16,
    start_ms: i64,
    claim_epoch: i16,
    expect_kind: sdk::DecisionKind,
    expect_reply: (i64, i16),
}

const TXN_ID: &str = "bench-txn-0001";
const PID: i64 = 1000;
const CANDIDATE: i64 = 2000;
const NOW_MS: i64 = 1_764_000_000_000;
const TIMEOUT_MS: i32 = 60_000;

const BUMP: Scenario = Scenario {
    name: "bump",
    state: sdk::TxnState::Empty,
    epoch: 5,
    last_pid: PID,
    last_epoch: -1,
    start_ms: -1,
    claim_epoch: 5,
    expect_kind: sdk::DecisionKind::Bump,
    expect_reply: (PID, 6),
};

const ROTATION: Scenario = Scenario {
    name: "rotation",
    state: sdk::TxnState::CompleteCommit,
    epoch: 32766,
    last_pid: PID,
    last_epoch: 32765,
    start_ms: NOW_MS - 5_000,
    claim_epoch: 32766,
    expect_kind: sdk::DecisionKind::Rotate,
    expect_reply: (CANDIDATE, 0),
};

struct SdkInputs {
    entry: sdk::Entry,
    req: sdk::InitRequest,
    limits: sdk::Limits,
}

fn sdk_inputs(s: &Scenario) -> SdkInputs {
    SdkInputs {
        entry: sdk::Entry {
            producer_id: PID,
            producer_epoch: s.epoch,
            last_producer_id: s.last_pid,
            last_producer_epoch: s.last_epoch,
            next_producer_id: -1,
            state: s.state,
            timeout_ms: TIMEOUT_MS,
            flags: sdk::EntryFlags::empty(),
        },
        req: sdk::InitRequest {
            transactional_id: sdk::TransactionalId::Present,
            claim: sdk::Claim {
                producer_id: PID,
                producer_epoch: s.claim_epoch,
            },
            version: 4,
            timeout_ms: TIMEOUT_MS,
            candidate_producer_id: CANDIDATE,
            tenant: 0,
        },
        limits: sdk::Limits {
            max_timeout_ms: 900_000,
            exhausted_epoch: 32766,
        },
    }
}

/// The same scenario's state in another binding's `TxnState` (`$m` is a
/// module exporting `TxnState`: the host's `kaas::policy` or this file's
/// own `direct` bindgen).
macro_rules! state_for {
    ($m:ident, $s:expr) => {
        match $s {
            sdk::TxnState::Empty => $m::TxnState::Empty,
            sdk::TxnState::Ongoing => $m::TxnState::Ongoing,
            sdk::TxnState::PrepareCommit => $m::TxnState::PrepareCommit,
            sdk::TxnState::PrepareAbort => $m::TxnState::PrepareAbort,
            sdk::TxnState::CompleteCommit => $m::TxnState::CompleteCommit,
            sdk::TxnState::CompleteAbort => $m::TxnState::CompleteAbort,
            sdk::TxnState::Dead => $m::TxnState::Dead,
        }
    };
}

/// The host's inputs: the full stored entry and request, as the
/// coordinator holds them (the runtime maps them onto ABI 2.0).
struct HostInputs {
    entry: host::Entry,
    req: host::InitRequest,
    limits: host::Limits,
}

fn host_inputs(s: &Scenario) -> HostInputs {
    let i = sdk_inputs(s);
    HostInputs {
        entry: host::Entry {
            transactional_id: TXN_ID.into(),
            producer_id: i.entry.producer_id,
            producer_epoch: i.entry.producer_epoch,
            last_producer_id: i.entry.last_producer_id,
            last_producer_epoch: i.entry.last_producer_epoch,
            state: state_for!(host, s.state),
            partitions: Vec::new(),
            timeout_ms: i.entry.timeout_ms,
            start_timestamp_ms: s.start_ms,
            last_update_timestamp_ms: NOW_MS - 1_000,
            next_producer_id: -1,
            client_transaction_version: 0,
            has_failed_epoch_fence: false,
        },
        req: host::InitRequest {
            transactional_id: Some(TXN_ID.into()),
            claim: Some(host::Claim {
                producer_id: PID,
                producer_epoch: s.claim_epoch,
            }),
            version: i.req.version,
            timeout_ms: i.req.timeout_ms,
            candidate_producer_id: i.req.candidate_producer_id,
            tenant: 0,
            now_ms: NOW_MS,
        },
        limits: host::Limits {
            max_timeout_ms: i.limits.max_timeout_ms,
            exhausted_epoch: i.limits.exhausted_epoch,
        },
    }
}

/// The scenario in the `direct` bindings' types (what goes over the ABI).
fn direct_inputs(s: &Scenario) -> (direct::Entry, direct::InitRequest, direct::Limits) {
    let i = sdk_inputs(s);
    (
        direct::Entry {
            producer_id: i.entry.producer_id,
            producer_epoch: i.entry.producer_epoch,
            last_producer_id: i.entry.last_producer_id,
            last_producer_epoch: i.entry.last_producer_epoch,
            next_producer_id: -1,
            state: state_for!(direct, s.state),
            timeout_ms: i.entry.timeout_ms,
            flags: direct::EntryFlags::empty(),
        },
        direct::InitRequest {
            transactional_id: direct::TransactionalId::Present,
            claim: direct::Claim {
                producer_id: PID,
                producer_epoch: s.claim_epoch,
            },
            version: i.req.version,
            timeout_ms: i.req.timeout_ms,
            candidate_producer_id: i.req.candidate_producer_id,
            tenant: 0,
        },
        direct::Limits {
            max_timeout_ms: i.limits.max_timeout_ms,
            exhausted_epoch: i.limits.exhausted_epoch,
        },
    )
}

fn host_kind(k: sdk::DecisionKind) -> host::DecisionKind {
    use host::DecisionKind as H;
    use sdk::DecisionKind as S;
    match k {
        S::NewProducer => H::NewProducer,
        S::Initialize => H::Initialize,
        S::Bump => H::Bump,
        S::RetryReturnsCurrent => H::RetryReturnsCurrent,
        S::Rotate => H::Rotate,
        S::FenceAndAbort => H::FenceAndAbort,
        S::AddPartitions => H::AddPartitions,
        S::NoChange => H::NoChange,
        S::PrepareCommit => H::PrepareCommit,
        S::PrepareAbort => H::PrepareAbort,
        S::Complete => H::Complete,
        S::Reject => H::Reject,
    }
}

/// Checks that native and WASM agree on the scenario's decision before
/// anything is timed, so the benchmark cannot time an error path by mistake.
fn sanity(s: &Scenario, apache: &Policy, noop: &Policy) -> anyhow::Result<host::Decision> {
    let si = sdk_inputs(s);
    let native = rules::init_producer_id(Some(si.entry), &si.req, &si.limits);
    anyhow::ensure!(
        native.kind == s.expect_kind
            && (native.reply.producer_id, native.reply.producer_epoch) == s.expect_reply,
        "{}: native decision {:?} {:?} is not the expected one",
        s.name,
        native.kind,
        native.reply
    );
    let hi = host_inputs(s);
    let wasm = apache
        .init_producer_id(Some(&hi.entry), &hi.req, hi.limits)
        .with_context(|| format!("{}: apache37 refused", s.name))?;
    anyhow::ensure!(
        wasm.kind == host_kind(native.kind)
            && wasm.reply.error_code == native.reply.error_code
            && wasm.reply.producer_id == native.reply.producer_id
            && wasm.reply.producer_epoch == native.reply.producer_epoch,
        "{}: WASM decision {:?} differs from native {:?}",
        s.name,
        wasm,
        native
    );
    let kind = noop
        .init_producer_id_call_cost(Some(&hi.entry), &hi.req, hi.limits)
        .with_context(|| format!("{}: noop call failed", s.name))?;
    anyhow::ensure!(
        kind == host::DecisionKind::NoChange,
        "{}: noop answered {kind:?}",
        s.name
    );
    Ok(wasm)
}

// ---------------------------------------------------------------- direct

/// A second set of bindings for the same WIT, so the investigation can drive
/// a component through plain wasmtime with engine settings the policy runtime
/// does not offer (fuel or epoch checks off). Never used for the headline
/// figures.
mod direct {
    wasmtime::component::bindgen!({
        path: "../policy-wit",
        world: "txn-policy",
    });
    pub use self::kaas::txn_policy::types::*;
}

/// One instance of a component on its own engine, configured like
/// `PolicyRuntime::new` except for the two switches.
struct DirectInstance {
    store: wasmtime::Store<wasmtime::StoreLimits>,
    bindings: direct::TxnPolicy,
    fuel: bool,
    epoch: bool,
}

impl DirectInstance {
    fn new(wasm: &[u8], fuel: bool, epoch: bool, limits: direct::Limits) -> anyhow::Result<Self> {
        use wasmtime::component::{Component, Linker};
        let sandbox = SandboxLimits::default();
        let mut config = wasmtime::Config::new();
        config
            .consume_fuel(fuel)
            .epoch_interruption(epoch)
            .max_wasm_stack(sandbox.max_wasm_stack)
            .concurrency_support(false)
            .wasm_backtrace_max_frames(None);
        let engine = wasmtime::Engine::new(&config).map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let component = Component::new(&engine, wasm).map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let mut linker = Linker::new(&engine);
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let store_limits = wasmtime::StoreLimitsBuilder::new()
            .memory_size(sandbox.memory_bytes)
            .instances(16)
            .memories(4)
            .tables(16)
            .trap_on_grow_failure(true)
            .build();
        let mut store = wasmtime::Store::new(&engine, store_limits);
        store.limiter(|l| l);
        if fuel {
            store
                .set_fuel(u64::MAX)
                .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        }
        if epoch {
            // No ticker: the epoch never advances, but every check still runs.
            store.set_epoch_deadline(1 << 40);
        }
        let bindings = direct::TxnPolicy::instantiate(&mut store, &component, &linker)
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        // Limits are given once per instance (ABI 2.0), as the runtime does.
        bindings
            .kaas_txn_policy_policy()
            .call_configure(&mut store, limits)
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        Ok(DirectInstance {
            store,
            bindings,
            fuel,
            epoch,
        })
    }

    /// One unchecked init-producer-id, re-arming fuel and deadline like the
    /// runtime does before every call.
    fn init_producer_id(
        &mut self,
        current: Option<direct::Entry>,
        req: direct::InitRequest,
    ) -> wasmtime::Result<direct::DecisionKind> {
        if self.fuel {
            let _ = self.store.set_fuel(20_000_000);
        }
        if self.epoch {
            self.store.set_epoch_deadline(20);
        }
        self.bindings
            .kaas_txn_policy_policy()
            .call_init_producer_id(&mut self.store, current, req)
            .map(|d| d.kind)
    }
}

// ---------------------------------------------------------------- harness

/// A case runs `n` calls of one decision; boxed once so that the per-call
/// loop inside is monomorphic (no dynamic dispatch per call).
struct Case<'a> {
    name: String,
    run: Box<dyn FnMut(usize) -> Option<String> + 'a>,
    samples: Vec<f64>,
    /// Calls that failed while timed, the first reason, and the wall time
    /// of the slowest batch that held a failure.
    failures: usize,
    first_failure: Option<String>,
    worst_failed_batch: Duration,
}

/// A case from a closure that says whether its call went as expected.
fn case<'a>(name: impl Into<String>, mut f: impl FnMut() -> Result<(), String> + 'a) -> Case<'a> {
    Case {
        name: name.into(),
        run: Box::new(move |n| {
            let mut failed = None;
            for _ in 0..n {
                if let Err(e) = f() {
                    failed.get_or_insert(e);
                }
            }
            failed
        }),
        samples: Vec::new(),
        failures: 0,
        first_failure: None,
        worst_failed_batch: Duration::ZERO,
    }
}

/// A timed call's outcome: its value is dropped (black-boxed), its error
/// kept as text. Failures are counted and reported, never silently timed.
fn outcome<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<(), String> {
    match r {
        Ok(v) => {
            drop(black_box(v));
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

fn run_cases(cases: &mut [Case<'_>], args: &Args) {
    let per_round = (args.iters / args.rounds.max(1)).max(args.batch);
    let batches = per_round / args.batch.max(1);
    // Round 0 is the warm-up (caches, branch predictors, the instances'
    // first-call paths): timed and checked like the others, not sampled.
    for round in 0..=args.rounds.max(1) {
        for c in cases.iter_mut() {
            c.samples.reserve(batches);
            for _ in 0..batches {
                let t = Instant::now();
                let failed = (c.run)(args.batch);
                let took = t.elapsed();
                if round > 0 {
                    c.samples.push(took.as_nanos() as f64 / args.batch as f64);
                }
                if let Some(e) = failed {
                    c.failures += 1;
                    c.first_failure.get_or_insert(e);
                    c.worst_failed_batch = c.worst_failed_batch.max(took);
                }
            }
        }
    }
}

/// Prints the cases that had failed calls (a batch counts once).
fn report_failures(cases: &[Case<'_>]) {
    for c in cases.iter().filter(|c| c.failures > 0) {
        println!(
            "  !! {}: {} batch(es) with a failed call (slowest such batch {:.3} ms): {}",
            c.name,
            c.failures,
            c.worst_failed_batch.as_secs_f64() * 1e3,
            c.first_failure.as_deref().unwrap_or("?")
        );
    }
}

#[derive(Debug, Clone, Copy)]
struct Stats {
    median: f64,
    p99: f64,
    n: usize,
}

fn stats(samples: &[f64]) -> Stats {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let pick = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: pick(0.50),
        p99: pick(0.99),
        n: v.len(),
    }
}

fn median_duration(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// What a single `Instant::now()` pair costs here (for reading `--batch 1`).
fn timer_cost() -> f64 {
    let mut v = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let t = Instant::now();
        v.push(black_box(t.elapsed()).as_nanos() as f64);
    }
    stats(&v).median
}

// ---------------------------------------------------------------- main

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.batch > 0 && args.rounds > 0 && args.iters > 0);
    anyhow::ensure!(args.load_reps > 0 && args.inst_reps > 0);
    let apache_path = args
        .apache37
        .clone()
        .unwrap_or_else(|| default_wasm("kaas_policy_apache37.wasm"));
    let noop_path = args
        .noop
        .clone()
        .unwrap_or_else(|| default_wasm("kaas_test_policy_noop.wasm"));
    let read = |p: &Path| {
        std::fs::read(p).with_context(|| {
            format!(
                "reading {} (build the policies first: cargo build --release \
                 --target wasm32-wasip2 --workspace --exclude kaas)",
                p.display()
            )
        })
    };
    let apache_wasm = read(&apache_path)?;
    let noop_wasm = read(&noop_path)?;

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("kaas policy_bench");
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    println!("  machine : {cpu}, {cores} cores available, load average {load} at start");
    println!(
        "  apache37: {} ({} bytes)",
        apache_path.display(),
        apache_wasm.len()
    );
    println!(
        "  noop    : {} ({} bytes)",
        noop_path.display(),
        noop_wasm.len()
    );
    println!(
        "  iters {} per case in {} interleaved rounds, batches of {} calls; timer pair ~{:.0} ns",
        args.iters,
        args.rounds,
        args.batch,
        timer_cost()
    );

    // ------------------------------------------------------------ loads
    let limits = SandboxLimits::default();

    let mut cold_nocache = Vec::new();
    let mut cold_store = Vec::new();
    let mut cached_load = Vec::new();
    let mut cached_total = Vec::new();
    let mut first_inst = Vec::new();
    let mut artifact_bytes = 0;
    let load_reps = if args.only.is_some() {
        0
    } else {
        args.load_reps
    };
    for _ in 0..load_reps {
        // Cold, no cache at all: cranelift compile in memory.
        let rt = PolicyRuntime::new(limits.clone(), None)?;
        let (_, st) = rt.load_with_stats(&apache_wasm)?;
        anyhow::ensure!(!st.from_cache);
        cold_nocache.push(st.load);

        // Cold into a fresh cache dir: compile, store, deserialize.
        let dir = tempfile::tempdir()?;
        let rt = PolicyRuntime::new(limits.clone(), Some(ArtifactCache::new(dir.path())))?;
        let (_, st) = rt.load_with_stats(&apache_wasm)?;
        anyhow::ensure!(!st.from_cache, "a fresh cache dir had an artifact");
        cold_store.push(st.load);
        artifact_bytes = std::fs::read_dir(dir.path())?
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum::<u64>();

        // Second load from the same dir, by a new runtime (a restart).
        let rt = PolicyRuntime::new(limits.clone(), Some(ArtifactCache::new(dir.path())))?;
        let t = Instant::now();
        let (p, st) = rt.load_with_stats(&apache_wasm)?;
        let total = t.elapsed();
        anyhow::ensure!(st.from_cache, "the second load did not hit the cache");
        cached_load.push(st.load);
        cached_total.push(total);
        first_inst.push(st.instantiate);
        drop(p);
    }

    // ------------------------------------------------------------ decisions
    let rt = PolicyRuntime::new(limits.clone(), None)?;
    let apache = rt.load_bytes(&apache_wasm)?;
    let noop = rt.load_bytes(&noop_wasm)?;

    let mut inst = Vec::with_capacity(args.inst_reps);
    for _ in 0..args.inst_reps {
        inst.push(apache.instantiate_fresh()?);
    }

    let scenarios = [BUMP, ROTATION];
    let sdk_in: Vec<SdkInputs> = scenarios.iter().map(sdk_inputs).collect();
    let host_in: Vec<HostInputs> = scenarios.iter().map(host_inputs).collect();
    let mut decisions = Vec::new();
    for s in &scenarios {
        decisions.push(sanity(s, &apache, &noop)?);
    }
    let noop_checked_err =
        match noop.init_producer_id(Some(&host_in[0].entry), &host_in[0].req, host_in[0].limits) {
            Ok(d) => format!("accepted ({:?})", d.kind),
            Err(e) => format!("{e}"),
        };

    let mut cases = Vec::new();
    for (i, s) in scenarios.iter().enumerate() {
        let si = &sdk_in[i];
        let hi = &host_in[i];
        let d = &decisions[i];
        let (apache, noop) = (&apache, &noop);
        cases.push(case(format!("{} native", s.name), move || {
            let entry = *black_box(&si.entry);
            black_box(rules::init_producer_id(
                Some(entry),
                black_box(&si.req),
                black_box(&si.limits),
            ));
            Ok(())
        }));
        cases.push(case(format!("{} wasm checked", s.name), move || {
            let r = apache.init_producer_id(
                Some(black_box(&hi.entry)),
                black_box(&hi.req),
                black_box(hi.limits),
            );
            outcome(r)
        }));
        cases.push(case(format!("{} wasm call", s.name), move || {
            outcome(apache.init_producer_id_call_cost(
                Some(black_box(&hi.entry)),
                black_box(&hi.req),
                black_box(hi.limits),
            ))
        }));
        cases.push(case(format!("{} noop call", s.name), move || {
            outcome(noop.init_producer_id_call_cost(
                Some(black_box(&hi.entry)),
                black_box(&hi.req),
                black_box(hi.limits),
            ))
        }));
        cases.push(case(format!("{} noop checked", s.name), move || {
            let r = noop.init_producer_id(
                Some(black_box(&hi.entry)),
                black_box(&hi.req),
                black_box(hi.limits),
            );
            match r {
                Err(e @ host::PolicyError::Illegal { .. }) => {
                    drop(black_box(e));
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
                Ok(_) => Err("the host accepted the noop's decision".into()),
            }
        }));
        cases.push(case(format!("{} host check", s.name), move || {
            outcome(host::check::init_producer_id(
                Some(black_box(&hi.entry)),
                black_box(&hi.req),
                black_box(d),
            ))
        }));
    }
    if let Some(only) = &args.only {
        cases.retain(|c| c.name.contains(only.as_str()));
    }
    run_cases(&mut cases, &args);

    let get = |name: &str| -> Stats {
        let c = cases
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no case {name}"));
        stats(&c.samples)
    };

    // ------------------------------------------------------------ report
    println!();
    println!("InitProducerId decision, ns per decision (median / p99 of batch means)");
    println!(
        "  {:<24} {:>10} {:>10} {:>8}",
        "case", "median", "p99", "samples"
    );
    for c in &cases {
        let st = stats(&c.samples);
        println!(
            "  {:<24} {:>10.1} {:>10.1} {:>8}",
            c.name, st.median, st.p99, st.n
        );
    }

    report_failures(&cases);
    if args.only.is_some() {
        return Ok(());
    }

    println!();
    println!("Ratios (medians)");
    let mut targets = Vec::new();
    for s in &scenarios {
        let native = get(&format!("{} native", s.name)).median;
        let checked = get(&format!("{} wasm checked", s.name)).median;
        let call = get(&format!("{} wasm call", s.name)).median;
        let noop_call = get(&format!("{} noop call", s.name)).median;
        let check = get(&format!("{} host check", s.name)).median;
        println!(
            "  {:<9} wasm/native {:>6.1}x   wasm/noop {:>5.2}x   (unchecked call/noop {:>5.2}x; \
             host check {:.0} ns, call+check {:.0} ns vs checked {:.0} ns)",
            s.name,
            checked / native,
            checked / noop_call,
            call / noop_call,
            check,
            call + check,
            checked
        );
        targets.push((
            format!("{} WASM decision <= 2x no-op call", s.name),
            format!("{:.2}x", checked / noop_call),
            checked <= 2.0 * noop_call,
        ));
        targets.push((
            format!("{} WASM decision median < 500 ns", s.name),
            format!("{checked:.0} ns"),
            checked < 500.0,
        ));
    }
    println!("  noop through the checked path: {noop_checked_err}");

    let cold_nc = median_duration(cold_nocache);
    let cold_st = median_duration(cold_store);
    let cached = median_duration(cached_load);
    let cached_t = median_duration(cached_total);
    let inst_m = median_duration(inst);
    let first_m = median_duration(first_inst);
    println!();
    println!(
        "apache37 load and instantiation (medians; {} load reps, {} instantiations)",
        args.load_reps, args.inst_reps
    );
    println!(
        "  cold, no cache (cranelift compile)          {:>12}",
        ms(cold_nc)
    );
    println!(
        "  cold, fresh cache dir (compile+store+load)  {:>12}",
        ms(cold_st)
    );
    println!(
        "  cached (deserialize the .cwasm)             {:>12}   artifact {} bytes",
        ms(cached),
        artifact_bytes
    );
    println!(
        "  cached, whole load_with_stats               {:>12}   (hash, deserialize, link, instantiate, describe)",
        ms(cached_t)
    );
    println!(
        "  first instantiation (LoadStats)             {:>12}",
        us(first_m)
    );
    println!(
        "  instantiate_fresh                           {:>12}",
        us(inst_m)
    );
    targets.push((
        "cached load < 5 ms".into(),
        format!("{} ({} whole load)", ms(cached), ms(cached_t)),
        cached < Duration::from_millis(5),
    ));

    let failed: usize = cases.iter().map(|c| c.failures).sum();
    targets.push((
        "every timed call succeeded".into(),
        format!("{failed} batch(es) with a failed call"),
        failed == 0,
    ));

    println!();
    println!("Targets");
    for (what, value, ok) in &targets {
        println!("  {:<4} {:<40} {}", verdict(*ok), what, value);
    }
    if args.investigate {
        investigate(&args, &apache, &noop, &apache_wasm, &noop_wasm)?;
    }
    Ok(())
}

/// What the no-op floor is made of. Prints its own table.
fn investigate(
    args: &Args,
    apache: &Policy,
    noop: &Policy,
    apache_wasm: &[u8],
    noop_wasm: &[u8],
) -> anyhow::Result<()> {
    let hi = host_inputs(&BUMP);
    // The same entry with 16 stored partitions: ABI 2.0 does not pass them,
    // so this should cost what the plain entry costs.
    let mut wide = hi.entry.clone();
    wide.partitions = (0..16)
        .map(|p| host::TopicPartition {
            topic: "bench-topic".into(),
            partition: p,
        })
        .collect();
    // A transactional request for an absent id, and an idempotent one.
    let txn_req = host::InitRequest {
        claim: None,
        ..hi.req.clone()
    };
    let idem_req = host::InitRequest {
        transactional_id: None,
        claim: None,
        ..hi.req.clone()
    };
    let (d_entry, d_req, d_limits) = direct_inputs(&BUMP);
    let mut variants = Vec::new();
    for (label, fuel, epoch) in [
        ("fuel+epoch", true, true),
        ("epoch only", false, true),
        ("fuel only", true, false),
        ("neither", false, false),
    ] {
        variants.push((
            format!("direct noop call, {label}"),
            DirectInstance::new(noop_wasm, fuel, epoch, d_limits)?,
        ));
    }
    for (label, fuel, epoch) in [("fuel+epoch", true, true), ("neither", false, false)] {
        variants.push((
            format!("direct apache37 call, {label}"),
            DirectInstance::new(apache_wasm, fuel, epoch, d_limits)?,
        ));
    }
    for (name, inst) in variants.iter_mut() {
        inst.init_producer_id(Some(d_entry), d_req)
            .map_err(|e| anyhow::anyhow!("{name}: {e:#}"))?;
    }

    let limits = hi.limits;
    let mut cases = vec![
        case("noop call, entry (as above)", || {
            outcome(noop.init_producer_id_call_cost(Some(black_box(&hi.entry)), &hi.req, limits))
        }),
        case("noop call, entry + 16 stored partitions", || {
            outcome(noop.init_producer_id_call_cost(Some(black_box(&wide)), &hi.req, limits))
        }),
        case("noop call, no entry, txn request", || {
            outcome(noop.init_producer_id_call_cost(None, black_box(&txn_req), limits))
        }),
        case("noop call, no entry, idempotent", || {
            outcome(noop.init_producer_id_call_cost(None, black_box(&idem_req), limits))
        }),
        case("apache37 describe()", || outcome(apache.describe())),
    ];
    for (name, inst) in variants.iter_mut() {
        cases.push(case(name.clone(), move || {
            outcome(inst.init_producer_id(Some(black_box(d_entry)), black_box(d_req)))
        }));
    }
    run_cases(&mut cases, args);
    println!();
    println!("Investigation: what a component call costs (ns per call, median / p99)");
    for c in &cases {
        let st = stats(&c.samples);
        println!("  {:<36} {:>8.1} {:>9.1}", c.name, st.median, st.p99);
    }
    report_failures(&cases);
    Ok(())
}
