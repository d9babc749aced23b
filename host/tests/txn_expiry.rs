//! transactional.id expiry (spec §2.7, TR-06, IT-18): an id with no
//! transaction and no change for transactional.id.expiration.ms is
//! tombstoned and removed, durably; an Ongoing one is kept; an old claim
//! on an expired id gets a new producer id at epoch 0.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use support::txn::{add, create_topic, init, s};
use support::{Client, InProcess};

use kaas::log::FsyncMode;

const EXPIRATION_MS: i64 = 300;
const NOT_FOUND: i16 = 105;

async fn start(dir: &std::path::Path) -> InProcess {
    InProcess::start_with(dir, FsyncMode::Always, |c| {
        c.transactional_id_expiration_ms = EXPIRATION_MS;
    })
    .await
}

/// DescribeTransactions of one id: (error code, state).
async fn describe(c: &mut Client, txn: &str) -> (i16, String) {
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(s(txn))]);
    let r = c.call(&req, 0).await;
    let t = &r.transaction_states[0];
    (t.error_code, t.transaction_state.to_string())
}

async fn await_expired(c: &mut Client, txn: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while describe(c, txn).await.0 != NOT_FOUND {
        assert!(Instant::now() < deadline, "{txn} never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn idle_ids_expire_durably_ongoing_ones_stay_and_an_old_claim_gets_a_new_pid() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path()).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create_topic(&mut c, "t", 1).await;

    let (code, pid, epoch) = init(&mut c, "idle", (-1, -1)).await;
    assert_eq!((code, epoch), (0, 0));
    let (code, busy_pid, busy_epoch) = init(&mut c, "busy", (-1, -1)).await;
    assert_eq!(code, 0);
    assert_eq!(
        add(&mut c, "busy", busy_pid, busy_epoch, "t", vec![0]).await,
        0
    );

    // TR-06: the idle id goes; the Ongoing one, far from its timeout, stays.
    await_expired(&mut c, "idle").await;
    assert_eq!(describe(&mut c, "busy").await, (0, "Ongoing".to_string()));
    b.stop().await;

    // The tombstone is durable: still gone after a restart.
    let b = start(dir.path()).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(describe(&mut c, "idle").await.0, NOT_FOUND);
    assert_eq!(describe(&mut c, "busy").await.0, 0);

    // IT-18: the old producer's claim on the expired id gets a fresh pid.
    let (code, new_pid, new_epoch) = init(&mut c, "idle", (pid, epoch)).await;
    assert_eq!(code, 0);
    assert_ne!(new_pid, pid);
    assert_eq!(new_epoch, 0);
    b.stop().await;
}
