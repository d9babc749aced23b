//! The request-path counters ([`Metrics`]) and the Prometheus text helpers
//! the exposition uses (samples, label escaping, fsync counters, the
//! policies' counters). The broker-wide page, which reads every part of the
//! broker, is gathered by `crate::exposition`; nothing here knows the
//! broker.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default, Clone, Copy)]
struct ApiStat {
    count: u64,
    nanos: u64,
}

/// Counters updated on the request path.
#[derive(Debug, Default)]
pub struct Metrics {
    per_api: Mutex<BTreeMap<i16, ApiStat>>,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub connections: AtomicU64,
    // Hostile clients: see server.rs.
    /// Connections closed to make room for a new one at max.connections.
    pub connections_evicted: AtomicU64,
    /// Connections closed after connections.max.idle.ms.
    pub connections_idle_closed: AtomicU64,
    /// Connections closed because a frame did not arrive, or a response
    /// could not be written, in time.
    pub request_timeouts: AtomicU64,
    /// Request bytes holding the queued.max.request.bytes budget now.
    pub queued_request_bytes: AtomicU64,
    // Security: see security::authenticate.
    /// SASL authentications that succeeded / failed.
    pub sasl_authentication_succeeded: AtomicU64,
    pub sasl_authentication_failed: AtomicU64,
    /// Connections closed because their SASL session had expired
    /// (connections.max.reauth.ms) or never authenticated in time.
    pub sasl_sessions_expired: AtomicU64,
    /// TLS handshakes that failed (garbage, wrong certificate, timeout).
    pub tls_handshakes_failed: AtomicU64,
}

impl Metrics {
    pub fn record(&self, api_key: i16, nanos: u64) {
        let mut m = self.per_api.lock().unwrap_or_else(|p| p.into_inner());
        let s = m.entry(api_key).or_default();
        s.count += 1;
        s.nanos += nanos;
    }

    /// Appends this broker's request and connection counters in the
    /// Prometheus text format.
    pub fn render_counters(&self, out: &mut String) {
        let _ = writeln!(out, "# TYPE kaas_requests_total counter");
        let _ = writeln!(out, "# TYPE kaas_request_seconds_sum counter");
        let per_api = self
            .per_api
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (k, s) in &per_api {
            let name = crate::names::api_name(*k);
            let _ = writeln!(out, "kaas_requests_total{{api=\"{name}\"}} {}", s.count);
            let _ = writeln!(
                out,
                "kaas_request_seconds_sum{{api=\"{name}\"}} {:.9}",
                s.nanos as f64 / 1e9
            );
        }
        sample(
            out,
            "kaas_bytes_in_total",
            "counter",
            self.bytes_in.load(Ordering::Relaxed),
        );
        sample(
            out,
            "kaas_bytes_out_total",
            "counter",
            self.bytes_out.load(Ordering::Relaxed),
        );
        sample(
            out,
            "kaas_connections_total",
            "counter",
            self.connections.load(Ordering::Relaxed),
        );
        for (name, kind, v) in [
            (
                "kaas_connections_evicted_total",
                "counter",
                &self.connections_evicted,
            ),
            (
                "kaas_connections_idle_closed_total",
                "counter",
                &self.connections_idle_closed,
            ),
            (
                "kaas_request_timeouts_total",
                "counter",
                &self.request_timeouts,
            ),
            (
                "kaas_queued_request_bytes",
                "gauge",
                &self.queued_request_bytes,
            ),
            (
                "kaas_sasl_authentication_succeeded_total",
                "counter",
                &self.sasl_authentication_succeeded,
            ),
            (
                "kaas_sasl_authentication_failed_total",
                "counter",
                &self.sasl_authentication_failed,
            ),
            (
                "kaas_sasl_sessions_expired_total",
                "counter",
                &self.sasl_sessions_expired,
            ),
            (
                "kaas_tls_handshakes_failed_total",
                "counter",
                &self.tls_handshakes_failed,
            ),
        ] {
            sample(out, name, kind, v.load(Ordering::Relaxed));
        }
    }
}

/// The policy deciding now (`kaas_policy_info`) and the counters of every
/// policy this process loaded, labelled
/// `policy="name@version",sha256="<12 hex digits>"` so a swapped-out
/// policy's series stay apart. Decisions and traps are listed where
/// non-zero, violations for every decision call, latency histograms for
/// every call made at least once.
pub fn policy_metrics(out: &mut String, current: &crate::policy::Policy) {
    use crate::policy::stats::{BUCKET_BOUNDS_NS, DECISION_KINDS, decision_kind_name};
    use crate::policy::{Call, TrapKind};

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

/// Escapes a Prometheus label value.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric with a single sample: its TYPE line and its value.
pub fn sample(out: &mut String, name: &str, kind: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "# TYPE {name} {kind}\n{name} {value}");
}

/// `<name>_total`, `<name>_seconds_sum` and `<name>_inline_total` of one
/// flusher.
pub fn fsync_counters(out: &mut String, name: &str, st: &crate::log::sync::SyncStats) {
    sample(
        out,
        &format!("{name}_total"),
        "counter",
        st.syncs.load(Ordering::Relaxed),
    );
    sample(
        out,
        &format!("{name}_seconds_sum"),
        "counter",
        format_args!("{:.9}", st.sync_nanos.load(Ordering::Relaxed) as f64 / 1e9),
    );
    sample(
        out,
        &format!("{name}_inline_total"),
        "counter",
        st.inline_syncs.load(Ordering::Relaxed),
    );
}
