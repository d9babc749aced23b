//! AddPartitionsToTxn (key 24): v0–3 from clients (one transaction), v4
//! batched (and VerifyOnly) between brokers. Front-end checks first (spec
//! §2.1): unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, internal topics
//! TOPIC_AUTHORIZATION_FAILED, and then every other partition
//! OPERATION_NOT_ATTEMPTED with nothing changed; otherwise the coordinator
//! (the policy) decides and the single error is copied to every partition.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseKind,
};

use crate::broker::Broker;
use crate::policy::{AddPartitionsRequest, TopicPartition};
use crate::txn::coordinator::now_ms;
use crate::wire::Handled;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const OPERATION_NOT_ATTEMPTED: i16 = 55;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Per-partition codes of one transaction's request.
async fn one(
    broker: &Arc<Broker>,
    txn_id: String,
    producer_id: i64,
    producer_epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    version: i16,
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut parts = Vec::new();
    let mut front: Vec<Option<i16>> = Vec::new();
    for t in topics {
        let name = t.name.0.to_string();
        for &p in &t.partitions {
            // A broker's VerifyOnly check names partitions it leads
            // (offsets partitions too): no front-end checks.
            let code = if verify_only {
                None
            } else if name.starts_with("__") {
                Some(TOPIC_AUTHORIZATION_FAILED)
            } else if !broker.has_partition(&name, p) {
                Some(UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                None
            };
            front.push(code);
            parts.push(TopicPartition {
                topic: name.clone(),
                partition: p,
            });
        }
    }
    let codes: Vec<i16> = if front.iter().any(Option::is_some) {
        front
            .iter()
            .map(|c| c.unwrap_or(OPERATION_NOT_ATTEMPTED))
            .collect()
    } else {
        let req = AddPartitionsRequest {
            transactional_id: txn_id,
            producer_id,
            producer_epoch,
            partitions: parts.clone(),
            version,
            verify_only,
            now_ms: now_ms(),
        };
        let (code, per) = match broker.txn.for_txn(&req.transactional_id) {
            Some(c) => c.add_partitions(broker, &req).await,
            None => (crate::wire::codes::NOT_COORDINATOR, Vec::new()),
        };
        if per.len() == parts.len() {
            per
        } else {
            vec![code; parts.len()]
        }
    };
    let mut results: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, code) in parts.iter().zip(codes) {
        let r = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(tp.partition)
            .with_partition_error_code(code);
        match results.iter_mut().find(|x| x.name.0.as_str() == tp.topic) {
            Some(x) => x.results_by_partition.push(r),
            None => results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(super::topic_name(&tp.topic))
                    .with_results_by_partition(vec![r]),
            ),
        }
    }
    results
}

pub fn handle(broker: &Arc<Broker>, req: AddPartitionsToTxnRequest, version: i16) -> Handled {
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let mut resp = AddPartitionsToTxnResponse::default();
        if version <= 3 {
            resp.results_by_topic_v3_and_below = one(
                &broker,
                req.v3_and_below_transactional_id.0.to_string(),
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
                &req.v3_and_below_topics,
                version,
                false,
            )
            .await;
        } else {
            for t in &req.transactions {
                let topic_results = one(
                    &broker,
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.producer_epoch,
                    &t.topics,
                    version,
                    t.verify_only,
                )
                .await;
                resp.results_by_transaction.push(
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(t.transactional_id.clone())
                        .with_topic_results(topic_results),
                );
            }
        }
        ResponseKind::AddPartitionsToTxn(resp)
    }))
}
