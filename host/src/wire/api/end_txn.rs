//! EndTxn (key 26): COMMIT or ABORT, decided by the policy; answered once
//! the Prepare record is durable, while the markers are written after.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId, ResponseKind};

use crate::broker::Broker;
use crate::txn::coordinator::now_ms;
use crate::wire::Handled;

pub fn handle(broker: &Arc<Broker>, req: EndTxnRequest, version: i16) -> Handled {
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let request = crate::policy::EndTxnRequest {
            transactional_id: req.transactional_id.0.to_string(),
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            commit: req.committed,
            version,
            now_ms: now_ms(),
        };
        let code = match broker.txn.for_txn(&request.transactional_id) {
            Some(c) => c.end_txn(&broker, &request).await,
            None => crate::wire::codes::NOT_COORDINATOR,
        };
        ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    }))
}
