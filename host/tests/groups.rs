//! Consumer groups over the wire with exact request structs: the classic
//! group protocol (join, sync, heartbeat, leave, timeouts, static
//! membership), committed offsets (commit, fetch, durability across a
//! restart, deletion with their topic), and the admin APIs.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;

// Kafka error codes.
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const INVALID_REQUEST: i16 = 42;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNKNOWN_LEADER_EPOCH: i16 = 75; // Kafka's code (76 is UNSUPPORTED_COMPRESSION_TYPE)
const MEMBER_ID_REQUIRED: i16 = 79;
const FENCED_INSTANCE_ID: i16 = 82;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;

const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 10_000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

fn tname(v: &str) -> TopicName {
    TopicName(s(v))
}

/// A broker whose groups form at once (no initial rebalance delay) and
/// accept short sessions.
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

async fn create_topic(c: &mut Client, topic: &str, partitions: i32) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(tname(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]);
    let resp = c.call(&req, 5).await;
    assert_eq!(resp.topics[0].error_code, NONE);
}

/// Consumer-protocol subscription metadata (v0) for `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    let sub =
        ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| s(t)).collect());
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    sub.encode(&mut buf, 0).expect("subscription encodes");
    buf.freeze()
}

#[derive(Clone)]
struct Joiner {
    group: String,
    member_id: String,
    instance_id: Option<String>,
    protocols: Vec<(&'static str, Bytes)>,
    session_ms: i32,
    rebalance_ms: i32,
    version: i16,
}

impl Joiner {
    fn new(group: &str) -> Joiner {
        Joiner {
            group: group.into(),
            member_id: String::new(),
            instance_id: None,
            protocols: vec![("range", subscription(&["t"]))],
            session_ms: SESSION_MS,
            rebalance_ms: REBALANCE_MS,
            version: 5,
        }
    }

    fn request(&self) -> JoinGroupRequest {
        let mut r = JoinGroupRequest::default()
            .with_group_id(gid(&self.group))
            .with_session_timeout_ms(self.session_ms)
            .with_member_id(s(&self.member_id))
            .with_protocol_type(s("consumer"))
            .with_protocols(
                self.protocols
                    .iter()
                    .map(|(n, m)| {
                        JoinGroupRequestProtocol::default()
                            .with_name(s(n))
                            .with_metadata(m.clone())
                    })
                    .collect(),
            );
        if self.version >= 1 {
            r = r.with_rebalance_timeout_ms(self.rebalance_ms);
        }
        if self.version >= 5 {
            r = r.with_group_instance_id(self.instance_id.as_deref().map(s));
        }
        r
    }
}

/// One JoinGroup round trip.
async fn join_once(c: &mut Client, j: &Joiner) -> JoinGroupResponse {
    c.call(&j.request(), j.version).await
}

/// Joins, answering MEMBER_ID_REQUIRED with the given id as clients do.
async fn join(c: &mut Client, j: &mut Joiner) -> JoinGroupResponse {
    loop {
        let r = join_once(c, j).await;
        j.member_id = r.member_id.to_string();
        if r.error_code != MEMBER_ID_REQUIRED {
            return r;
        }
    }
}

/// Runs a join on its own task (it long-polls until the join phase ends).
fn spawn_join(
    mut c: Client,
    mut j: Joiner,
) -> tokio::task::JoinHandle<(Client, Joiner, JoinGroupResponse)> {
    tokio::spawn(async move {
        let r = join(&mut c, &mut j).await;
        (c, j, r)
    })
}

async fn sync(
    c: &mut Client,
    j: &Joiner,
    generation: i32,
    assignments: &[(&str, &[u8])],
) -> SyncGroupResponse {
    let req = SyncGroupRequest::default()
        .with_group_id(gid(&j.group))
        .with_generation_id(generation)
        .with_member_id(s(&j.member_id))
        .with_group_instance_id(j.instance_id.as_deref().map(s))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        );
    c.call(&req, 3).await
}

fn spawn_sync(
    mut c: Client,
    j: Joiner,
    generation: i32,
) -> tokio::task::JoinHandle<(Client, SyncGroupResponse)> {
    tokio::spawn(async move {
        let r = sync(&mut c, &j, generation, &[]).await;
        (c, r)
    })
}

async fn heartbeat(c: &mut Client, j: &Joiner, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(gid(&j.group))
        .with_generation_id(generation)
        .with_member_id(s(&j.member_id))
        .with_group_instance_id(j.instance_id.as_deref().map(s));
    c.call(&req, 3).await.error_code
}

async fn describe(c: &mut Client, group: &str) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest::default().with_groups(vec![gid(group)]);
    c.call(&req, 5).await.groups.remove(0)
}

