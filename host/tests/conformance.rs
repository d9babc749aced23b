//! The conformance suite (tests/conformance/*.json) through the real wasmtime
//! runtime: both shipped policies pass every case, and a deliberately broken
//! policy fails the retry cases by name, so the runner is known to be able
//! to fail.

use std::path::PathBuf;
use std::sync::Arc;

use kaas::conformance::{load_suite, run_cases};
use kaas::policy::{PolicyRuntime, SandboxLimits};

fn wasm(name: &str) -> PathBuf {
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/wasm32-wasip2/release"
    ))
    .join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas` first",
        p.display()
    );
    p
}

fn suite() -> Vec<kaas::conformance::Case> {
    load_suite(&PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/conformance"
    )))
    .expect("suite loads")
}

fn failures(policy_file: &str) -> (usize, Vec<(String, String)>) {
    let rt = PolicyRuntime::new(SandboxLimits::default(), None).expect("runtime");
    let policy = Arc::new(rt.load_file(&wasm(policy_file)).expect("policy loads"));
    let results = run_cases(&policy, &suite());
    let failed = results
        .iter()
        .filter_map(|r| r.failure.clone().map(|f| (r.id.clone(), f)))
        .collect();
    (results.len(), failed)
}

#[test]
fn the_suite_has_at_least_80_cases_covering_the_required_scenarios() {
    let cases = suite();
    assert!(cases.len() >= 80, "only {} cases", cases.len());
    let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    let mut required: Vec<String> = Vec::new();
    required.extend((1..=18).map(|n| format!("IT-{n:02}")));
    required.extend((1..=8).map(|n| format!("IF-{n:02}")));
    required.extend((1..=14).map(|n| format!("IX-{n:02}")));
    required.extend((1..=11).map(|n| format!("ET-{n:02}")));
    required.extend((1..=5).map(|n| format!("TR-{n:02}")));
    for id in &required {
        assert!(ids.contains(&id.as_str()), "scenario {id} has no case");
    }
    for (id, needs_failover) in [("IX-08", true), ("IX-09", true)] {
        let case = cases.iter().find(|c| c.id == id).expect("present");
        assert_eq!(
            case.steps.iter().any(|s| s.failover),
            needs_failover,
            "{id} must pass through a failover step"
        );
    }
}

#[test]
fn apache37_passes_every_case() {
    let (n, failed) = failures("kaas_policy_apache37.wasm");
    assert!(
        failed.is_empty(),
        "{} of {n} failed: {failed:#?}",
        failed.len()
    );
}

#[test]
fn strict_passes_every_case_with_its_documented_overrides() {
    let (n, failed) = failures("kaas_policy_strict.wasm");
    assert!(
        failed.is_empty(),
        "{} of {n} failed: {failed:#?}",
        failed.len()
    );
}

#[test]
fn a_policy_without_the_retry_of_bump_rule_fails_the_retry_cases_by_name() {
    let (_, failed) = failures("kaas_test_policy_broken_retry.wasm");
    let ids: Vec<&str> = failed.iter().map(|(id, _)| id.as_str()).collect();
    for must_fail in [
        "IT-05",
        "IX-04",
        "IX-08",
        "IX-09",
        "SEED-a_retried_rotation_gets_the_same_answer",
    ] {
        assert!(
            ids.contains(&must_fail),
            "{must_fail} should fail for the broken policy; failures: {ids:?}"
        );
    }
    for must_pass in ["IT-01", "IT-03", "IF-01", "ET-01", "TR-01"] {
        assert!(
            !ids.contains(&must_pass),
            "{must_pass} does not depend on the retry rule but failed"
        );
    }
}
