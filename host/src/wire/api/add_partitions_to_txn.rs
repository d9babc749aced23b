//! AddPartitionsToTxn (key 24): v0–3 from clients (one transaction), v4
//! batched (and VerifyOnly) between brokers. Front-end checks first (spec
//! §2.1): unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, internal topics
//! TOPIC_AUTHORIZATION_FAILED, and then every other partition
//! OPERATION_NOT_ATTEMPTED with nothing changed; otherwise the coordinator
//! (the policy) decides and the single error is copied to every partition.
//!
//! Authorization: v0–3 need WRITE on the transactional id
//! (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), a
//! producer id bound to the session's principal (else
//! INVALID_PRODUCER_ID_MAPPING), and WRITE on each topic (the refused ones
//! TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED). v4 is
//! between brokers: CLUSTER_ACTION on the cluster, else the top-level
//! CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ResponseKind,
};

use crate::broker::Broker;
use crate::clock::now_ms;
use crate::policy::{AddPartitionsRequest, TopicPartition};
use crate::security::Operation;
use crate::wire::handled::Handled;

use crate::codes::{
    INVALID_PRODUCER_ID_MAPPING, OPERATION_NOT_ATTEMPTED, TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
};

/// Every partition of `topics` answered `code`.
fn all_failed(topics: &[AddPartitionsToTxnTopic], code: i16) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// The client version's checks: WRITE on the transactional id, the
/// producer id's owner, and WRITE on each topic (names refused).
async fn client_checks(
    broker: &Arc<Broker>,
    session: &crate::security::Session,
    txn_id: &str,
    producer_id: i64,
    topics: &[AddPartitionsToTxnTopic],
) -> Result<std::collections::HashSet<String>, i16> {
    let mut checks = super::Checks::new(broker, session, ApiKey::AddPartitionsToTxn);
    if !checks.txn(Operation::Write, txn_id) {
        return Err(TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    if !super::owns_producer_id(broker, session, "AddPartitionsToTxn", producer_id).await {
        return Err(INVALID_PRODUCER_ID_MAPPING);
    }
    Ok(topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !checks.topic(Operation::Write, n))
        .collect())
}

/// Per-partition codes of one transaction's request.
async fn one(
    broker: &Arc<Broker>,
    txn_id: String,
    producer_id: i64,
    producer_epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    version: i16,
    front_end: Option<&std::collections::HashSet<String>>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    // None: a broker's VerifyOnly check; Some: the topics refused WRITE.
    let verify_only = front_end.is_none();
    let empty = Default::default();
    let denied = front_end.unwrap_or(&empty);
    let mut parts = Vec::new();
    let mut front: Vec<Option<i16>> = Vec::new();
    for t in topics {
        let name = t.name.0.to_string();
        for &p in &t.partitions {
            // A broker's VerifyOnly check names partitions it leads
            // (offsets partitions too): no front-end checks.
            let code = if verify_only {
                None
            } else if denied.contains(&name) || name.starts_with("__") {
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
            // A broker's v4+ add that is not a VerifyOnly check is the
            // partition leader's implicit add (transaction version 2).
            source: if version >= 4 && !verify_only {
                crate::policy::AddSource::Implicit
            } else {
                crate::policy::AddSource::AddPartitions
            },
            tenant: 0,
            now_ms: now_ms(),
        };
        let (code, per) = match broker.txn.for_txn(&req.transactional_id) {
            Some(c) => c.add_partitions(&broker.coordinator_ports(), &req).await,
            None => (crate::codes::NOT_COORDINATOR, Vec::new()),
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

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> Handled {
    if version >= 4 {
        let mut checks = super::Checks::new(broker, session, ApiKey::AddPartitionsToTxn);
        if !checks.cluster(Operation::ClusterAction) {
            return Handled::Now(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default()
                    .with_error_code(crate::codes::CLUSTER_AUTHORIZATION_FAILED),
            ));
        }
    }
    let broker = broker.clone();
    let session = session.clone();
    Handled::Later(Box::pin(async move {
        let mut resp = AddPartitionsToTxnResponse::default();
        if version <= 3 {
            let denied = match client_checks(
                &broker,
                &session,
                &req.v3_and_below_transactional_id.0,
                req.v3_and_below_producer_id.0,
                &req.v3_and_below_topics,
            )
            .await
            {
                Ok(d) => d,
                Err(code) => {
                    resp.results_by_topic_v3_and_below = all_failed(&req.v3_and_below_topics, code);
                    return ResponseKind::AddPartitionsToTxn(resp);
                }
            };
            resp.results_by_topic_v3_and_below = one(
                &broker,
                req.v3_and_below_transactional_id.0.to_string(),
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
                &req.v3_and_below_topics,
                version,
                Some(&denied),
            )
            .await;
        } else {
            // Between brokers (CLUSTER_ACTION checked above): no topic check.
            let no_topic_refused = std::collections::HashSet::new();
            for t in &req.transactions {
                let topic_results = one(
                    &broker,
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.producer_epoch,
                    &t.topics,
                    version,
                    (!t.verify_only).then_some(&no_topic_refused),
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
