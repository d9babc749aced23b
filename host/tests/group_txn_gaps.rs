//! Group and transaction answers the wire test kit found differing from
//! Apache Kafka: each test pins Kafka's answer to one request shape.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, InProcess};

use kaas::log::FsyncMode;

const NONE: i16 = 0;
const UNKNOWN_MEMBER_ID: i16 = 25;
const UNSUPPORTED_VERSION: i16 = 35;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNSUPPORTED_ASSIGNOR: i16 = 112;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

async fn broker(dir: &std::path::Path) -> InProcess {
    InProcess::start_with(dir, FsyncMode::Always, |c| {
        c.groups.initial_rebalance_delay = Duration::ZERO;
        c.groups.min_session_timeout = Duration::from_millis(50);
    })
    .await
}

async fn connect(b: &InProcess) -> Client {
    Client::connect(&b.addr.to_string()).await
}

async fn create_topic(c: &mut Client, topic: &str, partitions: i32) -> uuid::Uuid {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s(topic)))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]);
    let resp = c.call(&req, 7).await;
    assert_eq!(resp.topics[0].error_code, NONE);
    resp.topics[0].topic_id
}

/// A simple (generation -1) OffsetCommit v2 of one offset.
async fn commit_simple(c: &mut Client, group: &str, topic: &str, offset: i64) {
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    let r = c.call(&req, 2).await;
    assert_eq!(r.topics[0].partitions[0].error_code, NONE);
}

/// CG-37: DeleteGroups naming a group twice answers once per distinct group.
#[tokio::test]
async fn delete_groups_answers_once_per_distinct_group() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    commit_simple(&mut c, "a", "t", 1).await;
    commit_simple(&mut c, "b", "t", 2).await;
    let req = DeleteGroupsRequest::default().with_groups_names(vec![gid("a"), gid("b"), gid("a")]);
    let r = c.call(&req, 0).await;
    let got: Vec<(String, i16)> = r
        .results
        .iter()
        .map(|x| (x.group_id.0.to_string(), x.error_code))
        .collect();
    assert_eq!(got, vec![("a".into(), NONE), ("b".into(), NONE)]);
    drop(c);
    b.stop().await;
}

/// One ConsumerGroupHeartbeat v0; the first (epoch 0) subscribes `topics`.
fn beat(
    group: &str,
    member: &str,
    epoch: i32,
    instance: Option<&str>,
    topics: &[&str],
) -> ConsumerGroupHeartbeatRequest {
    let join = epoch == 0;
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_instance_id(instance.map(s))
        .with_rebalance_timeout_ms(if join { 30_000 } else { -1 })
        .with_subscribed_topic_names(join.then(|| topics.iter().map(|t| TopicName(s(t))).collect()))
        .with_topic_partitions(join.then(Vec::new))
}

/// A member joins `group` alone and heartbeats until it owns every
/// partition: its id and epoch.
async fn lone_consumer(c: &mut Client, group: &str, instance: Option<&str>) -> (String, i32) {
    let r = c.call(&beat(group, "", 0, instance, &["t"]), 0).await;
    assert_eq!(r.error_code, NONE);
    let id = r.member_id.expect("member id").to_string();
    (id, r.member_epoch)
}

async fn consumer_describe(
    c: &mut Client,
    group: &str,
) -> consumer_group_describe_response::DescribedGroup {
    let r = c
        .call(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(group)]),
            0,
        )
        .await;
    r.groups.into_iter().next().expect("one group")
}

/// KG-05: a heartbeat past the join (epoch > 0, or a leave) to a group
/// that does not exist: GROUP_ID_NOT_FOUND, and no group is left behind.
#[tokio::test]
async fn a_heartbeat_to_an_unknown_group_is_group_id_not_found() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    for epoch in [1, 5, -1] {
        let r = c
            .call(&beat("nogroup", "nobody-0000", epoch, None, &[]), 0)
            .await;
        assert_eq!(r.error_code, GROUP_ID_NOT_FOUND, "epoch {epoch}");
    }
    // A failed join creates no group either.
    let r = c
        .call(
            &beat("nogroup", "", 0, None, &["t"]).with_server_assignor(Some(s("nope"))),
            0,
        )
        .await;
    assert_eq!(r.error_code, UNSUPPORTED_ASSIGNOR);
    assert_eq!(
        consumer_describe(&mut c, "nogroup").await.error_code,
        GROUP_ID_NOT_FOUND
    );
    drop(c);
    b.stop().await;
}

