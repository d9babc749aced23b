//! Idle markers: a committed transaction's COMMIT marker becomes visible
//! (the high watermark and the last stable offset move past it) soon after
//! EndTxn, even when nothing else is written to the broker afterwards and
//! the disk's recent flushes were slow.
//!
//! The marker's flush rides along with the next round of its file
//! (`GroupCommit::sync_lazily`) and flushes by itself only after a patience
//! derived from recent flush times. With no bound on that patience, one
//! slow fdatasync (a throttled virtual disk: 24 s) kept an idle broker's
//! marker invisible for ten seconds and more, until some other client
//! produced.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use support::txn::{add, create_topic, end, init, produce_txn, s};
use support::{Client, InProcess};

use kaas::log::FsyncMode;

/// ListOffsets v7 latest (-1) of `t`-`partition`: the LSO under
/// read_committed, the high watermark under read_uncommitted.
async fn latest(c: &mut Client, partition: i32, read_committed: bool) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(i8::from(read_committed))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(-1),
                ]),
        ]);
    let r = c.call(&req, 7).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// Waits until both offsets of `t`-0 reach `want`, at most `within`.
async fn assert_visible_within(c: &mut Client, want: i64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let (hw, lso) = (latest(c, 0, false).await, latest(c, 0, true).await);
        if hw == want && lso == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the COMMIT marker stayed invisible on an idle broker for {within:?}: \
             high watermark {hw}, LSO {lso} (want {want})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Topic `t` (2 partitions); `tid`'s transaction (P, 0) holds records a, b
/// at offsets 0-1 of `t`-0. Returns P.
async fn open_txn_of_two_records(c: &mut Client) -> i64 {
    create_topic(c, "t", 2).await;
    let (code, pid, epoch) = init(c, "tid", (-1, -1)).await;
    assert_eq!((code, epoch), (0, 0));
    assert_eq!(add(c, "tid", pid, 0, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(c, "tid", "t", 0, pid, 0, 0, &["a", "b"]).await,
        0
    );
    pid
}

#[tokio::test]
async fn a_commit_marker_becomes_visible_on_an_idle_broker_after_slow_flushes() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let pid = open_txn_of_two_records(&mut c).await;
    // As after one 24 s fdatasync of the write-ahead log (the moving
    // average gives each flush an eighth): the last flushes averaged 3 s.
    b.broker
        .logs
        .group_commit()
        .stats()
        .recent_sync_nanos
        .store(3_000_000_000, Ordering::Relaxed);
    assert_eq!(end(&mut c, "tid", pid, 0, true).await, 0);
    // a, b (0-1), COMMIT (2). Nothing else is written: the marker's own
    // flush must come within a bounded patience, not 4 x 3 s.
    assert_visible_within(&mut c, 3, Duration::from_secs(2)).await;
    b.stop().await;
}

/// The exact sequence (a fenced transaction aborted by a second
/// InitProducerId, then a committed one), on a normal disk.
#[tokio::test]
async fn a_commit_marker_after_a_fenced_transaction_becomes_visible_on_an_idle_broker() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let pid = open_txn_of_two_records(&mut c).await;
    assert_eq!(
        produce_txn(&mut c, "tid", "t", 1, pid, 0, 0, &["x"]).await,
        48,
        "INVALID_TXN_STATE: p1 was never added"
    );
    let (code, _, _) = init(&mut c, "tid", (-1, -1)).await;
    assert_eq!(code, 51, "CONCURRENT_TRANSACTIONS while the abort runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    let new_epoch = loop {
        let (code, p, e) = init(&mut c, "tid", (-1, -1)).await;
        if code == 0 {
            assert_eq!(p, pid);
            break e;
        }
        assert_eq!(code, 51);
        assert!(Instant::now() < deadline, "InitProducerId never settled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(new_epoch, 2);
    assert_eq!(
        produce_txn(&mut c, "tid", "t", 0, pid, 0, 2, &["z"]).await,
        47,
        "INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(
        end(&mut c, "tid", pid, 0, true).await,
        90,
        "PRODUCER_FENCED"
    );
    assert_eq!(add(&mut c, "tid", pid, 2, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tid", "t", 0, pid, 2, 0, &["c", "d"]).await,
        0
    );
    assert_eq!(end(&mut c, "tid", pid, 2, true).await, 0);
    // a, b (0-1), ABORT (2), c, d (3-4), COMMIT (5).
    assert_visible_within(&mut c, 6, Duration::from_secs(2)).await;
    b.stop().await;
}
