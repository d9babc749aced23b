//! The cross-broker fence ring's outbound side. Every
//! producer-epoch bump the transaction coordinator makes is appended to
//! this broker's fence file on the shared volume, for the peers to poll;
//! a new producer (epoch 0) has nothing to fence and is not written.
//!
//! Single-node mode writes no fence file unless `BrokerConfig::fence_log`
//! asks for it (these tests do, to see the file without a cluster).

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kaas::cluster::fence_log::{FENCE_DIR, read_file};
use kaas::log::FsyncMode;
use support::txn::init_settled;
use support::{Client, InProcess};

#[tokio::test]
async fn rejoin_appends_to_fence_log_for_broadcast() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |cfg| cfg.fence_log = true).await;
    let log = b
        .broker
        .fences
        .outbound()
        .expect("fence_log turns the outbound file on");
    let mut c = Client::connect(&b.addr.to_string()).await;

    let (pid, epoch) = init_settled(&mut c, "tid").await;
    assert_eq!(epoch, 0);
    log.flush().await.expect("flushed");
    assert_eq!(
        read_file(log.path()).expect("readable").get(&pid),
        None,
        "epoch 0 does not broadcast"
    );

    for want in 1..=3 {
        let (p, e) = init_settled(&mut c, "tid").await;
        assert_eq!((p, e), (pid, want), "a rejoin bumps the epoch");
        log.flush().await.expect("flushed");
        let on_disk = read_file(log.path()).expect("readable");
        assert_eq!(
            on_disk.get(&pid).map(|f| f.epoch),
            Some(want),
            "the bump overwrites the outbound entry"
        );
        assert_eq!(on_disk.len(), 1, "one entry per producer id");
    }
    b.stop().await;
}

#[tokio::test]
async fn single_node_mode_writes_no_fence_file_by_default() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    assert!(b.broker.fences.outbound().is_none());
    let mut c = Client::connect(&b.addr.to_string()).await;
    init_settled(&mut c, "tid").await;
    let (_, epoch) = init_settled(&mut c, "tid").await;
    assert_eq!(epoch, 1);
    assert!(!dir.path().join(FENCE_DIR).exists());
    b.stop().await;
}
