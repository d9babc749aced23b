//! Policy hot swap and transaction.max.timeout.ms, against a real `kaas
//! broker` process: `kaas policy load` over the admin endpoint, SIGHUP, the
//! vetting that refuses broken policies while the old one keeps deciding,
//! `kaas txn describe` showing which policy decided, the admin endpoint's
//! protection, and the timeout flag.
//!
//! The observable difference between the two policies: a claim on an
//! absent transactional id is accepted by apache37 and fenced by strict
//! (tests/conformance/90-strict.json STRICT-02).

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;
use support::txn::{init, init_request};
use support::{Client, Process, wasm};

const PRODUCER_FENCED: i16 = 90;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;

/// A broker process with its admin and metrics addresses.
struct Broker {
    process: Process,
    admin: Option<String>,
    metrics: Option<String>,
}

/// Starts `kaas broker` on `policy` (a path) with `extra` flags and the
/// admin endpoint and metrics on loopback port 0.
fn start(dir: &Path, policy: &Path, extra: &[&str]) -> Broker {
    let metrics_port = free_port();
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("data"))
        .arg("--policy")
        .arg(policy)
        .args(["--metrics-listen", &metrics])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kaas broker");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    let mut admin = None;
    let addr = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(a) = line.strip_prefix("kaas admin listening on ") {
                    admin = Some(a.trim().to_owned());
                }
                if let Some(a) = line.strip_prefix("kaas broker listening on ") {
                    break a.trim().to_owned();
                }
            }
            _ => panic!("broker exited before listening"),
        }
    };
    Broker {
        process: Process { child, addr },
        admin,
        metrics: Some(metrics),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Runs the `kaas` CLI: (success, stdout, stderr).
fn kaas(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(args)
        .output()
        .expect("run kaas");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kaas policy load FILE --admin ADDR [--admin-token-file F]`.
fn policy_load(admin: &str, file: &Path, token_file: Option<&Path>) -> (bool, String, String) {
    let file = file.to_str().expect("utf-8 path");
    let mut args = vec!["policy", "load", file, "--admin", admin];
    let token;
    if let Some(t) = token_file {
        token = t.to_str().expect("utf-8 path").to_owned();
        args.extend(["--admin-token-file", token.as_str()]);
    }
    kaas(&args)
}

/// `kaas txn describe`'s "decided by:" line.
fn decided_by(bootstrap: &str, txn: &str) -> (String, String) {
    let (ok, out, err) = kaas(&["txn", "describe", "--bootstrap", bootstrap, txn]);
    assert!(ok, "kaas txn describe {txn}: {err}");
    let line = |prefix: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"))
            .to_owned()
    };
    (line("decided by: "), line("current policy: "))
}

/// One GET of /metrics.
fn metrics(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("metrics connect");
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

fn swaps(b: &Broker, result: &str) -> u64 {
    let text = metrics(b.metrics.as_deref().expect("metrics"));
    let prefix = format!("kaas_policy_swaps_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {prefix} in /metrics"))
        .trim()
        .parse()
        .expect("a count")
}

/// The answer to a claim on a never-initialised transactional id: NONE under
/// apache37, PRODUCER_FENCED under strict.
async fn absent_claim(c: &mut Client, txn: &str) -> i16 {
    init(c, txn, (1000, 3)).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_over_the_admin_endpoint_changes_which_policy_decides() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        &wasm("kaas_policy_apache37.wasm"),
        &["--admin-listen", "127.0.0.1:0"],
    );
    let admin = b.admin.clone().expect("admin address printed");
    let mut c = Client::connect(&b.process.addr).await;

    assert_eq!(
        absent_claim(&mut c, "absent-before").await,
        0,
        "apache37 accepts"
    );
    assert_eq!(init(&mut c, "t1", (-1, -1)).await.0, 0);
    let (by, current) = decided_by(&b.process.addr, "t1");
    assert!(by.starts_with("apache37@"), "decided by {by}");
    assert!(current.starts_with("apache37@"), "current {current}");

    let (ok, out, err) = policy_load(&admin, &wasm("kaas_policy_strict.wasm"), None);
    assert!(ok, "kaas policy load strict: {out} {err}");
    assert!(
        out.contains("swapped: apache37@") && out.contains("-> strict@"),
        "{out}"
    );

    assert_eq!(
        absent_claim(&mut c, "absent-after").await,
        PRODUCER_FENCED,
        "strict fences a claim on an absent id"
    );
    // t1's entry was decided by apache37 and says so until strict decides it.
    let (by, current) = decided_by(&b.process.addr, "t1");
    assert!(by.starts_with("apache37@"), "decided by {by}");
    assert!(current.starts_with("strict@"), "current {current}");
    assert_eq!(
        init(&mut c, "t1", (-1, -1)).await.0,
        0,
        "a rejoin under strict"
    );
    let (by, _) = decided_by(&b.process.addr, "t1");
    assert!(by.starts_with("strict@"), "decided by {by}");

    // And back.
    let (ok, out, err) = policy_load(&admin, &wasm("kaas_policy_apache37.wasm"), None);
    assert!(ok, "kaas policy load apache37: {out} {err}");
    assert_eq!(absent_claim(&mut c, "absent-back").await, 0);
    assert_eq!(swaps(&b, "ok"), 2);
    assert_eq!(swaps(&b, "refused"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_policies_are_refused_and_the_old_one_keeps_deciding() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        &wasm("kaas_policy_apache37.wasm"),
        &["--admin-listen", "127.0.0.1:0"],
    );
    let admin = b.admin.clone().expect("admin address printed");
    let mut c = Client::connect(&b.process.addr).await;
    let not_wasm = dir.path().join("not.wasm");
    std::fs::write(&not_wasm, b"\0asm garbage").expect("write");
    for (file, reason) in [
        (
            wasm("kaas_test_policy_previous_major.wasm"),
            "kaas:txn-policy@2.0.0",
        ),
        // It decides transaction version 2, which the wire does not serve yet.
        (wasm("kaas_policy_apache40.wasm"), "transaction.version 2"),
        (wasm("kaas_test_policy_describe_panic.wasm"), "describe"),
        (wasm("kaas_test_policy_noop.wasm"), "smoke vectors"),
        (not_wasm, "does not load"),
    ] {
        let (ok, out, err) = policy_load(&admin, &file, None);
        assert!(!ok, "{} must be refused: {out}", file.display());
        assert!(
            err.contains("refused") && err.contains(reason),
            "{}: the refusal names the reason ({reason}): {err}",
            file.display()
        );
        assert_eq!(
            absent_claim(&mut c, &format!("absent-{}", file.display())).await,
            0,
            "apache37 still decides after {}",
            file.display()
        );
    }
    assert_eq!(swaps(&b, "refused"), 5);
    assert_eq!(swaps(&b, "ok"), 0);
    assert_eq!(init(&mut c, "t1", (-1, -1)).await.0, 0);
    let (by, current) = decided_by(&b.process.addr, "t1");
    assert!(by.starts_with("apache37@") && current.starts_with("apache37@"));
}

/// Waits (bounded) until `cond` holds, asking again every few milliseconds.
async fn eventually(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sighup(p: &Process) {
    let ok = Command::new("kill")
        .args(["-HUP", &p.child.id().to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -HUP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_re_reads_the_policy_file_and_refuses_a_broken_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("policy.wasm");
    std::fs::copy(wasm("kaas_policy_apache37.wasm"), &file).expect("copy");
    let mut b = start(dir.path(), &file, &[]);
    let mut c = Client::connect(&b.process.addr).await;
    assert_eq!(absent_claim(&mut c, "absent-0").await, 0);

    std::fs::copy(wasm("kaas_policy_strict.wasm"), &file).expect("copy");
    sighup(&b.process);
    let mut n = 0;
    eventually("strict decides after SIGHUP", async || {
        n += 1;
        absent_claim(&mut c, &format!("absent-1-{n}")).await == PRODUCER_FENCED
    })
    .await;
    assert!(
        b.process.child.try_wait().expect("try_wait").is_none(),
        "SIGHUP must not stop the broker"
    );
    assert_eq!(swaps(&b, "ok"), 1);

    std::fs::copy(wasm("kaas_test_policy_noop.wasm"), &file).expect("copy");
    sighup(&b.process);
    eventually("the broken file is refused", async || {
        swaps(&b, "refused") == 1
    })
    .await;
    assert_eq!(
        absent_claim(&mut c, "absent-2").await,
        PRODUCER_FENCED,
        "strict keeps deciding"
    );
    assert_eq!(swaps(&b, "ok"), 1);
}

#[test]
fn a_non_loopback_admin_address_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .arg("--policy")
        .arg(wasm("kaas_policy_apache37.wasm"))
        .args(["--admin-listen", "0.0.0.0:0"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_refuses_a_missing_or_wrong_token() {
    let dir = tempfile::tempdir().expect("tmp");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").expect("write");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-token\n").expect("write");
    let b = start(
        dir.path(),
        &wasm("kaas_policy_apache37.wasm"),
        &[
            "--admin-listen",
            "127.0.0.1:0",
            "--admin-token-file",
            token.to_str().expect("utf-8"),
        ],
    );
    let admin = b.admin.clone().expect("admin address printed");
    let strict = wasm("kaas_policy_strict.wasm");
    let (ok, _, err) = policy_load(&admin, &strict, None);
    assert!(!ok && err.contains("HTTP 401"), "{err}");
    let (ok, _, err) = policy_load(&admin, &strict, Some(&wrong));
    assert!(!ok && err.contains("HTTP 403"), "{err}");
    let mut c = Client::connect(&b.process.addr).await;
    assert_eq!(absent_claim(&mut c, "absent-0").await, 0, "nothing swapped");
    let (ok, out, err) = policy_load(&admin, &strict, Some(&token));
    assert!(ok, "{out} {err}");
    assert_eq!(absent_claim(&mut c, "absent-1").await, PRODUCER_FENCED);
    // Refused on the token, never vetted: not counted as refused policies.
    assert_eq!(swaps(&b, "refused"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_max_timeout_is_enforced_and_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        &wasm("kaas_policy_apache37.wasm"),
        &["--transaction-max-timeout-ms", "5000"],
    );
    let mut c = Client::connect(&b.process.addr).await;
    let over = init_request("long", (-1, -1)).with_transaction_timeout_ms(5001);
    assert_eq!(
        c.call(&over, 4).await.error_code,
        INVALID_TRANSACTION_TIMEOUT
    );
    let within = init_request("short", (-1, -1)).with_transaction_timeout_ms(5000);
    assert_eq!(c.call(&within, 4).await.error_code, 0);
    // After a swap the new policy is configured with the same limit.
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(support::txn::s("1"))
            .with_configuration_keys(Some(vec![support::txn::s("transaction.max.timeout.ms")])),
    ]);
    let resp = c.call(&req, 4).await;
    let configs = &resp.results[0].configs;
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].name.as_str(), "transaction.max.timeout.ms");
    assert_eq!(configs[0].value.as_ref().map(|v| v.as_str()), Some("5000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_in_policy_enforces_the_brokers_max_timeout() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        &wasm("kaas_policy_apache37.wasm"),
        &[
            "--transaction-max-timeout-ms",
            "5000",
            "--admin-listen",
            "127.0.0.1:0",
        ],
    );
    let admin = b.admin.clone().expect("admin address printed");
    let (ok, out, err) = policy_load(&admin, &wasm("kaas_policy_strict.wasm"), None);
    assert!(ok, "{out} {err}");
    let mut c = Client::connect(&b.process.addr).await;
    let over = init_request("long", (-1, -1)).with_transaction_timeout_ms(60_000);
    assert_eq!(
        c.call(&over, 4).await.error_code,
        INVALID_TRANSACTION_TIMEOUT
    );
    let within = init_request("short", (-1, -1)).with_transaction_timeout_ms(4_000);
    assert_eq!(c.call(&within, 4).await.error_code, 0);
}

/// A decision planned before a swap and made durable after it is recorded
/// as the old policy's (written_by, snapshot), and the next decision is the
/// new policy's: the machine reads the slot once per decision.
#[test]
fn a_decision_straddling_a_swap_keeps_its_own_policys_identity() {
    use kaas::policy::{PolicyRuntime, PolicySlot, SandboxLimits};
    use kaas::txn::machine::{DEFAULT_LIMITS, InitProducerId, Step, TxnMachine};
    use kaas::txn::record::StateRecord;
    use std::sync::Arc;

    let rt = PolicyRuntime::new(SandboxLimits::default(), None).expect("runtime");
    let load = |name: &str| Arc::new(rt.load_file(&wasm(name)).expect("loads"));
    let slot = PolicySlot::new(load("kaas_policy_apache37.wasm"));
    let mut m = TxnMachine::with_slot(slot.clone(), DEFAULT_LIMITS);
    let req = |txn: &str| InitProducerId {
        transactional_id: Some(txn.into()),
        timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        version: 4,
    };
    let Step::Write(w) = m.init_producer_id(&req("a"), 1_000, 5_000) else {
        panic!("a new id is written");
    };
    assert!(
        matches!(&w.record, StateRecord::Upsert { written_by: Some(by), .. } if by.starts_with("apache37@"))
    );
    slot.replace(load("kaas_policy_strict.wasm"));
    assert_eq!(m.finish(w, Ok(())).reply.error_code, 0);
    assert!(
        m.written_by("a")
            .expect("recorded")
            .starts_with("apache37@")
    );

    let Step::Write(w) = m.init_producer_id(&req("b"), 1_001, 5_001) else {
        panic!("a new id is written");
    };
    m.finish(w, Ok(()));
    assert!(m.written_by("b").expect("recorded").starts_with("strict@"));
    let by: Vec<(String, String)> = m
        .snapshot()
        .into_iter()
        .filter_map(|r| match r {
            StateRecord::Upsert {
                entry, written_by, ..
            } => Some((entry.transactional_id, written_by.unwrap_or_default())),
            StateRecord::Tombstone { .. } => None,
        })
        .collect();
    assert_eq!(by.len(), 2);
    assert!(by[0].0 == "a" && by[0].1.starts_with("apache37@"), "{by:?}");
    assert!(by[1].0 == "b" && by[1].1.starts_with("strict@"), "{by:?}");
}
