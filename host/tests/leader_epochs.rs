//! Leader epochs as fencing tokens over the wire: batches carry
//! the epoch their partition was led at, OffsetForLeaderEpoch answers from
//! the durable history, Metadata and ListOffsets report epochs, and the
//! KIP-320 check answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH on
//! Fetch, ListOffsets and OffsetForLeaderEpoch. A new epoch is begun the
//! way the cluster module will begin it: `Partition::become_leader` on the
//! in-process broker's partition.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;
use support::records::{create, name, produce};
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::{self, data_batch};

const NONE: i16 = 0;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75; // Kafka's code (76 is UNSUPPORTED_COMPRESSION_TYPE)

async fn produce_n(c: &mut Client, n: usize, ts0: i64) {
    for i in 0..n {
        let v = format!("v{ts0}-{i}");
        let ts = ts0 + i as i64;
        let (code, _) = produce(
            c,
            "t",
            0,
            data_batch(&[(None, v.as_bytes())], ts, None, false),
        )
        .await;
        assert_eq!(code, NONE);
    }
}

fn become_leader(b: &InProcess, epoch: i32) {
    b.broker
        .logs
        .partition("t", 0)
        .expect("partition t-0")
        .become_leader(epoch)
        .expect("become leader");
}

/// Fetch v12 of t-0 from offset 0 with `current` as current_leader_epoch.
async fn fetch(c: &mut Client, current: i32) -> fetch_response::PartitionData {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(10 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(current)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(10 << 20),
                ]),
        ]);
    let mut resp = c.call(&req, 12).await;
    resp.responses.remove(0).partitions.remove(0)
}

/// (base offset, partition leader epoch) of every batch in `records`.
fn batch_epochs(records: &Bytes) -> Vec<(i64, i32)> {
    let mut out = Vec::new();
    let mut rest = &records[..];
    while let Some(h) = batch::parse_header(rest) {
        out.push((
            h.base_offset,
            batch::partition_leader_epoch(rest).expect("epoch"),
        ));
        rest = &rest[h.size..];
    }
    out
}

/// ListOffsets v4 of t-0: (error, offset, leader epoch) per timestamp.
async fn list_offsets(c: &mut Client, current: i32, timestamps: &[i64]) -> Vec<(i16, i64, i32)> {
    let req = ListOffsetsRequest::default().with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(
                timestamps
                    .iter()
                    .map(|ts| {
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_current_leader_epoch(current)
                            .with_timestamp(*ts)
                    })
                    .collect(),
            ),
    ]);
    c.call(&req, 4).await.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.offset, p.leader_epoch))
        .collect()
}

/// OffsetForLeaderEpoch v4 of t-0: (error, epoch, end offset) per
/// (leader_epoch, current_leader_epoch).
async fn epoch_end(c: &mut Client, asks: &[(i32, i32)]) -> Vec<(i16, i32, i64)> {
    let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
        OffsetForLeaderTopic::default()
            .with_topic(name("t"))
            .with_partitions(
                asks.iter()
                    .map(|(epoch, current)| {
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(*epoch)
                            .with_current_leader_epoch(*current)
                    })
                    .collect(),
            ),
    ]);
    c.call(&req, 4).await.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect()
}

#[tokio::test]
async fn produced_batches_carry_the_epoch_their_partition_was_led_at() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    produce_n(&mut c, 2, 1000).await;
    become_leader(&b, 3);
    produce_n(&mut c, 1, 2000).await;
    let p = fetch(&mut c, 3).await;
    assert_eq!(p.error_code, NONE);
    assert_eq!(
        batch_epochs(&p.records.expect("records")),
        vec![(0, 0), (1, 0), (2, 3)]
    );
    b.stop().await;
}

#[tokio::test]
async fn a_fresh_partition_is_at_epoch_0_and_a_newer_current_epoch_is_unknown() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    produce_n(&mut c, 1, 1000).await;
    assert_eq!(fetch(&mut c, 0).await.error_code, NONE);
    assert_eq!(fetch(&mut c, -1).await.error_code, NONE);
    let unknown = fetch(&mut c, 1).await;
    assert_eq!(unknown.error_code, UNKNOWN_LEADER_EPOCH);
    assert!(unknown.records.unwrap_or_default().is_empty());
    assert_eq!(
        list_offsets(&mut c, 1, &[-1]).await,
        vec![(UNKNOWN_LEADER_EPOCH, -1, -1)]
    );
    b.stop().await;
}

