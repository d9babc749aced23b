//! DescribeProducers (key 61): the idempotent/transactional producer state
//! of each partition (epoch, last sequence, open transaction).

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId, ResponseKind,
};

use crate::broker::Broker;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeProducersRequest,
    _version: i16,
) -> ResponseKind {
    // READ on each topic.
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeProducers);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let allowed = checks.topic(Operation::Read, &t.name.0);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let r = PartitionResponse::default().with_partition_index(p);
                    if !allowed {
                        return r.with_error_code(crate::codes::TOPIC_AUTHORIZATION_FAILED);
                    }
                    let Some(part) = broker.logs.partition(&t.name.0, p) else {
                        return r.with_error_code(broker.not_here(&t.name.0, p));
                    };
                    let active = part
                        .producers()
                        .into_iter()
                        .map(|(pid, e)| {
                            ProducerState::default()
                                .with_producer_id(ProducerId(pid))
                                .with_producer_epoch(i32::from(e.epoch))
                                .with_last_sequence(e.batches.back().map_or(-1, |b| b.last_seq))
                                .with_last_timestamp(e.last_timestamp)
                                .with_coordinator_epoch(e.coordinator_epoch)
                                .with_current_txn_start_offset(e.txn_first_offset.unwrap_or(-1))
                        })
                        .collect();
                    r.with_active_producers(active)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::DescribeProducers(DescribeProducersResponse::default().with_topics(topics))
}
