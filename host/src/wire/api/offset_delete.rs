//! OffsetDelete (key 47): removes committed offsets of a group: all of them
//! when the group is Empty; for a consumer group with members, only those of
//! topics no member subscribes to (the rest GROUP_SUBSCRIBED_TO_TOPIC).
//! Answers once the deletion is durable.

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse, ResponseKind};

use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;
use crate::wire::handled::Handled;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: OffsetDeleteRequest,
    _version: i16,
) -> Handled {
    let mut checks = super::Checks::new(broker, session, ApiKey::OffsetDelete);
    if !checks.group(Operation::Delete, &req.group_id.0) {
        return Handled::Now(ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default()
                .with_error_code(crate::codes::GROUP_AUTHORIZATION_FAILED),
        ));
    }
    // (topic index, partition, Some(code) for an unknown topic)
    let mut slots: Vec<(usize, i32, Option<i16>)> = Vec::new();
    let mut eligible: Vec<(String, i32)> = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic = t.name.0.to_string();
        for p in &t.partitions {
            if !checks.topic(Operation::Read, &topic) {
                slots.push((
                    ti,
                    p.partition_index,
                    Some(crate::codes::TOPIC_AUTHORIZATION_FAILED),
                ));
            } else if !broker.has_partition(&topic, p.partition_index) {
                slots.push((
                    ti,
                    p.partition_index,
                    Some(codes::UNKNOWN_TOPIC_OR_PARTITION),
                ));
            } else {
                slots.push((ti, p.partition_index, None));
                eligible.push((topic.clone(), p.partition_index));
            }
        }
    }
    let names: Vec<_> = req.topics.iter().map(|t| t.name.clone()).collect();
    let build = move |group_error: i16, results: Vec<i16>| {
        let mut results = results.into_iter();
        let mut topics: Vec<OffsetDeleteResponseTopic> = names
            .iter()
            .map(|n| OffsetDeleteResponseTopic::default().with_name(n.clone()))
            .collect();
        for &(ti, partition, code) in &slots {
            let code = match code {
                Some(c) => c,
                None if group_error != codes::NONE => continue,
                None => results.next().unwrap_or(codes::NONE),
            };
            topics[ti].partitions.push(
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(partition)
                    .with_error_code(code),
            );
        }
        topics.retain(|t| !t.partitions.is_empty());
        ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default()
                .with_error_code(group_error)
                .with_topics(topics),
        )
    };
    let Some(groups) = broker.groups.for_group(&req.group_id.0) else {
        return Handled::Now(build(codes::NOT_COORDINATOR, Vec::new()));
    };
    match groups.delete_offsets(&req.group_id.0, &eligible) {
        Err(code) => Handled::Now(build(code, Vec::new())),
        Ok((results, durable)) => Handled::Later(Box::pin(async move {
            match durable.wait().await {
                Ok(()) => build(codes::NONE, results),
                Err(code) => build(code, Vec::new()),
            }
        })),
    }
}
