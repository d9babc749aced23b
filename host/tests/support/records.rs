//! Produce, Fetch, CreateTopics and InitProducerId with exact wire bytes,
//! shared by the test files that write and read records.

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::Client;

/// A wire topic name.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// CreateTopics v5 of one topic; asserts it was created.
pub async fn create(c: &mut Client, topic: &str, partitions: i32) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]);
    let resp = c.call(&req, 5).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

/// Produce (acks -1) of one batch to `topic`-`partition`.
pub fn produce_request(topic: &str, partition: i32, batch: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(batch))),
                ]),
        ])
}

/// Produce v9 (acks -1) of one batch: (error code, base offset).
pub async fn produce(c: &mut Client, topic: &str, partition: i32, batch: Vec<u8>) -> (i16, i64) {
    let resp = c.call(&produce_request(topic, partition, batch), 9).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Fetch v12 from `offset`: (offset, value) of every record returned.
pub async fn fetch_values(
    c: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Vec<(i64, Vec<u8>)> {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(10 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(10 << 20),
                ]),
        ]);
    let resp = c.call(&req, 12).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut records = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut records).expect("batches decode") {
        for r in set.records {
            out.push((r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()));
        }
    }
    out
}

/// InitProducerId v4 without a transactional id: the producer id.
pub async fn idempotent_pid(c: &mut Client) -> i64 {
    let resp = c
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(i32::MAX)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await;
    assert_eq!((resp.error_code, resp.producer_epoch), (0, 0));
    resp.producer_id.0
}
