//! ListOffsets (key 2): earliest (-2), latest (-1: the high watermark, or
//! the last stable offset for read_committed), max timestamp (-3: as Kafka
//! 3.7, the last offset of the batch holding it), or the
//! first offset whose timestamp is at or after a given one. From v4 the
//! request's current_leader_epoch goes through the KIP-320 check and each
//! answer carries a leader epoch: the current one for latest, else the
//! epoch of the batch holding the offset found (for earliest, the epoch at
//! the log start; -1 when nothing was found).

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse, ResponseKind};

use super::leader_epoch;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;
use crate::wire::handled::Handled;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: ListOffsetsRequest,
    version: i16,
) -> Handled {
    // DESCRIBE on each topic, decided before anything is read.
    let mut checks = super::Checks::new(broker, session, ApiKey::ListOffsets);
    let denied: HashSet<String> = req
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !checks.topic(Operation::Describe, n))
        .collect();
    let by_timestamp = req
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.timestamp >= 0 || p.timestamp <= -3);
    if !by_timestamp {
        return Handled::Now(answer(broker, req, version, &denied));
    }
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        crate::log::batch::offload(move || answer(&broker, req, version, &denied))
            .await
            .unwrap_or_else(|| ResponseKind::ListOffsets(ListOffsetsResponse::default()))
    }))
}

fn answer(
    broker: &Broker,
    req: ListOffsetsRequest,
    version: i16,
    denied: &HashSet<String>,
) -> ResponseKind {
    let read_committed = req.isolation_level == 1;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_leader_epoch(-1)
                        .with_offset(-1)
                        .with_timestamp(-1);
                    if denied.contains(&name) {
                        return r.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED);
                    }
                    let Some(part) = broker.logs.partition(&name, p.partition_index) else {
                        return r.with_error_code(broker.not_here(&name, p.partition_index));
                    };
                    let current = part.leader_epoch();
                    let code = leader_epoch::check(p.current_leader_epoch, current);
                    if code != codes::NONE {
                        return r.with_error_code(code);
                    }
                    let (offset, ts) = match p.timestamp {
                        -2 => (part.log_start_offset(), -1),
                        -1 => (
                            if read_committed {
                                part.last_stable_offset()
                            } else {
                                part.high_watermark()
                            },
                            -1,
                        ),
                        -3 => match part.max_timestamp() {
                            Ok((ts, off)) => (off, ts),
                            Err(_) => return r.with_error_code(codes::KAFKA_STORAGE_ERROR),
                        },
                        ts => match part.offset_for_timestamp(ts) {
                            Ok(Some((off, found))) => (off, found),
                            Ok(None) => (-1, -1),
                            Err(_) => return r.with_error_code(codes::KAFKA_STORAGE_ERROR),
                        },
                    };
                    let epoch = match p.timestamp {
                        _ if version < 4 => -1,
                        -1 => current,
                        _ => part.epoch_at(offset),
                    };
                    r.with_offset(offset)
                        .with_timestamp(ts)
                        .with_leader_epoch(epoch)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}
