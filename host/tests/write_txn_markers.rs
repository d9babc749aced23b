//! WriteTxnMarkers (API 27) over the wire: the
//! partition leader's side of a transaction's completion. The test plays
//! the coordinator of another broker: it opens a transaction through the
//! ordinary client APIs, then completes it with its own markers, and checks
//! what a read_committed consumer sees, the coordinator-epoch fence
//! (TRANSACTION_COORDINATOR_FENCED), the stale producer epoch, unknown
//! partitions, `__consumer_offsets` markers and the fence's survival of a
//! restart.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use support::txn::{add, create_topic, fetch_committed, init_settled, produce_txn, s};
use support::{Client, InProcess, Process};

use kaas::log::FsyncMode;

/// One marker of `pid`/`epoch` for `partitions` of `topic`.
fn marker(
    pid: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    topic: &str,
    partitions: Vec<i32>,
) -> WritableTxnMarker {
    WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_transaction_result(commit)
        .with_coordinator_epoch(coordinator_epoch)
        .with_topics(vec![
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partition_indexes(partitions),
        ])
}

/// WriteTxnMarkers v1 of `markers`: per marker, per partition (in request
/// order), (producer id, topic, partition, code).
async fn write_markers(
    c: &mut Client,
    markers: Vec<WritableTxnMarker>,
) -> Vec<(i64, String, i32, i16)> {
    let r = c
        .call(&WriteTxnMarkersRequest::default().with_markers(markers), 1)
        .await;
    let mut out = Vec::new();
    for m in &r.markers {
        for t in &m.topics {
            for p in &t.partitions {
                out.push((
                    m.producer_id.0,
                    t.name.0.to_string(),
                    p.partition_index,
                    p.error_code,
                ));
            }
        }
    }
    out
}

/// The codes of one marker's partitions.
async fn marker_codes(c: &mut Client, m: WritableTxnMarker) -> Vec<i16> {
    write_markers(c, vec![m])
        .await
        .into_iter()
        .map(|(_, _, _, code)| code)
        .collect()
}

/// A transactional producer with an open transaction on `topic`-0 holding
/// `values`: (producer id, epoch).
async fn open_txn(c: &mut Client, txn: &str, topic: &str, values: &[&str]) -> (i64, i16) {
    let (pid, epoch) = init_settled(c, txn).await;
    assert_eq!(add(c, txn, pid, epoch, topic, vec![0]).await, 0);
    assert_eq!(
        produce_txn(c, txn, topic, 0, pid, epoch, 0, values).await,
        0
    );
    (pid, epoch)
}

/// DescribeProducers of `topic`-0: (producer id, coordinator epoch) of each.
async fn coordinator_epochs(c: &mut Client, topic: &str) -> Vec<(i64, i32)> {
    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(vec![0]),
    ]);
    let r = c.call(&req, 0).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.active_producers
        .iter()
        .map(|a| (a.producer_id.0, a.coordinator_epoch))
        .collect()
}

#[tokio::test]
async fn a_commit_marker_from_the_wire_makes_the_open_transaction_readable_committed() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-c", "t", &["a", "b"]).await;
    let before = fetch_committed(&mut c, "t", 0).await;
    assert_eq!(before.lso, 0, "the open transaction pins the LSO");
    assert!(before.committed.is_empty());

    let got = write_markers(&mut c, vec![marker(pid, epoch, true, 0, "t", vec![0])]).await;
    assert_eq!(got, vec![(pid, "t".to_string(), 0, 0)]);

    // Durable when answered: the marker is readable at once.
    let after = fetch_committed(&mut c, "t", 0).await;
    assert_eq!(after.high_watermark, 3, "two records and the marker");
    assert_eq!(after.lso, 3, "the LSO moved past the marker");
    assert_eq!(after.committed, vec!["a", "b"]);
    assert!(after.aborted.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn an_abort_marker_from_the_wire_hides_the_open_transaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-a", "t", &["x"]).await;

    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, false, 0, "t", vec![0])).await,
        vec![0]
    );
    let after = fetch_committed(&mut c, "t", 0).await;
    assert_eq!(after.lso, 2);
    assert_eq!(after.values, vec!["x"], "the aborted record is returned");
    assert!(after.committed.is_empty(), "and dropped by read_committed");
    assert_eq!(after.aborted, vec![(pid, 0)]);
    b.stop().await;
}

#[tokio::test]
async fn a_marker_from_an_older_coordinator_epoch_is_refused_as_coordinator_fenced() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-f", "t", &["a"]).await;
    let part = b.broker.logs.partition("t", 0).expect("partition");

    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, true, 5, "t", vec![0])).await,
        vec![0]
    );
    let end = part.log_end_offset();
    assert_eq!(end, 2);
    assert_eq!(coordinator_epochs(&mut c, "t").await, vec![(pid, 5)]);

    // The zombie coordinator of epoch 4 completes it the other way: refused.
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, false, 4, "t", vec![0])).await,
        vec![52],
        "TRANSACTION_COORDINATOR_FENCED"
    );
    assert_eq!(part.log_end_offset(), end, "nothing appended");
    assert_eq!(coordinator_epochs(&mut c, "t").await, vec![(pid, 5)]);
    // The same coordinator epoch and a newer one are accepted.
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, true, 5, "t", vec![0])).await,
        vec![0]
    );
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, true, 6, "t", vec![0])).await,
        vec![0]
    );
    assert_eq!(part.log_end_offset(), end + 2);
    assert_eq!(fetch_committed(&mut c, "t", 0).await.committed, vec!["a"]);
    b.stop().await;
}

