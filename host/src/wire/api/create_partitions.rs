//! CreatePartitions (key 37): grows topics, from any broker (cluster mode
//! agrees the new count in etcd; see `cluster::admin`). Explicit
//! assignments are checked as a creation's (live brokers, none twice, the
//! topic's replication factor) and stored as the new partitions' replicas.

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind,
};

use super::sb;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: CreatePartitionsRequest,
    version: i16,
) -> ResponseKind {
    // ALTER on each topic.
    let mut checks = super::Checks::new(broker, session, ApiKey::CreatePartitions);
    let mut seen = std::collections::BTreeSet::new();
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let r = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let fail = |code: i16, msg: String| {
                r.clone()
                    .with_error_code(code)
                    .with_error_message(Some(sb(&msg)))
            };
            if !seen.insert(name.clone()) {
                return fail(
                    codes::INVALID_REQUEST,
                    format!("topic {name} is named more than once"),
                );
            }
            if !checks.topic(Operation::Alter, &name) {
                return fail(
                    codes::TOPIC_AUTHORIZATION_FAILED,
                    "The topic authorization is failed.".into(),
                );
            }
            // Some clients send an empty list when they assign nothing
            // (Kafka would refuse it as too few assignments).
            let assignments = t.assignments.as_ref().filter(|a| !a.is_empty()).map(|all| {
                all.iter()
                    .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            });
            match crate::cluster::admin::create_partitions(
                broker.topic_admin(),
                &name,
                t.count,
                assignments,
                req.validate_only,
            ) {
                Ok(()) => r,
                Err((code, msg)) => fail(code, msg),
            }
        })
        .collect();
    let _ = version;
    ResponseKind::CreatePartitions(CreatePartitionsResponse::default().with_results(results))
}
