//! Transaction requests with exact wire bytes, shared by the transaction
//! test files: topic creation, InitProducerId, AddPartitionsToTxn, a
//! transactional Produce, EndTxn and a read_committed Fetch.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::Client;

/// A wire string.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// CreateTopics v5 of one topic; asserts it was created.
pub async fn create_topic(c: &mut Client, topic: &str, partitions: i32) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s(topic)))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]);
    assert_eq!(c.call(&req, 5).await.topics[0].error_code, 0);
}

/// InitProducerId v4 with a 60 s timeout and `claim` ((-1, -1): none).
pub fn init_request(txn: &str, claim: (i64, i16)) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(txn))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(claim.0))
        .with_producer_epoch(claim.1)
}

/// InitProducerId v4: (error code, producer id, epoch).
pub async fn init(c: &mut Client, txn: &str, claim: (i64, i16)) -> (i16, i64, i16) {
    let r = c.call(&init_request(txn, claim), 4).await;
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// InitProducerId without a claim, retried while the answer is
/// CONCURRENT_TRANSACTIONS (a rejoin aborting an Ongoing transaction);
/// asserts success and returns (producer id, epoch).
pub async fn init_settled(c: &mut Client, txn: &str) -> (i64, i16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, pid, epoch) = init(c, txn, (-1, -1)).await;
        if code == 51 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        assert_eq!(code, 0, "InitProducerId of {txn}");
        return (pid, epoch);
    }
}

/// AddPartitionsToTxn v3 of `partitions` of `topic`: the first partition's code.
pub async fn add(
    c: &mut Client,
    txn: &str,
    pid: i64,
    epoch: i16,
    topic: &str,
    partitions: Vec<i32>,
) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(txn)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(partitions),
        ]);
    let r = c.call(&req, 3).await;
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// A transactional Produce v9 (acks -1) of `values` as one batch starting
/// at sequence `seq`: the partition's code.
#[allow(clippy::too_many_arguments)]
pub async fn produce_txn(
    c: &mut Client,
    txn: &str,
    topic: &str,
    partition: i32,
    pid: i64,
    epoch: i16,
    seq: i32,
    values: &[&str],
) -> i16 {
    let recs: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, v.as_bytes())).collect();
    let batch = kaas::log::batch::data_batch(&recs, 1_000, Some((pid, epoch, seq)), true);
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(s(txn))))
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(batch))),
                ]),
        ]);
    c.call(&req, 9).await.responses[0].partition_responses[0].error_code
}

/// EndTxn of (pid, epoch): COMMIT or ABORT.
pub fn end_request(txn: &str, pid: i64, epoch: i16, commit: bool) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit)
}

/// EndTxn v3: its code.
pub async fn end(c: &mut Client, txn: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    c.call(&end_request(txn, pid, epoch, commit), 3)
        .await
        .error_code
}

/// What a read_committed Fetch of one partition from offset 0 returned.
pub struct Fetched {
    pub lso: i64,
    pub high_watermark: i64,
    /// Values of every data record returned (aborted ones included).
    pub values: Vec<String>,
    /// Values a read_committed consumer keeps (aborted ranges dropped).
    pub committed: Vec<String>,
    /// (producer id, first offset) of each aborted transaction reported.
    pub aborted: Vec<(i64, i64)>,
}

/// Fetch v12, read_committed, of `topic`-`partition` from offset 0.
pub async fn fetch_committed(c: &mut Client, topic: &str, partition: i32) -> Fetched {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(s(topic)))
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
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut records = p.records.clone().unwrap_or_default();
    let (mut values, mut committed) = (Vec::new(), Vec::new());
    for set in RecordBatchDecoder::decode_all(&mut records).expect("decode") {
        for r in set.records {
            if r.control {
                continue;
            }
            let v =
                String::from_utf8(r.value.map(|v| v.to_vec()).unwrap_or_default()).expect("utf8");
            let dropped = aborted
                .iter()
                .any(|(pid, first)| *pid == r.producer_id && r.offset >= *first);
            if !dropped {
                committed.push(v.clone());
            }
            values.push(v);
        }
    }
    Fetched {
        lso: p.last_stable_offset,
        high_watermark: p.high_watermark,
        values,
        committed,
        aborted,
    }
}
