//! Crash tests of the transaction coordinator with a real restart of the
//! broker process (spec §4.5, IX-08, IX-09).
//!
//! The story (KAFKA-20357): a coordinator persists a rotation (or a bump),
//! dies before the producer hears back, and after failover the retry is
//! fenced because the persisted record lacked the previous producer id and
//! last epoch. Here the broker aborts at a fault point compiled only into
//! test builds (`--features fault-injection`), right after the state
//! record is durable and before the reply; the restarted broker must give
//! the retry the identity the lost reply carried, without a new pid.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "fault-injection")]

mod support;

use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use support::txn::{
    add, create_topic, end_request, fetch_committed, init, init_request, produce_txn,
};
use support::{Client, Process};

use kaas::policy::{Entry, TxnState};
use kaas::txn::record::StateRecord;
use kaas::txn::store::TxnStore;

/// Seeds an entry through the real store, as a previous run would have left it.
async fn seed(dir: &std::path::Path, state: TxnState, pid: i64, epoch: i16, last_epoch: i16) {
    let (store, _) = TxnStore::open(dir).expect("store");
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
        start_timestamp_ms: kaas::clock::now_ms(),
        last_update_timestamp_ms: kaas::clock::now_ms(),
        next_producer_id: -1,
        client_transaction_version: 0,
        has_failed_epoch_fence: false,
    };
    store
        .append(&StateRecord::upsert(&entry, Some("seed")))
        .await
        .expect("seed append");
}

async fn stored(dir: &std::path::Path) -> Entry {
    let (_, live) = TxnStore::open(dir).expect("store");
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
        &init_request("T", (1000, 32766)),
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
    let r = c.call(&init_request("T", (1000, 32766)), 4).await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, rotated.producer_id, 0),
        "IX-08"
    );
    let again = c.call(&init_request("T", (1000, 32766)), 4).await;
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
    crash_during(
        dir.path(),
        "after-append-bump",
        &init_request("T", (1000, 5)),
    )
    .await;
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    let r = c.call(&init_request("T", (1000, 5)), 4).await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, 1000, 6),
        "IX-09"
    );
    broker.terminate();
}

async fn txn_setup(c: &mut Client, partitions: Vec<i32>) -> (i64, i16) {
    create_topic(c, "t", 2).await;
    let (code, pid, epoch) = init(c, "T", (-1, -1)).await;
    assert_eq!(code, 0);
    assert_eq!(add(c, "T", pid, epoch, "t", partitions.clone()).await, 0);
    for p in partitions {
        let value = format!("txn-{p}");
        assert_eq!(
            produce_txn(c, "T", "t", p, pid, epoch, 0, &[&value]).await,
            0
        );
    }
    (pid, epoch)
}

/// Restarts the broker on `dir` and checks that the transaction of
/// [`txn_setup`] on partitions 0 and 1 is committed, each record once.
async fn committed_once_after_restart(dir: &std::path::Path) {
    let broker = Process::spawn(dir, &[]);
    let mut c = Client::connect(&broker.addr).await;
    assert_eq!(committed_values(&mut c, 0).await, vec!["txn-0"]);
    assert_eq!(committed_values(&mut c, 1).await, vec!["txn-1"]);
    broker.terminate();
}

/// Reads partition `p` read_committed until its LSO reaches the HW, and
/// returns the values a read_committed consumer keeps.
async fn committed_values(c: &mut Client, p: i32) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let f = fetch_committed(c, "t", p).await;
        if f.lso == f.high_watermark {
            return f.committed;
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
    let end = end_request("T", pid, epoch, true);
    let (_, frame) = c.frame(&end, 3);
    c.send_raw(&frame).await;
    assert!(c.read_frame().await.is_none());
    assert!(!broker.wait_crash().success());
    committed_once_after_restart(dir.path()).await;
}

#[tokio::test]
async fn a_crash_with_markers_half_written_finishes_them_on_restart_exactly_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn_env(dir.path(), &[], &[("KAAS_FAULT", "markers-half-written")]);
    let mut c = Client::connect(&broker.addr).await;
    let (pid, epoch) = txn_setup(&mut c, vec![0, 1]).await;
    let end = end_request("T", pid, epoch, true);
    let _ = c.call(&end, 3).await; // answered once PrepareCommit is durable; markers follow
    assert!(!broker.wait_crash().success());
    committed_once_after_restart(dir.path()).await;
}