/// KG-04: a leave of a member that already left is UNKNOWN_MEMBER_ID with
/// Kafka's epoch 0 and no member id; the empty group's target assignment
/// is at the group epoch.
#[tokio::test]
async fn a_second_leave_answers_epoch_0_and_the_empty_group_is_assigned() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (id, _) = lone_consumer(&mut c, "g", None).await;
    let r = c.call(&beat("g", &id, -1, None, &[]), 0).await;
    assert_eq!((r.error_code, r.member_epoch), (NONE, -1));
    let r = c.call(&beat("g", &id, -1, None, &[]), 0).await;
    assert_eq!(
        (r.error_code, r.member_epoch, r.member_id),
        (UNKNOWN_MEMBER_ID, 0, None)
    );
    let d = consumer_describe(&mut c, "g").await;
    assert_eq!(d.group_state.as_str(), "Empty");
    assert_eq!(d.assignment_epoch, d.group_epoch);
    drop(c);
    b.stop().await;
    // As replayed from the journal.
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    let d = consumer_describe(&mut c, "g").await;
    assert_eq!((d.group_epoch, d.assignment_epoch), (2, 2));
    drop(c);
    b.stop().await;
}

/// KG-07: a member subscribed by names is described with the regular
/// expression "" (Kafka's default), not null.
#[tokio::test]
async fn a_member_subscribed_by_names_is_described_with_an_empty_regex() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    lone_consumer(&mut c, "g", None).await;
    let d = consumer_describe(&mut c, "g").await;
    assert_eq!(d.members[0].subscribed_topic_regex.as_deref(), Some(""));
    drop(c);
    b.stop().await;
}

/// KG-11: a consumer-protocol member commits with OffsetCommit v9+; below
/// that Kafka answers UNSUPPORTED_VERSION.
#[tokio::test]
async fn a_consumer_group_member_commits_with_v9_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (id, epoch) = lone_consumer(&mut c, "g", None).await;
    let req = OffsetCommitRequest::default()
        .with_group_id(gid("g"))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(s(&id))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(3),
                ]),
        ]);
    let code = |r: OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(code(c.call(&req, 8).await), UNSUPPORTED_VERSION);
    assert_eq!(code(c.call(&req, 9).await), NONE);
    // An unknown member is still UNKNOWN_MEMBER_ID at v8.
    let other = req.clone().with_member_id(s("nobody"));
    assert_eq!(code(c.call(&other, 8).await), UNKNOWN_MEMBER_ID);
    drop(c);
    b.stop().await;
}

/// KG-14: a static member that left temporarily (epoch -2) and rejoins
/// under a new member id takes its old epoch and assignment; the group
/// epoch does not move.
#[tokio::test]
async fn a_static_member_rejoins_at_its_old_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 2).await;
    let r = c.call(&beat("g", "", 0, Some("i-1"), &["t"]), 0).await;
    assert_eq!(r.error_code, NONE);
    let (id, epoch) = (r.member_id.clone().expect("id").to_string(), r.member_epoch);
    let parts = |r: &ConsumerGroupHeartbeatResponse| {
        let mut p: Vec<i32> = r
            .assignment
            .iter()
            .flat_map(|a| a.topic_partitions.iter())
            .flat_map(|t| t.partitions.iter().copied())
            .collect();
        p.sort_unstable();
        p
    };
    assert_eq!(parts(&r), vec![0, 1]);
    let r = c.call(&beat("g", &id, -2, Some("i-1"), &[]), 0).await;
    assert_eq!((r.error_code, r.member_epoch), (NONE, -2));
    let r = c.call(&beat("g", "", 0, Some("i-1"), &["t"]), 0).await;
    assert_eq!(r.error_code, NONE);
    assert_ne!(r.member_id.as_deref(), Some(id.as_str()));
    assert_eq!(r.member_epoch, epoch);
    assert_eq!(parts(&r), vec![0, 1]);
    let d = consumer_describe(&mut c, "g").await;
    assert_eq!((d.group_epoch, d.assignment_epoch), (epoch, epoch));
    assert_eq!(d.members.len(), 1);
    drop(c);
    b.stop().await;
    // The new member keeps its target across a restart.
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    let d = consumer_describe(&mut c, "g").await;
    assert_eq!(d.members.len(), 1);
    let mut target: Vec<i32> = d.members[0]
        .target_assignment
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    target.sort_unstable();
    assert_eq!(target, vec![0, 1]);
    drop(c);
    b.stop().await;
}

