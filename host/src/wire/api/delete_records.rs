//! DeleteRecords (key 21): moves each partition's log start offset.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};

use crate::broker::Broker;
use crate::codes;
use crate::log::partition::ReadError;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DeleteRecordsRequest,
    _version: i16,
) -> ResponseKind {
    // DELETE on each topic.
    let mut checks = super::Checks::new(broker, session, ApiKey::DeleteRecords);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let allowed = checks.topic(Operation::Delete, &name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !allowed {
                        return r.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED);
                    }
                    let Some(part) = broker.logs.partition(&name, p.partition_index) else {
                        return r.with_error_code(broker.not_here(&name, p.partition_index));
                    };
                    match part.delete_records_before(p.offset) {
                        Ok(low) => r.with_low_watermark(low),
                        Err(ReadError::OutOfRange { .. }) => {
                            r.with_error_code(codes::OFFSET_OUT_OF_RANGE)
                        }
                        Err(ReadError::Io(_)) => r.with_error_code(codes::KAFKA_STORAGE_ERROR),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics))
}
