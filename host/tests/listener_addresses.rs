//! Per-listener addresses: Metadata and FindCoordinator advertise, to a client,
//! the address of the listener it came in on (a client that bootstrapped
//! on a SASL_SSL port must not be sent to the PLAINTEXT port).

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;
use support::{Client, Process};

/// A broker with listeners FIRST and SECOND (both PLAINTEXT on port 0),
/// and the address each one printed.
fn two_listener_broker(dir: &std::path::Path) -> (Process, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--data-dir"])
        .arg(dir)
        .args(["--policy"])
        .arg(support::wasm("kaas_policy_apache37.wasm"))
        .args([
            "--listener",
            "FIRST=PLAINTEXT://127.0.0.1:0",
            "--listener",
            "SECOND=PLAINTEXT://127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kaas broker");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    // Keeps draining stdout for the broker's life.
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut first, mut second) = (None, None);
    while first.is_none() || second.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("the broker prints its listeners");
        if let Some(a) = line.strip_prefix("kaas broker listening on FIRST ") {
            first = Some(a.trim().to_string());
        }
        if let Some(a) = line.strip_prefix("kaas broker listening on SECOND ") {
            second = Some(a.trim().to_string());
        }
    }
    let (first, second) = (first.unwrap(), second.unwrap());
    let p = Process {
        child,
        addr: first.clone(),
    };
    (p, first, second)
}

fn port_of(addr: &str) -> i32 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn metadata_and_find_coordinator_advertise_the_listener_the_client_came_in_on() {
    let dir = tempfile::tempdir().expect("tmp");
    let (broker, first, second) = two_listener_broker(dir.path());
    for addr in [&first, &second] {
        let mut c = Client::connect(addr).await;
        let md = c
            .call(&MetadataRequest::default().with_topics(Some(vec![])), 12)
            .await;
        let ports: Vec<i32> = md.brokers.iter().map(|b| b.port).collect();
        assert_eq!(ports, vec![port_of(addr)], "Metadata on {addr}");
        assert_eq!(md.brokers[0].host.as_str(), "127.0.0.1");

        let fc = c
            .call(
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
                4,
            )
            .await;
        assert_eq!(fc.coordinators[0].error_code, 0);
        assert_eq!(
            fc.coordinators[0].port,
            port_of(addr),
            "FindCoordinator v4 on {addr}"
        );
        let fc3 = c
            .call(
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_key(StrBytes::from_static_str("g")),
                3,
            )
            .await;
        assert_eq!(fc3.error_code, 0);
        assert_eq!(fc3.port, port_of(addr), "FindCoordinator v3 on {addr}");
    }
    broker.terminate();
}
