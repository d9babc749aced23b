//! CreatePartitions (API 37) in single-node mode, over the wire: a topic
//! grows, its new partitions take records, show in Metadata and survive a
//! restart; a count that does not grow, an unknown topic and validate_only
//! are answered without changing anything; ApiVersions advertises v0-3.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use support::records::{create, fetch_values, name, produce};
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_PARTITIONS: i16 = 37;

/// CreatePartitions of one topic at `version`: (error code, error message).
async fn grow(
    c: &mut Client,
    topic: &str,
    count: i32,
    validate_only: bool,
    version: i16,
) -> (i16, Option<String>) {
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(count)
                // None (or an empty list): kaas places them.
                .with_assignments(None),
        ])
        .with_timeout_ms(5000)
        .with_validate_only(validate_only);
    let resp = c.call(&req, version).await;
    assert_eq!(resp.results.len(), 1, "one result per topic asked");
    let r = &resp.results[0];
    assert_eq!(r.name.0.as_str(), topic);
    (
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// Metadata v12 of one topic, without auto-creation: (topic error code,
/// (partition index, error code, leader id) sorted by index).
async fn partitions_of(c: &mut Client, topic: &str) -> (i16, Vec<(i32, i16, i32)>) {
    let resp = c
        .call(
            &MetadataRequest::default()
                .with_allow_auto_topic_creation(false)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name(topic))),
                ])),
            12,
        )
        .await;
    let t = resp
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
        .expect("the topic asked for is in the answer");
    let mut ps: Vec<_> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.leader_id.0))
        .collect();
    ps.sort_unstable();
    (t.error_code, ps)
}

fn record(v: &str) -> Vec<u8> {
    data_batch(&[(None, v.as_bytes())], 1_700_000_000_000, None, false)
}

#[tokio::test]
async fn create_partitions_grows_a_topic_whose_new_partitions_take_records_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 2).await;
    assert_eq!(produce(&mut c, "t", 0, record("old-0")).await, (NONE, 0));

    // v1 is the last non-flexible version, v3 the newest.
    assert_eq!(grow(&mut c, "t", 4, false, 1).await, (NONE, None));
    assert_eq!(grow(&mut c, "t", 5, false, 3).await, (NONE, None));

    let (err, ps) = partitions_of(&mut c, "t").await;
    assert_eq!(err, NONE);
    assert_eq!(
        ps.iter().map(|&(i, e, _)| (i, e)).collect::<Vec<_>>(),
        (0..5).map(|i| (i, NONE)).collect::<Vec<_>>(),
        "Metadata lists the five partitions without errors"
    );
    for p in 2..5 {
        let v = format!("new-{p}");
        assert_eq!(
            produce(&mut c, "t", p, record(&v)).await,
            (NONE, 0),
            "partition {p} takes records from offset 0"
        );
    }
    assert_eq!(
        fetch_values(&mut c, "t", 0, 0).await,
        vec![(0, b"old-0".to_vec())],
        "the old partition kept its data"
    );

    drop(c);
    b.stop().await;
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let (err, ps) = partitions_of(&mut c, "t").await;
    assert_eq!(
        (err, ps.len()),
        (NONE, 5),
        "five partitions after the restart"
    );
    for p in 2..5 {
        assert_eq!(
            fetch_values(&mut c, "t", p, 0).await,
            vec![(0, format!("new-{p}").into_bytes())],
            "partition {p}'s record survived the restart"
        );
    }
    assert_eq!(
        produce(&mut c, "t", 4, record("after")).await,
        (NONE, 1),
        "a grown partition takes records after the restart"
    );
    b.stop().await;
}

#[tokio::test]
async fn create_partitions_to_a_count_that_does_not_grow_answers_invalid_partitions() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 3).await;
    for (count, version) in [(3, 0), (2, 3), (1, 1), (0, 2), (-1, 3)] {
        let (code, msg) = grow(&mut c, "t", count, false, version).await;
        assert_eq!(
            code, INVALID_PARTITIONS,
            "count {count} (v{version}) answers INVALID_PARTITIONS: {msg:?}"
        );
        assert!(msg.is_some(), "the refusal says why");
    }
    let (err, ps) = partitions_of(&mut c, "t").await;
    assert_eq!(
        (err, ps.len()),
        (NONE, 3),
        "the topic still has 3 partitions"
    );
    b.stop().await;
}

