//! Admin views of transactions: DescribeTransactions, ListTransactions,
//! DescribeProducers, and the metrics line naming the policy that made each
//! entry's last transition.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::*;
use support::txn::{add, create_topic, s};
use support::{Client, InProcess};

use kaas::log::FsyncMode;

#[tokio::test]
async fn transactions_are_visible_to_admin_apis_and_metrics_name_their_policy() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let r = c
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(s("tx-admin"))))
                .with_transaction_timeout_ms(30_000),
            4,
        )
        .await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add(&mut c, "tx-admin", pid, epoch, "t", vec![0]).await, 0);

    let d = c
        .call(
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![
                TransactionalId(s("tx-admin")),
                TransactionalId(s("nope")),
            ]),
            0,
        )
        .await;
    assert_eq!(
        d.transaction_states[0].transaction_state.as_str(),
        "Ongoing"
    );
    assert_eq!(
        (
            d.transaction_states[0].producer_id.0,
            d.transaction_states[0].transaction_timeout_ms
        ),
        (pid, 30_000)
    );
    assert_eq!(d.transaction_states[0].topics[0].partitions, vec![0]);
    assert_eq!(
        d.transaction_states[1].error_code, 105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );

    let l = c
        .call(
            &ListTransactionsRequest::default()
                .with_state_filters(vec![s("Ongoing"), s("Bogus")])
                .with_duration_filter(-1),
            0,
        )
        .await;
    assert_eq!(l.transaction_states.len(), 1);
    assert_eq!(
        l.unknown_state_filters
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>(),
        vec!["Bogus"]
    );
    let none = c
        .call(
            &ListTransactionsRequest::default()
                .with_state_filters(vec![s("Empty")])
                .with_duration_filter(-1),
            0,
        )
        .await;
    assert!(none.transaction_states.is_empty());

    let p = c
        .call(
            &DescribeProducersRequest::default().with_topics(vec![
                TopicRequest::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0, 9]),
            ]),
            0,
        )
        .await;
    assert_eq!(p.topics[0].partitions[0].error_code, 0);
    assert_eq!(p.topics[0].partitions[1].error_code, 3);

    let text = kaas::exposition::render(&b.broker);
    let line = text
        .lines()
        .find(|l| l.starts_with("kaas_txn_entry_epoch{transactional_id=\"tx-admin\""))
        .expect("metrics line for the entry");
    assert!(
        line.contains("state=\"Ongoing\"") && line.contains("policy=\"apache37@"),
        "{line}"
    );
    // The state log's own flusher is counted apart from the data logs'.
    let state_syncs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("kaas_txn_state_fsync_total "))
        .expect("state log fsync counter")
        .parse()
        .expect("a count");
    assert!(
        state_syncs >= 2,
        "InitProducerId and AddPartitions synced the state log: {state_syncs}"
    );
    b.stop().await;
}
