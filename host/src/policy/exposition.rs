//! The policies' lines of the Prometheus page: the policy deciding now and
//! the counters of every policy this process loaded ([`stats`](super::stats)),
//! rendered here so that `metrics` stays a leaf; `crate::exposition` calls
//! [`render`].

use std::fmt::Write as _;

use super::stats::{BUCKET_BOUNDS_NS, DECISION_KINDS, decision_kind_name};
use super::{Call, Policy, TrapKind};
use crate::metrics::escape;

/// The policy deciding now (`kaas_policy_info`) and the counters of every
/// policy this process loaded, labelled
/// `policy="name@version",sha256="<12 hex digits>"` so a swapped-out
/// policy's series stay apart. Decisions and traps are listed where
/// non-zero, violations for every decision call, latency histograms for
/// every call made at least once.
pub fn render(out: &mut String, current: &Policy) {
    let id = current.identity();
    let _ = writeln!(
        out,
        "# HELP kaas_policy_info The transaction policy deciding now.\n# TYPE kaas_policy_info gauge"
    );
    let _ = writeln!(
        out,
        "kaas_policy_info{{policy=\"{}@{}\",name=\"{}\",version=\"{}\",sha256=\"{}\",wit=\"{}\"}} 1",
        escape(&id.name),
        escape(&id.version),
        escape(&id.name),
        escape(&id.version),
        escape(&id.sha256),
        escape(&id.wit_version)
    );
    let loaded = current.loaded_policies();
    let labels: Vec<String> = loaded
        .iter()
        .map(|s| {
            format!(
                "policy=\"{}\",sha256=\"{}\"",
                escape(&s.label()),
                escape(s.short_sha256())
            )
        })
        .collect();
    let decision_calls = &Call::ALL[..Call::ALL.len() - 1];
    let _ = writeln!(
        out,
        "# HELP kaas_policy_decisions_total Legal decisions by policy, call and decision kind.\n# TYPE kaas_policy_decisions_total counter"
    );
    for (s, l) in loaded.iter().zip(&labels) {
        for call in decision_calls {
            for kind in DECISION_KINDS {
                let n = s.decisions(*call, kind);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "kaas_policy_decisions_total{{{l},call=\"{}\",kind=\"{}\"}} {n}",
                        call.name(),
                        decision_kind_name(kind)
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP kaas_policy_traps_total Calls that trapped, by policy, call and trap kind.\n# TYPE kaas_policy_traps_total counter"
    );
    for (s, l) in loaded.iter().zip(&labels) {
        for call in Call::ALL {
            for kind in TrapKind::ALL {
                let n = s.traps(call, kind);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "kaas_policy_traps_total{{{l},call=\"{}\",kind=\"{}\"}} {n}",
                        call.name(),
                        kind.name()
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP kaas_policy_violations_total Decisions the host's invariant check refused.\n# TYPE kaas_policy_violations_total counter"
    );
    for (s, l) in loaded.iter().zip(&labels) {
        for call in decision_calls {
            let _ = writeln!(
                out,
                "kaas_policy_violations_total{{{l},call=\"{}\"}} {}",
                call.name(),
                s.violations(*call)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP kaas_policy_call_seconds Latency of policy calls (sandboxed call and host check).\n# TYPE kaas_policy_call_seconds histogram"
    );
    for (s, l) in loaded.iter().zip(&labels) {
        for call in Call::ALL {
            let h = s.histogram(call);
            if h.count() == 0 {
                continue;
            }
            let name = call.name();
            for (bound, n) in BUCKET_BOUNDS_NS.iter().zip(&h.cumulative) {
                let _ = writeln!(
                    out,
                    "kaas_policy_call_seconds_bucket{{{l},call=\"{name}\",le=\"{}\"}} {n}",
                    *bound as f64 / 1e9
                );
            }
            let _ = writeln!(
                out,
                "kaas_policy_call_seconds_bucket{{{l},call=\"{name}\",le=\"+Inf\"}} {}\n\
                 kaas_policy_call_seconds_sum{{{l},call=\"{name}\"}} {:.9}\n\
                 kaas_policy_call_seconds_count{{{l},call=\"{name}\"}} {}",
                h.count(),
                h.sum_nanos as f64 / 1e9,
                h.count()
            );
        }
    }
}
