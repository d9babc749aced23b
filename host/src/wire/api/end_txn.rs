//! EndTxn (key 26): COMMIT or ABORT, decided by the policy; answered once
//! the Prepare record is durable, while the markers are written after.
//!
//! Authorization: WRITE on the transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and a producer id bound to the
//! session's principal (INVALID_PRODUCER_ID_MAPPING).

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse, ProducerId, ResponseKind};

use crate::broker::Broker;
use crate::clock::now_ms;
use crate::codes;
use crate::security::Operation;
use crate::wire::handled::Handled;

fn refused(code: i16) -> ResponseKind {
    ResponseKind::EndTxn(
        EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: EndTxnRequest,
    version: i16,
) -> Handled {
    let mut checks = super::Checks::new(broker, session, ApiKey::EndTxn);
    if !checks.txn(Operation::Write, &req.transactional_id.0) {
        return Handled::Now(refused(codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
    }
    let broker = broker.clone();
    let session = session.clone();
    Handled::Later(Box::pin(async move {
        if !super::owns_producer_id(&broker, &session, "EndTxn", req.producer_id.0).await {
            return refused(codes::INVALID_PRODUCER_ID_MAPPING);
        }
        let request = crate::policy::EndTxnRequest {
            transactional_id: req.transactional_id.0.to_string(),
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            commit: req.committed,
            version,
            candidate_producer_id: -1,
            tenant: 0,
            now_ms: now_ms(),
        };
        let code = match broker.txn.for_txn(&request.transactional_id) {
            Some(c) => c.end_txn(&broker.coordinator_ports(), &request).await,
            None => crate::codes::NOT_COORDINATOR,
        };
        ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    }))
}
