//! WriteTxnMarkers (key 27, v1): a transaction coordinator on another
//! broker completes a transaction on the partitions this broker leads. Each
//! marker becomes a [`MarkerSet`] applied by [`markers::write_all_here`];
//! the answer names every marker, topic and partition of the request with
//! its code, sent once every marker written is durable.
//!
//! The markers of one request are appended in the request's order (two
//! markers of one producer land in the order the coordinator sent them) and
//! made durable together in one group-commit round, instead of one round
//! per marker. A request names at most [`MAX_PARTITIONS`] partitions in
//! all; the ones past it are answered INVALID_REQUEST without any work.
//!
//! Only a caller holding CLUSTER_ACTION on the cluster is answered: every
//! other gets CLUSTER_AUTHORIZATION_FAILED on every partition,
//! with nothing written (in a secured cluster the brokers' own principal is
//! a super user).

use std::sync::Arc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, ResponseKind, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use crate::broker::Broker;
use crate::codes;
use crate::policy::TopicPartition;
use crate::security::Operation;
use crate::txn::markers::{self, MarkerSet};
use crate::wire::handled::Handled;

/// Most partitions (summed over markers and topics) one request may have
/// written; Kafka's coordinators send far fewer.
pub const MAX_PARTITIONS: usize = 10_000;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: WriteTxnMarkersRequest,
    _version: i16,
) -> Handled {
    let mut checks = super::Checks::new(broker, session, ApiKey::WriteTxnMarkers);
    let allowed = checks.cluster(Operation::ClusterAction);
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        // Within the budget: the sets to write; every marker keeps its
        // place in the answer.
        let mut budget = MAX_PARTITIONS;
        let sets: Vec<MarkerSet> = req
            .markers
            .iter()
            .map(|m| {
                let mut partitions = Vec::new();
                for t in &m.topics {
                    for &p in &t.partition_indexes {
                        if budget == 0 {
                            break;
                        }
                        budget -= 1;
                        partitions.push(TopicPartition {
                            topic: t.name.0.to_string(),
                            partition: p,
                        });
                    }
                }
                MarkerSet {
                    producer_id: m.producer_id.0,
                    producer_epoch: m.producer_epoch,
                    commit: m.transaction_result,
                    coordinator_epoch: m.coordinator_epoch,
                    partitions,
                }
            })
            .collect();
        let written = if allowed {
            markers::write_all_here(&*broker, &sets).await
        } else {
            sets.iter()
                .map(|s| vec![codes::CLUSTER_AUTHORIZATION_FAILED; s.partitions.len()])
                .collect()
        };
        let results = req
            .markers
            .into_iter()
            .zip(written)
            .map(|(m, codes_of)| {
                let mut codes_of = codes_of.into_iter();
                let topics = m
                    .topics
                    .into_iter()
                    .map(|t| {
                        let partitions = t
                            .partition_indexes
                            .iter()
                            .map(|&p| {
                                WritableTxnMarkerPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_error_code(
                                        codes_of.next().unwrap_or(codes::INVALID_REQUEST),
                                    )
                            })
                            .collect();
                        WritableTxnMarkerTopicResult::default()
                            .with_name(t.name)
                            .with_partitions(partitions)
                    })
                    .collect();
                WritableTxnMarkerResult::default()
                    .with_producer_id(m.producer_id)
                    .with_topics(topics)
            })
            .collect();
        ResponseKind::WriteTxnMarkers(WriteTxnMarkersResponse::default().with_markers(results))
    }))
}
