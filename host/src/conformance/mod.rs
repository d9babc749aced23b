//! `kaas conformance`: data-driven vectors (tests/conformance/*.json) run
//! through the real wasmtime runtime and the coordinator state machine.
//! Prints `PASS <id>` / `FAIL <id> <diff>` per case and a summary.

pub mod client;
pub mod probes;
pub mod runner;
pub mod vectors;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

pub use runner::{CaseResult, run_cases};
pub use vectors::{Case, VectorFile};

/// Reads every `*.json` file under `dir` (sorted by name) into one case list.
pub fn load_suite(dir: &Path) -> anyhow::Result<Vec<Case>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading the conformance suite {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        let file: VectorFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", f.display()))?;
        cases.extend(file.cases);
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in &cases {
        anyhow::ensure!(seen.insert(c.id.clone()), "case id {} appears twice", c.id);
    }
    Ok(cases)
}

/// The report lines: one per case, then `N passed, M failed`.
pub fn report(results: &[CaseResult]) -> String {
    let mut out = String::new();
    for r in results {
        match &r.failure {
            None => {
                let _ = writeln!(out, "PASS {}", r.id);
            }
            Some(diff) => {
                let _ = writeln!(out, "FAIL {} {}", r.id, diff);
            }
        }
    }
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    let _ = writeln!(out, "{} passed, {} failed", results.len() - failed, failed);
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
                    esc(diff)
                );
            }
        }
    }
    out.push_str("</testsuite>\n");
    out
}
