//! InitProducerId (key 22): both paths go through the coordinator, whose
//! decisions come from the loaded policy; a transactional answer is sent
//! only after its state record is durable.
//!
//! Authorization: a transactional id needs WRITE on it
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
//! IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679;
//! CLUSTER_AUTHORIZATION_FAILED). With the authorizer enabled, the id
//! answered is bound to the session's principal, durably, before the answer
//! leaves (`security::pid_owners`).

use std::sync::Arc;

use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};

use crate::broker::Broker;
use crate::codes;
use crate::security::pid_owners::Owner;
use crate::security::{Operation, ResourceType, Session};
use crate::txn::machine::InitProducerId;
use crate::wire::handled::Handled;

fn refused_kind(code: i16) -> ResponseKind {
    ResponseKind::InitProducerId(
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
}

fn refused(code: i16) -> Handled {
    Handled::Now(refused_kind(code))
}

/// Whether `session` may initialise this producer.
fn authorized(broker: &Broker, session: &Session, transactional_id: Option<&str>) -> bool {
    let mut checks = super::Checks::new(broker, session, ApiKey::InitProducerId);
    match transactional_id {
        Some(id) => checks.txn(Operation::Write, id),
        None => {
            checks.cluster_probe(Operation::IdempotentWrite)
                || broker.authz.authorize_by_resource_type(
                    session,
                    Operation::Write,
                    ResourceType::Topic,
                )
                // Denied both ways: audited once, as the cluster action.
                || checks.cluster(Operation::IdempotentWrite)
        }
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<Session>,
    req: InitProducerIdRequest,
    version: i16,
) -> Handled {
    let request = InitProducerId {
        transactional_id: req.transactional_id.map(|t| t.0.to_string()),
        timeout_ms: req.transaction_timeout_ms,
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        version,
    };
    if !authorized(broker, session, request.transactional_id.as_deref()) {
        return refused(if request.transactional_id.is_some() {
            codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        } else {
            codes::CLUSTER_AUTHORIZATION_FAILED
        });
    }
    let coordinator = match &request.transactional_id {
        None => broker.txn.idempotent().clone(),
        Some(id) => match broker.txn.for_txn(id) {
            Some(c) => c,
            // Cluster mode: another broker coordinates the id (the client
            // looks it up again with FindCoordinator).
            None => return refused(codes::NOT_COORDINATOR),
        },
    };
    let broker = broker.clone();
    let session = session.clone();
    Handled::Later(Box::pin(async move {
        let mut reply = coordinator
            .init_producer_id(&broker.coordinator_ports(), &request)
            .await;
        if reply.error_code == codes::NONE && reply.producer_id >= 0 && broker.pid_owners.is_some()
        {
            let b = broker.clone();
            let (pid, epoch) = (reply.producer_id, reply.producer_epoch);
            let principal = session.principal.clone();
            // An idempotent answer is a fresh id; should a policy ever
            // answer one bound to someone else, it is not handed over.
            let takeover = request.transactional_id.is_none()
                && broker.pid_owners.as_ref().map(|o| o.owner(pid, &principal))
                    == Some(Owner::Other);
            if takeover {
                crate::security::pid_owners::audit_refusal(
                    &principal,
                    "InitProducerId",
                    pid,
                    Owner::Other,
                );
                return refused_kind(codes::CLUSTER_AUTHORIZATION_FAILED);
            }
            let bound = tokio::task::spawn_blocking(move || match &b.pid_owners {
                Some(o) => o.bind(pid, epoch, &principal),
                None => Ok(()),
            })
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r);
            if let Err(e) = bound {
                // The id stays unbound (so unusable): the client retries
                // and gets another.
                tracing::error!(producer_id = pid, error = %e, "cannot bind the producer id to its principal");
                reply.error_code = codes::COORDINATOR_NOT_AVAILABLE;
                reply.producer_id = -1;
                reply.producer_epoch = -1;
            }
        }
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(reply.error_code)
                .with_producer_id(ProducerId(reply.producer_id))
                .with_producer_epoch(reply.producer_epoch),
        )
    }))
}
