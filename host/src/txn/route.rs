//! Which broker coordinates a transactional id, and the checks a partition
//! leader or a group coordinator asks of it (KIP-890 part 1 verification,
//! TxnOffsetCommit's verification), wherever it runs: a call on this
//! broker's coordinator when its shard is open here, else an
//! AddPartitionsToTxn v4 with `verify_only` to the coordinator broker over
//! [`crate::cluster::peer`], as Kafka 3.7's partition leaders ask theirs.
//!
//! It may touch: the shards open here, the cluster view, the peer client.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TransactionalId};

use super::coordinator::Coordinator;
use super::shards::TxnShards;
use crate::cluster::peer::Peers;
use crate::cluster::{Cluster, NodeInfo};
use crate::codes;
use crate::policy::TopicPartition;

use crate::codes::{
    CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, NOT_COORDINATOR, NOT_ENOUGH_REPLICAS,
    PRODUCER_FENCED,
};

/// Where a transactional id is coordinated.
#[derive(Debug)]
pub enum CoordinatorLocation {
    Here(Arc<Coordinator>),
    Peer(NodeInfo),
    /// No live coordinator known (or it is this broker, still loading).
    Unavailable,
}

/// What finding a coordinator reads: the shards open here, the cluster
/// view, and the peer client to ask another broker's.
#[derive(Debug, Clone, Copy)]
pub struct Routes<'a> {
    pub shards: &'a TxnShards,
    pub cluster: &'a Cluster,
    pub peers: &'a Peers,
}

/// The coordinator of `txn_id`.
pub fn coordinator_of(routes: Routes<'_>, txn_id: &str) -> CoordinatorLocation {
    if let Some(c) = routes.shards.for_txn(txn_id) {
        return CoordinatorLocation::Here(c);
    }
    let cluster = routes.cluster;
    match cluster.txn_coordinator(routes.shards.shard_of(txn_id)) {
        Some(n) if !cluster.is_local() && n.id != cluster.me().id => CoordinatorLocation::Peer(n),
        _ => CoordinatorLocation::Unavailable,
    }
}

/// Produce's code for a verification answer (docs/txn-semantics.md §3.6): fenced → INVALID_PRODUCER_EPOCH;
/// a coordinator busy, loading or elsewhere → NOT_ENOUGH_REPLICAS (the client
/// retries); anything else but success → INVALID_TXN_STATE.
pub fn produce_code(verified: i16) -> i16 {
    match verified {
        codes::NONE => codes::NONE,
        PRODUCER_FENCED | codes::INVALID_PRODUCER_EPOCH => codes::INVALID_PRODUCER_EPOCH,
        CONCURRENT_TRANSACTIONS
        | codes::COORDINATOR_LOAD_IN_PROGRESS
        | codes::COORDINATOR_NOT_AVAILABLE
        | NOT_COORDINATOR => NOT_ENOUGH_REPLICAS,
        _ => codes::INVALID_TXN_STATE,
    }
}

/// TxnOffsetCommit's code for a verification answer (docs/txn-semantics.md §2.3 step 3).
pub fn offsets_code(verified: i16) -> i16 {
    match verified {
        codes::NONE => codes::NONE,
        PRODUCER_FENCED | codes::INVALID_PRODUCER_EPOCH => codes::INVALID_PRODUCER_EPOCH,
        INVALID_PRODUCER_ID_MAPPING => INVALID_PRODUCER_ID_MAPPING,
        CONCURRENT_TRANSACTIONS
        | codes::COORDINATOR_LOAD_IN_PROGRESS
        | codes::COORDINATOR_NOT_AVAILABLE
        | NOT_COORDINATOR => codes::COORDINATOR_LOAD_IN_PROGRESS,
        _ => codes::INVALID_TXN_STATE,
    }
}

/// The VerifyOnly answer for each of `tps`: 0 when (pid, epoch) of
/// `txn_id` has the partition in its ongoing transaction, else the
/// coordinator's (or the partition's) error code, unmapped.
pub async fn verify_only(
    routes: Routes<'_>,
    txn_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tps: &[TopicPartition],
) -> Vec<i16> {
    match coordinator_of(routes, txn_id) {
        CoordinatorLocation::Here(c) => tps
            .iter()
            .map(|tp| c.verify_only_code(txn_id, producer_id, producer_epoch, tp.clone()))
            .collect(),
        CoordinatorLocation::Peer(node) => {
            ask(
                routes.peers,
                &node,
                txn_id,
                producer_id,
                producer_epoch,
                tps,
            )
            .await
        }
        CoordinatorLocation::Unavailable => vec![codes::COORDINATOR_NOT_AVAILABLE; tps.len()],
    }
}

async fn ask(
    peers: &Peers,
    node: &NodeInfo,
    txn_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tps: &[TopicPartition],
) -> Vec<i16> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for tp in tps {
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(tp.partition),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(crate::names::topic_name(&tp.topic))
                    .with_partitions(vec![tp.partition]),
            ),
        }
    }
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(crate::names::str_bytes(txn_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(true)
            .with_topics(topics),
    ]);
    let addr = format!("{}:{}", node.host, node.port);
    let resp = match peers.call(&addr, 4, &req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(node = node.id, error = %e, "verification with the coordinator failed");
            return vec![codes::COORDINATOR_NOT_AVAILABLE; tps.len()];
        }
    };
    if resp.error_code != codes::NONE {
        return vec![resp.error_code; tps.len()];
    }
    let results: Vec<(String, i32, i16)> = resp
        .results_by_transaction
        .iter()
        .filter(|r| r.transactional_id.0.as_str() == txn_id)
        .flat_map(|r| &r.topic_results)
        .flat_map(|t| {
            t.results_by_partition.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_error_code,
                )
            })
        })
        .collect();
    tps.iter()
        .map(|tp| {
            results
                .iter()
                .find(|(t, p, _)| *t == tp.topic && *p == tp.partition)
                .map_or(codes::COORDINATOR_NOT_AVAILABLE, |r| r.2)
        })
        .collect()
}