async fn commit(
    c: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (t, p, o) in offsets {
        let part = OffsetCommitRequestPartition::default()
            .with_partition_index(*p)
            .with_committed_offset(*o)
            .with_committed_leader_epoch(0)
            .with_committed_metadata(Some(s(&format!("meta-{t}-{p}-{o}"))));
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(part),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(tname(t))
                    .with_partitions(vec![part]),
            ),
        }
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(topics);
    let resp = c.call(&req, 8).await;
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// (offset, leader epoch, metadata) per requested partition, via v7.
async fn fetch(c: &mut Client, group: &str, topic: &str, parts: &[i32]) -> Vec<(i64, i32, String)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(gid(group))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(tname(topic))
                .with_partition_indexes(parts.to_vec()),
        ]));
    let resp = c.call(&req, 7).await;
    assert_eq!(resp.error_code, NONE);
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, NONE);
            (
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// Forms a one-member group and returns (client, joiner, generation).
async fn lone_member(b: &InProcess, group: &str) -> (Client, Joiner, i32) {
    let mut c = connect(b).await;
    let mut j = Joiner::new(group);
    let r = join(&mut c, &mut j).await;
    assert_eq!(r.error_code, NONE);
    let generation = r.generation_id;
    let me = j.member_id.clone();
    let sr = sync(&mut c, &j, generation, &[(me.as_str(), b"all")]).await;
    assert_eq!(sr.error_code, NONE);
    (c, j, generation)
}

/// Heartbeats (as a member does, every 20 ms) until the answer is not
/// NONE, and returns it; fails after five seconds.
async fn heartbeat_until_not_none(c: &mut Client, j: &Joiner, generation: i32, what: &str) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let code = heartbeat(c, j, generation).await;
        if code != NONE {
            return code;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn two_members_join_sync_heartbeat_and_leave() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let (mut ca, mut a, gen1) = lone_member(&b, "g").await;
    assert_eq!(gen1, 1);
    assert_eq!(heartbeat(&mut ca, &a, gen1).await, NONE);

    // B joins: its JoinGroup waits for A to rejoin.
    let mut jb = Joiner::new("g");
    jb.protocols = vec![
        ("roundrobin", subscription(&["t"])),
        ("range", subscription(&["t"])),
    ];
    let pending_b = spawn_join(connect(&b).await, jb);
    let code = heartbeat_until_not_none(&mut ca, &a, gen1, "A to see the rebalance").await;
    assert_eq!(code, REBALANCE_IN_PROGRESS);
    assert_eq!(
        describe(&mut ca, "g").await.group_state.as_str(),
        "PreparingRebalance"
    );

    // A rejoins: both get generation 2; A (the first member) leads and sees
    // both members' metadata as sent. Only "range" is common to both.
    let ra = join(&mut ca, &mut a).await;
    let (mut cb, jb, rb) = pending_b.await.expect("join task");
    assert_eq!((ra.error_code, rb.error_code), (NONE, NONE));
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!(ra.leader.as_str(), a.member_id);
    assert_eq!(rb.leader.as_str(), a.member_id);
    assert_eq!(ra.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty(), "followers get no member list");
    let b_meta = ra
        .members
        .iter()
        .find(|m| m.member_id.as_str() == jb.member_id)
        .expect("B listed")
        .metadata
        .clone();
    assert_eq!(b_meta, subscription(&["t"]));

    // B's SyncGroup waits for the leader's; then each gets its own share.
    let pending_sync = spawn_sync(cb, jb.clone(), 2);
    let sa = sync(
        &mut ca,
        &a,
        2,
        &[
            (a.member_id.as_str(), b"A-share"),
            (jb.member_id.as_str(), b"B-share"),
        ],
    )
    .await;
    let (cb2, sb) = pending_sync.await.expect("sync task");
    cb = cb2;
    assert_eq!(sa.error_code, NONE);
    assert_eq!(sa.assignment.as_ref(), b"A-share");
    assert_eq!(sb.error_code, NONE);
    assert_eq!(sb.assignment.as_ref(), b"B-share");
    assert_eq!(heartbeat(&mut ca, &a, 2).await, NONE);
    assert_eq!(heartbeat(&mut cb, &jb, 2).await, NONE);
    let d = describe(&mut ca, "g").await;
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.protocol_data.as_str(), "range");
    assert_eq!(d.members.len(), 2);

    // B leaves: A is told to rejoin and forms generation 3 alone.
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("g"))
        .with_members(vec![
            MemberIdentity::default().with_member_id(s(&jb.member_id)),
        ]);
    let lr = cb.call(&leave, 3).await;
    assert_eq!(lr.error_code, NONE);
    assert_eq!(lr.members[0].error_code, NONE);
    assert_eq!(heartbeat(&mut ca, &a, 2).await, REBALANCE_IN_PROGRESS);
    let ra = join(&mut ca, &mut a).await;
    assert_eq!(
        (ra.error_code, ra.generation_id, ra.members.len()),
        (NONE, 3, 1)
    );
    b.stop().await;
}

