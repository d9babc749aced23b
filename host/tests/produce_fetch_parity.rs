//! Produce, Fetch and ListOffsets where the wire test kit (wirekit, PF-xx)
//! found kaas answering otherwise than Apache Kafka 3.7: each test pins
//! Kafka's answer.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use support::records::{create, name, produce_request};
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

/// Fetch v12 of one partition from `offset`: the partition's answer.
async fn fetch(c: &mut Client, topic: &str, offset: i64) -> fetch_response::PartitionData {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    c.call(&req, 12).await.responses[0].partitions[0].clone()
}

fn metadata_of(topic: &str) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]))
}

/// PF-05: an acks=0 produce that fails (a missing partition) gets no
/// answer, so Kafka closes the connection to tell the client.
#[tokio::test]
async fn a_failed_acks_zero_produce_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let req = produce_request("t", 5, data_batch(&[(None, b"v")], 1, None, false)).with_acks(0);
    let (_, frame) = c.frame(&req, 9);
    c.send_raw(&frame).await;
    let (_, frame) = c.frame(&metadata_of("t"), 9);
    c.send_raw(&frame).await;
    let next = tokio::time::timeout(std::time::Duration::from_secs(5), c.read_frame()).await;
    assert!(
        matches!(next, Ok(None)),
        "the connection must close, got {next:?}"
    );
    b.stop().await;
}

/// PF-05: the records of an acks=0 produce are visible to the next request
/// on the same connection (Kafka answers a connection's requests in order).
#[tokio::test]
async fn an_acks_zero_append_is_visible_to_the_next_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    for i in 0..5 {
        let t = format!("t{i}");
        create(&mut c, &t, 1).await;
        let batch = data_batch(&[(None, b"a"), (None, b"b")], 1, None, false);
        let req = produce_request(&t, 0, batch).with_acks(0);
        let (_, frame) = c.frame(&req, 9);
        c.send_raw(&frame).await;
        let m = c.call(&metadata_of(&t), 9).await;
        assert_eq!(m.topics[0].error_code, 0);
        let p = fetch(&mut c, &t, 0).await;
        assert_eq!((p.error_code, p.high_watermark), (0, 2), "round {i}");
    }
    b.stop().await;
}

/// Produce v`version` (acks -1) of `records` to partition 0: (error, base).
async fn produce_at(c: &mut Client, topic: &str, records: Bytes, version: i16) -> (i16, i64) {
    let mut req = produce_request(topic, 0, Vec::new());
    req.topic_data[0].partition_data[0].records = Some(records);
    let r = c.call(&req, version).await;
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// PF-07: records present but zero bytes long hold no batch: Kafka answers
/// INVALID_RECORD, not CORRUPT_MESSAGE.
#[tokio::test]
async fn zero_byte_records_are_an_invalid_record() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    assert_eq!(produce_at(&mut c, "t", Bytes::new(), 9).await, (87, -1));
    assert_eq!(fetch(&mut c, "t", 0).await.high_watermark, 0);
    b.stop().await;
}

/// PF-19: zstd needs Produce v7; below it Kafka answers
/// UNSUPPORTED_COMPRESSION_TYPE and appends nothing.
#[tokio::test]
async fn zstd_below_produce_v7_is_refused_and_not_appended() {
    use kaas::log::batch::{compress, encode_records, framed_batch};
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let body = compress(4, &encode_records(&[(None, b"a"), (None, b"b")])).expect("zstd");
    let batch = Bytes::from(framed_batch(4, &body, 2, 1000));
    for v in [3, 6] {
        assert_eq!(
            produce_at(&mut c, "t", batch.clone(), v).await,
            (76, -1),
            "v{v}"
        );
    }
    assert_eq!(produce_at(&mut c, "t", batch, 7).await, (0, 0));
    b.stop().await;
}

/// PF-23: a Fetch out of range reports no offsets (all -1), as Kafka.
#[tokio::test]
async fn a_fetch_out_of_range_reports_no_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let batch = Bytes::from(data_batch(&[(None, b"a"), (None, b"b")], 1, None, false));
    assert_eq!(produce_at(&mut c, "t", batch, 9).await, (0, 0));
    for at in [3, 1000, -1] {
        let p = fetch(&mut c, "t", at).await;
        assert_eq!(
            (
                p.error_code,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset
            ),
            (1, -1, -1, -1),
            "from {at}"
        );
    }
    b.stop().await;
}

/// PF-28: ListOffsets -3 answers, as Kafka 3.7, the last offset of the
/// batch holding the largest timestamp, not the log's last offset.
#[tokio::test]
async fn max_timestamp_answers_the_batch_holding_it() {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let base = 1_700_000_000_000i64;
    let three = [(None, &b"a"[..]), (None, b"b"), (None, b"c")];
    for (i, ts) in [base, base + 500, base + 10, base + 500]
        .into_iter()
        .enumerate()
    {
        let batch = Bytes::from(data_batch(&three, ts, None, false));
        assert_eq!(produce_at(&mut c, "t", batch, 9).await, (0, 3 * i as i64));
    }
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_current_leader_epoch(-1)
                        .with_timestamp(-3),
                ]),
        ]);
    let r = c.call(&req, 7).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.offset, p.timestamp), (0, 5, base + 500));
    b.stop().await;
}
