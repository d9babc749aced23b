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
    let coordinator = match &request.transactional_id {
        None => broker.txn.idempotent().clone(),
        Some(id) => match broker.txn.for_txn(id) {
            Some(c) => c,
            // Cluster mode: another broker coordinates the id (the client
            // looks it up again with FindCoordinator).
            None => {
                return Handled::Now(ResponseKind::InitProducerId(
                    InitProducerIdResponse::default()
                        .with_error_code(crate::wire::codes::NOT_COORDINATOR)
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1),
                ));
            }
        },
    };
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let reply = coordinator.init_producer_id(&broker, &request).await;
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(reply.error_code)
                .with_producer_id(ProducerId(reply.producer_id))
                .with_producer_epoch(reply.producer_epoch),
        )
    }))
}
