//! ConsumerGroupHeartbeat (key 68, v0–1): KIP-848's consumer group
//! protocol. Checks the request as Kafka 4.0 does (INVALID_REQUEST with its
//! messages), hands it to the group's coordinator
//! ([`crate::group::consumer`]) with the log's topics, and answers once
//! the group's changes are durable.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, RequestHeader,
    ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::group::consumer::{self, Heartbeat, TopicId};
use crate::log::LogManager;
use crate::security::Operation;
use crate::wire::handled::Handled;

/// The log's topics as a consumer group sees them.
#[derive(Debug)]
pub struct LogTopics<'a>(pub &'a LogManager);

impl consumer::Topics for LogTopics<'_> {
    fn lookup(&self, name: &str) -> Option<(TopicId, i32)> {
        self.0.topic(name).map(|t| (t.id, t.partition_count))
    }

    fn names(&self) -> Vec<String> {
        self.0.topics().iter().map(|t| t.name.clone()).collect()
    }

    fn version(&self) -> u64 {
        self.0.topics_version()
    }
}

/// Kafka 4.0's checks of the request's shape.
fn invalid(req: &ConsumerGroupHeartbeatRequest, version: i16) -> Option<&'static str> {
    let empty =
        |s: &Option<kafka_protocol::protocol::StrBytes>| s.as_ref().is_some_and(|s| s.is_empty());
    if req.group_id.0.is_empty() {
        return Some("GroupId can't be empty.");
    }
    if empty(&req.instance_id) {
        return Some("InstanceId can't be empty.");
    }
    if empty(&req.rack_id) {
        return Some("RackId can't be empty.");
    }
    match req.member_epoch {
        e if e > 0 || e == -1 => req
            .member_id
            .is_empty()
            .then_some("MemberId can't be empty."),
        0 => {
            if version >= 1 && req.member_id.is_empty() {
                Some("MemberId can't be empty.")
            } else if req.rebalance_timeout_ms == -1 {
                Some("RebalanceTimeoutMs must be provided in first request.")
            } else if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                Some("TopicPartitions must be empty when (re-)joining.")
            } else if req
                .subscribed_topic_names
                .as_ref()
                .is_none_or(Vec::is_empty)
                && req
                    .subscribed_topic_regex
                    .as_ref()
                    .is_none_or(|r| r.is_empty())
            {
                Some("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
            } else {
                None
            }
        }
        -2 => {
            if req.member_id.is_empty() {
                Some("MemberId can't be empty.")
            } else if req.instance_id.is_none() {
                Some("InstanceId can't be null.")
            } else {
                None
            }
        }
        _ => Some("MemberEpoch is invalid."),
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    header: &RequestHeader,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> Handled {
    let error = |code: i16, msg: Option<&str>| {
        Handled::Now(ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code)
                .with_error_message(msg.map(str_bytes)),
        ))
    };
    let mut checks = super::Checks::new(broker, session, ApiKey::ConsumerGroupHeartbeat);
    if !checks.group(Operation::Read, &req.group_id.0) {
        return error(codes::GROUP_AUTHORIZATION_FAILED, None);
    }
    if let Some(msg) = invalid(&req, version) {
        return error(codes::INVALID_REQUEST, Some(msg));
    }
    let Some(groups) = broker.groups.for_group(&req.group_id.0) else {
        return error(codes::NOT_COORDINATOR, None);
    };
    let owned = req.topic_partitions.map(|tps| {
        let mut a = consumer::Assignment::new();
        for tp in tps {
            a.entry(*tp.topic_id.as_bytes())
                .or_default()
                .extend(tp.partitions);
        }
        a.retain(|_, ps| !ps.is_empty());
        a
    });
    let beat = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topic_names: req
            .subscribed_topic_names
            .map(|ns| ns.into_iter().map(|n| n.0.to_string()).collect()),
        topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        owned,
        client_id: header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", session.client_ip),
    };
    let (reply, durable) =
        groups.consumer_heartbeat(&req.group_id.0, beat, &LogTopics(&broker.logs));
    Handled::Later(Box::pin(async move {
        let mut reply = reply;
        if let Err(code) = durable.wait().await {
            reply = consumer::Reply {
                error: code,
                message: None,
                assignment: None,
                ..reply
            };
        }
        let assignment = reply.assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                a.into_iter()
                    .map(|(t, ps)| {
                        TopicPartitions::default()
                            .with_topic_id(uuid::Uuid::from_bytes(t))
                            .with_partitions(ps.into_iter().collect())
                    })
                    .collect(),
            )
        });
        // Kafka's error answers carry no member id and epoch 0.
        let ok = reply.error == codes::NONE;
        ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(reply.error)
                .with_error_message(reply.message.as_deref().map(str_bytes))
                .with_member_id(ok.then(|| str_bytes(&reply.member_id)))
                .with_member_epoch(if ok { reply.member_epoch } else { 0 })
                .with_heartbeat_interval_ms(reply.heartbeat_interval_ms)
                .with_assignment(assignment),
        )
    }))
}
