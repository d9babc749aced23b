//! Cluster mode's marker writer: a transaction's COMMIT/ABORT markers go to
//! whichever broker leads each partition (and each offsets partition's group
//! shard), this one included, with the coordinator's epoch; the caller
//! records the completion only once every marker is durable and
//! acknowledged.
//!
//! Partitions this broker leads are written here ([`super::markers`]);
//! the others get one WriteTxnMarkers (API 27) per leader over
//! [`crate::cluster::peer`]. A partition without a live leader, a leader
//! that moved (NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR) or a peer that
//! cannot be reached is tried again, with a growing delay, until it is
//! done: a transaction is never completed with a marker missing. Given up
//! only when the partition's topic no longer exists, when the partition
//! holds a newer producer epoch (the marker changes nothing there), or when
//! a newer coordinator fenced this one (TRANSACTION_COORDINATOR_FENCED: the
//! shard moved, its new coordinator finishes the job).
//!
//! It may touch: the cluster view (who leads what), the peer client, the
//! local marker path. It never touches the coordinator's state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest};

use super::coordinator::Coordinator;
use super::machine::MarkerJob;
use super::markers::{MarkerSet, write_here};
use crate::broker::Broker;
use crate::cluster::NodeInfo;
use crate::codes;
use crate::policy::TopicPartition;

const INVALID_PRODUCER_EPOCH: i16 = 47;
const TRANSACTION_COORDINATOR_FENCED: i16 = 52;

/// Where one marker goes.
enum Route {
    Here,
    Peer(NodeInfo),
    /// No live leader yet: ask again later.
    Unknown,
    /// The topic or partition no longer exists.
    Gone,
}

fn route(broker: &Broker, tp: &TopicPartition) -> Route {
    let me = broker.cluster.me().id;
    let leader = if tp.topic == crate::group::offsets_topic::OFFSETS_TOPIC {
        let Ok(shard) = u32::try_from(tp.partition) else {
            return Route::Gone;
        };
        if broker.groups.is_open(shard) {
            return Route::Here;
        }
        broker.cluster.group_coordinator(shard)
    } else {
        if broker.logs.partition(&tp.topic, tp.partition).is_some() {
            return Route::Here;
        }
        if !broker.has_partition(&tp.topic, tp.partition) {
            return Route::Gone;
        }
        broker
            .cluster
            .partition_leader(&tp.topic, tp.partition)
            .and_then(|l| {
                broker
                    .cluster
                    .brokers()
                    .into_iter()
                    .find(|b| b.id == l.node)
            })
    };
    match leader {
        Some(n) if n.id == me => Route::Unknown, // the view is ahead of our own opening
        Some(n) => Route::Peer(n),
        None => Route::Unknown,
    }
}

/// Writes `job`'s markers everywhere; true once every one is durable
/// (or needs none), false when this coordinator was fenced or retired.
pub async fn write_everywhere(broker: &Arc<Broker>, coord: &Coordinator, job: &MarkerJob) -> bool {
    let mut pending = job.partitions.clone();
    let mut delay = Duration::from_millis(5);
    loop {
        if coord.is_retired() {
            tracing::info!(txn = %job.transactional_id, "the shard moved; its new coordinator finishes the markers");
            return false;
        }
        let mut here = Vec::new();
        let mut remote: BTreeMap<i32, (NodeInfo, Vec<TopicPartition>)> = BTreeMap::new();
        let mut retry = Vec::new();
        for tp in pending.drain(..) {
            match route(broker, &tp) {
                Route::Here => here.push(tp),
                Route::Peer(n) => remote
                    .entry(n.id)
                    .or_insert_with(|| (n, Vec::new()))
                    .1
                    .push(tp),
                Route::Unknown => retry.push(tp),
                Route::Gone => {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, "marker for a partition that no longer exists; skipped");
                }
            }
        }
        let set = |partitions: Vec<TopicPartition>| MarkerSet {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            commit: job.commit,
            coordinator_epoch: coord.coordinator_epoch(),
            partitions,
        };
        let local = async {
            if here.is_empty() {
                Vec::new()
            } else {
                write_here(broker, &set(here.clone())).await
            }
        };
        let mut peers = tokio::task::JoinSet::new();
        let sent: Vec<TopicPartition> = remote.values().flat_map(|(_, t)| t.clone()).collect();
        for (node, tps) in remote.into_values() {
            peers.spawn(send(broker.clone(), node, set(tps)));
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
            match code {
                codes::NONE => {}
                INVALID_PRODUCER_EPOCH => {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, "the partition holds a newer epoch; marker skipped");
                }
                TRANSACTION_COORDINATOR_FENCED => {
                    tracing::warn!(txn = %job.transactional_id, topic = %tp.topic, partition = tp.partition, coordinator_epoch = coord.coordinator_epoch(), "a newer coordinator fenced this one; it finishes the markers");
                    return false;
                }
                codes::UNKNOWN_TOPIC_OR_PARTITION
                    if !broker.has_partition(&tp.topic, tp.partition)
                        && tp.topic != crate::group::offsets_topic::OFFSETS_TOPIC =>
                {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, "marker for a partition that no longer exists; skipped");
                }
                other => {
                    tracing::debug!(topic = %tp.topic, partition = tp.partition, code = other, "marker not written yet; retrying");
                    retry.push(tp);
                }
            }
        }
        if retry.is_empty() {
            return true;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
        pending = retry;
    }
}

/// One WriteTxnMarkers to `node`: each partition's code (every one
/// COORDINATOR_NOT_AVAILABLE when the peer could not be asked).
async fn send(broker: Arc<Broker>, node: NodeInfo, set: MarkerSet) -> Vec<(TopicPartition, i16)> {
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
    let resp = match broker.peers.call(&addr, 1, &req).await {
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
