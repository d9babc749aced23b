//! A policy's declared differences: the file an author keeps beside the
//! policy and passes with `kaas conformance --expect FILE`.
//!
//! ```json
//! {"policy": "strict", "differences": [
//!   {"case": "STRICT-01", "step": 0, "expect": {"error": "INVALID_REQUEST"},
//!    "new_pid_allocated": false, "reason": "a claim on the idempotent path is a client bug"}
//! ]}
//! ```
//!
//! Each entry names one step of one suite case and replaces that step's
//! expected fields (`expect`, `entry`, `partitions`, `partition_errors`,
//! `markers`, `new_pid_allocated`, `fence`, as in a vector step) for this
//! policy; `reason` (one line) is required. This module only reads and
//! validates the file against the loaded cases; the runner decides what a
//! declaration means when the step runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Map, Value};

use super::vectors::{Case, Expect};

/// The fields a difference may carry besides its expected fields.
const OWN_FIELDS: &[&str] = &["case", "step", "reason"];
/// The expected fields of a step (the `Expect` struct's).
const EXPECT_FIELDS: &[&str] = &[
    "expect",
    "entry",
    "partitions",
    "partition_errors",
    "markers",
    "new_pid_allocated",
    "fence",
];

/// One declared difference.
#[derive(Debug, Clone)]
pub struct Declared {
    /// What this policy answers at the step instead of the suite's expectation.
    pub expect: Expect,
    /// Why (one line, printed when the difference is confirmed).
    pub reason: String,
}

/// A parsed differences file.
#[derive(Debug, Clone, Default)]
pub struct Differences {
    /// The policy name the file is for (`describe().name`).
    pub policy: String,
    /// Where it was read from (for messages).
    pub source: Option<PathBuf>,
    /// (case id, step index) → the declaration.
    pub steps: BTreeMap<(String, usize), Declared>,
}

impl Differences {
    /// No declared differences: every step must meet the suite's expectation.
    pub fn none() -> Self {
        Differences::default()
    }

    /// The declaration for `case`'s step `step`, if any.
    pub fn get(&self, case: &str, step: usize) -> Option<&Declared> {
        self.steps.get(&(case.to_owned(), step))
    }

    /// Reads and parses `path` (no check against a suite yet).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the differences file {}", path.display()))?;
        let mut d = Self::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
        d.source = Some(path.to_owned());
        Ok(d)
    }

    /// Parses the JSON text of a differences file.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let root: Value = serde_json::from_str(text)?;
        let Value::Object(mut root) = root else {
            bail!("a differences file is an object {{\"policy\": ..., \"differences\": [...]}}");
        };
        let policy = match root.remove("policy") {
            Some(Value::String(s)) if !s.is_empty() => s,
            _ => bail!("\"policy\" (the policy's name, as describe() reports it) is required"),
        };
        let list = match root.remove("differences") {
            Some(Value::Array(a)) => a,
            _ => bail!("\"differences\" (a list) is required"),
        };
        if let Some(k) = root.keys().next() {
            bail!("unknown field {k:?} (a differences file has \"policy\" and \"differences\")");
        }
        let mut steps = BTreeMap::new();
        for (n, item) in list.into_iter().enumerate() {
            let (case, step, declared) =
                parse_one(item).with_context(|| format!("difference {n}"))?;
            if steps.insert((case.clone(), step), declared).is_some() {
                bail!("difference {n}: case {case} step {step} is declared twice");
            }
        }
        Ok(Differences {
            policy,
            source: None,
            steps,
        })
    }

    /// Refuses declarations that name a case the suite does not have or a
    /// step the case does not have, and a file written for another policy.
    pub fn check_against(&self, policy_name: &str, cases: &[Case]) -> anyhow::Result<()> {
        let file = self.source.as_ref().map_or_else(
            || "the differences file".to_owned(),
            |p| p.display().to_string(),
        );
        ensure!(
            self.policy == policy_name,
            "{file} declares the differences of policy {:?}, but the policy describes itself as {policy_name:?}",
            self.policy
        );
        let by_id: BTreeMap<&str, &Case> = cases.iter().map(|c| (c.id.as_str(), c)).collect();
        let mut problems = Vec::new();
        for (case, step) in self.steps.keys() {
            match by_id.get(case.as_str()) {
                None => problems.push(format!("case {case} is not in the suite")),
                Some(c) if *step >= c.steps.len() => problems.push(format!(
                    "case {case} has {} step(s), so step {step} does not exist",
                    c.steps.len()
                )),
                Some(_) => {}
            }
        }
        ensure!(
            problems.is_empty(),
            "{file}: {} declared difference(s) name no step of the suite: {}",
            problems.len(),
            problems.join("; ")
        );
        Ok(())
    }
}

