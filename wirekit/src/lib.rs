//! The wire test kit (`kaas conformance --bootstrap`): named probes of the
//! Kafka wire behaviour clients and applications depend on, run against any
//! bootstrap, and with `--against-bootstrap` against two brokers at once
//! (kaas and Apache Kafka), printing every difference side by side and
//! failing on one that compat/kafka/differences.json does not declare.
//!
//! Layout: `client` (exact wire bytes), `ctx` (what a probe works with),
//! `records` (batches), `kit` (probe type and runner), `compare` (two runs
//! against the declarations), `probes/` (one file per area). It knows
//! nothing of the broker's code: it only speaks the protocol.

pub mod client;
pub mod compare;
pub mod ctx;
pub mod kit;
pub mod probes;
pub mod records;

use std::fmt::Write as _;
use std::path::PathBuf;

pub use compare::{Declarations, Verdict};
pub use kit::{Outcome, Probe};

/// What `kaas conformance --bootstrap` (and the `wirekit` binary) are asked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The broker under test (kaas).
    pub bootstrap: String,
    /// The reference broker (Apache Kafka) to run every probe against too.
    pub against: Option<String>,
    /// The reference's major version ("4" or "3"): which declarations apply.
    pub kafka_version: String,
    /// The declared differences (compat/kafka/differences.json).
    pub expect: Option<PathBuf>,
    /// Only the probes whose id or name starts with one of these.
    pub only: Vec<String>,
    /// Print every observation under each probe.
    pub show: bool,
}

/// A probe's pass/fail line for JUnit: (id and name, failure).
pub type CaseLine = (String, Option<String>);

/// Runs the kit as asked, printing its report; returns whether it passed
/// and one line per probe for JUnit.
pub async fn run_cli(opts: &Options) -> anyhow::Result<(bool, Vec<CaseLine>)> {
    let probes = kit::select(probes::all(), &opts.only);
    anyhow::ensure!(!probes.is_empty(), "no probe matches {:?}", opts.only);
    let Some(other) = &opts.against else {
        let outcomes = kit::run(&opts.bootstrap, &probes).await?;
        print!("{}", single_report(&outcomes, opts.show));
        let lines = outcomes
            .iter()
            .map(|o| (format!("{} {}", o.id, o.name), o.error.clone()))
            .collect::<Vec<_>>();
        return Ok((outcomes.iter().all(|o| o.error.is_none()), lines));
    };
    let declared = match &opts.expect {
        Some(p) => Declarations::load(p)?,
        None => Declarations::default(),
    };
    let (a, b) = tokio::join!(kit::run(&opts.bootstrap, &probes), kit::run(other, &probes));
    let (a, b) = (a?, b?);
    if opts.show {
        print!("{}", single_report(&a, true));
    }
    let mut verdicts = compare::compare(&a, &b, &declared, &opts.kafka_version);
    // A probe that differs is run once more on both sides: a difference
    // that does not come back is a race in one broker's timing, not a
    // behaviour. It is reported (UNSTABLE) but does not fail the run;
    // one that comes back stands.
    let unclean: Vec<Probe> = probes
        .iter()
        .filter(|p| {
            verdicts
                .iter()
                .any(|v| v.id == p.id && (v.undeclared() > 0 || !v.stale.is_empty()))
        })
        .copied()
        .collect();
    if !unclean.is_empty() {
        let (a2, b2) = tokio::join!(
            kit::run(&opts.bootstrap, &unclean),
            kit::run(other, &unclean)
        );
        let again = compare::compare(&a2?, &b2?, &declared, &opts.kafka_version);
        for v in again {
            if v.undeclared() == 0 && v.stale.is_empty() {
                println!(
                    "UNSTABLE {} {}: differed once, the same on a second run",
                    v.id, v.name
                );
                if let Some(old) = verdicts.iter_mut().find(|o| o.id == v.id) {
                    *old = v;
                }
            }
        }
    }
    print!("{}", compare::report(&verdicts));
    let lines = verdicts
        .iter()
        .map(|v| {
            let failure = (v.undeclared() > 0 || !v.stale.is_empty()).then(|| {
                v.lines
                    .iter()
                    .filter(|l| l.declared.is_none())
                    .map(|l| format!("{}: kaas={:?} kafka={:?}", l.key, l.kaas, l.kafka))
                    .chain(v.stale.iter().map(|s| format!("stale declaration: {s}")))
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            (format!("{} {}", v.id, v.name), failure)
        })
        .collect();
    Ok((compare::clean(&verdicts), lines))
}

/// `PASS id name` / `FAIL id name: error` per probe (with `show`, each
/// observation under it), then a summary.
pub fn single_report(outcomes: &[Outcome], show: bool) -> String {
    let mut out = String::new();
    for o in outcomes {
        match &o.error {
            None => {
                let _ = writeln!(
                    out,
                    "PASS {} {} ({} ms)",
                    o.id,
                    o.name,
                    o.elapsed.as_millis()
                );
            }
            Some(e) => {
                let _ = writeln!(out, "FAIL {} {}: {e}", o.id, o.name);
            }
        }
        if show {
            for (k, v) in &o.seen {
                let _ = writeln!(out, "    {k} = {v}");
            }
        }
    }
    let failed = outcomes.iter().filter(|o| o.error.is_some()).count();
    let _ = writeln!(out, "{} passed, {failed} failed", outcomes.len() - failed);
    out
}