#[tokio::test]
async fn create_partitions_for_an_unknown_topic_answers_unknown_topic_or_partition() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    for version in 0..=3 {
        let (code, _) = grow(&mut c, "nope", 4, false, version).await;
        assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION, "v{version}");
    }
    let (err, ps) = partitions_of(&mut c, "nope").await;
    assert_eq!(
        (err, ps.len()),
        (UNKNOWN_TOPIC_OR_PARTITION, 0),
        "CreatePartitions did not create the topic"
    );
    assert!(
        !dir.path().join("nope-0").exists(),
        "no partition directory was made"
    );
    b.stop().await;
}

#[tokio::test]
async fn create_partitions_with_validate_only_answers_but_changes_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 2).await;
    assert_eq!(grow(&mut c, "t", 6, true, 3).await, (NONE, None));
    // validate_only still checks: a shrink is refused as it would be.
    assert_eq!(grow(&mut c, "t", 1, true, 3).await.0, INVALID_PARTITIONS);
    let (err, ps) = partitions_of(&mut c, "t").await;
    assert_eq!((err, ps.len()), (NONE, 2), "still 2 partitions");
    assert!(
        !dir.path().join("t-2").exists(),
        "no directory for a partition that was only validated"
    );
    let (code, _) = produce(&mut c, "t", 2, record("x")).await;
    assert_eq!(
        code, UNKNOWN_TOPIC_OR_PARTITION,
        "a validated-only partition takes no records"
    );
    // The real request afterwards still grows it from 2.
    assert_eq!(grow(&mut c, "t", 3, false, 3).await, (NONE, None));
    assert_eq!(partitions_of(&mut c, "t").await.1.len(), 3);
    b.stop().await;
}

#[tokio::test]
async fn api_versions_advertises_create_partitions_v0_to_v3() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let v = c.call(&support::api_versions_v3(), 3).await;
    assert_eq!(v.error_code, NONE);
    let k = v
        .api_keys
        .iter()
        .find(|k| k.api_key == 37)
        .expect("ApiVersions lists CreatePartitions (37)");
    assert_eq!((k.min_version, k.max_version), (0, 3));
    b.stop().await;
}

#[tokio::test]
async fn an_explicit_assignment_must_name_this_broker_and_an_empty_list_means_none() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let ask = |count, assignments| {
        CreatePartitionsRequest::default()
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(name("t"))
                    .with_count(count)
                    .with_assignments(assignments),
            ])
            .with_timeout_ms(5000)
    };
    let on = |broker| {
        Some(vec![
            create_partitions_request::CreatePartitionsAssignment::default()
                .with_broker_ids(vec![BrokerId(broker)]),
        ])
    };
    let resp = c.call(&ask(2, on(7)), 3).await;
    assert_eq!(resp.results[0].error_code, 39, "INVALID_REPLICA_ASSIGNMENT");
    assert_eq!(
        resp.results[0].error_message.as_deref(),
        Some(
            "The manual partition assignment includes broker 7, but no such broker is registered."
        )
    );
    assert_eq!(partitions_of(&mut c, "t").await.1.len(), 1, "unchanged");
    // This broker (node 1) is the one replica there is.
    let resp = c.call(&ask(2, on(1)), 3).await;
    assert_eq!(resp.results[0].error_code, NONE);
    assert_eq!(partitions_of(&mut c, "t").await.1.len(), 2);
    // Some clients send an empty list when they assign nothing.
    let resp = c.call(&ask(3, Some(Vec::new())), 3).await;
    assert_eq!(resp.results[0].error_code, NONE);
    assert_eq!(partitions_of(&mut c, "t").await.1.len(), 3);
    b.stop().await;
}
