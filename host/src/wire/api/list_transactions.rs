//! ListTransactions (key 66): every transactional.id, filtered by state and
//! producer id (v0) and by minimum duration (v1+).

use std::sync::Arc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, ResponseKind,
    TransactionalId,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::clock::now_ms;
use crate::policy::state_name;
use crate::security::{Operation, ResourceType};

const KNOWN: [&str; 6] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
];

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: ListTransactionsRequest,
    _version: i16,
) -> ResponseKind {
    // Only ids the session may describe, silently.
    let checks = super::Checks::new(broker, session, ApiKey::ListTransactions);
    let filters: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let unknown: Vec<_> = filters
        .iter()
        .filter(|f| !KNOWN.contains(&f.as_str()))
        .map(|f| str_bytes(f))
        .collect();
    let now = now_ms();
    let shards = broker.txn.all();
    let machines: Vec<_> = shards.iter().map(|c| c.machine()).collect();
    let states = machines
        .iter()
        .flat_map(|m| m.entries())
        .filter(|e| filters.is_empty() || filters.iter().any(|f| f == state_name(e.state)))
        .filter(|e| {
            req.producer_id_filters.is_empty()
                || req.producer_id_filters.iter().any(|p| p.0 == e.producer_id)
        })
        .filter(|e| {
            req.duration_filter < 0
                || (e.start_timestamp_ms >= 0 && now - e.start_timestamp_ms >= req.duration_filter)
        })
        .filter(|e| {
            checks.probe(
                Operation::Describe,
                ResourceType::TransactionalId,
                &e.transactional_id,
            )
        })
        .map(|e| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(&e.transactional_id)))
                .with_producer_id(ProducerId(e.producer_id))
                .with_transaction_state(str_bytes(state_name(e.state)))
        })
        .collect();
    ResponseKind::ListTransactions(
        ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown)
            .with_transaction_states(states),
    )
}