#[tokio::test]
async fn a_new_member_gets_member_id_required_from_v4_and_joins_directly_before() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    let mut j = Joiner::new("required");
    j.version = 4;
    let first = join_once(&mut c, &j).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    assert!(!first.member_id.is_empty(), "the id to rejoin with");
    // Kafka's form: the client id, "-", a UUID.
    let id = first.member_id.as_str();
    let (client, uuid) = id.split_at(id.len().saturating_sub(37));
    assert!(
        !client.is_empty() && uuid.starts_with('-') && uuid::Uuid::parse_str(&uuid[1..]).is_ok(),
        "{id}"
    );
    j.member_id = first.member_id.to_string();
    let second = join_once(&mut c, &j).await;
    assert_eq!(second.error_code, NONE);
    assert_eq!(second.member_id, first.member_id);
    assert_eq!(second.generation_id, 1);

    let mut old = Joiner::new("direct");
    old.version = 3;
    let r = join_once(&mut c, &old).await;
    assert_eq!(r.error_code, NONE, "v3 joins without the extra round trip");
    assert!(!r.member_id.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn a_stale_generation_is_illegal_generation() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (mut c, j, generation) = lone_member(&b, "g").await;
    assert_eq!(
        heartbeat(&mut c, &j, generation + 1).await,
        ILLEGAL_GENERATION
    );
    assert_eq!(
        heartbeat(&mut c, &j, generation - 1).await,
        ILLEGAL_GENERATION
    );
    assert_eq!(
        sync(&mut c, &j, generation - 1, &[]).await.error_code,
        ILLEGAL_GENERATION
    );
    assert_eq!(
        commit(&mut c, "g", generation - 1, &j.member_id, &[("t", 0, 5)]).await,
        vec![ILLEGAL_GENERATION]
    );
    // A commit with a generation for a group that does not exist.
    assert_eq!(
        commit(&mut c, "nobody", 3, "m", &[("t", 0, 5)]).await,
        vec![ILLEGAL_GENERATION]
    );
    b.stop().await;
}

#[tokio::test]
async fn an_unknown_member_is_unknown_member_id() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (mut c, j, generation) = lone_member(&b, "g").await;
    let mut stranger = j.clone();
    stranger.member_id = "stranger".into();
    assert_eq!(
        heartbeat(&mut c, &stranger, generation).await,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        sync(&mut c, &stranger, generation, &[]).await.error_code,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        join_once(&mut c, &stranger).await.error_code,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        commit(&mut c, "g", generation, "stranger", &[("t", 0, 1)]).await,
        vec![UNKNOWN_MEMBER_ID]
    );
    // Only members may commit for a group that has members.
    assert_eq!(
        commit(&mut c, "g", -1, "", &[("t", 0, 1)]).await,
        vec![UNKNOWN_MEMBER_ID]
    );
    // A member id for a group that does not exist.
    let mut lost = Joiner::new("no-such-group");
    lost.member_id = "m-1".into();
    assert_eq!(join_once(&mut c, &lost).await.error_code, UNKNOWN_MEMBER_ID);
    assert_eq!(heartbeat(&mut c, &lost, 1).await, UNKNOWN_MEMBER_ID);
    b.stop().await;
}

#[tokio::test]
async fn join_checks_group_id_session_timeout_and_protocol_compatibility() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let (mut c, _, _) = lone_member(&b, "g").await;
    let empty = Joiner::new("");
    assert_eq!(join_once(&mut c, &empty).await.error_code, INVALID_GROUP_ID);
    let mut short = Joiner::new("g2");
    short.session_ms = 10;
    assert_eq!(
        join_once(&mut c, &short).await.error_code,
        INVALID_SESSION_TIMEOUT
    );
    let mut other = Joiner::new("g");
    other.protocols = vec![("sticky-only", subscription(&["t"]))];
    assert_eq!(
        join_once(&mut c, &other).await.error_code,
        INCONSISTENT_GROUP_PROTOCOL
    );
    b.stop().await;
}

#[tokio::test]
async fn heartbeat_during_a_rebalance_is_rebalance_in_progress() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (mut ca, a, generation) = lone_member(&b, "g").await;
    let pending = spawn_join(connect(&b).await, Joiner::new("g"));
    let code = heartbeat_until_not_none(&mut ca, &a, generation, "the rebalance to start").await;
    assert_eq!(code, REBALANCE_IN_PROGRESS);
    // It keeps saying so (and keeps A's session alive) until A rejoins.
    assert_eq!(
        heartbeat(&mut ca, &a, generation).await,
        REBALANCE_IN_PROGRESS
    );
    // A commit is still accepted while the group prepares to rebalance.
    assert_eq!(
        commit(&mut ca, "g", generation, &a.member_id, &[("t", 0, 4)]).await,
        vec![NONE]
    );
    drop(pending);
    b.stop().await;
}

#[tokio::test]
async fn a_member_that_stops_heartbeating_is_removed_and_the_group_rebalances() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut ca = connect(&b).await;
    let mut a = Joiner::new("g");
    a.session_ms = 400;
    let ra = join(&mut ca, &mut a).await;
    let me = a.member_id.clone();
    sync(&mut ca, &a, ra.generation_id, &[(me.as_str(), b"x")]).await;
    // B joins with the same short session, A rejoins, both sync.
    let mut jb = Joiner::new("g");
    jb.session_ms = 400;
    let pending_b = spawn_join(connect(&b).await, jb);
    let generation = ra.generation_id;
    assert_eq!(
        heartbeat_until_not_none(&mut ca, &a, generation, "the rebalance to start").await,
        REBALANCE_IN_PROGRESS
    );
    let ra = join(&mut ca, &mut a).await;
    let (cb, jb, rb) = pending_b.await.expect("join task");
    assert_eq!(ra.generation_id, rb.generation_id);
    let gen2 = ra.generation_id;
    let pending_sync = spawn_sync(cb, jb.clone(), gen2);
    sync(&mut ca, &a, gen2, &[]).await;
    let (_cb, sb) = pending_sync.await.expect("sync task");
    assert_eq!(sb.error_code, NONE);

    // B goes silent; A keeps heartbeating and is told to rejoin once B's
    // session has expired.
    let started = Instant::now();
    assert_eq!(
        heartbeat_until_not_none(&mut ca, &a, gen2, "B's session to expire").await,
        REBALANCE_IN_PROGRESS
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not before the session timeout"
    );
    let ra = join(&mut ca, &mut a).await;
    assert_eq!(ra.error_code, NONE);
    assert_eq!(ra.generation_id, gen2 + 1);
    assert_eq!(ra.members.len(), 1, "only A remains");
    assert_eq!(heartbeat(&mut ca, &jb, gen2).await, UNKNOWN_MEMBER_ID);
    b.stop().await;
}

