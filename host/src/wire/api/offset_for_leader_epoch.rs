//! OffsetForLeaderEpoch (key 23): every partition has one leader epoch, 0,
//! so epoch 0 ends at the high watermark and any other requested epoch is
//! unknown (-1/-1, as Kafka answers an epoch it has no entry for). A client
//! that believes in a newer current epoch gets UNKNOWN_LEADER_EPOCH.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind,
};

use crate::broker::Broker;
use crate::group::codes;

/// The only leader epoch of every partition.
const EPOCH: i32 = 0;

pub fn handle(
    broker: &Arc<Broker>,
    req: OffsetForLeaderEpochRequest,
    _version: i16,
) -> ResponseKind {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.to_string();
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let Some(part) = broker.logs.partition(&name, p.partition) else {
                        return r.with_error_code(broker.not_here(&name, p.partition));
                    };
                    if p.current_leader_epoch > EPOCH {
                        return r.with_error_code(codes::UNKNOWN_LEADER_EPOCH);
                    }
                    if p.leader_epoch == EPOCH {
                        r.with_leader_epoch(EPOCH)
                            .with_end_offset(part.high_watermark())
                    } else {
                        r
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))
}
