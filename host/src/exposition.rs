//! The broker-wide Prometheus page served on `--metrics-listen`: the
//! request counters of [`crate::metrics::Metrics`] and what the other parts
//! report (authorization denials, policy swaps and counters, fsyncs, the
//! write-ahead log, fence ring, transactional ids, producer-state entries, log end offsets). It
//! reads the whole broker, so it lives on the broker's side of the seam.

use std::fmt::Write as _;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::broker::Broker;
use crate::metrics::{escape, sample};

/// The Prometheus text exposition of `broker`.
pub fn render(broker: &Broker) -> String {
    let mut out = String::new();
    broker.metrics.render_counters(&mut out);
    // Client quotas: every measured entity (bounded, see quota::Quotas).
    broker.quotas.render(&mut out);
    // Security: decisive authorization denials (each audited, rate-limited).
    sample(
        &mut out,
        "kaas_authorization_denied_total",
        "counter",
        broker.authz.denied_total(),
    );
    // Policy hot swaps, accepted and refused.
    let slot = broker.policy_slot();
    let _ = writeln!(out, "# TYPE kaas_policy_swaps_total counter");
    let _ = writeln!(
        out,
        "kaas_policy_swaps_total{{result=\"ok\"}} {}\nkaas_policy_swaps_total{{result=\"refused\"}} {}",
        slot.swaps_ok(),
        slot.swaps_refused()
    );
    broker
        .logs
        .group_commit()
        .stats()
        .render(&mut out, "kaas_fsync");
    // The transaction state log has its own flusher.
    broker
        .txn
        .sync_stats()
        .render(&mut out, "kaas_txn_state_fsync");
    if let Some(wal) = broker.logs.wal() {
        sample(
            &mut out,
            "kaas_wal_checkpoints_total",
            "counter",
            wal.checkpoints(),
        );
        sample(
            &mut out,
            "kaas_wal_checkpoint_failures_total",
            "counter",
            wal.failed_checkpoints(),
        );
        sample(&mut out, "kaas_wal_pending_bytes", "gauge", wal.pending().0);
    }
    // Peer fences applied, by the path that brought them.
    let _ = writeln!(out, "# TYPE kaas_fences_applied_total counter");
    for via in [
        crate::cluster::fences::Via::Push,
        crate::cluster::fences::Via::Poll,
    ] {
        let _ = writeln!(
            out,
            "kaas_fences_applied_total{{path=\"{}\"}} {}",
            via.name(),
            broker.fences.applied_total(via)
        );
    }
    crate::policy::exposition::render(&mut out, &broker.policy());
    let _ = writeln!(
        out,
        "# HELP kaas_txn_entry_epoch Producer epoch per transactional.id, labelled with its state and the policy that made its last transition."
    );
    let _ = writeln!(out, "# TYPE kaas_txn_entry_epoch gauge");
    let shards = broker.txn.all();
    let machines: Vec<_> = shards.iter().map(|c| c.machine()).collect();
    for (e, by) in machines.iter().flat_map(|m| m.entries_with_writer()) {
        let _ = writeln!(
            out,
            "kaas_txn_entry_epoch{{transactional_id=\"{}\",producer_id=\"{}\",state=\"{}\",policy=\"{}\"}} {}",
            escape(&e.transactional_id),
            e.producer_id,
            crate::policy::state_name(e.state),
            escape(by.unwrap_or("unknown")),
            e.producer_epoch
        );
    }
    crate::log::cleaner::render(&broker.cleaner_stats, &broker.logs, &mut out);
    // The open-file cache (--max-open-segment-files).
    crate::log::open_files::render(broker.logs.open_files(), &mut out);
    // What producer-state expiry bounds (producer.id.expiration.ms):
    // (partition, producer id) entries, and producer ids bound to principals.
    let entries: usize = broker
        .logs
        .topics()
        .iter()
        .flat_map(|t| t.open_partitions())
        .map(|p| p.producer_count())
        .sum();
    sample(
        &mut out,
        "kaas_producer_state_entries",
        "gauge",
        entries as u64,
    );
    if let Some(owners) = &broker.pid_owners {
        sample(
            &mut out,
            "kaas_producer_id_owners",
            "gauge",
            owners.len() as u64,
        );
    }
    let _ = writeln!(out, "# TYPE kaas_log_end_offset gauge");
    for t in broker.logs.topics() {
        for p in &t.open_partitions() {
            let _ = writeln!(
                out,
                "kaas_log_end_offset{{topic=\"{}\",partition=\"{}\"}} {}",
                t.name,
                p.id,
                p.log_end_offset()
            );
        }
    }
    out
}

/// Serves `GET /metrics` (any path, really) until the listener fails.
pub async fn serve(listener: TcpListener, broker: Arc<Broker>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let broker = broker.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let _ = sock.read(&mut buf).await;
            let body = render(&broker);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
        });
    }
}
