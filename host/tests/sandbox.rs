//! Proves the policy sandbox contains hostile policies.
//!
//! Each hostile test policy (`tests/policies/*`) is loaded into a real
//! [`PolicyRuntime`] and called:
//! - `spin` (loops forever) is stopped by fuel, and with unlimited fuel by
//!   the wall-clock deadline;
//! - `grow` (allocates without bound) is stopped by the memory cap;
//! - `trap` (panics) traps, and its replaced instance answers the next call;
//! - `illegal` (epoch goes down, or a pid that is not the candidate) is
//!   refused by the host's invariant checks, and [`TxnMachine`] never applies
//!   the refused decision.
//!
//! Every hostile call must end well within a second with an error that names
//! the policy and the cause, and a good policy (apache37) loaded in the same
//! runtime must still decide afterwards. Finally, a component built for
//! another major version of the WIT package (1.x) is refused at load.
//!
//! The granted WASI: a guest's panic message reaches the
//! error and the log (`panic-message` panics in `describe()`, `trap` in a
//! decision); `wasi-probe` floods stderr (bounded), reads an empty
//! environment, and calls a clock, a file and random bytes (each still
//! traps, counted as a capability trap). Trap log lines are rate-limited.
//!
//! The components are built by
//! `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas`.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kaas::codes as code;
use kaas::policy::{
    Call, DecisionKind, Entry, InitRequest, Limits, Policy, PolicyError, PolicyRuntime,
    STDERR_CAPACITY, SandboxLimits, TrapKind, TxnState, WIT_VERSION,
};
use kaas::txn::machine::{DEFAULT_LIMITS, InitProducerId, Step, TxnMachine};

/// How long containing a hostile call may take, at most.
const CONTAINED_WITHIN: Duration = Duration::from_secs(1);

/// The memory cap of the `grow` test (the default is 32 MiB).
const SMALL_MEMORY_CAP: usize = 16 << 20;

/// The candidate producer id the host offers in these tests.
const CANDIDATE: i64 = 4242;

/// The bytes of a policy component built into the workspace target dir;
/// fails (never skips) when it has not been built.
fn component(file: &str) -> Vec<u8> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/wasm32-wasip2/release"
    ))
    .join(file);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the policy component {} ({e}); run \
             `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas` first",
            path.display()
        )
    })
}

/// A runtime with `limits` and no artifact cache.
fn runtime(limits: SandboxLimits) -> PolicyRuntime {
    PolicyRuntime::new(limits, None).expect("the policy runtime starts")
}

/// Loads `file` into `rt`, checking that `describe()` names it `name`.
fn load(rt: &PolicyRuntime, file: &str, name: &str) -> Policy {
    let policy = rt
        .load_bytes(&component(file))
        .unwrap_or_else(|e| panic!("loading {file}: {e:#}"));
    assert_eq!(policy.identity().name, name, "describe() of {file}");
    policy
}

/// The good policy every hostile test checks is still served afterwards.
fn load_apache37(rt: &PolicyRuntime) -> Policy {
    load(rt, "kaas_policy_apache37.wasm", "apache37")
}

/// The requested timeout for which the `trap` policy decides instead of
/// panicking (its `NO_TRAP_TIMEOUT_MS`).
const NO_TRAP_TIMEOUT_MS: i32 = 77_777;

/// An InitProducerId (v4, no KIP-360 claim) for `txn_id`.
fn init_request(txn_id: &str) -> InitRequest {
    init_request_with_timeout(txn_id, 60_000)
}

/// The same with another requested transaction timeout.
fn init_request_with_timeout(txn_id: &str, timeout_ms: i32) -> InitRequest {
    InitRequest {
        transactional_id: Some(txn_id.to_owned()),
        claim: None,
        version: 4,
        timeout_ms,
        candidate_producer_id: CANDIDATE,
        tenant: 0,
        now_ms: 1_700_000_000_000,
    }
}

