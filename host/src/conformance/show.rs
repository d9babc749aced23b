//! Human-readable report text: a step's request, what a step was expected
//! to produce, and what it produced. Pure formatting; used by the FAIL lines
//! of the runner and by the differential report.

use serde_json::Value;

use super::runner::{Observed, parse_entry, show_entry, show_partition};
use super::vectors::{Case, Expect, Step, error_code, error_label};
use crate::policy::Entry;

/// `(title) step N: request` then the indented detail lines.
pub(crate) fn failure(case: &Case, i: usize, detail: &str) -> String {
    format!(
        "{}\n    {}",
        heading(case, i),
        detail.replace('\n', "\n    ")
    )
}

/// `(title) step N: request`, the first line of a FAIL or DIFF entry.
pub(crate) fn heading(case: &Case, i: usize) -> String {
    let request = case
        .steps
        .get(i)
        .map_or_else(|| "(no such step)".to_owned(), |s| request(case, s));
    format!("({}) step {i}: {request}", title(case))
}

/// The case's title, or the seed tests it realises when it has none.
pub(crate) fn title(case: &Case) -> String {
    if !case.title.is_empty() {
        case.title.clone()
    } else if !case.seed.is_empty() {
        format!("seed {}", case.seed.join(", "))
    } else {
        "untitled".to_owned()
    }
}

/// The request (or tick) a step makes, on one line.
pub(crate) fn request(case: &Case, s: &Step) -> String {
    let txn = |t: &Option<String>| t.clone().unwrap_or_else(|| case.txn.clone());
    let mut out = if let Some(i) = &s.init {
        let txn = match &i.txn {
            None => case.txn.clone(),
            Some(Value::Null) => "null (idempotent)".to_owned(),
            Some(Value::String(t)) if t.is_empty() => "\"\"".to_owned(),
            Some(Value::String(t)) => t.clone(),
            Some(other) => other.to_string(),
        };
        let claim = i
            .claim
            .map_or_else(|| "none".to_owned(), |(p, e)| format!("({p}, {e})"));
        format!(
            "InitProducerId v{} txn={txn} claim={claim} timeout={}",
            i.version, i.timeout
        )
    } else if let Some(a) = &s.add {
        format!(
            "AddPartitionsToTxn v{}{} txn={} producer=({}, {}) partitions=[{}]",
            a.version,
            if a.verify_only { " VerifyOnly" } else { "" },
            txn(&a.txn),
            a.pid,
            a.epoch,
            a.partitions.join(",")
        )
    } else if let Some(a) = &s.add_offsets {
        format!(
            "AddOffsetsToTxn v{} txn={} producer=({}, {}) group={}",
            a.version,
            txn(&a.txn),
            a.pid,
            a.epoch,
            a.group
        )
    } else if let Some(e) = &s.end {
        format!(
            "EndTxn v{} {} txn={} producer=({}, {})",
            e.version,
            if e.commit { "COMMIT" } else { "ABORT" },
            txn(&e.txn),
            e.pid,
            e.epoch
        )
    } else if s.reap {
        "reaper tick".to_owned()
    } else if s.failover {
        "coordinator failover (entries re-read from their state records)".to_owned()
    } else if s.markers_done {
        "the held markers are written".to_owned()
    } else {
        "(no request)".to_owned()
    };
    if let Some(e) = &s.append_error {
        out.push_str(&format!(" [append fails {e}]"));
    }
    if s.hold_markers {
        out.push_str(" [markers held]");
    }
    if let Some(ms) = s.advance_ms {
        out.push_str(&format!(" [after {ms} ms]"));
    }
    out
}

/// `LABEL: <expected>` / `actual: <observed>` / `differs in: ...`.
pub(crate) fn mismatch(
    label: &str,
    txn: &str,
    x: &Expect,
    obs: &Observed,
    misses: &[String],
) -> String {
    let width = label.len().max("actual".len());
    let mut out = format!(
        "{:<width$}: {}\n{:<width$}: {}",
        label,
        expected(txn, x, obs),
        "actual",
        actual(txn, x, obs)
    );
    if !misses.is_empty() {
        out.push_str(&format!(
            "\n{:<width$}: {}",
            "differs in",
            misses.join(", ")
        ));
    }
    out
}

