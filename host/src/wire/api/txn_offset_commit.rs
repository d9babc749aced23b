//! TxnOffsetCommit (key 28, v0–3): a transactional producer commits a
//! consumer group's offsets inside its transaction (docs/txn-semantics.md §2.3). The offsets
//! partition of the group must be in the transaction (AddOffsetsToTxn,
//! checked with the coordinator's VerifyOnly rule); the group checks the
//! member fields of v3; the offsets are journaled as pending and become
//! visible only when the transaction's COMMIT marker completes them.
//! Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, metadata
//! over `offset.metadata.max.bytes` OFFSET_METADATA_TOO_LARGE.
//!
//! Authorization: WRITE on the transactional id (every partition
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (every
//! partition GROUP_AUTHORIZATION_FAILED), READ on each topic (its
//! partitions TOPIC_AUTHORIZATION_FAILED), and a producer id bound to the
//! session's principal (every partition INVALID_PRODUCER_ID_MAPPING).

use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ResponseKind, TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use super::offset_commit::{Requested, Slot, check};
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;
use crate::wire::handled::Handled;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> Handled {
    let mut checks = super::Checks::new(broker, session, ApiKey::TxnOffsetCommit);
    let whole = if !checks.txn(Operation::Write, &req.transactional_id.0) {
        Some(crate::codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !checks.group(Operation::Read, &req.group_id.0) {
        Some(crate::codes::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    };
    let requested = req.topics.iter().enumerate().flat_map(|(ti, t)| {
        t.partitions.iter().map(move |p| Requested {
            topic_index: ti,
            topic: &t.name.0,
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: if version >= 2 {
                p.committed_leader_epoch
            } else {
                -1
            },
            metadata: p.committed_metadata.as_deref(),
        })
    });
    let names: Vec<TopicName> = req.topics.iter().map(|t| t.name.clone()).collect();
    if let Some(code) = whole {
        let slots: Vec<Slot> = requested
            .map(|r| (r.topic_index, r.partition, None))
            .collect();
        return Handled::Now(response(&names, &slots, code));
    }
    let (slots, entries) = check(broker, requested, crate::clock::now_ms(), None, &mut |t| {
        checks.topic(Operation::Read, t)
    });
    // Old clients know 15, not 14 (docs/txn-semantics.md §2.3).
    let for_version = move |code: i16| {
        if version < 2 && code == crate::codes::COORDINATOR_LOAD_IN_PROGRESS {
            codes::COORDINATOR_NOT_AVAILABLE
        } else {
            code
        }
    };
    let group = req.group_id.0.to_string();
    if group.is_empty() {
        return Handled::Now(response(&names, &slots, codes::INVALID_GROUP_ID));
    }
    let broker = broker.clone();
    let session = session.clone();
    Handled::Later(Box::pin(async move {
        if !super::owns_producer_id(&broker, &session, "TxnOffsetCommit", req.producer_id.0).await {
            let all: Vec<Slot> = slots.iter().map(|&(ti, p, _)| (ti, p, None)).collect();
            return response(&names, &all, crate::codes::INVALID_PRODUCER_ID_MAPPING);
        }
        let tp = crate::policy::TopicPartition {
            topic: crate::group::offsets_topic::OFFSETS_TOPIC.into(),
            partition: crate::group::offsets_topic::offsets_partition(&group),
        };
        // The transaction's coordinator may be another broker (cluster mode).
        let verified = crate::txn::route::verify_only(
            broker.txn_routes(),
            &req.transactional_id.0,
            req.producer_id.0,
            req.producer_epoch,
            std::slice::from_ref(&tp),
        )
        .await
        .first()
        .copied()
        .map_or(
            crate::codes::COORDINATOR_LOAD_IN_PROGRESS,
            crate::txn::route::offsets_code,
        );
        if verified != codes::NONE {
            return response(&names, &slots, for_version(verified));
        }
        let Some(groups) = broker.groups.for_group(&group) else {
            return response(&names, &slots, codes::NOT_COORDINATOR);
        };
        let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
        match groups.txn_commit(
            &group,
            req.generation_id,
            &req.member_id,
            instance.as_deref(),
            req.producer_id.0,
            req.producer_epoch,
            entries,
        ) {
            Err(code) => response(&names, &slots, for_version(code)),
            Ok(durable) => {
                let code = match durable.wait().await {
                    Ok(()) => codes::NONE,
                    Err(code) => code,
                };
                response(&names, &slots, for_version(code))
            }
        }
    }))
}

fn response(names: &[TopicName], slots: &[Slot], group_code: i16) -> ResponseKind {
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = names
        .iter()
        .map(|n| TxnOffsetCommitResponseTopic::default().with_name(n.clone()))
        .collect();
    for &(ti, partition, code) in slots {
        topics[ti].partitions.push(
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code.unwrap_or(group_code)),
        );
    }
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
}
