//! CreatePartitions (key 37): grows topics, from any broker (cluster mode
//! agrees the new count in etcd; see `cluster::admin`). Explicit
//! assignments are checked as a creation's (live brokers, none twice, the
//! topic's replication factor) and stored as the new partitions' replicas.

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: CreatePartitionsRequest,
    version: i16,
    quota: &mut crate::quota::MutationQuota,
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
                    .with_error_message(Some(str_bytes(&msg)))
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
            // controller_mutation_rate: one token per partition added.
            if !req.validate_only {
                let now = broker
                    .logs
                    .topic(&name)
                    .map_or(t.count, |tp| tp.partition_count);
                let added = t.count.saturating_sub(now).max(0);
                if quota.admit(added as u32).is_err() {
                    return fail(
                        codes::THROTTLING_QUOTA_EXCEEDED,
                        crate::quota::THROTTLED_MESSAGE.into(),
                    );
                }
            }
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
    ResponseKind::CreatePartitions(
        CreatePartitionsResponse::default()
            .with_results(results)
            .with_throttle_time_ms(crate::quota::clamp_ms(quota.throttle_ms())),
    )
}
