//! Incremental fetch sessions (KIP-227) over the wire: a full fetch opens a
//! session, incremental fetches name only what changed and are answered
//! with only the partitions that have something new, forgotten partitions
//! leave the session, wrong epochs and unknown sessions get Kafka's codes,
//! and epoch -1 closes a session.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::*;
use support::records::{create, name, produce};
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

fn part(p: i32, offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(p)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)
}

fn fetch(session: i32, epoch: i32, parts: Vec<FetchPartition>) -> FetchRequest {
    let topics = if parts.is_empty() {
        vec![]
    } else {
        vec![
            FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(parts),
        ]
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(session)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// (partition, high watermark, record bytes) of each partition answered.
fn answered(r: &FetchResponse) -> Vec<(i32, i64, usize)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.high_watermark,
                p.records.as_ref().map_or(0, |b| b.len()),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_incremental_fetch_answers_only_what_changed() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Never).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 3).await;
    let one = || data_batch(&[(None, b"v")], 1, None, false);
    produce(&mut c, "t", 0, one()).await;

    // A full fetch asking for a session: every partition answered.
    let full = c
        .call(&fetch(0, 0, (0..3).map(|p| part(p, 0)).collect()), 12)
        .await;
    assert_eq!(full.error_code, 0);
    assert_ne!(full.session_id, 0, "a session was opened");
    let id = full.session_id;
    assert_eq!(answered(&full).len(), 3);
    assert!(answered(&full)[0].2 > 0, "partition 0's record");

    // Nothing new: the client moves partition 0's offset on, and the
    // answer carries no partition at all.
    let r = c.call(&fetch(id, 1, vec![part(0, 1)]), 12).await;
    assert_eq!((r.error_code, r.session_id), (0, id));
    assert_eq!(answered(&r), vec![]);

    // A record on partition 2 only: only partition 2 comes back.
    produce(&mut c, "t", 2, one()).await;
    let r = c.call(&fetch(id, 2, vec![]), 12).await;
    let a = answered(&r);
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!((a[0].0, a[0].1), (2, 1));
    assert!(a[0].2 > 0);

    // Wrong epochs and unknown sessions.
    let r = c.call(&fetch(id, 2, vec![]), 12).await;
    assert_eq!(r.error_code, INVALID_FETCH_SESSION_EPOCH);
    let r = c.call(&fetch(id ^ 0x5a5a, 1, vec![]), 12).await;
    assert_eq!(r.error_code, FETCH_SESSION_ID_NOT_FOUND);

    // Partition 2 forgotten: a record there is no longer answered, one on
    // partition 1 is.
    let forget = fetch(id, 3, vec![]).with_forgotten_topics_data(vec![
        ForgottenTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![2]),
    ]);
    assert_eq!(c.call(&forget, 12).await.error_code, 0);
    produce(&mut c, "t", 2, one()).await;
    produce(&mut c, "t", 1, one()).await;
    let r = c.call(&fetch(id, 4, vec![]), 12).await;
    let a = answered(&r);
    assert_eq!(a.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1]);

    // Epoch -1 closes the session (a full fetch without one).
    let r = c.call(&fetch(id, -1, vec![part(0, 0)]), 12).await;
    assert_eq!((r.error_code, r.session_id), (0, 0));
    assert_eq!(answered(&r).len(), 1);
    let r = c.call(&fetch(id, 5, vec![]), 12).await;
    assert_eq!(r.error_code, FETCH_SESSION_ID_NOT_FOUND);
    assert!(b.broker.fetch_sessions.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn without_slots_no_session_is_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    let b =
        InProcess::start_with(dir.path(), FsyncMode::Never, |c| c.fetch_session_slots = 0).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let r = c.call(&fetch(0, 0, vec![part(0, 0)]), 12).await;
    assert_eq!((r.error_code, r.session_id), (0, 0), "full fetches go on");
    b.stop().await;
}
