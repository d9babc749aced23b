//! Producer-state expiry (`producer.id.expiration.ms`).
//! 100,000 short-lived idempotent producers write to one partition; past
//! the expiration only the live producers keep state there, a batch from
//! an expired id is taken as from an unknown producer (any sequence, as
//! Kafka answers since KIP-360), and a restart shows the same view whether
//! the producer snapshot was written before or after the expiry.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::InProcess;
use support::records::create;

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

const EXPIRATION_MS: i64 = 60_000;
const SHORT_LIVED: usize = 100_000;

async fn broker(dir: &std::path::Path) -> InProcess {
    InProcess::start_with(dir, FsyncMode::Never, |c| {
        c.producer_id_expiration_ms = EXPIRATION_MS;
        // The timer stays out of the way: the test drives expiry.
        c.producer_id_expiration_check = Duration::from_secs(3600);
    })
    .await
}

fn producers(b: &InProcess) -> usize {
    b.broker
        .logs
        .partition("t", 0)
        .expect("partition")
        .producer_count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_short_lived_producers_expire_and_the_live_ones_stay() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = support::Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let p = b.broker.logs.partition("t", 0).expect("partition");
    let now = kaas::clock::now_ms();
    // Ids as InitProducerId hands them out (state under any other id is
    // dropped at start as forged).
    let mut ids = Vec::with_capacity(SHORT_LIVED + 3);
    for _ in 0..SHORT_LIVED + 3 {
        ids.push(b.broker.producer_ids.allocate().await.expect("an id"));
    }
    let live = ids.split_off(SHORT_LIVED);
    let short_lived = ids;
    // The short-lived ones last wrote two expirations ago; the live ones now.
    let old = now - 2 * EXPIRATION_MS;
    for &pid in &short_lived {
        let batch = data_batch(&[(None, b"x")], old, Some((pid, 0, 0)), false);
        p.append(batch).expect("append");
    }
    for &pid in &live {
        for seq in 0..3 {
            let batch = data_batch(&[(None, b"live")], now, Some((pid, 0, seq)), false);
            p.append(batch).expect("append");
        }
    }
    assert_eq!(producers(&b), SHORT_LIVED + live.len());

    // A restart before any expiry: the snapshot holds every producer, and
    // the broker expires them before it serves.
    drop(c);
    b.stop().await;
    let b = broker(dir.path()).await;
    assert_eq!(producers(&b), live.len(), "expired at start");
    // Operators see the same count on the metrics page.
    let page = kaas::exposition::render(&b.broker);
    assert!(
        page.lines()
            .any(|l| l == format!("kaas_producer_state_entries {}", live.len())),
        "kaas_producer_state_entries on the metrics page"
    );
    let p = b.broker.logs.partition("t", 0).expect("partition");

    // A batch from an expired id: no state, so any sequence is taken.
    let late = data_batch(
        &[(None, b"late")],
        now,
        Some((short_lived[17], 0, 42)),
        false,
    );
    p.append(late)
        .expect("an expired producer's batch is from an unknown producer");
    // The live ones keep their sequence checks: a gap is refused.
    let gap = data_batch(&[(None, b"gap")], now, Some((live[0], 0, 9)), false);
    assert!(
        p.append(gap).is_err(),
        "a live producer's gap is still out of order"
    );
    assert_eq!(producers(&b), live.len() + 1);

    // The clock moves past the expiration: only the ids that wrote since go.
    assert_eq!(
        b.broker
            .logs
            .expire_producers(now + EXPIRATION_MS, EXPIRATION_MS),
        live.len() + 1
    );
    assert_eq!(producers(&b), 0);
    let fresh = now + EXPIRATION_MS;
    let batch = data_batch(&[(None, b"again")], fresh, Some((live[1], 0, 3)), false);
    p.append(batch).expect("append");
    assert_eq!(producers(&b), 1);

    // A restart after the expiry shows the same view.
    b.stop().await;
    let b = broker(dir.path()).await;
    assert_eq!(producers(&b), 1, "the same view after a restart");
    b.stop().await;
}
