//! InitProducerId (key 22). The idempotent path goes through the policy
//! (which hands out the allocator's candidate id). Transactional ids need
//! the durable transaction state log, which this broker does not run yet:
//! they get COORDINATOR_NOT_AVAILABLE rather than an undurable answer.

use std::sync::Arc;

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};

use crate::broker::Broker;
use crate::txn::machine::{InitProducerId, Step};
use crate::wire::codes;

pub fn handle(broker: &Arc<Broker>, req: InitProducerIdRequest, version: i16) -> ResponseKind {
    let error = |code: i16| {
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    };
    if req.transactional_id.is_some() {
        return error(codes::COORDINATOR_NOT_AVAILABLE);
    }
    let candidate = match broker.producer_ids.peek() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "reserving producer ids failed");
            return error(codes::COORDINATOR_NOT_AVAILABLE);
        }
    };
    let request = InitProducerId {
        transactional_id: None,
        timeout_ms: req.transaction_timeout_ms,
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        version,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let step = broker
        .txn
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .init_producer_id(&request, now, candidate);
    match step {
        Step::Done(a) => {
            if a.candidate_used {
                broker.producer_ids.consume(candidate);
            }
            ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_error_code(a.reply.error_code)
                    .with_producer_id(ProducerId(a.reply.producer_id))
                    .with_producer_epoch(a.reply.producer_epoch),
            )
        }
        // The idempotent path never writes; a policy that tries is refused
        // by the host's checks before it gets here.
        Step::Write(_) => error(codes::UNKNOWN_SERVER_ERROR),
    }
}