#[tokio::test]
async fn a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut ca = connect(&b).await;
    let mut cb = connect(&b).await;
    let mut a = Joiner::new("g");
    a.rebalance_ms = 300;
    let mut jb = a.clone();
    let ra = join(&mut ca, &mut a).await;
    let me = a.member_id.clone();
    sync(&mut ca, &a, ra.generation_id, &[(me.as_str(), b"x")]).await;
    let pending_b = spawn_join(cb, jb.clone());
    let generation = ra.generation_id;
    assert_eq!(
        heartbeat_until_not_none(&mut ca, &a, generation, "the rebalance to start").await,
        REBALANCE_IN_PROGRESS
    );
    // A keeps heartbeating but never rejoins: the join phase ends at the
    // rebalance timeout without it.
    let (c, j, rb) = pending_b.await.expect("join task");
    (cb, jb) = (c, j);
    assert_eq!(rb.error_code, NONE);
    assert_eq!(rb.generation_id, generation + 1);
    assert_eq!(rb.leader.as_str(), jb.member_id, "B leads once A is gone");
    assert_eq!(rb.members.len(), 1);
    assert_eq!(heartbeat(&mut ca, &a, generation).await, UNKNOWN_MEMBER_ID);
    assert_eq!(
        sync(&mut cb, &jb, rb.generation_id, &[]).await.error_code,
        NONE
    );
    b.stop().await;
}

#[tokio::test]
async fn a_static_member_rejoining_with_unchanged_metadata_causes_no_rebalance() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut ca = connect(&b).await;
    let mut a = Joiner::new("static");
    a.instance_id = Some("instance-a".into());
    let ra = join(&mut ca, &mut a).await;
    assert_eq!(
        ra.error_code, NONE,
        "static members skip MEMBER_ID_REQUIRED"
    );
    let me = a.member_id.clone();
    sync(&mut ca, &a, ra.generation_id, &[(me.as_str(), b"a0")]).await;

    let mut jb = Joiner::new("static");
    jb.instance_id = Some("instance-b".into());
    let pending_b = spawn_join(connect(&b).await, jb);
    let generation = ra.generation_id;
    assert_eq!(
        heartbeat_until_not_none(&mut ca, &a, generation, "the rebalance to start").await,
        REBALANCE_IN_PROGRESS
    );
    let ra = join(&mut ca, &mut a).await;
    let (cb, jb, _) = pending_b.await.expect("join task");
    let stable_gen = ra.generation_id;
    let pending_sync = spawn_sync(cb, jb.clone(), stable_gen);
    sync(
        &mut ca,
        &a,
        stable_gen,
        &[(a.member_id.as_str(), b"A"), (jb.member_id.as_str(), b"B")],
    )
    .await;
    let (_old_connection, sb) = pending_sync.await.expect("sync task");
    assert_eq!(sb.assignment.as_ref(), b"B");

    // B restarts: same instance id, no member id, same metadata.
    let mut cb = connect(&b).await;
    let mut b2 = Joiner::new("static");
    b2.instance_id = Some("instance-b".into());
    let r = join_once(&mut cb, &b2).await;
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.generation_id, stable_gen, "no new generation");
    assert_ne!(r.member_id.as_str(), jb.member_id, "a fresh member id");
    assert_eq!(r.leader.as_str(), a.member_id);
    b2.member_id = r.member_id.to_string();
    let s2 = sync(&mut cb, &b2, stable_gen, &[]).await;
    assert_eq!((s2.error_code, s2.assignment.as_ref()), (NONE, &b"B"[..]));
    // A never notices; the old incarnation of B is fenced.
    assert_eq!(heartbeat(&mut ca, &a, stable_gen).await, NONE);
    assert_eq!(heartbeat(&mut cb, &b2, stable_gen).await, NONE);
    assert_eq!(
        heartbeat(&mut cb, &jb, stable_gen).await,
        FENCED_INSTANCE_ID
    );
    assert_eq!(join_once(&mut cb, &jb).await.error_code, FENCED_INSTANCE_ID);
    assert_eq!(
        describe(&mut ca, "static").await.group_state.as_str(),
        "Stable"
    );
    b.stop().await;
}