#[tokio::test]
async fn a_stale_current_leader_epoch_is_fenced_and_a_future_one_unknown() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    produce_n(&mut c, 1, 1000).await;
    become_leader(&b, 2);
    let node = b.broker.config.node_id;

    let fenced = fetch(&mut c, 1).await;
    assert_eq!(fenced.error_code, FENCED_LEADER_EPOCH);
    assert_eq!(
        (
            fenced.current_leader.leader_id.0,
            fenced.current_leader.leader_epoch
        ),
        (node, 2),
        "Fetch v12+ names the current leader"
    );
    let unknown = fetch(&mut c, 3).await;
    assert_eq!(unknown.error_code, UNKNOWN_LEADER_EPOCH);
    assert_eq!(unknown.current_leader.leader_epoch, 2);
    assert_eq!(fetch(&mut c, 2).await.error_code, NONE);
    assert_eq!(fetch(&mut c, -1).await.error_code, NONE);

    let codes = |v: Vec<(i16, i64, i32)>| v.into_iter().map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(
        codes(list_offsets(&mut c, 1, &[-1]).await),
        vec![FENCED_LEADER_EPOCH]
    );
    assert_eq!(
        codes(list_offsets(&mut c, 3, &[-1]).await),
        vec![UNKNOWN_LEADER_EPOCH]
    );
    assert_eq!(codes(list_offsets(&mut c, 2, &[-1]).await), vec![NONE]);

    assert_eq!(
        epoch_end(&mut c, &[(0, 1), (0, 3), (0, 2), (0, -1)]).await,
        vec![
            (FENCED_LEADER_EPOCH, -1, -1),
            (UNKNOWN_LEADER_EPOCH, -1, -1),
            (NONE, 0, 1),
            (NONE, 0, 1),
        ]
    );
    b.stop().await;
}

#[tokio::test]
async fn metadata_and_list_offsets_report_the_epochs() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    produce_n(&mut c, 2, 1000).await;
    become_leader(&b, 5);
    produce_n(&mut c, 2, 2000).await;

    let meta = c
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("t"))),
            ])),
            12,
        )
        .await;
    assert_eq!(meta.topics[0].partitions[0].leader_epoch, 5);

    assert_eq!(
        list_offsets(&mut c, -1, &[-2, -1, 1000, 1001, 2000, -3]).await,
        vec![
            (NONE, 0, 0), // earliest: the epoch at the log start
            (NONE, 4, 5), // latest: the current epoch
            (NONE, 0, 0), // by timestamp: the epoch of the batch holding it
            (NONE, 1, 0),
            (NONE, 2, 5),
            (NONE, 3, 5), // max timestamp
        ]
    );
    assert_eq!(
        list_offsets(&mut c, -1, &[9999]).await,
        vec![(NONE, -1, -1)]
    );
    b.stop().await;
}

#[tokio::test]
async fn offset_for_leader_epoch_answers_from_the_history_after_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let b = InProcess::start(dir.path(), FsyncMode::Always).await;
        let mut c = Client::connect(&b.addr.to_string()).await;
        create(&mut c, "t", 1).await;
        produce_n(&mut c, 3, 1000).await;
        become_leader(&b, 2);
        produce_n(&mut c, 2, 2000).await;
        b.stop().await;
    }
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    // What librdkafka asks after a leader change: the epoch of the last
    // batch it consumed, with the epoch Metadata gave it as current.
    assert_eq!(
        epoch_end(&mut c, &[(0, 2), (1, -1), (2, 2), (3, -1)]).await,
        vec![(NONE, 0, 3), (NONE, 0, 3), (NONE, 2, 5), (NONE, -1, -1)]
    );
    let p = fetch(&mut c, 2).await;
    assert_eq!(p.error_code, NONE);
    assert_eq!(
        batch_epochs(&p.records.expect("records")),
        vec![(0, 0), (1, 0), (2, 0), (3, 2), (4, 2)]
    );
    b.stop().await;
}
