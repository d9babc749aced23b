//! The conformance suite (tests/conformance/*.json) through the real wasmtime
//! runtime: apache37 passes every case; strict and capped pass with their
//! declared differences (policies/*/differences.json) and fail without
//! them; the differential report between each and apache37 lists exactly
//! their declared steps; a deliberately broken policy fails the retry cases
//! by name, so the runner is known to be able to fail. The command line
//! (`kaas conformance --expect/--against/--suite`) is run as a process.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use kaas::conformance::{
    Differences, differential, load_suite, load_suites, report_suite, run_cases, run_suite,
};
use kaas::policy::{Policy, PolicyRuntime, SandboxLimits};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn wasm(name: &str) -> PathBuf {
    let p = root().join("target/wasm32-wasip2/release").join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas` first",
        p.display()
    );
    p
}

fn suite_dir() -> PathBuf {
    root().join("tests/conformance")
}

fn suite() -> Vec<kaas::conformance::Case> {
    load_suite(&suite_dir()).expect("suite loads")
}

fn policy(file: &str) -> Arc<Policy> {
    let rt = PolicyRuntime::new(SandboxLimits::default(), None).expect("runtime");
    Arc::new(rt.load_file(&wasm(file)).expect("policy loads"))
}

fn declared_file(name: &str) -> PathBuf {
    root().join("policies").join(name).join("differences.json")
}

fn declared(name: &str) -> Differences {
    Differences::load(&declared_file(name)).expect("differences file loads")
}

fn declared_steps(d: &Differences) -> BTreeSet<(String, usize)> {
    d.steps.keys().cloned().collect()
}

fn failures(policy_file: &str) -> (usize, Vec<(String, String)>) {
    let results = run_cases(&policy(policy_file), &suite());
    let failed = results
        .iter()
        .filter_map(|r| r.failure.clone().map(|f| (r.id.clone(), f)))
        .collect();
    (results.len(), failed)
}

fn differential_steps(a: &str, b: &str) -> (BTreeSet<(String, usize)>, String) {
    let d = differential(&policy(a), &policy(b), &suite());
    assert!(d.errors.is_empty(), "cases not replayed: {:?}", d.errors);
    let steps = d
        .divergences
        .iter()
        .map(|v| (v.case.clone(), v.step))
        .collect();
    (steps, kaas::conformance::diff::report(&d))
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

fn passes_with_its_declared_differences(file: &str, name: &str) {
    let cases = suite();
    let d = declared(name);
    d.check_against(name, &cases)
        .expect("declarations name suite steps");
    let run = run_suite(&policy(file), &cases, &d);
    let failed: Vec<_> = run.results.iter().filter(|r| r.failure.is_some()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let confirmed: BTreeSet<(String, usize)> = run
        .confirmed
        .iter()
        .map(|c| (c.case.clone(), c.step))
        .collect();
    assert_eq!(confirmed, declared_steps(&d), "every declaration confirmed");
    let text = report_suite(&run);
    for c in &run.confirmed {
        let line = format!("DIFF {} step {} confirmed: {}", c.case, c.step, c.reason);
        assert!(text.contains(&line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn strict_passes_every_case_with_its_declared_differences() {
    passes_with_its_declared_differences("kaas_policy_strict.wasm", "strict");
}

#[test]
fn capped_passes_every_case_with_its_declared_differences() {
    passes_with_its_declared_differences("kaas_policy_capped.wasm", "capped");
}

#[test]
fn apache40_passes_at_least_170_cases_with_its_declared_differences() {
    passes_with_its_declared_differences("kaas_policy_apache40.wasm", "apache40");
    let run = run_suite(
        &policy("kaas_policy_apache40.wasm"),
        &suite(),
        &declared("apache40"),
    );
    assert!(
        run.skipped.is_empty(),
        "apache40 finalizes transaction.version 2"
    );
    assert!(run.results.len() >= 170, "only {} cases", run.results.len());
    let tv2 = suite()
        .iter()
        .filter(|c| c.transaction_version == 2)
        .count();
    assert!(tv2 >= 60, "only {tv2} transaction-version-2 cases");
}

#[test]
fn a_policy_of_transaction_version_0_skips_the_version_2_cases() {
    let run = run_suite(
        &policy("kaas_policy_apache37.wasm"),
        &suite(),
        &Differences::none(),
    );
    let tv2: BTreeSet<String> = suite()
        .iter()
        .filter(|c| c.transaction_version == 2)
        .map(|c| c.id.clone())
        .collect();
    let skipped: BTreeSet<String> = run.skipped.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(skipped, tv2);
    assert!(report_suite(&run).contains(&format!(", {} skipped", tv2.len())));
}

#[test]
fn an_undeclared_difference_fails_with_the_title_the_request_and_both_answers() {
    let (_, failed) = failures("kaas_policy_strict.wasm");
    let ids: BTreeSet<String> = failed.iter().map(|(id, _)| id.clone()).collect();
    let declared_cases: BTreeSet<String> = declared_steps(&declared("strict"))
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(
        ids, declared_cases,
        "strict fails exactly its declared cases"
    );
    let (_, ip02) = failed.iter().find(|(id, _)| id == "IP-02").expect("IP-02");
    for needle in [
        "idempotent path ignores a v3+ claim",
        "step 0: InitProducerId v4 txn=null (idempotent) claim=(1000, 5) timeout=60000",
        "expected: error NONE(0) pid 2000 epoch 0; entry absent",
        "actual  : error INVALID_REQUEST(42) pid -1 epoch -1; entry absent",
        "differs in: error",
    ] {
        assert!(ip02.contains(needle), "{needle:?} not in\n{ip02}");
    }
}

fn parse(text: &str) -> Differences {
    Differences::parse(text).expect("parses")
}

#[test]
fn a_stale_declaration_fails_the_case() {
    let d = parse(
        r#"{"policy": "apache37", "differences": [
          {"case": "IT-01", "step": 0, "expect": {"error": "NONE", "pid": 2000, "epoch": 0},
           "reason": "declared, but apache37 answers as the suite expects"}]}"#,
    );
    let cases = suite();
    d.check_against("apache37", &cases)
        .expect("names a suite step");
    let run = run_suite(&policy("kaas_policy_apache37.wasm"), &cases, &d);
    let failed: Vec<_> = run
        .results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| (r.id.as_str(), f)))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].0, "IT-01");
    assert!(failed[0].1.contains("stale declaration"), "{}", failed[0].1);
    assert!(run.confirmed.is_empty());
}

#[test]
fn a_declared_difference_that_does_not_hold_fails_with_both_answers() {
    let d = parse(
        r#"{"policy": "strict", "differences": [
          {"case": "IP-02", "step": 0, "expect": {"error": "PRODUCER_FENCED"}, "reason": "wrong on purpose"}]}"#,
    );
    let run = run_suite(&policy("kaas_policy_strict.wasm"), &suite(), &d);
    let f = run
        .results
        .iter()
        .find(|r| r.id == "IP-02")
        .and_then(|r| r.failure.clone())
        .expect("IP-02 fails");
    assert!(f.contains("did not hold (wrong on purpose)"), "{f}");
    assert!(f.contains("declared: error PRODUCER_FENCED(90)"), "{f}");
    assert!(f.contains("error INVALID_REQUEST(42)"), "{f}");
}

#[test]
fn declarations_naming_no_step_of_the_suite_or_another_policy_are_refused() {
    let cases = suite();
    let unknown = parse(
        r#"{"policy": "strict", "differences": [
          {"case": "NO-SUCH-CASE", "step": 0, "expect": {"error": 42}, "reason": "r"},
          {"case": "IP-02", "step": 7, "expect": {"error": 42}, "reason": "r"}]}"#,
    );
    let e = format!("{:#}", unknown.check_against("strict", &cases).unwrap_err());
    assert!(e.contains("case NO-SUCH-CASE is not in the suite"), "{e}");
    assert!(e.contains("step 7 does not exist"), "{e}");
    let e = format!(
        "{:#}",
        declared("strict")
            .check_against("apache37", &cases)
            .unwrap_err()
    );
    assert!(
        e.contains("\"strict\"") && e.contains("\"apache37\""),
        "{e}"
    );
}

#[test]
fn strict_against_apache37_lists_exactly_stricts_declared_differences() {
    let (steps, text) = differential_steps("kaas_policy_strict.wasm", "kaas_policy_apache37.wasm");
    assert_eq!(steps, declared_steps(&declared("strict")), "\n{text}");
    assert!(text.contains(
        "DIFF IP-02 (idempotent path ignores a v3+ claim (strict: INVALID_REQUEST)) step 0"
    ));
    assert!(text.contains("    strict  : error INVALID_REQUEST(42) pid -1 epoch -1"));
    assert!(text.contains("    apache37: error NONE(0) pid 2000 epoch 0"));
    let n = steps.len();
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with(&format!("strict vs apache37: {n} differing step(s)")),
        "{text}"
    );
}

#[test]
fn capped_against_apache37_lists_exactly_cappeds_declared_differences() {
    let (steps, text) = differential_steps("kaas_policy_capped.wasm", "kaas_policy_apache37.wasm");
    assert_eq!(steps, declared_steps(&declared("capped")), "\n{text}");
}

#[test]
fn a_policy_against_itself_differs_nowhere() {
    let (steps, text) =
        differential_steps("kaas_policy_apache37.wasm", "kaas_policy_apache37.wasm");
    assert!(steps.is_empty(), "{text}");
    assert!(text.contains("apache37 (A) vs apache37 (B): 0 differing step(s)"));
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

/// A suite directory of its own with one case, for the multi-suite tests.
fn extra_suite(dir: &Path, id: &str) -> PathBuf {
    let p = dir.join("extra.json");
    std::fs::write(
        &p,
        format!(
            r#"{{"cases": [{{"id": "{id}", "title": "an author's own case", "steps": [
              {{"init": {{}}, "expect": {{"error": "NONE", "pid": 2000, "epoch": 0}}}}]}}]}}"#
        ),
    )
    .unwrap();
    dir.to_owned()
}

#[test]
fn suites_given_more_than_once_contribute_all_their_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let mine = extra_suite(tmp.path(), "MINE-01");
    let both = load_suites(&[suite_dir(), mine]).expect("loads");
    assert_eq!(both.len(), suite().len() + 1);
    assert!(both.iter().any(|c| c.id == "MINE-01"));
    assert!(both.iter().any(|c| c.id == "IT-01"));
}

#[test]
fn a_case_id_in_two_suites_is_refused_naming_both_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mine = extra_suite(tmp.path(), "IT-01");
    let e = format!(
        "{:#}",
        load_suites(&[suite_dir(), mine.clone()]).unwrap_err()
    );
    assert!(e.contains("case id IT-01 appears in both"), "{e}");
    assert!(e.contains("20-init-txn.json"), "{e}");
    assert!(
        e.contains(&mine.join("extra.json").display().to_string()),
        "{e}"
    );
}

#[test]
fn a_leftover_by_policy_field_is_refused_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("old.json"),
        r#"{"cases": [{"id": "OLD-01", "steps": [{"init": {}}],
            "by_policy": {"strict": {"0": {"expect": {"error": 90}}}}}]}"#,
    )
    .unwrap();
    let e = format!("{:#}", load_suite(tmp.path()).unwrap_err());
    assert!(e.contains("by_policy"), "{e}");
}

fn kaas(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("kaas runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn the_command_confirms_declared_differences_and_fails_without_them() {
    let strict = s(&wasm("kaas_policy_strict.wasm"));
    let expect = s(&declared_file("strict"));
    let (ok, out, err) = kaas(&["conformance", "--policy", &strict, "--expect", &expect]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("DIFF STRICT-01 step 0 confirmed: S-1:"),
        "{out}"
    );
    let n = declared("strict").steps.len();
    // strict finalizes transaction.version 0: the version 2 cases are skipped.
    let skipped = suite().iter().filter(|c| c.transaction_version > 0).count();
    assert!(
        out.trim_end().ends_with(&format!(
            "0 failed, {skipped} skipped, {n} declared difference(s) confirmed"
        )),
        "{out}"
    );
    let (ok, out, _) = kaas(&["conformance", "--policy", &strict]);
    assert!(!ok);
    assert!(out.contains("FAIL STRICT-01 (strict difference 1"), "{out}");
}

#[test]
fn the_command_takes_several_suites_and_refuses_duplicate_ids() {
    let apache = s(&wasm("kaas_policy_apache37.wasm"));
    let tmp = tempfile::tempdir().unwrap();
    let mine = s(&extra_suite(tmp.path(), "MINE-01"));
    let suite = s(&suite_dir());
    let (ok, out, err) = kaas(&[
        "conformance",
        "--policy",
        &apache,
        "--suite",
        &suite,
        "--suite",
        &mine,
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("PASS MINE-01") && out.contains("PASS IT-01"),
        "{out}"
    );
    let (ok, _, err) = kaas(&[
        "conformance",
        "--policy",
        &apache,
        "--suite",
        &mine,
        "--suite",
        &mine,
    ]);
    assert!(!ok);
    assert!(err.contains("is part of more than one suite"), "{err}");
}

#[test]
fn the_differential_command_reports_and_exits_zero() {
    let capped = s(&wasm("kaas_policy_capped.wasm"));
    let apache = s(&wasm("kaas_policy_apache37.wasm"));
    let (ok, out, err) = kaas(&["conformance", "--policy", &capped, "--against", &apache]);
    assert!(ok, "{out}\n{err}");
    let n = declared("capped").steps.len();
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("capped vs apache37: {n} differing step(s)")),
        "{out}"
    );
    assert!(out.contains("DIFF CAPPED-04 "), "{out}");
}