#[tokio::test]
async fn offsets_commit_and_fetch_with_metadata_and_leader_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 3).await;
    // A group that only stores offsets (generation -1, no member).
    assert_eq!(
        commit(&mut c, "standalone", -1, "", &[("t", 0, 10), ("t", 2, 30)]).await,
        vec![NONE, NONE]
    );
    let got = fetch(&mut c, "standalone", "t", &[0, 1, 2]).await;
    assert_eq!(
        got,
        vec![
            (10, 0, "meta-t-0-10".into()),
            (-1, -1, String::new()),
            (30, 0, "meta-t-2-30".into())
        ]
    );
    // A later commit replaces the earlier one.
    commit(&mut c, "standalone", -1, "", &[("t", 0, 11)]).await;
    assert_eq!(fetch(&mut c, "standalone", "t", &[0]).await[0].0, 11);
    // An unknown group has no offsets (and no error).
    assert_eq!(
        fetch(&mut c, "nobody", "t", &[0]).await,
        vec![(-1, -1, String::new())]
    );

    // Unknown partitions and oversized metadata are refused per partition.
    let req = OffsetCommitRequest::default()
        .with_group_id(gid("standalone"))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(tname("t"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(20),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(7)
                        .with_committed_offset(1),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(99)
                        .with_committed_metadata(Some(s(&"x".repeat(5000)))),
                ]),
            OffsetCommitRequestTopic::default()
                .with_name(tname("missing"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()]),
        ]);
    let resp = c.call(&req, 2).await;
    let codes: Vec<Vec<i16>> = resp
        .topics
        .iter()
        .map(|t| t.partitions.iter().map(|p| p.error_code).collect())
        .collect();
    assert_eq!(
        codes,
        vec![
            vec![NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE],
            vec![UNKNOWN_TOPIC_OR_PARTITION]
        ]
    );
    assert_eq!(
        fetch(&mut c, "standalone", "t", &[0, 1]).await[..2]
            .iter()
            .map(|x| x.0)
            .collect::<Vec<_>>(),
        vec![11, 20]
    );

    // v8+: several groups in one request, and "all partitions" (null topics).
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(gid("standalone"))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(gid("nobody"))
            .with_topics(Some(vec![
                OffsetFetchRequestTopics::default()
                    .with_name(tname("t"))
                    .with_partition_indexes(vec![0]),
            ])),
    ]);
    let resp = c.call(&req, 8).await;
    assert_eq!(resp.groups.len(), 2);
    let all: Vec<(i32, i64)> = resp.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    assert_eq!(all, vec![(0, 11), (1, 20), (2, 30)]);
    assert_eq!(resp.groups[1].topics[0].partitions[0].committed_offset, -1);
    b.stop().await;
}

#[tokio::test]
async fn a_member_commits_during_stable_but_not_while_completing_a_rebalance() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let mut j = Joiner::new("g");
    let r = join(&mut c, &mut j).await;
    // Joined, not yet synced: CompletingRebalance.
    assert_eq!(
        commit(&mut c, "g", r.generation_id, &j.member_id, &[("t", 0, 1)]).await,
        vec![REBALANCE_IN_PROGRESS]
    );
    let me = j.member_id.clone();
    sync(&mut c, &j, r.generation_id, &[(me.as_str(), b"x")]).await;
    assert_eq!(
        commit(&mut c, "g", r.generation_id, &j.member_id, &[("t", 0, 2)]).await,
        vec![NONE]
    );
    assert_eq!(fetch(&mut c, "g", "t", &[0]).await[0].0, 2);
    b.stop().await;
}

#[tokio::test]
async fn committed_offsets_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 2).await;
    let (mut mc, j, generation) = lone_member(&b, "members").await;
    assert_eq!(
        commit(
            &mut mc,
            "members",
            generation,
            &j.member_id,
            &[("t", 0, 7), ("t", 1, 8)]
        )
        .await,
        vec![NONE, NONE]
    );
    commit(&mut c, "solo", -1, "", &[("t", 1, 42)]).await;
    commit(&mut c, "solo", -1, "", &[("t", 1, 43)]).await;
    drop((c, mc));
    b.stop().await;

    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    assert_eq!(
        fetch(&mut c, "members", "t", &[0, 1]).await,
        vec![(7, 0, "meta-t-0-7".into()), (8, 0, "meta-t-1-8".into())]
    );
    assert_eq!(
        fetch(&mut c, "solo", "t", &[1]).await,
        vec![(43, 0, "meta-t-1-43".into())]
    );
    // The group comes back Empty with its generation; members rejoin.
    let d = describe(&mut c, "members").await;
    assert_eq!(
        (d.group_state.as_str(), d.protocol_type.as_str()),
        ("Empty", "consumer")
    );
    assert_eq!(heartbeat(&mut c, &j, generation).await, UNKNOWN_MEMBER_ID);
    let mut again = Joiner::new("members");
    let r = join(&mut c, &mut again).await;
    assert_eq!(r.generation_id, generation + 1, "generations continue");
    b.stop().await;
}

#[tokio::test]
async fn offsets_of_a_deleted_topic_are_dropped_also_after_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "doomed", 2).await;
    create_topic(&mut c, "kept", 1).await;
    commit(
        &mut c,
        "g",
        -1,
        "",
        &[("doomed", 0, 5), ("doomed", 1, 6), ("kept", 0, 7)],
    )
    .await;
    let resp = c
        .call(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![tname("doomed")])
                .with_timeout_ms(5000),
            4,
        )
        .await;
    assert_eq!(resp.responses[0].error_code, NONE);
    create_topic(&mut c, "doomed", 2).await;
    assert_eq!(
        fetch(&mut c, "g", "doomed", &[0, 1])
            .await
            .iter()
            .map(|x| x.0)
            .collect::<Vec<_>>(),
        vec![-1, -1]
    );
    assert_eq!(fetch(&mut c, "g", "kept", &[0]).await[0].0, 7);
    drop(c);
    b.stop().await;

    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    assert_eq!(
        fetch(&mut c, "g", "doomed", &[0, 1])
            .await
            .iter()
            .map(|x| x.0)
            .collect::<Vec<_>>(),
        vec![-1, -1]
    );
    assert_eq!(fetch(&mut c, "g", "kept", &[0]).await[0].0, 7);
    b.stop().await;
}