/// An idle (Empty) entry of `txn_id` at (`pid`, `epoch`).
fn empty_entry(txn_id: &str, pid: i64, epoch: i16) -> Entry {
    Entry {
        transactional_id: txn_id.to_owned(),
        producer_id: pid,
        producer_epoch: epoch,
        last_producer_id: -1,
        last_producer_epoch: -1,
        state: TxnState::Empty,
        partitions: Vec::new(),
        timeout_ms: 60_000,
        start_timestamp_ms: -1,
        last_update_timestamp_ms: 1_699_999_999_000,
        next_producer_id: -1,
        client_transaction_version: 0,
        has_failed_epoch_fence: false,
    }
}

/// Runs one call into a hostile policy, asserting it ends within
/// [`CONTAINED_WITHIN`] and with an error; returns the error.
fn contained<T: std::fmt::Debug>(
    what: &str,
    call: impl FnOnce() -> Result<T, PolicyError>,
) -> PolicyError {
    let started = Instant::now();
    let result = call();
    let took = started.elapsed();
    let e = match result {
        Ok(value) => panic!("{what}: the hostile call returned {value:?} instead of an error"),
        Err(e) => e,
    };
    println!("{what}: contained in {took:?}: {e}");
    assert!(
        took < CONTAINED_WITHIN,
        "{what}: the host needed {took:?} to stop the call (bound: {CONTAINED_WITHIN:?})"
    );
    e
}

/// Asserts the error names the policy and contains every one of `cause`.
fn assert_reports(e: &PolicyError, policy: &str, cause: &[&str]) {
    let text = e.to_string();
    assert!(
        text.contains(policy),
        "the error does not name the policy {policy:?}: {text}"
    );
    for word in cause {
        assert!(
            text.contains(word),
            "the error does not give the cause {word:?}: {text}"
        );
    }
}

/// A fresh transactional.id initialised by the good policy: the first
/// producer id is the candidate at epoch 0.
fn assert_good_policy_decides(good: &Policy) {
    let d = good
        .init_producer_id(None, &init_request("good-after-hostile"), DEFAULT_LIMITS)
        .expect("the good policy decides after the hostile call");
    assert_eq!(d.kind, DecisionKind::Initialize);
    assert_eq!(d.reply.error_code, code::NONE);
    assert_eq!(
        (d.reply.producer_id, d.reply.producer_epoch),
        (CANDIDATE, 0)
    );
}

#[test]
fn spinning_policy_is_stopped_by_fuel_within_a_second() {
    let rt = runtime(SandboxLimits {
        fuel_per_call: 5_000_000,
        // Far beyond the time bound, so only fuel can stop the call in time.
        deadline: Duration::from_secs(5),
        ..SandboxLimits::default()
    });
    let good = load_apache37(&rt);
    let spin = load(&rt, "kaas_test_policy_spin.wasm", "hostile-spin");

    let e = contained("spin (fuel)", || {
        spin.init_producer_id(None, &init_request("spin"), DEFAULT_LIMITS)
    });

    assert!(matches!(e, PolicyError::Trap { .. }), "{e:?}");
    assert_reports(&e, "hostile-spin", &["init-producer-id", "fuel"]);
    assert_good_policy_decides(&good);
    // The stopped instance is replaced: the policy answers its next call.
    let info = spin
        .describe()
        .expect("describe() after running out of fuel");
    assert_eq!(info.name, "hostile-spin");
}

#[test]
fn spinning_policy_with_unlimited_fuel_is_stopped_by_the_deadline_within_a_second() {
    let rt = runtime(SandboxLimits {
        fuel_per_call: u64::MAX,
        deadline: Duration::from_millis(50),
        ..SandboxLimits::default()
    });
    let good = load_apache37(&rt);
    let spin = load(&rt, "kaas_test_policy_spin.wasm", "hostile-spin");

    let e = contained("spin (deadline)", || {
        spin.init_producer_id(None, &init_request("spin"), DEFAULT_LIMITS)
    });

    assert!(matches!(e, PolicyError::Trap { .. }), "{e:?}");
    assert_reports(&e, "hostile-spin", &["init-producer-id", "deadline"]);
    assert_good_policy_decides(&good);
    let info = spin.describe().expect("describe() after the deadline");
    assert_eq!(info.name, "hostile-spin");
}

