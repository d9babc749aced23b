//! SIGTERM under load: the broker stops accepting, lets the requests in
//! flight finish (within a bound), then closes the log cleanly. Every
//! record an idempotent producer was told is safe is there after the
//! restart, exactly once, and the shutdown itself logs no error.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kafka_protocol::messages::{ProduceResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use support::records::{create, fetch_values, idempotent_pid, produce_request};
use support::{Client, Process};
use tokio::sync::Mutex;

use kaas::log::batch::data_batch;

const TOPIC: &str = "drain";
const PARTITIONS: i32 = 4;
const PRODUCERS: usize = 4;

/// A broker whose stderr goes to `log` (with `fault` as KAAS_FAULT).
fn spawn_logging(dir: &std::path::Path, log: &std::path::Path, fault: &str) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .arg("--policy")
        .arg(support::wasm("kaas_policy_apache37.wasm"))
        .env("RUST_LOG", "info")
        .env("KAAS_FAULT", fault)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn kaas broker");
    Process::listening(child)
}

/// One idempotent producer: a producer id of its own, a sequence per
/// partition, 10-record batches with acks=all, until the broker goes.
/// Every acknowledged value goes to `acked`.
async fn produce_until_closed(
    addr: String,
    producer: usize,
    acked: Arc<Mutex<Vec<String>>>,
    count: Arc<AtomicUsize>,
) {
    let mut c = Client::connect(&addr).await;
    let (pid, epoch) = (idempotent_pid(&mut c).await, 0);
    let mut seq = [0i32; PARTITIONS as usize];
    for i in 0u64.. {
        let partition = ((producer as u64 + i) % PARTITIONS as u64) as i32;
        let values: Vec<String> = (0..10).map(|k| format!("p{producer}-{i}-{k}")).collect();
        let recs: Vec<(Option<&[u8]>, &[u8])> =
            values.iter().map(|v| (None, v.as_bytes())).collect();
        let s = &mut seq[partition as usize];
        let batch = data_batch(&recs, 1_700_000_000_000, Some((pid, epoch, *s)), false);
        let (_, frame) = c.frame(&produce_request(TOPIC, partition, batch), 9);
        c.send_raw(&frame).await;
        let Some(mut resp) = c.read_frame().await else {
            return; // the broker closed the connection
        };
        ResponseHeader::decode(&mut resp, 1).expect("header");
        let body = ProduceResponse::decode(&mut resp, 9).expect("produce response");
        let code = body.responses[0].partition_responses[0].error_code;
        assert_eq!(code, 0, "a produce was refused during the drain");
        *s += 10;
        acked.lock().await.extend(values);
        count.fetch_add(10, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_under_idempotent_load_keeps_every_acknowledged_record_and_logs_no_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("broker.stderr");
    let data = dir.path().join("data");
    // The close takes a while (a fault point): a connection still served
    // meanwhile would write into a closing log.
    let broker = spawn_logging(&data, &log, "slow-log-close");
    let addr = broker.addr.clone();
    create(&mut Client::connect(&addr).await, TOPIC, PARTITIONS).await;
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            tokio::spawn(produce_until_closed(
                addr.clone(),
                p,
                acked.clone(),
                count.clone(),
            ))
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count.load(Ordering::Relaxed) < 2000 {
        assert!(
            std::time::Instant::now() < deadline,
            "producers made no progress"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // SIGTERM with requests in flight.
    let status = broker.sigterm();
    for t in tasks {
        t.await.expect("a producer failed");
    }
    let stderr = std::fs::read_to_string(&log).expect("log");
    assert!(
        status.success(),
        "the broker exited with {status}; its log:\n{stderr}"
    );
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains(" WARN "))
        .collect();
    assert!(
        errors.is_empty(),
        "the shutdown logged:\n{}",
        errors.join("\n")
    );
    assert!(
        stderr.contains("log closed cleanly"),
        "the log was not closed cleanly:\n{stderr}"
    );
    let acked = acked.lock().await.clone();
    assert!(acked.len() >= 2000);

    // A cleanly closed log opens without a rescan or a repair.
    let restart_log = dir.path().join("restart.stderr");
    let broker = spawn_logging(&data, &restart_log, "");
    let mut c = Client::connect(&broker.addr).await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for p in 0..PARTITIONS {
        let mut offset = 0;
        loop {
            let records = fetch_values(&mut c, TOPIC, p, offset).await;
            let Some(&(last, _)) = records.last() else {
                break;
            };
            for (_, v) in records {
                *seen.entry(String::from_utf8(v).expect("utf8")).or_default() += 1;
            }
            offset = last + 1;
        }
    }
    let dupes: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dupes.is_empty(), "duplicated records: {dupes:?}");
    let lost: Vec<_> = acked.iter().filter(|v| !seen.contains_key(*v)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost, e.g. {:?}",
        lost.len(),
        lost.first()
    );
    let restart = std::fs::read_to_string(&restart_log).expect("log");
    let warnings: Vec<&str> = restart
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains(" WARN "))
        .collect();
    assert!(
        warnings.is_empty(),
        "the restart after a clean shutdown logged:\n{}",
        warnings.join("\n")
    );
    broker.terminate();
}
