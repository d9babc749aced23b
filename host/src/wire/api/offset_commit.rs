//! OffsetCommit (key 8): stores committed offsets (with metadata and
//! leader epoch) for a group, answering once they are durable. Partitions
//! of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and metadata over
//! `offset.metadata.max.bytes` OFFSET_METADATA_TOO_LARGE; the rest share the
//! group's verdict (generation and member checks, see `group::state`).

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse, ResponseKind};

use crate::broker::Broker;
use crate::codes;
use crate::group::Committed;
use crate::security::Operation;
use crate::wire::handled::Handled;

/// (topic index, partition, code or None while it waits on the group).
pub(crate) type Slot = (usize, i32, Option<i16>);

/// One requested partition, as OffsetCommit and TxnOffsetCommit both carry it.
pub(crate) struct Requested<'a> {
    pub topic_index: usize,
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// -1 when the request version has none.
    pub leader_epoch: i32,
    pub metadata: Option<&'a str>,
}

/// Checks each requested partition: a topic `topic_allowed` refuses gets
/// TOPIC_AUTHORIZATION_FAILED (before its existence is looked at), an
/// unknown topic or partition gets
/// UNKNOWN_TOPIC_OR_PARTITION, metadata over `offset.metadata.max.bytes`
/// OFFSET_METADATA_TOO_LARGE; the rest become entries to store, their slot
/// waiting on the group's verdict.
pub(crate) fn check<'a>(
    broker: &Broker,
    requested: impl Iterator<Item = Requested<'a>>,
    now_ms: i64,
    expire_ms: Option<i64>,
    topic_allowed: &mut dyn FnMut(&str) -> bool,
) -> (Vec<Slot>, Vec<(String, i32, Committed)>) {
    let max_metadata = broker
        .groups
        .config()
        .offset_metadata_max_bytes
        .min(i16::MAX as usize);
    let mut slots = Vec::new();
    let mut entries = Vec::new();
    for r in requested {
        let metadata = r.metadata.unwrap_or_default();
        let code = if !topic_allowed(r.topic) {
            Some(crate::codes::TOPIC_AUTHORIZATION_FAILED)
        } else if !broker.has_partition(r.topic, r.partition) {
            Some(codes::UNKNOWN_TOPIC_OR_PARTITION)
        } else if metadata.len() > max_metadata {
            Some(codes::OFFSET_METADATA_TOO_LARGE)
        } else {
            entries.push((
                r.topic.to_string(),
                r.partition,
                Committed {
                    offset: r.offset,
                    leader_epoch: r.leader_epoch,
                    metadata: metadata.to_string(),
                    commit_ms: now_ms,
                    expire_ms,
                },
            ));
            None
        };
        slots.push((r.topic_index, r.partition, code));
    }
    (slots, entries)
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: OffsetCommitRequest,
    version: i16,
) -> Handled {
    let mut checks = super::Checks::new(broker, session, ApiKey::OffsetCommit);
    let group_allowed = checks.group(Operation::Read, &req.group_id.0);
    let now_ms = crate::clock::now_ms();
    // v2–v4 may ask for a retention of their own (-1: the broker's).
    let expire_ms = ((2..=4).contains(&version) && req.retention_time_ms != -1)
        .then(|| now_ms.saturating_add(req.retention_time_ms));
    let requested = req.topics.iter().enumerate().flat_map(|(ti, t)| {
        t.partitions.iter().map(move |p| Requested {
            topic_index: ti,
            topic: &t.name.0,
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: if version >= 6 {
                p.committed_leader_epoch
            } else {
                -1
            },
            metadata: p.committed_metadata.as_deref(),
        })
    });
    let names: Vec<_> = req.topics.iter().map(|t| t.name.clone()).collect();
    if !group_allowed {
        // Every partition, with nothing looked at.
        let slots: Vec<Slot> = requested
            .map(|r| (r.topic_index, r.partition, None))
            .collect();
        return Handled::Now(response(
            &names,
            &slots,
            crate::codes::GROUP_AUTHORIZATION_FAILED,
        ));
    }
    let (slots, entries) = check(broker, requested, now_ms, expire_ms, &mut |t| {
        checks.topic(Operation::Read, t)
    });
    if entries.is_empty() {
        // Nothing to commit: Kafka answers without consulting the group.
        return Handled::Now(response(&names, &slots, codes::NONE));
    }
    let Some(groups) = broker.groups.for_group(&req.group_id.0) else {
        return Handled::Now(response(&names, &slots, codes::NOT_COORDINATOR));
    };
    match groups.commit(
        version,
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
