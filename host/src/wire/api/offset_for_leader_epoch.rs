//! OffsetForLeaderEpoch (key 23): for each partition, where the requested
//! leader epoch ended, from the partition's durable epoch history
//! ([`crate::log::epochs`], KIP-101): the largest epoch at or below it and
//! the next epoch's start offset, or the log end for the current epoch;
//! -1/-1 for an epoch the history cannot place. The request's
//! current_leader_epoch (v2+) goes through the KIP-320 check
//! ([`super::leader_epoch::check`]) first.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind,
};

use super::leader_epoch;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: OffsetForLeaderEpochRequest,
    _version: i16,
) -> ResponseKind {
    // CLUSTER_ACTION (a follower) may ask about every topic; others need
    // DESCRIBE on each.
    let mut checks = super::Checks::new(broker, session, ApiKey::OffsetForLeaderEpoch);
    let all = checks.cluster_probe(Operation::ClusterAction);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.to_string();
            let allowed = all || checks.topic(Operation::Describe, &name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if !allowed {
                        return r.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED);
                    }
                    let Some(part) = broker.logs.partition(&name, p.partition) else {
                        return r.with_error_code(broker.not_here(&name, p.partition));
                    };
                    let code = leader_epoch::check(p.current_leader_epoch, part.leader_epoch());
                    if code != codes::NONE {
                        return r.with_error_code(code);
                    }
                    let (epoch, end) = part.end_offset_for_epoch(p.leader_epoch);
                    r.with_leader_epoch(epoch).with_end_offset(end)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))
}
