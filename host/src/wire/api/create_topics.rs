//! CreateTopics (key 19): a replication factor up to the live brokers
//! (-1: `--default-replication-factor`), or a manual assignment naming
//! live brokers (`cluster::replicas` has the checks and Kafka's messages);
//! topic configs checked as Kafka 3.7 checks them (`log::config::topic_config`);
//! validate_only supported.
//!
//! Bounds: a request asking for more than
//! `max_partitions_per_request` partitions in all is refused whole, every
//! topic answered POLICY_VIOLATION, before anything is created (as Kafka's
//! controller does past its 10,000); a topic that would take the broker past
//! `--max-partitions` or its open-file budget is answered POLICY_VIOLATION
//! and leaves nothing on disk.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, ResponseKind};

use super::str_bytes;
use crate::broker::Broker;
use crate::cluster::admin::Replication;
use crate::codes;
use crate::log::CreateError;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    mut req: CreateTopicsRequest,
    version: i16,
    quota: &mut crate::quota::MutationQuota,
) -> ResponseKind {
    // A name given more than once: none of its entries is looked at.
    let duplicates = take_duplicates(&mut req.topics);
    // CREATE on the cluster (probe) or on each topic; whether a
    // created topic's configs are shown: DESCRIBE_CONFIGS on it.
    let mut checks = super::Checks::new(broker, session, ApiKey::CreateTopics);
    let all = checks.cluster_probe(Operation::Create);
    let allowed: Vec<bool> = req
        .topics
        .iter()
        .map(|t| all || checks.topic(Operation::Create, &t.name.0))
        .collect();
    let unauthorized = |t: &CreatableTopic| {
        CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
            .with_error_message(Some(str_bytes("Authorization failed.")))
    };
    let asked = requested_partitions(&req, broker.config.default_partitions);
    let max = broker.config.max_partitions_per_request;
    if asked > max as u64 {
        let msg = format!(
            "the request asks for {asked} partitions in all; at most {max} may be created per request"
        );
        let results = req
            .topics
            .into_iter()
            .zip(&allowed)
            .map(|(t, ok)| {
                if !ok {
                    return unauthorized(&t);
                }
                CreatableTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(codes::POLICY_VIOLATION)
                    .with_error_message(Some(str_bytes(&msg)))
            })
            .chain(duplicates)
            .collect();
        return respond(results, version, 0);
    }
    let results = req
        .topics
        .into_iter()
        .zip(allowed)
        .map(|(t, ok)| {
            if !ok {
                return unauthorized(&t);
            }
            let name = t.name.0.to_string();
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let fail = |code: i16, msg: String| {
                result
                    .clone()
                    .with_error_code(code)
                    .with_error_message(Some(str_bytes(&msg)))
            };
            let replication = match replication(&t) {
                Ok(r) => r,
                Err((code, msg)) => return fail(code, msg),
            };
            let partitions = if t.num_partitions == -1 {
                broker.config.default_partitions
            } else {
                t.num_partitions
            };
            // controller_mutation_rate: one token per partition created.
            if !req.validate_only {
                let permits = if t.assignments.is_empty() {
                    partitions
                } else {
                    t.assignments.len() as i32
                };
                if quota.admit(permits.max(0) as u32).is_err() {
                    return fail(
                        codes::THROTTLING_QUOTA_EXCEEDED,
                        crate::quota::THROTTLED_MESSAGE.into(),
                    );
                }
            }
            let mut overrides = BTreeMap::new();
            for c in &t.configs {
                if let Some(v) = &c.value {
                    overrides.insert(c.name.to_string(), v.to_string());
                }
            }
            match crate::cluster::admin::create_topic(
                broker.topic_admin(),
                &name,
                partitions,
                &replication,
                overrides,
                req.validate_only,
            ) {
                Ok(_) if !checks.topic(Operation::DescribeConfigs, &name) => result
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_topic_config_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
                    .with_configs(Some(Vec::new())),
                Ok(topic) => {
                    let configs = topic
                        .configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfigs::default()
                                .with_name(str_bytes(k))
                                .with_value(Some(str_bytes(v)))
                                .with_config_source(1)
                        })
                        .collect();
                    result
                        .with_topic_id(uuid::Uuid::from_bytes(crate::log::parse_id(&topic.id)))
                        .with_num_partitions(topic.partitions)
                        .with_replication_factor(topic.replication_factor)
                        .with_configs(Some(configs))
                }
                Err(CreateError::Exists(n)) => fail(
                    codes::TOPIC_ALREADY_EXISTS,
                    format!("topic {n} already exists"),
                ),
                Err(CreateError::InvalidName(n)) => fail(
                    codes::INVALID_TOPIC_EXCEPTION,
                    format!("invalid topic name {n:?}"),
                ),
                Err(CreateError::InvalidPartitions(n)) => fail(
                    codes::INVALID_PARTITIONS,
                    format!("invalid partition count {n}"),
                ),
                Err(CreateError::InvalidConfig(m)) => fail(codes::INVALID_CONFIG, m),
                Err(CreateError::InvalidReplicationFactor(m)) => {
                    fail(codes::INVALID_REPLICATION_FACTOR, m)
                }
                Err(CreateError::InvalidReplicaAssignment(m)) => {
                    fail(codes::INVALID_REPLICA_ASSIGNMENT, m)
                }
                Err(CreateError::Io(e)) => fail(codes::KAFKA_STORAGE_ERROR, e.to_string()),
                Err(e @ (CreateError::PartitionLimit { .. } | CreateError::FdBudget(_))) => {
                    fail(codes::POLICY_VIOLATION, e.to_string())
                }
            }
        })
        .chain(duplicates)
        .collect();
    respond(results, version, quota.throttle_ms())
}

