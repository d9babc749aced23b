//! The request-path counters ([`Metrics`]) and the Prometheus text helpers
//! (samples, label escaping) every part renders its own lines with: the
//! policies' (`policy::exposition`), the flushers' (`log::sync`), the
//! quotas' and the open-file cache's. A leaf: it imports nothing of the
//! crate but `names`. The broker-wide page is gathered by `crate::exposition`.

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
