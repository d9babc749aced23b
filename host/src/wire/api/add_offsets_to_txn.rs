//! AddOffsetsToTxn (key 25): the group's `__consumer_offsets` partition
//! (hash of the group id modulo 50, as Kafka maps it) joins the
//! transaction, decided exactly like AddPartitions (spec §2.2).

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseKind};

use crate::broker::Broker;
use crate::policy::{AddPartitionsRequest, TopicPartition};
use crate::txn::coordinator::now_ms;
use crate::wire::Handled;

pub fn handle(broker: &Arc<Broker>, req: AddOffsetsToTxnRequest, version: i16) -> Handled {
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let tp = TopicPartition {
            topic: crate::txn::OFFSETS_TOPIC.into(),
            partition: crate::txn::offsets_partition(&req.group_id.0),
        };
        let request = AddPartitionsRequest {
            transactional_id: req.transactional_id.0.to_string(),
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            partitions: vec![tp],
            version,
            verify_only: false,
            now_ms: now_ms(),
        };
        let code = match broker.txn.for_txn(&request.transactional_id) {
            Some(c) => c.add_partitions(&broker, &request).await.0,
            None => crate::wire::codes::NOT_COORDINATOR,
        };
        ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
    }))
}
