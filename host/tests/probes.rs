//! `kaas conformance --bootstrap`: the wire probes pass against a real
//! broker process running each shipped policy.

mod support;

use support::Process;

async fn probes_pass_with(policy: &str) {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn_full(dir.path(), policy, &[], &[]);
    let results = kaas::conformance::probes::run(&broker.addr)
        .await
        .expect("probes ran");
    let failed: Vec<_> = results.iter().filter(|r| r.failure.is_some()).collect();
    assert!(results.len() >= 6);
    assert!(failed.is_empty(), "{policy}: {failed:#?}");
    broker.terminate();
}

#[tokio::test]
async fn the_wire_probes_pass_against_apache37() {
    probes_pass_with("kaas_policy_apache37.wasm").await;
}

#[tokio::test]
async fn the_wire_probes_pass_against_strict() {
    probes_pass_with("kaas_policy_strict.wasm").await;
}
