//! Transactional offsets over the wire (spec §2.3, AO-01..AO-04): a
//! TxnOffsetCommit needs AddOffsetsToTxn first, checks the member fields,
//! stays invisible until the COMMIT marker, is dropped on ABORT, survives a
//! broker restart while pending, and makes OffsetFetch with require_stable
//! answer UNSTABLE_OFFSET_COMMIT meanwhile.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use support::txn::{create_topic, end, init_settled, s};
use support::{Client, InProcess};

use kaas::log::FsyncMode;

const GROUP: &str = "copier";

async fn add_offsets(c: &mut Client, txn: &str, pid: i64, epoch: i16) -> i16 {
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(txn)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(s(GROUP)));
    c.call(&req, 3).await.error_code
}

/// TxnOffsetCommit v3 of `in`-`partition` at `offset`: the partition's code.
async fn txn_commit(
    c: &mut Client,
    txn: &str,
    pid: i64,
    epoch: i16,
    generation: i32,
    partition: i32,
    offset: i64,
) -> i16 {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(txn)))
        .with_group_id(GroupId(s(GROUP)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(generation)
        .with_member_id(s(""))
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s("in")))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(Some(s("tx"))),
                ]),
        ]);
    let r = c.call(&req, 3).await;
    r.topics[0].partitions[0].error_code
}

/// OffsetFetch v7 of `in`-`partition`: (committed offset, partition code).
async fn fetch_offset(c: &mut Client, partition: i32, require_stable: bool) -> (i64, i16) {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_require_stable(require_stable)
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("in")))
                .with_partition_indexes(vec![partition]),
        ]));
    let r = c.call(&req, 7).await;
    assert_eq!(r.error_code, 0);
    let p = &r.topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

/// Polls until OffsetFetch shows `want` (markers follow EndTxn's reply).
async fn await_offset(c: &mut Client, partition: i32, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (offset, code) = fetch_offset(c, partition, true).await;
        if offset == want && code == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "offset stayed {offset} (code {code}) instead of reaching {want}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn txn_offsets_need_add_offsets_and_become_visible_only_on_commit() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "in", 2).await;
    let (pid, epoch) = init_settled(&mut c, "tx-a").await;

    // AO-02: no AddOffsetsToTxn yet.
    assert_eq!(txn_commit(&mut c, "tx-a", pid, epoch, -1, 0, 5).await, 48);
    // AO-01.
    assert_eq!(add_offsets(&mut c, "tx-a", pid, epoch).await, 0);
    // A stale epoch is fenced as INVALID_PRODUCER_EPOCH (spec §2.3 step 3).
    assert_eq!(
        txn_commit(&mut c, "tx-a", pid, epoch - 1, -1, 0, 5).await,
        47
    );
    // AO-03: a generation with no member id, to a group without members:
    // Kafka 3.7 looks for the member first, UNKNOWN_MEMBER_ID (the wire
    // kit's AO-03 against 3.7.2; 4.x answers ILLEGAL_GENERATION).
    assert_eq!(txn_commit(&mut c, "tx-a", pid, epoch, 7, 0, 5).await, 25);
    assert_eq!(txn_commit(&mut c, "tx-a", pid, epoch, -1, 0, 5).await, 0);

    // Pending: invisible, and unstable for a client that asks.
    assert_eq!(fetch_offset(&mut c, 0, false).await, (-1, 0));
    assert_eq!(fetch_offset(&mut c, 0, true).await, (-1, 88));
    assert_eq!(fetch_offset(&mut c, 1, true).await, (-1, 0));

    // AO-04: visible once the COMMIT marker reaches the offsets partition.
    assert_eq!(end(&mut c, "tx-a", pid, epoch, true).await, 0);
    await_offset(&mut c, 0, 5).await;
    b.stop().await;
}

#[tokio::test]
async fn aborted_txn_offsets_are_dropped_and_the_committed_one_stays() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "in", 2).await;
    let (pid, epoch) = init_settled(&mut c, "tx-b").await;
    assert_eq!(add_offsets(&mut c, "tx-b", pid, epoch).await, 0);
    assert_eq!(txn_commit(&mut c, "tx-b", pid, epoch, -1, 1, 10).await, 0);
    assert_eq!(end(&mut c, "tx-b", pid, epoch, true).await, 0);
    await_offset(&mut c, 1, 10).await;

    assert_eq!(add_offsets(&mut c, "tx-b", pid, epoch).await, 0);
    assert_eq!(txn_commit(&mut c, "tx-b", pid, epoch, -1, 1, 20).await, 0);
    assert_eq!(fetch_offset(&mut c, 1, true).await.1, 88);
    assert_eq!(end(&mut c, "tx-b", pid, epoch, false).await, 0);
    // The abort completes (stable again) and leaves the earlier commit.
    await_offset(&mut c, 1, 10).await;
    b.stop().await;
}

#[tokio::test]
async fn pending_txn_offsets_survive_a_restart_and_commit_after_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let (pid, epoch) = {
        let b = InProcess::start(dir.path(), FsyncMode::Always).await;
        let mut c = Client::connect(&b.addr.to_string()).await;
        create_topic(&mut c, "in", 2).await;
        let (pid, epoch) = init_settled(&mut c, "tx-c").await;
        assert_eq!(add_offsets(&mut c, "tx-c", pid, epoch).await, 0);
        assert_eq!(txn_commit(&mut c, "tx-c", pid, epoch, -1, 0, 42).await, 0);
        b.stop().await;
        (pid, epoch)
    };
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(fetch_offset(&mut c, 0, true).await, (-1, 88));
    assert_eq!(end(&mut c, "tx-c", pid, epoch, true).await, 0);
    await_offset(&mut c, 0, 42).await;
    b.stop().await;

    // And the committed offset is in the journal, not only in memory.
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(fetch_offset(&mut c, 0, true).await, (42, 0));
    b.stop().await;
}

#[tokio::test]
async fn a_rejoin_mid_transaction_drops_its_pending_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "in", 2).await;
    let (pid, epoch) = init_settled(&mut c, "tx-d").await;
    assert_eq!(add_offsets(&mut c, "tx-d", pid, epoch).await, 0);
    assert_eq!(txn_commit(&mut c, "tx-d", pid, epoch, -1, 0, 7).await, 0);
    // A new session of the same transactional.id fences and aborts it.
    let (pid2, epoch2) = init_settled(&mut c, "tx-d").await;
    assert_eq!(pid2, pid);
    assert!(epoch2 > epoch);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (offset, code) = fetch_offset(&mut c, 0, true).await;
        if code == 0 {
            assert_eq!(offset, -1, "the aborted offset must never show");
            break;
        }
        assert!(Instant::now() < deadline, "the abort never completed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The zombie session can no longer commit offsets.
    assert_eq!(txn_commit(&mut c, "tx-d", pid, epoch, -1, 0, 8).await, 47);
    b.stop().await;
}