#[tokio::test]
async fn a_crash_while_ongoing_leaves_data_aborted_by_the_reaper_after_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&broker.addr).await;
    create_topic(&mut c, "t", 2).await;
    // A 1 s transaction timeout so the reaper acts quickly after the restart.
    let r = c
        .call(
            &init_request("T", (-1, -1)).with_transaction_timeout_ms(1000),
            4,
        )
        .await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add(&mut c, "T", pid, epoch, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "T", "t", 0, pid, epoch, 0, &["never"]).await,
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

/// Cuts the last batch off a segment file (and the zero-filled tail after
/// it), as a power cut would lose a write that was never fdatasynced.
/// Returns the cut batch's attributes.
fn drop_last_batch(segment: &std::path::Path) -> i16 {
    let &(last, attributes) = batches(segment).last().expect("the segment holds a batch");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(segment)
        .expect("open segment");
    f.set_len(last as u64).expect("truncate");
    attributes
}

/// Each batch of a segment file: its position and attributes.
fn batches(segment: &std::path::Path) -> Vec<(usize, i16)> {
    let bytes = std::fs::read(segment).expect("read segment");
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 61 <= bytes.len() {
        let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        if len <= 0 {
            break; // the zero-filled tail
        }
        let attributes = i16::from_be_bytes(bytes[at + 21..at + 23].try_into().expect("2 bytes"));
        out.push((at, attributes));
        at += 12 + len as usize;
    }
    out
}

/// Commits a transaction over partitions 0 and 1, waits until its markers
/// are durable (so the completion is written), kills the broker and cuts
/// the COMMIT marker off partition 1's segment; returns that segment.
async fn commit_then_cut_the_marker(dir: &std::path::Path) -> std::path::PathBuf {
    let broker = Process::spawn(dir, &[]);
    let mut c = Client::connect(&broker.addr).await;
    let (pid, epoch) = txn_setup(&mut c, vec![0, 1]).await;
    assert_eq!(
        c.call(&end_request("T", pid, epoch, true), 3)
            .await
            .error_code,
        0
    );
    assert_eq!(committed_values(&mut c, 1).await, vec!["txn-1"]);
    broker.kill9();
    let segment = dir.join("t-1").join(format!("{:020}.log", 0));
    let attributes = drop_last_batch(&segment);
    assert_ne!(attributes & 0x20, 0, "the cut batch is the COMMIT marker");
    segment
}

/// Markers off the critical path: the completion is recorded while the
/// markers' fdatasync runs, naming each marker's offset. A power cut that
/// loses a marker (simulated: the broker is killed after the commit, then
/// the marker is cut off its segment, and the write-ahead log's copy with
/// it) must not leave the transaction open in that partition: the marker is
/// appended again at load.
#[tokio::test]
async fn a_marker_lost_in_a_power_cut_is_appended_again_at_load() {
    let dir = tempfile::tempdir().expect("tmp");
    commit_then_cut_the_marker(dir.path()).await;
    // A power cut loses the marker's frame too (a kill leaves every other
    // batch in the segments, so nothing else is lost with the files).
    std::fs::remove_dir_all(dir.path().join("__wal")).expect("remove the write-ahead log");
    committed_once_after_restart(dir.path()).await;
}

/// The write-ahead log's half of a power cut: the marker is cut off its
/// segment but its frame survives, so the partition takes it back at load.
#[tokio::test]
async fn a_marker_cut_off_its_segment_comes_back_from_the_write_ahead_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let segment = commit_then_cut_the_marker(dir.path()).await;
    committed_once_after_restart(dir.path()).await;
    let markers = batches(&segment)
        .iter()
        .filter(|(_, attributes)| attributes & 0x20 != 0)
        .count();
    assert_eq!(
        markers, 1,
        "one COMMIT marker, taken back from the log, none appended twice"
    );
}
