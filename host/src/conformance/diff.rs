//! The differential report (`kaas conformance --policy A --against B`):
//! every case of the suite replayed under both policies, listing each step
//! where the two decide differently. The suite's expectations are not
//! consulted: this compares two policies, not a policy and the suite.
//!
//! Each policy replays a case on its own state, so after a first difference
//! the two runs may hold different entries. A step is reported when what it
//! *did* differs: the reply (error, producer id, epoch, per-partition codes),
//! whether it consumed the candidate producer id, the markers it asked for,
//! the (pid, epoch) it fenced, and the entry after the step of every
//! transactional id that either run's step wrote (state, identity, previous
//! identity, partitions, timeout, failed-fence flag; the host's timestamps
//! are not compared). A state difference carried over from an earlier step
//! is therefore not reported again by itself, only when it makes a later
//! step decide differently.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use super::runner::{CaseRun, Observed};
use super::show;
use super::vectors::Case;
use crate::policy::{Entry, Policy, TopicPartition, TxnState};

/// One step where the two policies decided differently.
#[derive(Debug, Clone)]
pub struct Divergence {
    pub case: String,
    pub step: usize,
    /// `(title) step N: request`.
    pub heading: String,
    /// What policy A did, then policy B.
    pub a: String,
    pub b: String,
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Differential {
    pub a_name: String,
    pub b_name: String,
    pub divergences: Vec<Divergence>,
    /// Cases that could not be replayed (a malformed vector), with why.
    pub errors: Vec<(String, String)>,
    pub cases: usize,
    pub steps: usize,
    /// Cases not compared: they need a transaction.version one of the two
    /// policies does not finalize.
    pub skipped: usize,
}

/// Replays every case under `a` and `b`.
pub fn differential(a: &Arc<Policy>, b: &Arc<Policy>, cases: &[Case]) -> Differential {
    let (mut a_name, mut b_name) = (a.identity().name.clone(), b.identity().name.clone());
    if a_name == b_name {
        a_name.push_str(" (A)");
        b_name.push_str(" (B)");
    }
    let mut report = Differential {
        a_name,
        b_name,
        divergences: Vec::new(),
        errors: Vec::new(),
        cases: 0,
        steps: 0,
        skipped: 0,
    };
    let tv = |p: &Arc<Policy>| {
        crate::policy::features::transaction_version(&p.identity().protocol_features)
    };
    let common = tv(a).min(tv(b));
    for case in cases {
        if case.transaction_version > common {
            report.skipped += 1;
            continue;
        }
        report.cases += 1;
        if let Err(e) = compare_case(a, b, case, &mut report) {
            report.errors.push((case.id.clone(), e));
        }
    }
    report
}

fn compare_case(
    a: &Arc<Policy>,
    b: &Arc<Policy>,
    case: &Case,
    report: &mut Differential,
) -> Result<(), String> {
    let mut ra = CaseRun::start(a, case).map_err(|e| format!("initial entry: {e}"))?;
    let mut rb = CaseRun::start(b, case).map_err(|e| format!("initial entry: {e}"))?;
    for i in 0..case.steps.len() {
        report.steps += 1;
        let (oa, ob) = (ra.play(i), rb.play(i));
        let (oa, ob) = match (oa, ob) {
            (Ok(oa), Ok(ob)) => (oa, ob),
            (Err(ea), Err(eb)) if ea == eb => return Err(format!("step {i}: {ea}")),
            // A step one policy can play and the other cannot (its state no
            // longer fits the vector): a difference; the runs stop here.
            (oa, ob) => {
                let text = |o: Result<Observed, String>| match o {
                    Ok(o) => show::effect(&o, &written(&o)),
                    Err(e) => format!("the step could not be played: {e}"),
                };
                report.divergences.push(Divergence {
                    case: case.id.clone(),
                    step: i,
                    heading: show::heading(case, i),
                    a: text(oa),
                    b: text(ob),
                });
                return Ok(());
            }
        };
        let mut ids: BTreeSet<String> = written(&oa).into_iter().collect();
        ids.extend(written(&ob));
        let ids: Vec<String> = ids.into_iter().collect();
        let same = effect(&oa) == effect(&ob)
            && ids
                .iter()
                .all(|id| decided(oa.after.get(id)) == decided(ob.after.get(id)));
        if !same {
            report.divergences.push(Divergence {
                case: case.id.clone(),
                step: i,
                heading: show::heading(case, i),
                a: show::effect(&oa, &ids),
                b: show::effect(&ob, &ids),
            });
        }
    }
    Ok(())
}

type MarkerKey = (bool, i64, i16, Vec<TopicPartition>);
type ReplyKey = (i16, i64, i16, Vec<i16>);
type EffectKey = (Option<ReplyKey>, bool, Vec<MarkerKey>, Option<(i64, i16)>);

/// The compared part of a step's answer.
fn effect(o: &Observed) -> EffectKey {
    let reply = o.answer.as_ref().map(|a| {
        (
            a.reply.error_code,
            a.reply.producer_id,
            a.reply.producer_epoch,
            a.partition_errors.clone(),
        )
    });
    let markers = o
        .markers
        .iter()
        .map(|m| {
            (
                m.commit,
                m.producer_id,
                m.producer_epoch,
                m.partitions.clone(),
            )
        })
        .collect();
    (reply, o.candidate_used, markers, o.fence)
}

type DecidedKey = (TxnState, i64, i16, i64, i16, Vec<TopicPartition>, i32, bool);

/// The compared part of an entry (everything but the host's timestamps).
fn decided(e: Option<&Entry>) -> Option<DecidedKey> {
    e.map(|e| {
        (
            e.state,
            e.producer_id,
            e.producer_epoch,
            e.last_producer_id,
            e.last_producer_epoch,
            e.partitions.clone(),
            e.timeout_ms,
            e.has_failed_epoch_fence,
        )
    })
}

/// The transactional ids whose entry the step changed.
fn written(o: &Observed) -> Vec<String> {
    let mut ids: BTreeSet<&String> = o.before.keys().collect();
    ids.extend(o.after.keys());
    ids.into_iter()
        .filter(|id| o.before.get(*id) != o.after.get(*id))
        .cloned()
        .collect()
}

/// The report text: one entry per divergence, then the summary line.
pub fn report(d: &Differential) -> String {
    let mut out = String::new();
    let width = d.a_name.len().max(d.b_name.len());
    for v in &d.divergences {
        let _ = writeln!(out, "DIFF {} {}", v.case, v.heading);
        let _ = writeln!(out, "    {:<width$}: {}", d.a_name, v.a);
        let _ = writeln!(out, "    {:<width$}: {}", d.b_name, v.b);
    }
    for (id, e) in &d.errors {
        let _ = writeln!(out, "ERROR {id} {e}");
    }
    let cases: BTreeSet<&str> = d.divergences.iter().map(|v| v.case.as_str()).collect();
    let _ = writeln!(
        out,
        "{} vs {}: {} differing step(s) in {} case(s); {} case(s), {} step(s) compared{}{}",
        d.a_name,
        d.b_name,
        d.divergences.len(),
        cases.len(),
        d.cases,
        d.steps,
        if d.skipped == 0 {
            String::new()
        } else {
            format!(
                "; {} case(s) skipped (a transaction.version one policy does not finalize)",
                d.skipped
            )
        },
        if d.errors.is_empty() {
            String::new()
        } else {
            format!("; {} case(s) could not be replayed", d.errors.len())
        }
    );
    out
}
