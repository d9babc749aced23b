//! `kaas conformance`: data-driven vectors (tests/conformance/*.json) run
//! through the real wasmtime runtime and the coordinator state machine.
//! Prints `PASS <id>` / `FAIL <id> <diff>` per case and a summary; with a
//! policy's declared differences (`--expect`, see `declared.rs`) it checks
//! those steps against the declaration, and with `--against` it prints the
//! differential report between two policies (`diff.rs`).

pub use kaas_wirekit::client;
pub mod declared;
pub mod diff;
pub mod runner;
mod show;
pub mod suite;
pub mod vectors;

use std::fmt::Write as _;

pub use declared::Differences;
pub use diff::{Differential, Divergence, differential};
pub use runner::{CaseResult, Confirmed, SuiteRun, run_cases, run_suite};
pub use suite::{load_suite, load_suites};
pub use vectors::{Case, VectorFile};

/// The report lines: one per case, then `N passed, M failed`.
pub fn report(results: &[CaseResult]) -> String {
    report_suite(&SuiteRun {
        results: results.to_vec(),
        confirmed: Vec::new(),
        skipped: Vec::new(),
    })
}

/// The report lines of a run with declared differences: `PASS <id>` or
/// `FAIL <id> <what differed>` per case, after a passing case one
/// `DIFF <id> step N confirmed: <reason>` per declared difference it
/// confirmed, then `N passed, M failed[, K declared differences confirmed]`.
pub fn report_suite(run: &SuiteRun) -> String {
    let mut out = String::new();
    for r in &run.results {
        match &r.failure {
            None => {
                let _ = writeln!(out, "PASS {}", r.id);
                for c in run.confirmed.iter().filter(|c| c.case == r.id) {
                    let _ = writeln!(
                        out,
                        "DIFF {} step {} confirmed: {}",
                        c.case, c.step, c.reason
                    );
                }
            }
            Some(diff) => {
                let _ = writeln!(out, "FAIL {} {}", r.id, diff);
            }
        }
    }
    for (id, tv) in &run.skipped {
        let _ = writeln!(
            out,
            "SKIP {id} (needs transaction.version {tv}, which the policy does not finalize)"
        );
    }
    let failed = run.results.iter().filter(|r| r.failure.is_some()).count();
    let _ = write!(
        out,
        "{} passed, {} failed",
        run.results.len() - failed,
        failed
    );
    if !run.skipped.is_empty() {
        let _ = write!(out, ", {} skipped", run.skipped.len());
    }
    if !run.confirmed.is_empty() {
        let _ = write!(
            out,
            ", {} declared difference(s) confirmed",
            run.confirmed.len()
        );
    }
    out.push('\n');
    out
}

/// JUnit XML for CI dashboards.
pub fn junit(policy: &str, results: &[CaseResult]) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"kaas-conformance-{}\" tests=\"{}\" failures=\"{}\">\n",
        esc(policy),
        results.len(),
        failed
    );
    for r in results {
        match &r.failure {
            None => {
                let _ = writeln!(out, "  <testcase name=\"{}\"/>", esc(&r.id));
            }
            Some(diff) => {
                let _ = writeln!(
                    out,
                    "  <testcase name=\"{}\"><failure message=\"{}\"/></testcase>",
                    esc(&r.id),
                    esc(diff).replace('\n', "&#10;")
                );
            }
        }
    }
    out.push_str("</testsuite>\n");
    out
}
