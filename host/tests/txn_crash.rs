//! Crash tests of the transaction coordinator with a real restart of the
//! broker process (spec §4.5, IX-08, IX-09; issue item 9).
//!
//! The story (KAFKA-20357): a coordinator persists a rotation (or a bump),
//! dies before the producer hears back, and after failover the retry is
//! fenced because the persisted record lacked the previous producer id and
//! last epoch. Here the broker aborts at a fault point compiled only into
//! test builds (`--features fault-injection`), right after the state
//! record is durable and before the reply; the restarted broker must give
//! the retry the identity the lost reply carried, without a new pid.

#![cfg(feature = "fault-injection")]

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use support::{Client, Process};

use kaas::log::{FsyncMode, GroupCommit};
use kaas::policy::{Entry, TxnState};
use kaas::txn::record::StateRecord;
use kaas::txn::store::TxnStore;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn init_req(txn: &str, claim: (i64, i16)) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(txn))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(claim.0))
        .with_producer_epoch(claim.1)
}

/// Seeds an entry through the real store, as a previous run would have left it.
async fn seed(dir: &std::path::Path, state: TxnState, pid: i64, epoch: i16, last_epoch: i16) {
    let (store, _) = TxnStore::open(dir, GroupCommit::new(FsyncMode::Always)).expect("store");
    let entry = Entry {
        transactional_id: "T".into(),
        producer_id: pid,
        producer_epoch: epoch,
        last_producer_id: pid,
        last_producer_epoch: last_epoch,
        state,
        partitions: vec![],
        timeout_ms: 60_000,
        // Recent: an entry idle for transactional.id.expiration.ms would be
        // expired by the broker's first reaper tick.
        start_timestamp_ms: kaas::txn::coordinator::now_ms(),
        last_update_timestamp_ms: kaas::txn::coordinator::now_ms(),
        has_failed_epoch_fence: false,
    };
    store
        .append(&StateRecord::upsert(&entry, Some("seed")))
        .await
        .expect("seed append");
}

async fn stored(dir: &std::path::Path) -> Entry {
    let (_, live) = TxnStore::open(dir, GroupCommit::new(FsyncMode::Always)).expect("store");
    match live.into_iter().next() {
        Some(StateRecord::Upsert { entry, .. }) => entry,
        other => panic!("expected the entry, got {other:?}"),
    }
}

/// Sends InitProducerId to a broker that aborts at `fault` before replying.
async fn crash_during(dir: &std::path::Path, fault: &str, req: &InitProducerIdRequest) {
    let broker = Process::spawn_env(dir, &[], &[("KAAS_FAULT", fault)]);
    let mut c = Client::connect(&broker.addr).await;
    let (_, frame) = c.frame(req, 4);
    c.send_raw(&frame).await;
    assert!(
        c.read_frame().await.is_none(),
        "the reply must be lost: the broker dies first"
    );
    assert!(!broker.wait_crash().success());
}

#[tokio::test]
async fn a_rotation_retried_after_the_broker_died_before_replying_gets_the_rotated_identity() {
    let dir = tempfile::tempdir().expect("tmp");
    seed(dir.path(), TxnState::CompleteCommit, 1000, 32766, -1).await;
    crash_during(
        dir.path(),
        "after-append-rotate",
        &init_req("T", (1000, 32766)),
    )
    .await;
    let rotated = stored(dir.path()).await;
    assert_ne!(rotated.producer_id, 1000, "the rotation record is durable");
    assert_eq!(
        (
            rotated.producer_epoch,
            rotated.last_producer_id,
            rotated.last_producer_epoch
        ),
        (0, 1000, 32766)
    );

    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    let r = c.call(&init_req("T", (1000, 32766)), 4).await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, rotated.producer_id, 0),
        "IX-08"
    );
    let again = c.call(&init_req("T", (1000, 32766)), 4).await;
    assert_eq!(
        again.producer_id.0, rotated.producer_id,
        "no new pid on a second retry either"
    );
    broker.terminate();
    assert_eq!(stored(dir.path()).await.producer_id, rotated.producer_id);
}

#[tokio::test]
async fn a_bump_retried_after_the_broker_died_before_replying_gets_the_bumped_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    seed(dir.path(), TxnState::CompleteCommit, 1000, 5, 4).await;
    crash_during(dir.path(), "after-append-bump", &init_req("T", (1000, 5))).await;
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    let r = c.call(&init_req("T", (1000, 5)), 4).await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, 1000, 6),
        "IX-09"
    );
    broker.terminate();
}