#[test]
fn growing_policy_is_stopped_at_the_memory_cap_within_a_second() {
    let rt = runtime(SandboxLimits {
        memory_bytes: SMALL_MEMORY_CAP,
        // Generous fuel and time, so only the memory cap can stop the call.
        fuel_per_call: u64::MAX,
        deadline: Duration::from_secs(5),
        ..SandboxLimits::default()
    });
    let good = load_apache37(&rt);
    let grow = load(&rt, "kaas_test_policy_grow.wasm", "hostile-grow");

    let e = contained("grow (memory)", || {
        grow.init_producer_id(None, &init_request("grow"), DEFAULT_LIMITS)
    });

    assert!(matches!(e, PolicyError::Trap { .. }), "{e:?}");
    assert_reports(&e, "hostile-grow", &["init-producer-id", "memory limit"]);
    assert_good_policy_decides(&good);
    let info = grow
        .describe()
        .expect("describe() after hitting the memory cap");
    assert_eq!(info.name, "hostile-grow");
}

#[test]
fn panicking_policy_traps_and_its_replaced_instance_answers_the_next_call() {
    let rt = runtime(SandboxLimits::default());
    let good = load_apache37(&rt);
    let trap = load(&rt, "kaas_test_policy_trap.wasm", "hostile-trap");

    let e = contained("trap (panic)", || {
        trap.init_producer_id(None, &init_request("trap"), DEFAULT_LIMITS)
    });

    assert!(matches!(e, PolicyError::Trap { .. }), "{e:?}");
    assert_reports(&e, "hostile-trap", &["trapped in init-producer-id"]);
    assert_good_policy_decides(&good);
    // The same policy, on a fresh instance, takes its non-panicking path.
    let d = trap
        .init_producer_id(
            None,
            &init_request_with_timeout("no-trap", NO_TRAP_TIMEOUT_MS),
            DEFAULT_LIMITS,
        )
        .expect("the trap policy answers after its instance trapped");
    assert_eq!(d.kind, DecisionKind::Initialize);
    assert_eq!(
        (d.reply.producer_id, d.reply.producer_epoch),
        (CANDIDATE, 0)
    );
    let entry = d.entry.expect("an initialised entry to persist");
    assert_eq!(entry.transactional_id, "no-trap");
    assert_eq!((entry.producer_id, entry.producer_epoch), (CANDIDATE, 0));
    assert_eq!(entry.state, TxnState::Empty);
    assert_eq!(entry.timeout_ms, NO_TRAP_TIMEOUT_MS);
}

#[test]
fn limits_reach_every_instance_once_and_follow_a_change() {
    // ABI 2.0 gives limits once per instance (`configure`), not per call.
    let rt = runtime(SandboxLimits::default());
    let good = load_apache37(&rt);
    let tight = Limits {
        max_timeout_ms: 30_000,
        ..DEFAULT_LIMITS
    };
    let timeout = |policy: &Policy, req: &InitRequest, limits: Limits| {
        let d = policy
            .init_producer_id(None, req, limits)
            .expect("the policy decides");
        (d.kind, d.reply.error_code)
    };
    let rejected = (DecisionKind::Reject, 50); // INVALID_TRANSACTION_TIMEOUT
    let initialized = (DecisionKind::Initialize, code::NONE);
    // A 60 s timeout is over the tight limit, within the default one; the
    // instance follows each change of the caller's limits.
    let req = init_request("limits");
    assert_eq!(timeout(&good, &req, tight), rejected);
    assert_eq!(timeout(&good, &req, DEFAULT_LIMITS), initialized);
    assert_eq!(timeout(&good, &req, tight), rejected);

    // The instance that replaces a trapped one is configured again.
    let trap = load(&rt, "kaas_test_policy_trap.wasm", "hostile-trap");
    let no_trap = init_request_with_timeout("limits", NO_TRAP_TIMEOUT_MS);
    assert_eq!(timeout(&trap, &no_trap, tight), rejected);
    contained("trap (panic)", || {
        trap.init_producer_id(None, &init_request("trap"), tight)
    });
    assert_eq!(timeout(&trap, &no_trap, tight), rejected);
    assert_eq!(timeout(&trap, &no_trap, DEFAULT_LIMITS), initialized);
}

