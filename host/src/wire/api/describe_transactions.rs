//! DescribeTransactions (key 65): the coordinator's entry per
//! transactional.id, as Kafka's admin client shows it (NOT_COORDINATOR
//! for an id another broker coordinates).
//!
//! Kafka's schema has no field for the policy, so two tagged fields carry
//! it (clients that do not know them skip them): in each
//! TransactionState, tag [`TAG_DECIDED_BY`] holds the identity of the policy
//! that made the entry's last transition (its state record's written_by),
//! and at the response level tag [`TAG_CURRENT_POLICY`] holds the identity
//! of the policy deciding now; both are UTF-8 bytes
//! (`name@version (sha256 <12 hex>)`). `kaas txn describe` prints them.

use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, ResponseKind,
};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::policy::state_name;
use crate::security::{Operation, ResourceType};

use crate::codes::TRANSACTIONAL_ID_NOT_FOUND;

/// TransactionState tagged field: who decided the entry's last transition.
pub const TAG_DECIDED_BY: i32 = 10_000;
/// Response tagged field: the policy deciding now.
pub const TAG_CURRENT_POLICY: i32 = 10_001;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> ResponseKind {
    // DESCRIBE on each transactional id; partitions only of topics the
    // session may describe.
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeTransactions);
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let base = TransactionState::default().with_transactional_id(id.clone());
            if !checks.txn(Operation::Describe, &id.0) {
                return base
                    .with_error_code(crate::codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    .with_transaction_state(str_bytes(""));
            }
            // Cluster mode: the id's coordinator is another broker.
            let Some(c) = broker.txn.for_txn(&id.0) else {
                return base
                    .with_error_code(crate::codes::NOT_COORDINATOR)
                    .with_transaction_state(str_bytes(""));
            };
            let machine = c.machine();
            let Some(e) = machine.entry(&id.0) else {
                // Kafka leaves the state empty for an id it does not know.
                return base
                    .with_error_code(TRANSACTIONAL_ID_NOT_FOUND)
                    .with_transaction_state(str_bytes(""));
            };
            let mut topics: Vec<TopicData> = Vec::new();
            for p in &e.partitions {
                if !checks.probe(Operation::Describe, ResourceType::Topic, &p.topic) {
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
            let mut tagged = std::collections::BTreeMap::new();
            if let Some(by) = machine.written_by(&id.0) {
                tagged.insert(TAG_DECIDED_BY, bytes::Bytes::copy_from_slice(by.as_bytes()));
            }
            base.with_transaction_state(str_bytes(state_name(e.state)))
                .with_unknown_tagged_fields(tagged)
                .with_transaction_timeout_ms(e.timeout_ms)
                .with_transaction_start_time_ms(e.start_timestamp_ms)
                .with_producer_id(ProducerId(e.producer_id))
                .with_producer_epoch(e.producer_epoch)
                .with_topics(topics)
        })
        .collect();
    let current = broker.policy().identity().to_string();
    ResponseKind::DescribeTransactions(
        DescribeTransactionsResponse::default()
            .with_transaction_states(states)
            .with_unknown_tagged_fields(std::collections::BTreeMap::from([(
                TAG_CURRENT_POLICY,
                bytes::Bytes::from(current.into_bytes()),
            )])),
    )
}
