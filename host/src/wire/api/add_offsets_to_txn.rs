//! AddOffsetsToTxn (key 25): the group's `__consumer_offsets` partition
//! (hash of the group id modulo 50, as Kafka maps it) joins the
//! transaction, decided exactly like AddPartitions (docs/txn-semantics.md §2.2).
//!
//! Authorization: WRITE on the transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), a producer id bound to the
//! session's principal (INVALID_PRODUCER_ID_MAPPING), READ on the group
//! (GROUP_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey, ResponseKind,
};

use crate::broker::Broker;
use crate::clock::now_ms;
use crate::codes;
use crate::policy::{AddPartitionsRequest, TopicPartition};
use crate::security::Operation;
use crate::wire::handled::Handled;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> Handled {
    let refused = |code: i16| {
        ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
    };
    let mut checks = super::Checks::new(broker, session, ApiKey::AddOffsetsToTxn);
    if !checks.txn(Operation::Write, &req.transactional_id.0) {
        return Handled::Now(refused(codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
    }
    if !checks.group(Operation::Read, &req.group_id.0) {
        return Handled::Now(refused(codes::GROUP_AUTHORIZATION_FAILED));
    }
    let broker = broker.clone();
    let session = session.clone();
    Handled::Later(Box::pin(async move {
        if !super::owns_producer_id(&broker, &session, "AddOffsetsToTxn", req.producer_id.0).await {
            return refused(codes::INVALID_PRODUCER_ID_MAPPING);
        }
        let tp = TopicPartition {
            topic: crate::group::offsets_topic::OFFSETS_TOPIC.into(),
            partition: crate::group::offsets_topic::offsets_partition(&req.group_id.0),
        };
        let request = AddPartitionsRequest {
            transactional_id: req.transactional_id.0.to_string(),
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            partitions: vec![tp],
            version,
            verify_only: false,
            source: crate::policy::AddSource::AddOffsets,
            tenant: 0,
            now_ms: now_ms(),
        };
        let code = match broker.txn.for_txn(&request.transactional_id) {
            Some(c) => {
                c.add_partitions(&broker.coordinator_ports(), &request)
                    .await
                    .0
            }
            None => crate::codes::NOT_COORDINATOR,
        };
        ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
    }))
}