#[test]
fn decision_lowering_the_epoch_is_refused_naming_the_policy() {
    let rt = runtime(SandboxLimits::default());
    let good = load_apache37(&rt);
    let illegal = load(&rt, "kaas_test_policy_illegal.wasm", "hostile-illegal");
    let current = empty_entry("lowered", 1000, 5);

    let e = contained("illegal (epoch down)", || {
        illegal.init_producer_id(Some(&current), &init_request("lowered"), DEFAULT_LIMITS)
    });

    assert!(matches!(e, PolicyError::Illegal { .. }), "{e:?}");
    assert_reports(
        &e,
        "hostile-illegal",
        &["illegal decision", "epoch of pid 1000 went down: 5 -> 4"],
    );
    // Counted as a violation, not as a decision.
    assert_eq!(illegal.stats().violations(Call::InitProducerId), 1);
    let decided: u64 = kaas::policy::stats::DECISION_KINDS
        .iter()
        .map(|k| illegal.stats().decisions(Call::InitProducerId, *k))
        .sum();
    assert_eq!(decided, 0);
    assert_good_policy_decides(&good);
    assert_eq!(
        good.stats()
            .decisions(Call::InitProducerId, DecisionKind::Initialize),
        1
    );
}

#[test]
fn decision_with_a_pid_that_is_not_the_candidate_is_refused_naming_the_policy() {
    let rt = runtime(SandboxLimits::default());
    let good = load_apache37(&rt);
    let illegal = load(&rt, "kaas_test_policy_illegal.wasm", "hostile-illegal");

    let e = contained("illegal (foreign pid)", || {
        illegal.init_producer_id(None, &init_request("foreign-pid"), DEFAULT_LIMITS)
    });

    assert!(matches!(e, PolicyError::Illegal { .. }), "{e:?}");
    let foreign = CANDIDATE + 7777;
    assert_reports(
        &e,
        "hostile-illegal",
        &[
            "illegal decision",
            &format!("pid {foreign} is not the candidate Some({CANDIDATE})"),
        ],
    );
    assert_good_policy_decides(&good);
}

#[test]
fn a_second_init_of_a_new_id_while_the_first_is_written_is_concurrent_transactions() {
    // Kafka creates the metadata of a new transactional.id before it writes
    // it, so a second InitProducerId meanwhile finds a pending transition.
    let rt = runtime(SandboxLimits::default());
    let mut machine = TxnMachine::new(Arc::new(load_apache37(&rt)), DEFAULT_LIMITS);
    let request = InitProducerId {
        transactional_id: Some("fresh".to_owned()),
        timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        version: 4,
    };
    let now = 1_700_000_000_000;
    let Step::Write(first) = machine.init_producer_id(&request, now, CANDIDATE) else {
        panic!("the first InitProducerId of a new id writes its entry");
    };
    let Step::Done(second) = machine.init_producer_id(&request, now, CANDIDATE + 1) else {
        panic!("a second InitProducerId must not plan a write while the first is in flight");
    };
    assert_eq!(second.reply.error_code, code::CONCURRENT_TRANSACTIONS);
    assert!(!second.candidate_used);
    let answer = machine.finish(first, Ok(()));
    assert_eq!(
        (answer.reply.producer_id, answer.reply.producer_epoch),
        (CANDIDATE, 0)
    );
    let entry = machine.entry("fresh").expect("written");
    assert_eq!((entry.producer_id, entry.producer_epoch), (CANDIDATE, 0));
    // Once written, the next InitProducerId decides again (a bump).
    let Step::Write(bump) = machine.init_producer_id(&request, now, CANDIDATE + 2) else {
        panic!("the id is no longer pending");
    };
    assert_eq!(bump.entry().producer_epoch, 1);
    // A failed first write releases the id too.
    let other = InitProducerId {
        transactional_id: Some("fails".to_owned()),
        ..request
    };
    let Step::Write(w) = machine.init_producer_id(&other, now, CANDIDATE + 3) else {
        panic!("writes");
    };
    machine.finish(w, Err(kaas::txn::machine::AppendError::NotEnoughReplicas));
    assert!(machine.entry("fails").is_none());
    assert!(matches!(
        machine.init_producer_id(&other, now, CANDIDATE + 4),
        Step::Write(_)
    ));
}

