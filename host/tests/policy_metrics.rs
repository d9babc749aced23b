//! The policy's observability on a real broker process:
//! after a transaction and a trap, `/metrics` shows the loaded policy's
//! identity, its decisions by call and kind, its trap by kind, its
//! violations and latency histograms; the log (at the default level, not on
//! a terminal) shows the start-up policy line and the guest's panic message,
//! without colour codes.
//!
//! The broker runs the `trap` test policy, which decides as apache37 for a
//! requested timeout of 77 777 ms and panics for any other.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use kaas::policy::WIT_VERSION;
use sha2::{Digest, Sha256};
use support::{Client, Process, txn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The timeout for which the `trap` policy decides instead of panicking.
const NO_TRAP_TIMEOUT_MS: i32 = 77_777;

/// The body of `GET /metrics`.
async fn scrape(addr: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: kaas\r\n\r\n")
        .await
        .expect("metrics request");
    let mut text = String::new();
    s.read_to_string(&mut text).await.expect("metrics body");
    text
}

/// The value of the sample named exactly `series` (name and labels).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[tokio::test]
async fn metrics_show_the_policy_its_decisions_traps_and_latencies_and_the_log_its_panic() {
    let dir = tempfile::tempdir().expect("tmp");
    let policy = support::wasm("kaas_test_policy_trap.wasm");
    let sha256 = hex::encode(Sha256::digest(std::fs::read(&policy).expect("policy")));
    let metrics = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("addr").to_string()
    };
    let stderr_path = dir.path().join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--policy")
        .arg(&policy)
        .args(["--metrics-listen", &metrics])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("spawn kaas broker");
    let p = Process::listening(child);
    let mut c = Client::connect(&p.addr).await;

    // A committed transaction the policy decides...
    txn::create_topic(&mut c, "observed", 1).await;
    let init =
        txn::init_request("observed-txn", (-1, -1)).with_transaction_timeout_ms(NO_TRAP_TIMEOUT_MS);
    let r = c.call(&init, 4).await;
    assert_eq!(r.error_code, 0, "InitProducerId");
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        txn::add(&mut c, "observed-txn", pid, epoch, "observed", vec![0]).await,
        0
    );
    assert_eq!(txn::end(&mut c, "observed-txn", pid, epoch, true).await, 0);
    // ...and a trap (any other timeout panics), answered UNKNOWN_SERVER_ERROR.
    let (code, _, _) = txn::init(&mut c, "trapping-txn", (-1, -1)).await;
    assert_eq!(code, -1);

    let labels = format!("policy=\"hostile-trap@0.0.1\",sha256=\"{}\"", &sha256[..12]);
    // The completion after the markers is decided in the background.
    let completed = format!(
        "kaas_policy_decisions_total{{{labels},call=\"complete-transaction\",kind=\"complete\"}}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(&metrics).await;
        if value(&text, &completed) == Some(1.0) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "no completion decision counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let info = format!(
        "kaas_policy_info{{policy=\"hostile-trap@0.0.1\",name=\"hostile-trap\",version=\"0.0.1\",sha256=\"{sha256}\",wit=\"{WIT_VERSION}\"}}"
    );
    assert_eq!(value(&text, &info), Some(1.0), "{text}");
    for (call, kind) in [
        ("init-producer-id", "initialize"),
        ("add-partitions", "add-partitions"),
        ("end-txn", "prepare-commit"),
    ] {
        let series =
            format!("kaas_policy_decisions_total{{{labels},call=\"{call}\",kind=\"{kind}\"}}");
        assert_eq!(value(&text, &series), Some(1.0), "{series}\n{text}");
    }
    let trap =
        format!("kaas_policy_traps_total{{{labels},call=\"init-producer-id\",kind=\"panic\"}}");
    assert_eq!(value(&text, &trap), Some(1.0), "{trap}\n{text}");
    let violations = format!("kaas_policy_violations_total{{{labels},call=\"init-producer-id\"}}");
    assert_eq!(value(&text, &violations), Some(0.0), "{text}");
    // One histogram per call made. InitProducerId was called twice (a
    // decision, a trap); the histogram times the first call of each and
    // then one in eight.
    let count = format!("kaas_policy_call_seconds_count{{{labels},call=\"init-producer-id\"}}");
    assert_eq!(value(&text, &count), Some(1.0), "{text}");
    let inf = format!(
        "kaas_policy_call_seconds_bucket{{{labels},call=\"init-producer-id\",le=\"+Inf\"}}"
    );
    assert_eq!(value(&text, &inf), Some(1.0), "{text}");
    let sum = format!("kaas_policy_call_seconds_sum{{{labels},call=\"init-producer-id\"}}");
    assert!(value(&text, &sum).is_some_and(|s| s > 0.0), "{text}");
    let smallest =
        format!("kaas_policy_call_seconds_bucket{{{labels},call=\"end-txn\",le=\"0.00000025\"}}");
    assert!(value(&text, &smallest).is_some(), "{smallest}\n{text}");
    assert!(text.contains("# TYPE kaas_policy_call_seconds histogram"));

    // The log, at the default level and not on a terminal.
    let log = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert!(
        log.contains("transaction policy loaded"),
        "the default log level hides the start-up policy line:\n{log}"
    );
    assert!(
        log.contains("hostile-trap policy: deliberate panic for a 60000 ms timeout"),
        "the guest's panic message is not in the log:\n{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log that is not a terminal:\n{log}"
    );
    p.terminate();
}
