//! Transactions over the wire with exact request bytes: commit and abort as
//! read_committed consumers see them (spec §3.5, PS-14/15), KIP-890
//! verification (PS-11), and the seed's rejoin contract with its fence.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use support::txn::{Fetched, add, create_topic, end, fetch_committed, init, produce_txn};
use support::{Client, InProcess};

use kaas::log::FsyncMode;

/// Polls until the partition's last stable offset reaches `lso` (markers
/// are written after EndTxn answers).
async fn wait_lso(c: &mut Client, partition: i32, lso: i64) -> Fetched {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let f = fetch_committed(c, "t", partition).await;
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
    create_topic(&mut c, "t", 2).await;
    let (e, pid, epoch) = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!((e, epoch), (0, 0));
    assert_eq!(add(&mut c, "tx", pid, epoch, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, pid, epoch, 0, &["a", "b"]).await,
        0
    );
    let open = fetch_committed(&mut c, "t", 0).await;
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

    assert_eq!(add(&mut c, "tx", pid, epoch, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, pid, epoch, 2, &["c"]).await,
        0
    );
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
    create_topic(&mut c, "t", 2).await;
    let (_, pid, epoch) = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!(add(&mut c, "tx", pid, epoch, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 1, pid, epoch, 0, &["x"]).await,
        48,
        "PS-11"
    );
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, pid, epoch, 0, &["y"]).await,
        0
    );
    b.stop().await;
}

#[tokio::test]
async fn rejoin_mid_ongoing_aborts_it_and_answers_concurrent() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let addr = b.addr.to_string();
    let mut c = Client::connect(&addr).await;
    create_topic(&mut c, "t", 2).await;
    let (_, pid, epoch) = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!(add(&mut c, "tx", pid, epoch, "t", vec![0]).await, 0);
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, pid, epoch, 0, &["zombie-data"]).await,
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
    // The ABORT marker is appended before the entry completes; it becomes
    // stable once its flush (which rides on the next one) is done.
    let f = wait_lso(&mut c, 0, 2).await;
    assert_eq!(
        f.aborted,
        vec![(pid, 0)],
        "the old transaction was aborted with markers; a consumer drops pid's data from offset 0"
    );
    // The zombie (epoch 0) is fenced everywhere.
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, pid, 0, 1, &["late"]).await,
        47
    );
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 1, pid, 0, 0, &["late"]).await,
        47
    );
    assert_eq!(end(&mut c, "tx", pid, 0, true).await, 90);
    b.stop().await;
}