#[test]
fn decision_refused_by_the_host_is_never_applied_by_the_machine() {
    let rt = runtime(SandboxLimits::default());
    let illegal = load(&rt, "kaas_test_policy_illegal.wasm", "hostile-illegal");
    let mut machine = TxnMachine::new(Arc::new(illegal), DEFAULT_LIMITS);
    let before = empty_entry("lowered", 1000, 5);
    machine.install(before.clone());
    let request = |txn_id: &str| InitProducerId {
        transactional_id: Some(txn_id.to_owned()),
        timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        version: 4,
    };

    for txn_id in ["lowered", "foreign-pid"] {
        let step = machine.init_producer_id(&request(txn_id), 1_700_000_000_000, CANDIDATE);
        let Step::Done(answer) = step else {
            panic!("{txn_id}: the machine planned a write of a refused decision: {step:?}");
        };
        assert_eq!(
            answer.reply.error_code,
            code::UNKNOWN_SERVER_ERROR,
            "{txn_id}"
        );
        assert_eq!(
            (answer.reply.producer_id, answer.reply.producer_epoch),
            (-1, -1),
            "{txn_id}"
        );
        assert!(
            !answer.candidate_used,
            "{txn_id}: the candidate was consumed"
        );
        assert_eq!(answer.kind, None, "{txn_id}");
        assert!(
            !machine.is_pending(txn_id),
            "{txn_id}: a transition is in flight"
        );
    }
    assert_eq!(machine.entry("lowered"), Some(&before));
    assert_eq!(machine.entry("foreign-pid"), None);
    assert_eq!(machine.entries().count(), 1);
}

#[test]
fn component_of_another_wit_major_version_is_refused_at_load_naming_both_versions() {
    let rt = runtime(SandboxLimits::default());

    // A policy built against ABI 2.x, the major before the one this host speaks.
    let e = rt
        .load_bytes(&component("kaas_test_policy_previous_major.wasm"))
        .expect_err("a kaas:txn-policy@2.0.0 component must be refused");

    let text = format!("{e:#}");
    assert!(text.contains("kaas:txn-policy@2.0.0"), "{text}");
    assert!(
        text.contains(&format!("kaas:txn-policy@{WIT_VERSION}")),
        "{text}"
    );
    assert_eq!(WIT_VERSION, "3.0.0");
    // Refusing a component leaves the runtime serving good policies.
    assert_good_policy_decides(&load_apache37(&rt));
}

// ---- Observability: the guest's stderr, trap kinds,
// counters, rate-limited trap logs.

/// The `wasi-probe` policy's behaviours, by requested timeout (its
/// `*_TIMEOUT_MS` constants).
mod probe {
    pub const FLOOD: i32 = 1001;
    pub const CLOCK: i32 = 1002;
    pub const FILE: i32 = 1003;
    pub const RANDOM: i32 = 1004;
    pub const NOTE: i32 = 1005;
    pub const ENV: i32 = 1006;
}

