//! DescribeTransactions (key 65): the coordinator's entry per
//! transactional.id, as Kafka's admin client shows it (NOT_COORDINATOR
//! for an id another broker coordinates).

use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, ResponseKind,
};

use super::{sb, topic_name};
use crate::broker::Broker;
use crate::policy::state_name;
use crate::security::{Operation, ResourceType};

const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> ResponseKind {
    // DESCRIBE on each transactional id; partitions only of topics the
    // session may describe (issue 16).
    let mut gate = super::Gate::new(broker, session, ApiKey::DescribeTransactions);
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let base = TransactionState::default().with_transactional_id(id.clone());
            if !gate.txn(Operation::Describe, &id.0) {
                return base
                    .with_error_code(crate::wire::codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    .with_transaction_state(sb(""));
            }
            // Cluster mode: the id's coordinator is another broker.
            let Some(c) = broker.txn.for_txn(&id.0) else {
                return base
                    .with_error_code(crate::wire::codes::NOT_COORDINATOR)
                    .with_transaction_state(sb(""));
            };
            let machine = c.machine();
            let Some(e) = machine.entry(&id.0) else {
                return base
                    .with_error_code(TRANSACTIONAL_ID_NOT_FOUND)
                    .with_transaction_state(sb("Dead"));
            };
            let mut topics: Vec<TopicData> = Vec::new();
            for p in &e.partitions {
                if !gate.probe(Operation::Describe, ResourceType::Topic, &p.topic) {
                    continue;
                }
                match topics.iter_mut().find(|t| t.topic.0.as_str() == p.topic) {
                    Some(t) => t.partitions.push(p.partition),
                    None => topics.push(
                        TopicData::default()
                            .with_topic(topic_name(&p.topic))
                            .with_partitions(vec![p.partition]),
                    ),
                }
            }
            base.with_transaction_state(sb(state_name(e.state)))
                .with_transaction_timeout_ms(e.timeout_ms)
                .with_transaction_start_time_ms(e.start_timestamp_ms)
                .with_producer_id(ProducerId(e.producer_id))
                .with_producer_epoch(e.producer_epoch)
                .with_topics(topics)
        })
        .collect();
    ResponseKind::DescribeTransactions(
        DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}
