//! The coordinator's marker router: a transaction's COMMIT/ABORT markers go
//! to whichever broker leads each partition (and each offsets partition's
//! group shard), this one included, with the coordinator's epoch; the
//! caller records the completion only once every marker is durable and
//! acknowledged. Single-node mode takes this path too for a transaction
//! with consumer offsets (every partition is led here).
//!
//! Partitions this broker leads go to the local marker writer
//! ([`super::markers`], through [`MarkerSink`]); the others get one
//! WriteTxnMarkers (API 27) per leader ([`PeerMarkers`], built by
//! [`send`]). A partition without a live leader, a leader that moved
//! (NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR) or a peer that cannot be
//! reached is tried again, with a growing delay, until it is done: a
//! transaction is never completed with a marker missing. Given up only when
//! the partition's topic no longer exists, when the partition holds a newer
//! producer epoch (the marker changes nothing there), or when a newer
//! coordinator fenced this one (TRANSACTION_COORDINATOR_FENCED: the shard
//! moved, its new coordinator finishes the job).
//!
//! It may touch: the coordinator's ports ([`LeaderView`], [`MarkerSink`],
//! [`PeerMarkers`]) and the peer client. It never touches the coordinator's
//! state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest};

use super::machine::MarkerJob;
use super::port::{CoordinatorPorts, Leader, MarkerSet};
use crate::cluster::NodeInfo;
use crate::cluster::peer::Peers;
use crate::codes;
use crate::policy::TopicPartition;
use crate::ratelimit::Backoff;

/// The waits between tries of markers not written yet (no leader, a leader
/// that moved, an unreachable peer, a disk error): 5 ms doubling to 1 s.
/// Both marker paths wait by it: this router and the coordinator's
/// single-node unsynced path.
pub const MARKER_RETRY: Backoff = Backoff::new(Duration::from_millis(5), Duration::from_secs(1));

/// What a marker's answer means for the coordinator writing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerVerdict {
    /// Written and durable.
    Written,
    /// Nothing to write there: the partition is gone, or holds a newer
    /// producer epoch (the marker changes nothing).
    Skip,
    /// A newer coordinator fenced this one (TRANSACTION_COORDINATOR_FENCED).
    Fenced,
    /// Not written yet (no leader, a leader that moved, a disk error): again.
    Retry,
}

/// The [`MarkerVerdict`] on `code`, the answer for `tp`'s marker (both marker
/// paths decide with it).
pub fn verdict(host: &dyn CoordinatorPorts, tp: &TopicPartition, code: i16) -> MarkerVerdict {
    match code {
        codes::NONE => MarkerVerdict::Written,
        codes::INVALID_PRODUCER_EPOCH => {
            tracing::warn!(topic = %tp.topic, partition = tp.partition, "the partition holds a newer epoch; marker skipped");
            MarkerVerdict::Skip
        }
        codes::TRANSACTION_COORDINATOR_FENCED => MarkerVerdict::Fenced,
        codes::UNKNOWN_TOPIC_OR_PARTITION
            if !host.exists(tp) && tp.topic != crate::group::offsets_topic::OFFSETS_TOPIC =>
        {
            tracing::warn!(topic = %tp.topic, partition = tp.partition, "marker for a partition that no longer exists; skipped");
            MarkerVerdict::Skip
        }
        other => {
            tracing::debug!(topic = %tp.topic, partition = tp.partition, code = other, "marker not written yet; retrying");
            MarkerVerdict::Retry
        }
    }
}

