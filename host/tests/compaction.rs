//! Log compaction on a running broker, over the wire: a topic created with
//! cleanup.policy=compact is cleaned by the broker's cleaner thread (the
//! last value of each key survives, at its own offset), and a record
//! without a key is refused on it, record by record, as Kafka refuses it.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use kaas::log::FsyncMode;
use kaas::log::batch::kv_batch;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use support::records::{name, produce, produce_request};
use support::{Client, InProcess};

const INVALID_RECORD: i16 = 87;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

async fn create_compacted(c: &mut Client, topic: &str) {
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1024"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            ),
    ]);
    let resp = c.call(&req, 5).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

/// Every record of partition 0 from the log start: (offset, key, value).
async fn read_all(c: &mut Client, topic: &str) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
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
        let resp = c.call(&req, 12).await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let mut records = p.records.clone().unwrap_or_default();
        let mut got = false;
        for set in RecordBatchDecoder::decode_all(&mut records).expect("batches decode") {
            for r in set.records {
                got = true;
                let text =
                    |b: Option<bytes::Bytes>| b.map(|b| String::from_utf8_lossy(&b).into_owned());
                offset = r.offset + 1;
                out.push((r.offset, text(r.key).unwrap_or_default(), text(r.value)));
            }
        }
        if !got || offset >= p.high_watermark {
            return out;
        }
    }
}

#[tokio::test]
async fn the_running_broker_compacts_a_compacted_topic() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.cleaner.backoff_ms = 20;
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_compacted(&mut c, "table").await;
    for i in 0..400 {
        let key = format!("key-{}", i % 20);
        let value = format!("value-{i}");
        let batch = kv_batch(
            &[(Some(key.as_bytes()), Some(value.as_bytes()))],
            1000 + i,
            None,
            false,
        );
        assert_eq!(produce(&mut c, "table", 0, batch).await.0, 0);
    }
    let expected: BTreeMap<String, String> = (380..400)
        .map(|i| (format!("key-{}", i % 20), format!("value-{i}")))
        .collect();
    // Awaited: the cleaner has removed most of the records.
    let stats = b.broker.cleaner_stats.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stats
        .records_removed
        .load(std::sync::atomic::Ordering::Relaxed)
        < 300
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the cleaner never cleaned"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = read_all(&mut c, "table").await;
    assert!(after.len() < 100, "{} records left", after.len());
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0), "offsets ascend");
    let last: BTreeMap<String, String> = after
        .iter()
        .map(|(_, k, v)| (k.clone(), v.clone().unwrap_or_default()))
        .collect();
    assert_eq!(last, expected);
    for (offset, _, v) in &after {
        assert_eq!(
            v.as_deref(),
            Some(format!("value-{offset}").as_str()),
            "each record at its own offset"
        );
    }
    let page = kaas::exposition::render(&b.broker);
    assert!(
        page.contains("kaas_log_cleaner_bytes_written_total"),
        "{page}"
    );
    assert!(
        page.contains("kaas_log_dirty_ratio{topic=\"table\",partition=\"0\"}"),
        "{page}"
    );
    b.stop().await;
}

#[tokio::test]
async fn a_record_without_a_key_is_refused_on_a_compacted_topic() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_compacted(&mut c, "keyed").await;
    let batch = kv_batch(
        &[
            (Some(b"k"), Some(b"v")),
            (None, Some(b"no key")),
            (Some(b"k2"), None),
        ],
        1000,
        None,
        false,
    );
    let resp = c.call(&produce_request("keyed", 0, batch), 9).await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, INVALID_RECORD);
    let errors: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(errors, vec![1]);
    assert_eq!(
        p.error_message.as_deref(),
        Some("Compacted topic cannot accept message without key in topic partition keyed-0.")
    );
    // With every key (a tombstone included) the batch is taken.
    let ok = kv_batch(
        &[(Some(b"k"), Some(b"v")), (Some(b"k2"), None)],
        1000,
        None,
        false,
    );
    assert_eq!(produce(&mut c, "keyed", 0, ok).await, (0, 0));
    b.stop().await;
}
