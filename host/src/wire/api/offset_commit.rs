//! OffsetCommit (key 8): stores committed offsets (with metadata and
//! leader epoch) for a group, answering once they are durable. Partitions
//! of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and metadata over
//! `offset.metadata.max.bytes` OFFSET_METADATA_TOO_LARGE; the rest share the
//! group's verdict (generation and member checks, see `group::state`).

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};

use crate::broker::Broker;
use crate::group::{Committed, codes};
use crate::wire::Handled;

/// (topic index, partition, code or None while it waits on the group).
type Slot = (usize, i32, Option<i16>);

pub fn handle(broker: &Arc<Broker>, req: OffsetCommitRequest, version: i16) -> Handled {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    // v2–v4 may ask for a retention of their own (-1: the broker's).
    let expire_ms = ((2..=4).contains(&version) && req.retention_time_ms != -1)
        .then(|| now_ms.saturating_add(req.retention_time_ms));
    let max_metadata = broker
        .groups
        .config()
        .offset_metadata_max_bytes
        .min(i16::MAX as usize);
    let mut slots: Vec<Slot> = Vec::new();
    let mut entries = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic = t.name.0.to_string();
        for p in &t.partitions {
            let metadata = p
                .committed_metadata
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default();
            let code = if broker.logs.partition(&topic, p.partition_index).is_none() {
                Some(codes::UNKNOWN_TOPIC_OR_PARTITION)
            } else if metadata.len() > max_metadata {
                Some(codes::OFFSET_METADATA_TOO_LARGE)
            } else {
                entries.push((
                    topic.clone(),
                    p.partition_index,
                    Committed {
                        offset: p.committed_offset,
                        leader_epoch: if version >= 6 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        },
                        metadata,
                        commit_ms: now_ms,
                        expire_ms,
                    },
                ));
                None
            };
            slots.push((ti, p.partition_index, code));
        }
    }
    let names: Vec<_> = req.topics.iter().map(|t| t.name.clone()).collect();
    if entries.is_empty() {
        // Nothing to commit: Kafka answers without consulting the group.
        return Handled::Now(response(&names, &slots, codes::NONE));
    }
    match broker.groups.commit(
        &req.group_id.0,
        req.generation_id_or_member_epoch,
        &req.member_id,
        req.group_instance_id.as_deref(),
        entries,
    ) {
        Err(code) => Handled::Now(response(&names, &slots, code)),
        Ok(durable) => Handled::Later(Box::pin(async move {
            let code = match durable.wait().await {
                Ok(()) => codes::NONE,
                Err(code) => code,
            };
            response(&names, &slots, code)
        })),
    }
}

fn response(
    names: &[kafka_protocol::messages::TopicName],
    slots: &[Slot],
    group_code: i16,
) -> ResponseKind {
    let mut topics: Vec<OffsetCommitResponseTopic> = names
        .iter()
        .map(|n| OffsetCommitResponseTopic::default().with_name(n.clone()))
        .collect();
    for &(ti, partition, code) in slots {
        topics[ti].partitions.push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code.unwrap_or(group_code)),
        );
    }
    ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
}