#[tokio::test]
async fn a_marker_with_a_stale_producer_epoch_is_refused_as_invalid_producer_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-s", "t", &["a"]).await;
    // The coordinator's ABORT at a bumped epoch (a rejoin) raises the
    // partition's epoch for the producer.
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch + 1, false, 0, "t", vec![0])).await,
        vec![0]
    );
    let part = b.broker.logs.partition("t", 0).expect("partition");
    let end = part.log_end_offset();

    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, true, 0, "t", vec![0])).await,
        vec![47],
        "INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(part.log_end_offset(), end, "nothing appended");
    let after = fetch_committed(&mut c, "t", 0).await;
    assert!(after.committed.is_empty(), "still aborted");
    assert_eq!(after.aborted, vec![(pid, 0)]);
    b.stop().await;
}

#[tokio::test]
async fn markers_for_partitions_this_broker_lacks_answer_unknown_topic_or_partition_per_partition()
{
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-u", "t", &["a"]).await;

    let got = write_markers(
        &mut c,
        vec![
            marker(pid, epoch, true, 0, "t", vec![0, 7, -1]),
            marker(pid + 1, 0, true, 0, "nowhere", vec![0]),
            marker(pid + 2, 0, false, 0, "__consumer_offsets", vec![50, -3]),
        ],
    )
    .await;
    assert_eq!(
        got,
        vec![
            (pid, "t".to_string(), 0, 0),
            (pid, "t".to_string(), 7, 3),
            (pid, "t".to_string(), -1, 3),
            (pid + 1, "nowhere".to_string(), 0, 3),
            (pid + 2, "__consumer_offsets".to_string(), 50, 3),
            (pid + 2, "__consumer_offsets".to_string(), -3, 3),
        ]
    );
    assert_eq!(fetch_committed(&mut c, "t", 0).await.committed, vec!["a"]);
    b.stop().await;
}

#[tokio::test]
async fn partitions_past_a_requests_budget_are_answered_invalid_request_without_work() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-b", "t", &["a"]).await;
    let part = b.broker.logs.partition("t", 0).expect("partition");
    let end = part.log_end_offset();
    // 10,000 partitions fill the budget; the marker for t-0 after them is
    // not written.
    let filler = marker(pid + 1, 0, true, 0, "nowhere", (0..10_000).collect());
    let got = write_markers(
        &mut c,
        vec![filler, marker(pid, epoch, true, 0, "t", vec![0])],
    )
    .await;
    assert_eq!(got.len(), 10_001, "every partition is answered");
    assert!(got[..10_000].iter().all(|(_, _, _, code)| *code == 3));
    assert_eq!(
        got[10_000],
        (pid, "t".to_string(), 0, 42),
        "INVALID_REQUEST"
    );
    assert_eq!(part.log_end_offset(), end, "nothing appended");
    b.stop().await;
}

const GROUP: &str = "copier";

/// OffsetFetch v7 (require_stable) of `in`-0: (offset, partition code).
async fn fetch_offset(c: &mut Client) -> (i64, i16) {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_require_stable(true)
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("in")))
                .with_partition_indexes(vec![0]),
        ]));
    let r = c.call(&req, 7).await;
    assert_eq!(r.error_code, 0);
    let p = &r.topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

#[tokio::test]
async fn a_consumer_offsets_marker_completes_the_pending_transactional_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "in", 1).await;
    let (pid, epoch) = init_settled(&mut c, "tx-o").await;
    let add_offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s("tx-o")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(s(GROUP)));
    assert_eq!(c.call(&add_offsets, 3).await.error_code, 0);
    let commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("tx-o")))
        .with_group_id(GroupId(s(GROUP)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s("in")))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(42)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    assert_eq!(
        c.call(&commit, 3).await.topics[0].partitions[0].error_code,
        0
    );
    assert_eq!(fetch_offset(&mut c).await, (-1, 88), "pending: unstable");

    let shard = kaas::group::offsets_topic::offsets_partition(GROUP);
    assert_eq!(
        marker_codes(
            &mut c,
            marker(pid, epoch, true, 0, "__consumer_offsets", vec![shard])
        )
        .await,
        vec![0]
    );
    // Durable and published when answered.
    assert_eq!(fetch_offset(&mut c).await, (42, 0));
    b.stop().await;
}

#[tokio::test]
async fn the_coordinator_epoch_survives_a_clean_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-r", "t", &["a"]).await;
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, true, 5, "t", vec![0])).await,
        vec![0]
    );
    drop(c);
    b.stop().await;

    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(coordinator_epochs(&mut c, "t").await, vec![(pid, 5)]);
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, false, 4, "t", vec![0])).await,
        vec![52]
    );
    b.stop().await;
}

#[tokio::test]
async fn the_coordinator_epoch_is_rebuilt_from_the_log_after_a_kill() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    create_topic(&mut c, "t", 1).await;
    let (pid, epoch) = open_txn(&mut c, "tx-k", "t", &["a"]).await;
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, true, 5, "t", vec![0])).await,
        vec![0]
    );
    drop(c);
    // No clean close: no snapshot at the log end; the producer state comes
    // back from the control batch itself.
    broker.kill9();

    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    assert_eq!(coordinator_epochs(&mut c, "t").await, vec![(pid, 5)]);
    assert_eq!(
        marker_codes(&mut c, marker(pid, epoch, false, 4, "t", vec![0])).await,
        vec![52]
    );
    assert_eq!(fetch_committed(&mut c, "t", 0).await.committed, vec!["a"]);
    broker.terminate();
}
