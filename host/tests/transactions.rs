//! Transactions over the wire with exact request bytes: commit and abort as
//! read_committed consumers see them (spec §3.5, PS-14/15), KIP-890
//! verification (PS-11), and the seed's rejoin contract with its fence.

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
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

async fn setup(c: &mut Client) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s("t")))
            .with_num_partitions(2)
            .with_replication_factor(1),
    ]);
    assert_eq!(c.call(&req, 5).await.topics[0].error_code, 0);
}

async fn init(c: &mut Client, txn: &str, claim: (i64, i16)) -> (i16, i64, i16) {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(txn))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(claim.0))
        .with_producer_epoch(claim.1);
    let r = c.call(&req, 4).await;
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

async fn add(c: &mut Client, txn: &str, pid: i64, epoch: i16, partitions: Vec<i32>) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(txn)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(partitions),
        ]);
    let r = c.call(&req, 3).await;
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

async fn produce_txn(
    c: &mut Client,
    txn: &str,
    partition: i32,
    pid: i64,
    epoch: i16,
    seq: i32,
    values: &[&str],
) -> i16 {
    let recs: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, v.as_bytes())).collect();
    let batch = data_batch(&recs, 1_000, Some((pid, epoch, seq)), true);
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(s(txn))))
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(batch))),
                ]),
        ]);
    c.call(&req, 9).await.responses[0].partition_responses[0].error_code
}

async fn end(c: &mut Client, txn: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    c.call(&req, 3).await.error_code
}

struct Fetched {
    lso: i64,
    values: Vec<String>,
    aborted: Vec<(i64, i64)>,
}

async fn fetch_committed(c: &mut Client, partition: i32) -> Fetched {
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
                        .with_partition(partition)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r = c.call(&req, 12).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let aborted = p
        .aborted_transactions
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut records = p.records.clone().unwrap_or_default();
    let mut values = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut records).expect("decode") {
        for r in set.records {
            if !r.control {
                values.push(
                    String::from_utf8(r.value.map(|v| v.to_vec()).unwrap_or_default())
                        .expect("utf8"),
                );
            }
        }
    }
    Fetched {
        lso: p.last_stable_offset,
        values,
        aborted,
    }
}

/// Polls until the partition's last stable offset reaches `lso` (markers
/// are written after EndTxn answers).
async fn wait_lso(c: &mut Client, partition: i32, lso: i64) -> Fetched {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let f = fetch_committed(c, partition).await;
        if f.lso == lso {
            return f;
        }
        assert!(
            Instant::now() < deadline,
            "LSO stayed at {} instead of reaching {lso}",
            f.lso
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn committed_data_becomes_visible_and_aborted_data_is_reported_aborted() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let addr = b.addr.to_string();
    let mut c = Client::connect(&addr).await;
    setup(&mut c).await;
    let (e, pid, epoch) = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!((e, epoch), (0, 0));
    assert_eq!(add(&mut c, "tx", pid, epoch, vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", 0, pid, epoch, 0, &["a", "b"]).await,
        0
    );
    let open = fetch_committed(&mut c, 0).await;
    assert_eq!(
        (open.lso, open.values.len()),
        (0, 0),
        "PS-14: nothing below an open transaction's first offset"
    );
    assert_eq!(end(&mut c, "tx", pid, epoch, true).await, 0);
    let mut c2 = Client::connect(&addr).await;
    let done = wait_lso(&mut c2, 0, 3).await;
    assert_eq!(done.values, vec!["a", "b"]);
    assert!(done.aborted.is_empty());

    assert_eq!(add(&mut c, "tx", pid, epoch, vec![0]).await, 0);
    assert_eq!(produce_txn(&mut c, "tx", 0, pid, epoch, 2, &["c"]).await, 0);
    assert_eq!(end(&mut c, "tx", pid, epoch, false).await, 0);
    let aborted = wait_lso(&mut c2, 0, 5).await;
    assert_eq!(
        aborted.aborted,
        vec![(pid, 3)],
        "PS-15: the aborted transaction is reported from its first offset"
    );
    b.stop().await;
}

#[tokio::test]
async fn a_transactional_batch_to_a_partition_not_in_the_transaction_is_rejected() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    setup(&mut c).await;
    let (_, pid, epoch) = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!(add(&mut c, "tx", pid, epoch, vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", 1, pid, epoch, 0, &["x"]).await,
        48,
        "PS-11"
    );
    assert_eq!(produce_txn(&mut c, "tx", 0, pid, epoch, 0, &["y"]).await, 0);
    b.stop().await;
}

#[tokio::test]
async fn rejoin_mid_ongoing_aborts_it_and_answers_concurrent() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let addr = b.addr.to_string();
    let mut c = Client::connect(&addr).await;
    setup(&mut c).await;
    let (_, pid, epoch) = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!(add(&mut c, "tx", pid, epoch, vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", 0, pid, epoch, 0, &["zombie-data"]).await,
        0
    );
    // A new instance: CONCURRENT_TRANSACTIONS while the old transaction aborts.
    assert_eq!(init(&mut c, "tx", (-1, -1)).await.0, 51);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (code, pid2, epoch2) = loop {
        let r = init(&mut c, "tx", (-1, -1)).await;
        if r.0 != 51 {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "the fence's abort never completed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(
        (code, pid2, epoch2),
        (0, pid, 2),
        "fence at epoch 1, then the retry bumps to 2"
    );
    let f = fetch_committed(&mut c, 0).await;
    assert_eq!(
        f.aborted,
        vec![(pid, 0)],
        "the old transaction was aborted with markers"
    );
    assert_eq!(
        f.lso, 2,
        "data and the ABORT marker are stable; a consumer drops pid's data from offset 0"
    );
    // The zombie (epoch 0) is fenced everywhere.
    assert_eq!(produce_txn(&mut c, "tx", 0, pid, 0, 1, &["late"]).await, 47);
    assert_eq!(produce_txn(&mut c, "tx", 1, pid, 0, 0, &["late"]).await, 47);
    assert_eq!(end(&mut c, "tx", pid, 0, true).await, 90);
    b.stop().await;
}