#[tokio::test]
async fn delete_groups_refuses_a_group_with_members_and_deletes_an_empty_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (mut mc, j, generation) = lone_member(&b, "busy").await;
    commit(&mut c, "idle", -1, "", &[("t", 0, 3)]).await;
    let req = DeleteGroupsRequest::default().with_groups_names(vec![
        gid("busy"),
        gid("idle"),
        gid("ghost"),
    ]);
    let resp = c.call(&req, 2).await;
    let codes: Vec<(String, i16)> = resp
        .results
        .iter()
        .map(|r| (r.group_id.0.to_string(), r.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("busy".into(), NON_EMPTY_GROUP),
            ("idle".into(), NONE),
            ("ghost".into(), GROUP_ID_NOT_FOUND)
        ]
    );
    assert_eq!(fetch(&mut c, "idle", "t", &[0]).await[0].0, -1);
    assert_eq!(describe(&mut c, "idle").await.group_state.as_str(), "Dead");
    // Once its last member leaves, the group can go.
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("busy"))
        .with_member_id(s(&j.member_id));
    assert_eq!(mc.call(&leave, 1).await.error_code, NONE);
    let _ = generation;
    let resp = c
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![gid("busy")]),
            2,
        )
        .await;
    assert_eq!(resp.results[0].error_code, NONE);
    drop((c, mc));
    b.stop().await;

    // Deletions are durable.
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    assert_eq!(fetch(&mut c, "idle", "t", &[0]).await[0].0, -1);
    let listed = c.call(&ListGroupsRequest::default(), 4).await;
    assert!(listed.groups.is_empty(), "{:?}", listed.groups);
    b.stop().await;
}

#[tokio::test]
async fn list_groups_and_describe_groups_report_state_and_members() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let (_mc, j, _) = lone_member(&b, "live").await;
    commit(&mut c, "offsets-only", -1, "", &[("t", 0, 1)]).await;

    let all = c.call(&ListGroupsRequest::default(), 4).await;
    let mut listed: Vec<(String, String, String)> = all
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                g.protocol_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("live".into(), "consumer".into(), "Stable".into()),
            ("offsets-only".into(), String::new(), "Empty".into())
        ]
    );
    let stable = c
        .call(
            &ListGroupsRequest::default().with_states_filter(vec![s("stable")]),
            4,
        )
        .await;
    assert_eq!(stable.groups.len(), 1);
    assert_eq!(stable.groups[0].group_id.0.as_str(), "live");

    let d = describe(&mut c, "live").await;
    assert_eq!(d.error_code, NONE);
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.protocol_type.as_str(), "consumer");
    assert_eq!(d.protocol_data.as_str(), "range");
    assert_eq!(d.members.len(), 1);
    let m = &d.members[0];
    assert_eq!(m.member_id.as_str(), j.member_id);
    assert!(!m.client_id.is_empty());
    assert!(
        m.member_id
            .starts_with(&format!("{}-", m.client_id.as_str()))
    );
    assert_eq!(m.member_metadata, subscription(&["t"]));
    assert_eq!(m.member_assignment.as_ref(), b"all");
    let unknown = describe(&mut c, "never-seen").await;
    assert_eq!(
        (unknown.error_code, unknown.group_state.as_str()),
        (NONE, "Dead")
    );
    b.stop().await;
}

#[tokio::test]
async fn offset_delete_removes_offsets_of_topics_the_group_does_not_consume() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    create_topic(&mut c, "other", 1).await;
    let (mut mc, j, generation) = lone_member(&b, "g").await;
    commit(
        &mut mc,
        "g",
        generation,
        &j.member_id,
        &[("t", 0, 1), ("other", 0, 2)],
    )
    .await;
    let req = OffsetDeleteRequest::default()
        .with_group_id(gid("g"))
        .with_topics(vec![
            OffsetDeleteRequestTopic::default()
                .with_name(tname("t"))
                .with_partitions(vec![OffsetDeleteRequestPartition::default()]),
            OffsetDeleteRequestTopic::default()
                .with_name(tname("other"))
                .with_partitions(vec![OffsetDeleteRequestPartition::default()]),
            OffsetDeleteRequestTopic::default()
                .with_name(tname("missing"))
                .with_partitions(vec![OffsetDeleteRequestPartition::default()]),
        ]);
    let resp = c.call(&req, 0).await;
    assert_eq!(resp.error_code, NONE);
    let codes: Vec<i16> = resp
        .topics
        .iter()
        .map(|t| t.partitions[0].error_code)
        .collect();
    assert_eq!(
        codes,
        vec![GROUP_SUBSCRIBED_TO_TOPIC, NONE, UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(fetch(&mut c, "g", "t", &[0]).await[0].0, 1);
    assert_eq!(fetch(&mut c, "g", "other", &[0]).await[0].0, -1);
    let resp = c.call(&req.clone().with_group_id(gid("ghost")), 0).await;
    assert_eq!(resp.error_code, GROUP_ID_NOT_FOUND);
    b.stop().await;
}

#[tokio::test]
async fn find_coordinator_names_this_broker_for_groups_and_transactions() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    let port = i32::from(b.addr.port());
    for v in 0..=3 {
        let mut req = FindCoordinatorRequest::default().with_key(s("g"));
        if v >= 1 {
            req = req.with_key_type(1);
        }
        let r = c.call(&req, v).await;
        assert_eq!((r.error_code, r.node_id.0, r.port), (NONE, 1, port), "v{v}");
        assert_eq!(r.host.as_str(), "127.0.0.1");
    }
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("a"), s("b")]);
    let r = c.call(&req, 4).await;
    assert_eq!(r.coordinators.len(), 2);
    assert!(
        r.coordinators
            .iter()
            .all(|x| x.error_code == NONE && x.port == port)
    );
    assert_eq!(r.coordinators[1].key.as_str(), "b");
    let bad = c.call(&req.clone().with_key_type(7), 4).await;
    assert_eq!(bad.coordinators[0].error_code, INVALID_REQUEST);
    b.stop().await;
}

