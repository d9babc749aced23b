//! `kaas conformance --bootstrap`: the wire kit (wirekit/) against a real
//! broker process running each shipped policy. Every probe must run to its
//! end, and the rejoin contract both policies share (KIP-360 claims,
//! fencing, CONCURRENT_TRANSACTIONS during a fence's abort; spec §1) must
//! be observed exactly as the spec states it.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::Process;

/// The rejoin probes' observations the spec requires (IP-03, IT-03, IT-04,
/// IT-06, IF-01 with IF-02/IF-10/ET-07, ET-06 with ET-03).
const CONTRACT: &[(&str, &str, &str)] = &[
    ("IP-03", "claim (1000,-1)", "error=42 pid=-1 epoch=-1"),
    ("IP-03", "claim (-1,3)", "42"),
    ("IT-03", "first", "error=0 epoch=0"),
    ("IT-03", "noclaim v4", "error=0 pid=P epoch=1"),
    ("IT-03", "noclaim v2", "error=0 pid=P epoch=2"),
    ("IT-04", "claim (P,0)", "error=0 pid=P epoch=1"),
    ("IT-04", "retry claim (P,0)", "error=0 pid=P epoch=1"),
    ("IT-04", "claim (P,1) v3", "error=0 pid=P epoch=2"),
    ("IT-06", "stale claim v4", "error=90 pid=-1 epoch=-1"),
    ("IT-06", "stale claim v3", "error=47 pid=-1 epoch=-1"),
    ("IT-06", "future epoch", "error=90 pid=-1 epoch=-1"),
    ("IT-06", "unrelated pid", "error=90 pid=-1 epoch=-1"),
    ("IF-01", "rejoin mid-Ongoing", "error=51 pid=-1 epoch=-1"),
    ("IF-01", "retry after the abort", "error=0 pid=P epoch=2"),
    ("IF-01", "old epoch AddPartitionsToTxn", "90"),
    ("IF-01", "old epoch EndTxn", "90"),
    ("IF-01", "EndTxn on Empty", "48"),
    ("ET-06", "EndTxn COMMIT", "0"),
    ("ET-06", "EndTxn COMMIT retried until not 51", "0"),
];

async fn kit_runs_with(policy: &str) {
    let dir = tempfile::tempdir().expect("tmp");
    // The timings scripts/test-wire-kit gives both kaas and Apache Kafka.
    let broker = Process::spawn_full(
        dir.path(),
        policy,
        &[
            "--group-initial-rebalance-delay-ms",
            "0",
            "--group-min-session-timeout-ms",
            "1000",
            "--txn-reaper-interval-ms",
            "1000",
        ],
        &[],
    );
    let probes = kaas_wirekit::probes::all();
    let outcomes = kaas_wirekit::kit::run(&broker.addr, &probes)
        .await
        .expect("the kit ran");
    let failed: Vec<_> = outcomes.iter().filter(|o| o.error.is_some()).collect();
    assert!(failed.is_empty(), "{policy}: {failed:#?}");
    for (id, key, want) in CONTRACT {
        let o = outcomes.iter().find(|o| o.id == *id).expect("probe ran");
        let got = o
            .seen
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str());
        assert_eq!(got, Some(*want), "{policy}: {id} {key}");
    }
    broker.terminate();
}

#[tokio::test]
async fn the_wire_kit_runs_and_the_rejoin_contract_holds_under_apache37() {
    kit_runs_with("kaas_policy_apache37.wasm").await;
}

#[tokio::test]
async fn the_wire_kit_runs_and_the_rejoin_contract_holds_under_strict() {
    kit_runs_with("kaas_policy_strict.wasm").await;
}