fn parse_one(item: Value) -> anyhow::Result<(String, usize, Declared)> {
    let Value::Object(mut o) = item else {
        bail!("a difference is an object {{\"case\", \"step\", \"reason\", expected fields}}");
    };
    for k in o.keys() {
        ensure!(
            OWN_FIELDS.contains(&k.as_str()) || EXPECT_FIELDS.contains(&k.as_str()),
            "unknown field {k:?} (expected fields are {})",
            EXPECT_FIELDS.join(", ")
        );
    }
    let case = match o.remove("case") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => bail!("\"case\" (a case id) is required"),
    };
    let step = o
        .remove("step")
        .and_then(|v| v.as_u64())
        .and_then(|n| usize::try_from(n).ok())
        .with_context(|| format!("{case}: \"step\" (the step's index, from 0) is required"))?;
    let reason = match o.remove("reason") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        _ => bail!("{case} step {step}: \"reason\" (one line: why) is required"),
    };
    ensure!(
        !reason.contains('\n'),
        "{case} step {step}: \"reason\" is one line"
    );
    ensure!(
        !o.is_empty(),
        "{case} step {step}: a difference needs at least one expected field ({})",
        EXPECT_FIELDS.join(", ")
    );
    let expect: Expect = serde_json::from_value(Value::Object(Map::from_iter(o)))
        .with_context(|| format!("{case} step {step}"))?;
    Ok((case, step, Declared { expect, reason }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_replaces_the_named_fields_and_keeps_its_reason() {
        let d = Differences::parse(
            r#"{"policy": "p", "differences": [
              {"case": "X-1", "step": 2, "expect": {"error": "PRODUCER_FENCED"},
               "entry": "unchanged", "fence": null, "reason": "zombies are fenced"}]}"#,
        )
        .unwrap();
        let got = d.get("X-1", 2).unwrap();
        assert_eq!(got.reason, "zombies are fenced");
        assert_eq!(got.expect.entry, Some(Value::String("unchanged".into())));
        assert_eq!(got.expect.fence, Some(Value::Null));
        assert!(got.expect.new_pid_allocated.is_none());
        assert!(d.get("X-1", 1).is_none());
    }

    #[test]
    fn a_difference_without_a_reason_is_refused() {
        let e = Differences::parse(
            r#"{"policy": "p", "differences": [{"case": "X-1", "step": 0, "expect": {"error": 42}}]}"#,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("\"reason\""), "{e:#}");
    }

    #[test]
    fn a_misspelt_field_is_refused_not_ignored() {
        let e = Differences::parse(
            r#"{"policy": "p", "differences": [{"case": "X-1", "step": 0, "new_pid_alocated": false, "reason": "r"}]}"#,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("new_pid_alocated"), "{e:#}");
    }

    #[test]
    fn the_same_step_declared_twice_is_refused() {
        let e = Differences::parse(
            r#"{"policy": "p", "differences": [
              {"case": "X-1", "step": 0, "expect": {"error": 42}, "reason": "a"},
              {"case": "X-1", "step": 0, "expect": {"error": 90}, "reason": "b"}]}"#,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("declared twice"), "{e:#}");
    }
}