/// Writes `job`'s markers everywhere, as the coordinator at
/// `coordinator_epoch`; true once every one is durable (or needs none),
/// false when this coordinator was fenced or (`retired`) its shard moved.
pub async fn write_everywhere(
    host: &Arc<dyn CoordinatorPorts>,
    job: &MarkerJob,
    coordinator_epoch: i32,
    retired: impl Fn() -> bool,
) -> bool {
    let mut pending = job.partitions.clone();
    let mut backoff = MARKER_RETRY;
    loop {
        if retired() {
            tracing::info!(txn = %job.transactional_id, "the shard moved; its new coordinator finishes the markers");
            return false;
        }
        let mut here = Vec::new();
        let mut remote: BTreeMap<i32, (NodeInfo, Vec<TopicPartition>)> = BTreeMap::new();
        let mut retry = Vec::new();
        for tp in pending.drain(..) {
            match host.leader_of(&tp) {
                Leader::Here => here.push(tp),
                Leader::Peer(n) => remote
                    .entry(n.id)
                    .or_insert_with(|| (n, Vec::new()))
                    .1
                    .push(tp),
                Leader::Unknown => retry.push(tp),
                Leader::Gone => {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, "marker for a partition that no longer exists; skipped");
                }
            }
        }
        let set = |partitions: Vec<TopicPartition>| MarkerSet {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            commit: job.commit,
            coordinator_epoch,
            partitions,
        };
        let local = async {
            if here.is_empty() {
                Vec::new()
            } else {
                host.write_here(set(here.clone())).await
            }
        };
        let mut peers = tokio::task::JoinSet::new();
        let sent: Vec<TopicPartition> = remote.values().flat_map(|(_, t)| t.clone()).collect();
        for (node, tps) in remote.into_values() {
            peers.spawn(host.send(node, set(tps)));
        }
        let peers = async {
            let mut out = Vec::new();
            while let Some(r) = peers.join_next().await {
                match r {
                    Ok(codes) => out.extend(codes),
                    Err(e) => tracing::error!(error = %e, "a marker request task failed"),
                }
            }
            out
        };
        let (local, peers) = tokio::join!(local, peers);
        // A task that failed left its partitions out: they are tried again.
        for tp in sent {
            if !peers.iter().any(|(p, _)| *p == tp) {
                retry.push(tp);
            }
        }
        for (tp, code) in local.into_iter().chain(peers) {
            match verdict(&**host, &tp, code) {
                MarkerVerdict::Written | MarkerVerdict::Skip => {}
                MarkerVerdict::Fenced => {
                    tracing::warn!(txn = %job.transactional_id, topic = %tp.topic, partition = tp.partition, coordinator_epoch, "a newer coordinator fenced this one; it finishes the markers");
                    return false;
                }
                MarkerVerdict::Retry => retry.push(tp),
            }
        }
        if retry.is_empty() {
            return true;
        }
        tokio::time::sleep(backoff.failed()).await;
        pending = retry;
    }
}

/// One WriteTxnMarkers to `node`: each partition's code (every one
/// COORDINATOR_NOT_AVAILABLE when the peer could not be asked).
pub async fn send(peers: &Peers, node: &NodeInfo, set: MarkerSet) -> Vec<(TopicPartition, i16)> {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for tp in &set.partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partition_indexes.push(tp.partition),
            None => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(crate::names::topic_name(&tp.topic))
                    .with_partition_indexes(vec![tp.partition]),
            ),
        }
    }
    let req = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(set.producer_id))
            .with_producer_epoch(set.producer_epoch)
            .with_transaction_result(set.commit)
            .with_topics(topics)
            .with_coordinator_epoch(set.coordinator_epoch),
    ]);
    let addr = format!("{}:{}", node.host, node.port);
    let failed = |code| set.partitions.iter().map(|tp| (tp.clone(), code)).collect();
    let resp = match peers.call(&addr, 1, &req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(node = node.id, error = %e, "WriteTxnMarkers failed; retrying");
            return failed(codes::COORDINATOR_NOT_AVAILABLE);
        }
    };
    let mut out = Vec::new();
    for m in resp.markers {
        for t in m.topics {
            for p in t.partitions {
                out.push((
                    TopicPartition {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                    },
                    p.error_code,
                ));
            }
        }
    }
    // A partition the answer left out is tried again.
    for tp in &set.partitions {
        if !out.iter().any(|(o, _)| o == tp) {
            out.push((tp.clone(), codes::COORDINATOR_NOT_AVAILABLE));
        }
    }
    out
}
