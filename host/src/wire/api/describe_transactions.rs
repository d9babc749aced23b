//! DescribeTransactions (key 65): the coordinator's entry per
//! transactional.id, as Kafka's admin client shows it (NOT_COORDINATOR
//! for an id another broker coordinates).

use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, ResponseKind,
};

use super::{sb, topic_name};
use crate::broker::Broker;
use crate::policy::state_name;

const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

pub fn handle(
    broker: &Arc<Broker>,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> ResponseKind {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let base = TransactionState::default().with_transactional_id(id.clone());
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