#[tokio::test]
async fn offset_for_leader_epoch_answers_epoch_0_ending_at_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    for i in 0..3 {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![
                produce_request::TopicProduceData::default()
                    .with_name(tname("t"))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(data_batch(
                                &[(None, format!("v{i}").as_bytes())],
                                i,
                                None,
                                false,
                            )))),
                    ]),
            ]);
        assert_eq!(
            c.call(&req, 9).await.responses[0].partition_responses[0].error_code,
            NONE
        );
    }
    let part = |epoch: i32, current: i32, p: i32| {
        OffsetForLeaderPartition::default()
            .with_partition(p)
            .with_leader_epoch(epoch)
            .with_current_leader_epoch(current)
    };
    let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
        OffsetForLeaderTopic::default()
            .with_topic(tname("t"))
            .with_partitions(vec![
                part(0, 0, 0),
                part(0, -1, 0),
                part(3, -1, 0),
                part(0, 1, 0),
                part(0, 0, 9),
            ]),
    ]);
    let r = c.call(&req, 4).await;
    let got: Vec<(i16, i32, i64)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect();
    assert_eq!(
        got,
        vec![
            (NONE, 0, 3),
            (NONE, 0, 3),
            (NONE, -1, -1),
            (UNKNOWN_LEADER_EPOCH, -1, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
        ]
    );
    b.stop().await;
}

#[tokio::test]
async fn the_journal_compacts_and_replays_to_the_latest_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    let start = |dir: std::path::PathBuf| async move {
        InProcess::start_with(&dir, FsyncMode::Never, |c| {
            c.groups.compact_bytes = 4096;
        })
        .await
    };
    let b = start(dir.path().to_path_buf()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 4).await;
    for i in 0..500 {
        assert_eq!(
            commit(&mut c, "g", -1, "", &[("t", i % 4, i64::from(i))]).await,
            vec![NONE]
        );
    }
    let journal = dir.path().join("__groups").join("offsets.log");
    // Compaction runs in the background, triggered by appends; commits made
    // while it runs land in the new file too. Keep committing (as a consumer
    // would) until the file has shrunk.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut i = 500;
    while std::fs::metadata(&journal).map_or(u64::MAX, |m| m.len()) >= 8192 {
        assert!(Instant::now() < deadline, "the journal was never compacted");
        assert_eq!(
            commit(&mut c, "g", -1, "", &[("t", i % 4, i64::from(i))]).await,
            vec![NONE]
        );
        i += 1;
    }
    let last = i64::from(i);
    drop(c);
    b.stop().await;
    let b = start(dir.path().to_path_buf()).await;
    let mut c = connect(&b).await;
    let got: Vec<i64> = fetch(&mut c, "g", "t", &[0, 1, 2, 3])
        .await
        .iter()
        .map(|x| x.0)
        .collect();
    let want: Vec<i64> = (0..4)
        .map(|p| {
            (last - 4..last)
                .find(|o| o % 4 == p)
                .expect("one per partition")
        })
        .collect();
    assert_eq!(got, want);
    b.stop().await;
}