/// A log sink for [`captured`].
#[derive(Clone, Default)]
struct Sink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with this thread's log (info and up) captured; returns what
/// `f` returned and the log's text.
fn captured<R>(f: impl FnOnce() -> R) -> (R, String) {
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let r = tracing::subscriber::with_default(subscriber, f);
    let text =
        String::from_utf8_lossy(&sink.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
    (r, text)
}

fn trap_kind(e: &PolicyError) -> TrapKind {
    match e {
        PolicyError::Trap { kind, .. } => *kind,
        other => panic!("not a trap: {other:?}"),
    }
}

#[test]
fn a_panic_in_describe_fails_the_load_with_the_panic_message() {
    let rt = runtime(SandboxLimits::default());

    let e = rt
        .load_bytes(&component("kaas_test_policy_panic_message.wasm"))
        .expect_err("a policy whose describe() panics must be refused");

    let text = format!("{e:#}");
    println!("{text}");
    assert!(text.contains("describe() failed"), "{text}");
    assert!(text.contains("panicked"), "{text}");
    assert!(
        text.contains("describe exploded (panic-message test policy)"),
        "the guest's panic message is lost: {text}"
    );
    assert!(
        !text.contains("unknown import"),
        "the panic path must not trap on a WASI import: {text}"
    );
    assert_good_policy_decides(&load_apache37(&rt));
}

#[test]
fn a_panicking_decision_carries_its_message_and_counts_as_a_panic() {
    let rt = runtime(SandboxLimits::default());
    let trap = load(&rt, "kaas_test_policy_trap.wasm", "hostile-trap");

    let e = contained("trap (panic message)", || {
        trap.init_producer_id(None, &init_request("trap"), DEFAULT_LIMITS)
    });

    assert_eq!(trap_kind(&e), TrapKind::Panic);
    assert_reports(
        &e,
        "hostile-trap",
        &[
            "trapped in init-producer-id",
            "panicked",
            "hostile-trap policy: deliberate panic for a 60000 ms timeout",
        ],
    );
    let stats = trap.stats();
    assert_eq!(stats.traps(Call::InitProducerId, TrapKind::Panic), 1);
    assert_eq!(stats.traps(Call::InitProducerId, TrapKind::Capability), 0);
    assert_eq!(stats.histogram(Call::InitProducerId).count(), 1);
    // The replaced instance decides, and that is counted as a decision.
    trap.init_producer_id(
        None,
        &init_request_with_timeout("no-trap", NO_TRAP_TIMEOUT_MS),
        DEFAULT_LIMITS,
    )
    .expect("the trap policy answers after its instance trapped");
    assert_eq!(
        stats.decisions(Call::InitProducerId, DecisionKind::Initialize),
        1
    );
    // The histogram times the first call and then one in eight.
    assert_eq!(stats.histogram(Call::InitProducerId).count(), 1);
}

#[test]
fn a_stderr_flood_is_bounded_and_the_flooder_still_traps() {
    // Generous fuel and time: only the panic after the flood ends the call.
    let rt = runtime(SandboxLimits {
        fuel_per_call: u64::MAX,
        deadline: Duration::from_secs(10),
        ..SandboxLimits::default()
    });
    let probe = load(&rt, "kaas_test_policy_wasi_probe.wasm", "wasi-probe");

    let started = Instant::now();
    let e = probe
        .init_producer_id(
            None,
            &init_request_with_timeout("flood", probe::FLOOD),
            DEFAULT_LIMITS,
        )
        .expect_err("the flood ends in a panic");
    println!("flood contained in {:?}", started.elapsed());

    assert_eq!(trap_kind(&e), TrapKind::Panic, "{e}");
    let text = e.to_string();
    assert!(
        text.len() < STDERR_CAPACITY + 512,
        "{} bytes of error for an 8 MiB flood: the capture is not bounded",
        text.len()
    );
    // 8 MiB and the panic message were written, the capacity kept: the
    // rest is counted.
    let tail = &text[text.len().saturating_sub(200)..];
    let dropped: usize = tail
        .rsplit_once('[')
        .and_then(|(_, t)| t.strip_suffix(" more bytes dropped]"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of dropped bytes: {tail}"));
    assert!(dropped > (8 << 20) - STDERR_CAPACITY, "{dropped}");
    assert!(text.contains("xxxx"), "the flood's first bytes are kept");
    // The next call starts with an empty stderr.
    let d = probe
        .init_producer_id(None, &init_request("after-flood"), DEFAULT_LIMITS)
        .expect("the probe decides after the flood");
    assert_eq!(d.kind, DecisionKind::Initialize);
}

#[test]
fn clocks_files_and_random_still_trap_as_capabilities_not_granted() {
    let rt = runtime(SandboxLimits::default());
    let good = load_apache37(&rt);
    let probe = load(&rt, "kaas_test_policy_wasi_probe.wasm", "wasi-probe");

    for (what, timeout, interface) in [
        ("clock", probe::CLOCK, "wasi:clocks/"),
        ("file", probe::FILE, "wasi:filesystem/"),
        ("random", probe::RANDOM, "wasi:random/"),
    ] {
        let e = contained(what, || {
            probe.init_producer_id(
                None,
                &init_request_with_timeout(what, timeout),
                DEFAULT_LIMITS,
            )
        });
        assert_eq!(trap_kind(&e), TrapKind::Capability, "{what}: {e}");
        assert_reports(
            &e,
            "wasi-probe",
            &[interface, "a capability kaas does not grant"],
        );
    }
    assert_eq!(
        probe
            .stats()
            .traps(Call::InitProducerId, TrapKind::Capability),
        3
    );
    assert_good_policy_decides(&good);
}

#[test]
fn the_environment_is_empty_and_a_note_on_stderr_is_logged_without_failing_the_decision() {
    let rt = runtime(SandboxLimits::default());
    let probe = load(&rt, "kaas_test_policy_wasi_probe.wasm", "wasi-probe");

    // The probe panics if it can see PATH (or any variable it asks for).
    let d = probe
        .init_producer_id(
            None,
            &init_request_with_timeout("env", probe::ENV),
            DEFAULT_LIMITS,
        )
        .expect("an empty environment: the probe decides");
    assert_eq!(d.kind, DecisionKind::Initialize);

    let (d, log) = captured(|| {
        probe.init_producer_id(
            None,
            &init_request_with_timeout("note", probe::NOTE),
            DEFAULT_LIMITS,
        )
    });
    let d = d.expect("writing to stderr does not fail the decision");
    assert_eq!(d.kind, DecisionKind::Initialize);
    let line = log
        .lines()
        .find(|l| l.contains("policy wrote to stderr"))
        .unwrap_or_else(|| panic!("no stderr line in the log: {log}"));
    assert!(line.contains("wasi-probe: a note on stderr"), "{line}");
    assert!(line.contains("wasi-probe@0.0.1"), "{line}");
    assert!(line.contains("init-producer-id"), "{line}");
}

#[test]
fn trap_log_lines_are_rate_limited_and_count_what_they_held_back() {
    let rt = runtime(SandboxLimits::default());
    let trap = Arc::new(load(&rt, "kaas_test_policy_trap.wasm", "hostile-trap"));
    let mut machine = TxnMachine::new(trap.clone(), DEFAULT_LIMITS);
    let request = InitProducerId {
        transactional_id: Some("burst".to_owned()),
        timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        version: 4,
    };
    const BURST: u64 = 50;

    let ((), log) = captured(|| {
        let started = Instant::now();
        for _ in 0..BURST {
            let Step::Done(answer) =
                machine.init_producer_id(&request, 1_700_000_000_000, CANDIDATE)
            else {
                panic!("a trap planned a write");
            };
            assert_eq!(answer.reply.error_code, code::UNKNOWN_SERVER_ERROR);
        }
        let took = started.elapsed();
        // Past the limiter's period (100 ms), the next line carries the
        // count of everything held back since the last one.
        std::thread::sleep(Duration::from_millis(110));
        let _ = machine.init_producer_id(&request, 1_700_000_000_000, CANDIDATE);
        println!("{BURST} traps in {took:?}");
    });

    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("policy decision refused"))
        .collect();
    let suppressed: u64 = lines
        .iter()
        .map(|l| {
            l.split("suppressed=")
                .nth(1)
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no suppressed count: {l}"))
        })
        .sum();
    println!("{} lines, {suppressed} suppressed", lines.len());
    assert!(
        lines.len() < 10,
        "{} log lines for {} traps: not rate-limited",
        lines.len(),
        BURST + 1
    );
    assert_eq!(
        lines.len() as u64 + suppressed,
        BURST + 1,
        "every trap is either logged or counted in a later line"
    );
    assert!(lines[0].contains("deliberate panic"), "{}", lines[0]);
    assert_eq!(
        trap.stats().traps(Call::InitProducerId, TrapKind::Panic),
        BURST + 1,
        "the counter sees every trap"
    );
}