/// Removes every entry of a name the request gives more than once and
/// answers each such name once, INVALID_REQUEST (Kafka's controller
/// creates none of them).
fn take_duplicates(topics: &mut Vec<CreatableTopic>) -> Vec<CreatableTopicResult> {
    let mut seen = std::collections::HashSet::new();
    let mut twice = Vec::new();
    for t in topics.iter() {
        if !seen.insert(&t.name) && !twice.contains(&t.name) {
            twice.push(t.name.clone());
        }
    }
    if twice.is_empty() {
        return Vec::new();
    }
    topics.retain(|t| !twice.contains(&t.name));
    twice
        .into_iter()
        .map(|name| {
            CreatableTopicResult::default()
                .with_name(name)
                .with_error_code(codes::INVALID_REQUEST)
                .with_error_message(Some(str_bytes("Duplicate topic name.")))
        })
        .collect()
}

/// What a topic of the request asks of its replicas: a factor, or its
/// assignments in partition order, refused as Kafka's controller refuses
/// them (the brokers named are checked against the live ones later).
fn replication(t: &CreatableTopic) -> Result<Replication, (i16, String)> {
    if t.assignments.is_empty() {
        return Ok(Replication::Factor(t.replication_factor));
    }
    if t.replication_factor != -1 {
        return Err((
            codes::INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1."
                .into(),
        ));
    }
    if t.num_partitions != -1 {
        return Err((
            codes::INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1."
                .into(),
        ));
    }
    let mut by_index: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for a in &t.assignments {
        let brokers = a.broker_ids.iter().map(|b| b.0).collect();
        if by_index.insert(a.partition_index, brokers).is_some() {
            return Err((
                codes::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Found multiple manual partition assignments for partition {}",
                    a.partition_index
                ),
            ));
        }
    }
    if !by_index.keys().copied().eq(0..by_index.len() as i32) {
        return Err((
            codes::INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    Ok(Replication::Assigned(by_index.into_values().collect()))
}

/// Partitions the request asks for, summed over its topics (a topic's
/// -1 is the broker default; invalid counts add nothing, they are refused
/// on their own).
fn requested_partitions(req: &CreateTopicsRequest, default_partitions: i32) -> u64 {
    req.topics
        .iter()
        .map(|t| {
            if !t.assignments.is_empty() {
                t.assignments.len() as u64
            } else if t.num_partitions == -1 {
                u64::try_from(default_partitions).unwrap_or(0)
            } else {
                u64::try_from(t.num_partitions).unwrap_or(0)
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// The response, fitted to `version`.
fn respond(mut results: Vec<CreatableTopicResult>, version: i16, throttle_ms: u64) -> ResponseKind {
    for r in &mut results {
        if version < 7 {
            r.topic_id = uuid::Uuid::nil();
        }
        if version < 5 {
            r.num_partitions = -1;
            r.replication_factor = -1;
            r.configs = Some(Vec::new());
            r.topic_config_error_code = 0;
        }
    }
    ResponseKind::CreateTopics(
        CreateTopicsResponse::default()
            .with_topics(results)
            .with_throttle_time_ms(crate::quota::clamp_ms(throttle_ms)),
    )
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;

    use super::*;

    fn topic(partitions: i32, rf: i16, assigned: &[(i32, &[i32])]) -> CreatableTopic {
        CreatableTopic::default()
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
            .with_assignments(
                assigned
                    .iter()
                    .map(|(p, brokers)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(*p)
                            .with_broker_ids(brokers.iter().copied().map(BrokerId).collect())
                    })
                    .collect(),
            )
    }

    #[test]
    fn a_name_given_twice_is_answered_once_and_not_created() {
        use kafka_protocol::messages::TopicName;
        let named = |n: &'static str| {
            topic(1, 1, &[]).with_name(TopicName(
                kafka_protocol::protocol::StrBytes::from_static_str(n),
            ))
        };
        let mut topics = vec![named("a"), named("b"), named("a"), named("a")];
        let answered = take_duplicates(&mut topics);
        assert_eq!(topics, vec![named("b")]);
        assert_eq!(answered.len(), 1);
        assert_eq!(
            (answered[0].name.0.as_str(), answered[0].error_code),
            ("a", codes::INVALID_REQUEST)
        );
    }

    #[test]
    fn assignments_are_taken_in_partition_order() {
        assert_eq!(
            replication(&topic(-1, -1, &[(1, &[2, 1]), (0, &[1, 2])])),
            Ok(Replication::Assigned(vec![vec![1, 2], vec![2, 1]]))
        );
        assert_eq!(replication(&topic(3, 2, &[])), Ok(Replication::Factor(2)));
    }

    #[test]
    fn an_assignment_with_a_count_or_factor_or_gaps_is_refused_with_kafkas_messages() {
        assert_eq!(
            replication(&topic(-1, 1, &[(0, &[1])])),
            Err((
                codes::INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not set to -1.".into()
            ))
        );
        assert_eq!(
            replication(&topic(1, -1, &[(0, &[1])])),
            Err((
                codes::INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1."
                    .into()
            ))
        );
        assert_eq!(
            replication(&topic(-1, -1, &[(0, &[1]), (0, &[2])])),
            Err((
                codes::INVALID_REPLICA_ASSIGNMENT,
                "Found multiple manual partition assignments for partition 0".into()
            ))
        );
        assert_eq!(
            replication(&topic(-1, -1, &[(0, &[1]), (2, &[1])])),
            Err((
                codes::INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence".into()
            ))
        );
    }
}