/// Every group API at every version it advertises, through a realistic
/// one-member flow: each answer decodes in its version's format.
#[tokio::test]
async fn every_group_api_answers_every_advertised_version() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let mut c = connect(&b).await;
    create_topic(&mut c, "t", 1).await;
    let range = |k: ApiKey| kaas::wire::range(k).expect("advertised");

    let (lo, hi) = range(ApiKey::FindCoordinator);
    for v in lo..=hi {
        let req = if v >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")])
        } else {
            FindCoordinatorRequest::default().with_key(s("g"))
        };
        c.call(&req, v).await;
    }
    let (lo, hi) = range(ApiKey::JoinGroup);
    for v in lo..=hi {
        let group = format!("join-v{v}");
        let mut j = Joiner::new(&group);
        j.version = v;
        if v >= 5 {
            j.instance_id = Some(format!("i-{v}"));
        }
        let r = join(&mut c, &mut j).await;
        assert_eq!(
            (r.error_code, r.generation_id, r.members.len()),
            (NONE, 1, 1),
            "JoinGroup v{v}"
        );
        if v >= 5 {
            assert_eq!(
                r.members[0].group_instance_id.as_ref().map(|x| x.as_str()),
                j.instance_id.as_deref()
            );
        }
        let (slo, shi) = range(ApiKey::SyncGroup);
        let sv = v.clamp(slo, shi);
        let mut req = SyncGroupRequest::default()
            .with_group_id(gid(&group))
            .with_generation_id(1)
            .with_member_id(s(&j.member_id))
            .with_assignments(vec![
                SyncGroupRequestAssignment::default()
                    .with_member_id(s(&j.member_id))
                    .with_assignment(Bytes::from_static(b"a")),
            ]);
        if sv >= 3 {
            req = req.with_group_instance_id(j.instance_id.as_deref().map(s));
        }
        if sv >= 5 {
            req = req
                .with_protocol_type(Some(s("consumer")))
                .with_protocol_name(Some(s("range")));
        }
        let sr = c.call(&req, sv).await;
        assert_eq!(
            (sr.error_code, sr.assignment.as_ref()),
            (NONE, &b"a"[..]),
            "SyncGroup v{sv}"
        );
    }
    let (lo, hi) = range(ApiKey::SyncGroup);
    for v in lo..=hi {
        let req = SyncGroupRequest::default()
            .with_group_id(gid("join-v0"))
            .with_member_id(s("x"));
        assert_eq!(c.call(&req, v).await.error_code, UNKNOWN_MEMBER_ID);
    }
    let (lo, hi) = range(ApiKey::Heartbeat);
    for v in lo..=hi {
        let req = HeartbeatRequest::default()
            .with_group_id(gid("join-v0"))
            .with_member_id(s("x"));
        assert_eq!(c.call(&req, v).await.error_code, UNKNOWN_MEMBER_ID);
    }
    let (lo, hi) = range(ApiKey::OffsetCommit);
    for v in lo..=hi {
        let req = OffsetCommitRequest::default()
            .with_group_id(gid("offsets"))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(tname("t"))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default().with_committed_offset(i64::from(v)),
                    ]),
            ]);
        assert_eq!(
            c.call(&req, v).await.topics[0].partitions[0].error_code,
            NONE,
            "OffsetCommit v{v}"
        );
    }
    let (lo, hi) = range(ApiKey::OffsetFetch);
    for v in lo..=hi {
        let offset = if v >= 8 {
            let req = OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(gid("offsets"))
                    .with_topics(None),
            ]);
            c.call(&req, v).await.groups[0].topics[0].partitions[0].committed_offset
        } else {
            let req = OffsetFetchRequest::default()
                .with_group_id(gid("offsets"))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(tname("t"))
                        .with_partition_indexes(vec![0]),
                ]));
            c.call(&req, v).await.topics[0].partitions[0].committed_offset
        };
        assert_eq!(offset, 9, "OffsetFetch v{v}");
    }
    let (lo, hi) = range(ApiKey::DescribeGroups);
    for v in lo..=hi {
        let mut req =
            DescribeGroupsRequest::default().with_groups(vec![gid("join-v9"), gid("none")]);
        if v >= 3 {
            req = req.with_include_authorized_operations(true);
        }
        let r = c.call(&req, v).await;
        assert_eq!(
            r.groups[0].group_state.as_str(),
            "Stable",
            "DescribeGroups v{v}"
        );
        assert_eq!(r.groups[0].members.len(), 1);
    }
    let (lo, hi) = range(ApiKey::ListGroups);
    for v in lo..=hi {
        let r = c.call(&ListGroupsRequest::default(), v).await;
        assert_eq!(r.groups.len(), 11, "ListGroups v{v}");
    }
    let (lo, hi) = range(ApiKey::LeaveGroup);
    for v in lo..=hi {
        let group = format!("join-v{v}");
        let r = if v >= 3 {
            let req = LeaveGroupRequest::default()
                .with_group_id(gid(&group))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(s("x")),
                    MemberIdentity::default()
                        .with_member_id(s(""))
                        .with_group_instance_id(if v >= 5 {
                            Some(s(&format!("i-{v}")))
                        } else {
                            None
                        }),
                ]);
            let r = c.call(&req, v).await;
            assert_eq!(r.members.len(), 2, "LeaveGroup v{v}");
            assert_eq!(r.members[0].error_code, UNKNOWN_MEMBER_ID);
            r
        } else {
            let req = LeaveGroupRequest::default()
                .with_group_id(gid(&group))
                .with_member_id(s("x"));
            let r = c.call(&req, v).await;
            assert_eq!(r.error_code, UNKNOWN_MEMBER_ID, "LeaveGroup v{v}");
            r
        };
        let _ = r;
    }
    let (lo, hi) = range(ApiKey::DeleteGroups);
    for v in lo..=hi {
        let r = c
            .call(
                &DeleteGroupsRequest::default().with_groups_names(vec![gid("none")]),
                v,
            )
            .await;
        assert_eq!(r.results[0].error_code, GROUP_ID_NOT_FOUND);
    }
    let (lo, hi) = range(ApiKey::OffsetForLeaderEpoch);
    for v in lo..=hi {
        let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(tname("t"))
                .with_partitions(vec![OffsetForLeaderPartition::default()]),
        ]);
        let r = c.call(&req, v).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code, NONE,
            "OffsetForLeaderEpoch v{v}"
        );
    }
    assert_eq!(range(ApiKey::OffsetDelete), (0, 0));
    b.stop().await;
}
