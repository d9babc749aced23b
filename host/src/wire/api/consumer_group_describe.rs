//! ConsumerGroupDescribe (key 69, v0–1): a consumer-protocol group's state,
//! epochs, assignor and members with their current and target assignments
//! (topic ids and names). A classic or unknown group is GROUP_ID_NOT_FOUND,
//! as Kafka 4.0 answers.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ResponseKind, TopicName,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::group::consumer;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: ConsumerGroupDescribeRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::ConsumerGroupDescribe);
    let names: HashMap<[u8; 16], String> = broker
        .logs
        .topics()
        .iter()
        .map(|t| (t.id, t.name.clone()))
        .collect();
    let assignment = |a: &consumer::Assignment| {
        Assignment::default().with_topic_partitions(
            a.iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(uuid::Uuid::from_bytes(*t))
                        .with_topic_name(TopicName(str_bytes(
                            names.get(t).map_or("", String::as_str),
                        )))
                        .with_partitions(ps.iter().copied().collect())
                })
                .collect(),
        )
    };
    let groups = req
        .group_ids
        .into_iter()
        .map(|id| {
            let operations = if req.include_authorized_operations {
                checks.operations(crate::security::ResourceType::Group, &id.0)
            } else {
                i32::MIN
            };
            let base = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(operations);
            if !checks.group(Operation::Describe, &id.0) {
                return base.with_error_code(crate::codes::GROUP_AUTHORIZATION_FAILED);
            }
            let described = match broker.groups.for_group(&id.0) {
                Some(groups) => groups.consumer_describe(&id.0),
                None => Err((crate::codes::NOT_COORDINATOR, String::new())),
            };
            match described {
                Err((code, msg)) => base
                    .with_error_code(code)
                    .with_error_message((!msg.is_empty()).then(|| str_bytes(&msg))),
                Ok(d) => base
                    .with_group_state(str_bytes(d.state))
                    .with_group_epoch(d.epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_assignor_name(str_bytes(&d.assignor))
                    .with_members(
                        d.members
                            .iter()
                            .map(|(m, target)| {
                                Member::default()
                                    .with_member_id(str_bytes(&m.id))
                                    .with_instance_id(m.sub.instance_id.as_deref().map(str_bytes))
                                    .with_rack_id(m.sub.rack_id.as_deref().map(str_bytes))
                                    .with_member_epoch(m.progress.epoch)
                                    .with_client_id(str_bytes(&m.sub.client_id))
                                    .with_client_host(str_bytes(&m.sub.client_host))
                                    .with_subscribed_topic_names(
                                        m.sub
                                            .topic_names
                                            .iter()
                                            .map(|n| TopicName(str_bytes(n)))
                                            .collect(),
                                    )
                                    // Kafka's is "" for a member without one.
                                    .with_subscribed_topic_regex(Some(str_bytes(
                                        m.sub.topic_regex.as_deref().unwrap_or(""),
                                    )))
                                    .with_assignment(assignment(&m.progress.assigned))
                                    .with_target_assignment(assignment(target))
                                    .with_member_type(1)
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    ResponseKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeResponse::default().with_groups(groups),
    )
}
