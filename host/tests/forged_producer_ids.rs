//! Forged producer ids: a batch under a producer id this broker never handed
//! out is refused, so no client can poison the sequence state of the
//! producer that will later get that id; a freshly handed-out id starts
//! with no state on any partition, across restarts too.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::records::{create, fetch_values, idempotent_pid, produce};
use support::txn::produce_txn;
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

const UNKNOWN_PRODUCER_ID: i16 = 59;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;

#[tokio::test]
async fn a_forged_producer_id_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut attacker = Client::connect(&b.addr.to_string()).await;
    create(&mut attacker, "t", 1).await;
    let mine = idempotent_pid(&mut attacker).await;
    // The ids InitProducerId will hand out next.
    for forged in mine + 1..mine + 4 {
        let batch = data_batch(&[(None, b"forged")], 1, Some((forged, 0, 0)), false);
        assert_eq!(
            produce(&mut attacker, "t", 0, batch).await.0,
            UNKNOWN_PRODUCER_ID,
            "an idempotent batch under {forged}, not handed out yet"
        );
        assert_eq!(
            produce_txn(&mut attacker, "x", "t", 0, forged, 0, 0, &["forged"]).await,
            INVALID_PRODUCER_ID_MAPPING,
            "a transactional batch under {forged}"
        );
    }
    assert!(
        fetch_values(&mut attacker, "t", 0, 0).await.is_empty(),
        "nothing forged was stored"
    );

    // The producer that gets the next id: its first batch is stored, not
    // answered as a duplicate of the forged one.
    let mut victim = Client::connect(&b.addr.to_string()).await;
    let pid = idempotent_pid(&mut victim).await;
    assert_eq!(pid, mine + 1, "the id the attacker forged");
    let first = data_batch(&[(None, b"real")], 1, Some((pid, 0, 0)), false);
    assert_eq!(produce(&mut victim, "t", 0, first).await, (0, 0));
    let stored = fetch_values(&mut victim, "t", 0, 0).await;
    assert_eq!(stored, vec![(0, b"real".to_vec())]);
    // Its own id keeps working for the attacker too.
    let own = data_batch(&[(None, b"own")], 1, Some((mine, 0, 0)), false);
    assert_eq!(produce(&mut attacker, "t", 0, own).await, (0, 1));
    b.stop().await;
}

#[tokio::test]
async fn state_under_an_id_never_handed_out_is_dropped_at_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 2).await;
    let mine = idempotent_pid(&mut c).await;
    // As a broker before the fix accepted it: written straight into the
    // partitions, past the wire's check, under the first id the broker will
    // hand out after a restart (the start of the next block).
    let forged = mine + kaas::pid::BLOCK;
    for p in 0..2 {
        let part = b.broker.logs.partition("t", p).expect("partition");
        let a = part
            .append(data_batch(
                &[(None, b"forged")],
                1,
                Some((forged, 0, 0)),
                false,
            ))
            .expect("append");
        let file = a.file.expect("a file to sync");
        b.broker.logs.group_commit().sync(file).await.expect("sync");
        part.advance_high_watermark(a.end_offset);
    }
    b.stop().await;

    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    // The state the forged batches left is gone from every partition.
    for p in 0..2 {
        let part = b.broker.logs.partition("t", p).expect("partition");
        assert!(
            part.producers().iter().all(|(id, _)| *id != forged),
            "partition {p} still holds state under the forged id {forged}"
        );
    }
    let pid = idempotent_pid(&mut c).await;
    assert_eq!(pid, forged, "the restarted broker hands out the forged id");
    let first = data_batch(&[(None, b"real")], 1, Some((pid, 0, 0)), false);
    assert_eq!(produce(&mut c, "t", 0, first).await, (0, 1));
    b.stop().await;
}