/// The fields `x` asks for, as it asks for them.
pub(crate) fn expected(txn: &str, x: &Expect, obs: &Observed) -> String {
    let mut parts = Vec::new();
    if let Some(r) = &x.expect {
        let code = error_code(&r.error).map_or_else(|e| e, error_label);
        let mut s = format!("error {code}");
        if let Some(p) = r.pid {
            s.push_str(&format!(" pid {p}"));
        }
        if let Some(e) = r.epoch {
            s.push_str(&format!(" epoch {e}"));
        }
        parts.push(s);
    }
    if let Some(v) = &x.entry {
        parts.push(match v {
            Value::Null => "entry absent".to_owned(),
            Value::String(s) if s == "unchanged" => {
                format!("entry unchanged ({})", show_entry(obs.before.get(txn)))
            }
            v => match parse_entry(txn, v) {
                Ok(e) => {
                    let shown = show_entry(Some(&e));
                    // Partitions are compared only when the vector names them.
                    let names_parts = v.as_str().is_some_and(|s| s.contains('{'));
                    match shown.split_once('{') {
                        Some((head, _)) if !names_parts => format!("entry {head}"),
                        _ => format!("entry {shown}"),
                    }
                }
                Err(e) => format!("entry (bad: {e})"),
            },
        });
    }
    if let Some(p) = &x.partitions {
        parts.push(format!("partitions [{}]", p.join(",")));
    }
    if let Some(codes) = &x.partition_errors {
        let codes: Vec<String> = codes
            .iter()
            .map(|c| error_code(c).map_or_else(|e| e, error_label))
            .collect();
        parts.push(format!("partition errors [{}]", codes.join(",")));
    }
    if let Some(m) = &x.markers {
        let mut s = format!("{} markers", m.result);
        if let Some(p) = m.pid {
            s.push_str(&format!(" pid {p}"));
        }
        if let Some(e) = m.epoch {
            s.push_str(&format!(" epoch {e}"));
        }
        if let Some(p) = &m.partitions {
            s.push_str(&format!(" to [{}]", p.join(",")));
        }
        parts.push(s);
    }
    if let Some(a) = x.new_pid_allocated {
        parts.push(format!("new pid allocated {}", yes_no(a)));
    }
    if let Some(f) = &x.fence {
        parts.push(
            match serde_json::from_value::<Option<(i64, i16)>>(f.clone()) {
                Ok(f) => format!("fence {}", fence(f)),
                Err(e) => format!("fence (bad: {e})"),
            },
        );
    }
    if parts.is_empty() {
        "(nothing checked)".to_owned()
    } else {
        parts.join("; ")
    }
}

/// What the step produced, for the same fields `x` asks for.
pub(crate) fn actual(txn: &str, x: &Expect, obs: &Observed) -> String {
    let after = obs.after.get(txn);
    let mut parts = Vec::new();
    if x.expect.is_some() {
        parts.push(reply(obs));
    }
    if x.entry.is_some() {
        parts.push(format!("entry {}", show_entry(after)));
    }
    if x.partitions.is_some() {
        parts.push(format!("partitions [{}]", partitions_of(after).join(",")));
    }
    if x.partition_errors.is_some() {
        parts.push(format!("partition errors [{}]", partition_errors(obs)));
    }
    if x.markers.is_some() {
        parts.push(markers(obs));
    }
    if x.new_pid_allocated.is_some() {
        parts.push(format!("new pid allocated {}", yes_no(obs.candidate_used)));
    }
    if x.fence.is_some() {
        parts.push(format!("fence {}", fence(obs.fence)));
    }
    if parts.is_empty() {
        reply(obs)
    } else {
        parts.join("; ")
    }
}

/// Everything a step produced (the differential report's view): the reply,
/// the pid allocation, markers, fence, and the entries of `ids` after it.
pub(crate) fn effect(obs: &Observed, ids: &[String]) -> String {
    let mut parts = vec![reply(obs)];
    if obs
        .answer
        .as_ref()
        .is_some_and(|a| !a.partition_errors.is_empty())
    {
        parts.push(format!("partition errors [{}]", partition_errors(obs)));
    }
    parts.push(format!("new pid allocated {}", yes_no(obs.candidate_used)));
    parts.push(markers(obs));
    parts.push(format!("fence {}", fence(obs.fence)));
    for id in ids {
        let before = obs.before.get(id);
        let after = obs.after.get(id);
        let what = if before == after {
            format!("{} (unchanged)", entry_full(after))
        } else {
            entry_full(after)
        };
        parts.push(format!("entry {id} {what}"));
    }
    parts.join("; ")
}

/// An entry with the policy-decided fields a comparison looks at.
pub(crate) fn entry_full(e: Option<&Entry>) -> String {
    match e {
        None => "absent".to_owned(),
        Some(e) => {
            let mut s = format!("{} timeout {}", show_entry(Some(e)), e.timeout_ms);
            if e.has_failed_epoch_fence {
                s.push_str(" failed-fence");
            }
            s
        }
    }
}

pub(crate) fn partitions_of(e: Option<&Entry>) -> Vec<String> {
    e.map(|e| e.partitions.iter().map(show_partition).collect())
        .unwrap_or_default()
}

fn reply(obs: &Observed) -> String {
    match &obs.answer {
        None => "no reply".to_owned(),
        Some(a) => format!(
            "error {} pid {} epoch {}",
            error_label(a.reply.error_code),
            a.reply.producer_id,
            a.reply.producer_epoch
        ),
    }
}

fn partition_errors(obs: &Observed) -> String {
    obs.answer
        .as_ref()
        .map(|a| {
            a.partition_errors
                .iter()
                .map(|c| error_label(*c))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn markers(obs: &Observed) -> String {
    if obs.markers.is_empty() {
        return "no markers".to_owned();
    }
    obs.markers
        .iter()
        .map(|job| {
            let parts: Vec<String> = job.partitions.iter().map(show_partition).collect();
            format!(
                "{} markers pid {} epoch {} to [{}]",
                if job.commit { "commit" } else { "abort" },
                job.producer_id,
                job.producer_epoch,
                parts.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn fence(f: Option<(i64, i16)>) -> String {
    f.map_or_else(|| "none".to_owned(), |(p, e)| format!("({p}, {e})"))
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
