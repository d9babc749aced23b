//! InitProducerId (key 22): both paths go through the coordinator, whose
//! decisions come from the loaded policy; a transactional answer is sent
//! only after its state record is durable.

use std::sync::Arc;

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};

use crate::broker::Broker;
use crate::txn::machine::InitProducerId;
use crate::wire::Handled;

pub fn handle(broker: &Arc<Broker>, req: InitProducerIdRequest, version: i16) -> Handled {
    let request = InitProducerId {
        transactional_id: req.transactional_id.map(|t| t.0.to_string()),
        timeout_ms: req.transaction_timeout_ms,
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        version,
    };
    if request.transactional_id.is_some() && !broker.cluster.is_local() {
        // Transactions across the cluster come with issue 15.
        return Handled::Now(ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(crate::wire::codes::COORDINATOR_NOT_AVAILABLE)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ));
    }
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let reply = broker.txn.init_producer_id(&broker, &request).await;
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(reply.error_code)
                .with_producer_id(ProducerId(reply.producer_id))
                .with_producer_epoch(reply.producer_epoch),
        )
    }))
}
