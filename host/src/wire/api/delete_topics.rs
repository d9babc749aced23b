//! DeleteTopics (key 20): by name (v1–5) or by name/id (v6). Every group's
//! committed offsets of a deleted topic are dropped with it.

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind, TopicName,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DeleteTopicsRequest,
    version: i16,
    quota: &mut crate::quota::MutationQuota,
) -> ResponseKind {
    // DELETE on the cluster (probe), else DESCRIBE and DELETE on each topic
    //: a topic the session may not describe is answered
    // TOPIC_AUTHORIZATION_FAILED whether or not it exists (by id: without
    // its name).
    let mut checks = super::Checks::new(broker, session, ApiKey::DeleteTopics);
    let all = checks.cluster_probe(Operation::Delete);
    let mut names: Vec<(Option<String>, uuid::Uuid)> = req
        .topic_names
        .iter()
        .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
        .collect();
    names.extend(
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
    );
    let responses = names
        .into_iter()
        .map(|(name, id)| {
            if let Some(msg) = ambiguous(name.as_deref(), id) {
                return DeletableTopicResult::default()
                    .with_name(name.map(|n| TopicName(str_bytes(&n))))
                    .with_topic_id(id)
                    .with_error_code(codes::INVALID_REQUEST)
                    .with_error_message(Some(str_bytes(msg)));
            }
            let name = name.or_else(|| {
                broker
                    .topic_ids
                    .topic(&broker.logs, id.as_bytes())
                    .map(|t| t.name.clone())
            });
            let Some(name) = name else {
                return DeletableTopicResult::default()
                    .with_topic_id(id)
                    .with_error_code(codes::UNKNOWN_TOPIC_ID);
            };
            if !all && !checks.topic(Operation::Describe, &name) {
                let shown = (id.is_nil()).then(|| TopicName(str_bytes(&name)));
                return DeletableTopicResult::default()
                    .with_name(shown)
                    .with_topic_id(id)
                    .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED);
            }
            if !all && !checks.topic(Operation::Delete, &name) {
                return DeletableTopicResult::default()
                    .with_name(Some(TopicName(str_bytes(&name))))
                    .with_topic_id(id)
                    .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED);
            }
            let r = DeletableTopicResult::default()
                .with_name(Some(TopicName(str_bytes(&name))))
                .with_topic_id(id);
            // controller_mutation_rate: one token per partition deleted.
            let partitions = broker.logs.topic(&name).map_or(0, |t| t.partition_count);
            if quota.admit(partitions.max(0) as u32).is_err() {
                return r
                    .with_error_code(codes::THROTTLING_QUOTA_EXCEEDED)
                    .with_error_message(Some(str_bytes(crate::quota::THROTTLED_MESSAGE)));
            }
            match crate::cluster::admin::delete_topic(broker.topic_admin(), &name) {
                Ok(true) => {
                    // Committed offsets of the topic go with it.
                    broker.groups.topic_deleted(&name);
                    r
                }
                Ok(false) => r.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION),
                Err(e) => r
                    .with_error_code(codes::KAFKA_STORAGE_ERROR)
                    .with_error_message(Some(str_bytes(&e.to_string()))),
            }
        })
        .collect();
    let mut responses: Vec<DeletableTopicResult> = responses;
    for r in &mut responses {
        if version < 5 {
            r.error_message = None;
        }
        if version < 6 {
            r.topic_id = uuid::Uuid::nil();
        }
    }
    ResponseKind::DeleteTopics(
        DeleteTopicsResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(crate::quota::clamp_ms(quota.throttle_ms())),
    )
}

/// Why a v6 entry names no single topic: both a name and an id, or
/// neither (Kafka's controller refuses both, INVALID_REQUEST).
fn ambiguous(name: Option<&str>, id: uuid::Uuid) -> Option<&'static str> {
    match (name, id.is_nil()) {
        (Some(_), false) => Some("You may not specify both topic name and topic id."),
        (None, true) => Some("Neither topic name nor id were specified."),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::ambiguous;

    #[test]
    fn an_entry_must_name_exactly_one_of_name_and_id() {
        let id = uuid::Uuid::from_u128(7);
        assert!(ambiguous(Some("t"), id).is_some());
        assert!(ambiguous(None, uuid::Uuid::nil()).is_some());
        assert!(ambiguous(Some("t"), uuid::Uuid::nil()).is_none());
        assert!(ambiguous(None, id).is_none());
    }
}