async fn txn_setup(c: &mut Client, partitions: Vec<i32>) -> (i64, i16) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s("t")))
            .with_num_partitions(2)
            .with_replication_factor(1),
    ]);
    assert_eq!(c.call(&req, 5).await.topics[0].error_code, 0);
    let r = c.call(&init_req("T", (-1, -1)), 4).await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("T")))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(partitions.clone()),
        ]);
    assert_eq!(c.call(&add, 3).await.error_code, 0);
    for p in partitions {
        let value = format!("txn-{p}");
        let batch = kaas::log::batch::data_batch(
            &[(None, value.as_bytes())],
            1,
            Some((pid, epoch, 0)),
            true,
        );
        let req = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(s("T"))))
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(Bytes::from(batch))),
                    ]),
            ]);
        assert_eq!(
            c.call(&req, 9).await.responses[0].partition_responses[0].error_code,
            0
        );
    }
    (pid, epoch)
}

/// Reads partition `p` read_committed until its LSO reaches the HW, and
/// returns the values a read_committed consumer keeps.
async fn committed_values(c: &mut Client, p: i32) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let req = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_isolation_level(1)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(s("t")))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let r = c.call(&req, 12).await;
        let part = &r.responses[0].partitions[0];
        if part.last_stable_offset == part.high_watermark {
            let aborted: Vec<(i64, i64)> = part
                .aborted_transactions
                .clone()
                .unwrap_or_default()
                .iter()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect();
            let mut records = part.records.clone().unwrap_or_default();
            let mut out = Vec::new();
            for set in RecordBatchDecoder::decode_all(&mut records).expect("decode") {
                for r in set.records {
                    let dropped = aborted
                        .iter()
                        .any(|(pid, first)| *pid == r.producer_id && r.offset >= *first);
                    if !r.control && !dropped {
                        out.push(
                            String::from_utf8(r.value.map(|v| v.to_vec()).unwrap_or_default())
                                .expect("utf8"),
                        );
                    }
                }
            }
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "partition {p} never became stable"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_crash_after_prepare_commit_finishes_the_commit_on_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn_env(
        dir.path(),
        &[],
        &[("KAAS_FAULT", "after-append-preparecommit")],
    );
    let mut c = Client::connect(&broker.addr).await;
    let (pid, epoch) = txn_setup(&mut c, vec![0, 1]).await;
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s("T")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let (_, frame) = c.frame(&end, 3);
    c.send_raw(&frame).await;
    assert!(c.read_frame().await.is_none());
    assert!(!broker.wait_crash().success());
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    assert_eq!(committed_values(&mut c, 0).await, vec!["txn-0"]);
    assert_eq!(committed_values(&mut c, 1).await, vec!["txn-1"]);
    broker.terminate();
}

#[tokio::test]
async fn a_crash_with_markers_half_written_finishes_them_on_restart_exactly_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn_env(dir.path(), &[], &[("KAAS_FAULT", "markers-half-written")]);
    let mut c = Client::connect(&broker.addr).await;
    let (pid, epoch) = txn_setup(&mut c, vec![0, 1]).await;
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s("T")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let _ = c.call(&end, 3).await; // answered once PrepareCommit is durable; markers follow
    assert!(!broker.wait_crash().success());
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    assert_eq!(committed_values(&mut c, 0).await, vec!["txn-0"]);
    assert_eq!(committed_values(&mut c, 1).await, vec!["txn-1"]);
    broker.terminate();
}

#[tokio::test]
async fn a_crash_while_ongoing_leaves_data_aborted_by_the_reaper_after_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    // A 1 s transaction timeout so the reaper acts quickly after the restart.
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s("t")))
            .with_num_partitions(2)
            .with_replication_factor(1),
    ]);
    assert_eq!(c.call(&req, 5).await.topics[0].error_code, 0);
    let r = c
        .call(
            &init_req("T", (-1, -1)).with_transaction_timeout_ms(1000),
            4,
        )
        .await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("T")))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![0]),
        ]);
    assert_eq!(c.call(&add, 3).await.error_code, 0);
    let batch = kaas::log::batch::data_batch(&[(None, b"never")], 1, Some((pid, epoch, 0)), true);
    let produce = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(s("T"))))
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(batch))),
                ]),
        ]);
    assert_eq!(
        c.call(&produce, 9).await.responses[0].partition_responses[0].error_code,
        0
    );
    broker.kill9();
    let broker = Process::spawn(dir.path(), &["--txn-reaper-interval-ms", "100"]);
    let mut c = Client::connect(&broker.addr).await;
    assert!(
        committed_values(&mut c, 0).await.is_empty(),
        "aborted data is never visible"
    );
    broker.terminate();
}