/// A JoinGroup v9 of a static consumer member subscribing "t".
fn static_join(group: &str) -> JoinGroupRequest {
    let mut sub = bytes::BytesMut::new();
    sub.extend_from_slice(&0i16.to_be_bytes());
    sub.extend_from_slice(&1i32.to_be_bytes());
    sub.extend_from_slice(&1i16.to_be_bytes());
    sub.extend_from_slice(b"t");
    sub.extend_from_slice(&(-1i32).to_be_bytes());
    JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_group_instance_id(Some(s("instance-1")))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(sub.freeze()),
        ])
}

/// CG-12 (KIP-814): the static leader of a Stable group rejoining with
/// the same protocols leads again, with the members, but skips the
/// assignment.
#[tokio::test]
async fn a_rejoining_static_leader_leads_and_skips_the_assignment() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let r = c.call(&static_join("cg"), 9).await;
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.leader, r.member_id);
    let first = r.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(gid("cg"))
        .with_generation_id(r.generation_id)
        .with_member_id(s(&first))
        .with_group_instance_id(Some(s("instance-1")))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(&first))
                .with_assignment(bytes::Bytes::from_static(b"assigned")),
        ]);
    assert_eq!(c.call(&sync, 5).await.error_code, NONE);
    let r2 = c.call(&static_join("cg"), 9).await;
    assert_eq!(r2.error_code, NONE);
    assert_ne!(r2.member_id.as_str(), first);
    assert_eq!(r2.generation_id, r.generation_id);
    assert_eq!(r2.leader, r2.member_id);
    assert!(r2.skip_assignment);
    assert_eq!(r2.members.len(), 1);
    assert_eq!(r2.members[0].member_id, r2.member_id);
    // Below v9 there is no skip_assignment to send.
    let r3 = c.call(&static_join("cg"), 8).await;
    assert_eq!((r3.error_code, r3.leader == r3.member_id), (NONE, true));
    drop(c);
    b.stop().await;
}

/// IT-01 / TX-03: DescribeTransactions of an id the coordinator does not
/// know: TRANSACTIONAL_ID_NOT_FOUND with an empty state, as Kafka answers.
#[tokio::test]
async fn describe_transactions_of_an_unknown_id_has_an_empty_state() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(s("nobody"))]);
    let r = c.call(&req, 0).await;
    let st = &r.transaction_states[0];
    assert_eq!(
        (st.error_code, st.transaction_state.as_str()),
        (TRANSACTIONAL_ID_NOT_FOUND, "")
    );
    drop(c);
    b.stop().await;
}

/// PS-16 / TX-05: a transactional batch without a transactional id is
/// refused before anything else (Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
/// authorizer or not), and nothing is appended.
#[tokio::test]
async fn a_transactional_batch_needs_a_transactional_id() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let batch = kaas::log::batch::data_batch(&[(None, b"v")], 1, Some((7, 0, 0)), true);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(bytes::Bytes::from(batch))),
                ]),
        ]);
    let r = c.call(&req, 9).await;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    drop(c);
    b.stop().await;
}
