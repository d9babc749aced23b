//! KIP-848's consumer group protocol over the wire with exact request
//! structs: ConsumerGroupHeartbeat joins, reconciliation (revoke before
//! assign), Kafka 4.0's request checks, both protocols on one coordinator,
//! OffsetCommit v9's member epochs, ListGroups v5's type filter,
//! ConsumerGroupDescribe, Metadata by topic id, and a group that survives
//! a kill -9 of its broker with its members' epochs and assignments.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, Process};
use uuid::Uuid;

const NONE: i16 = 0;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const FENCED_MEMBER_EPOCH: i16 = 110;
const UNSUPPORTED_ASSIGNOR: i16 = 112;
const STALE_MEMBER_EPOCH: i16 = 113;
const INVALID_REGULAR_EXPRESSION: i16 = 128;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn create_topic(c: &mut Client, topic: &str, partitions: i32) -> Uuid {
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

/// A consumer-protocol member as a client keeps it.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    epoch: i32,
    owned: Vec<(Uuid, Vec<i32>)>,
}

impl Member {
    fn new(id: &str) -> Member {
        Member {
            id: id.into(),
            epoch: 0,
            owned: Vec::new(),
        }
    }

    fn count(&self) -> usize {
        self.owned.iter().map(|(_, p)| p.len()).sum()
    }

    fn request(&self, group: &str, topics: Option<&[&str]>) -> ConsumerGroupHeartbeatRequest {
        let join = self.epoch == 0;
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s(&self.id))
            .with_member_epoch(self.epoch)
            .with_rebalance_timeout_ms(if join { 30_000 } else { -1 })
            .with_subscribed_topic_names(
                topics.map(|ts| ts.iter().map(|t| TopicName(s(t))).collect()),
            )
            .with_topic_partitions(Some(
                self.owned
                    .iter()
                    .map(|(t, ps)| {
                        TopicPartitions::default()
                            .with_topic_id(*t)
                            .with_partitions(ps.clone())
                    })
                    .collect(),
            ))
    }

    /// One heartbeat; applies the answer as a client does.
    async fn beat(
        &mut self,
        c: &mut Client,
        group: &str,
        topics: &[&str],
    ) -> ConsumerGroupHeartbeatResponse {
        let req = self.request(group, (self.epoch == 0).then_some(topics));
        let r = c.call(&req, 1).await;
        if r.error_code == NONE {
            self.epoch = r.member_epoch;
            if let Some(a) = &r.assignment {
                self.owned = a
                    .topic_partitions
                    .iter()
                    .map(|tp| (tp.topic_id, tp.partitions.clone()))
                    .collect();
            }
        }
        r
    }
}

fn exclusive(ms: &[&Member]) {
    let mut seen = BTreeSet::new();
    for m in ms {
        for (t, ps) in &m.owned {
            for p in ps {
                assert!(seen.insert((*t, *p)), "partition {p} owned twice");
            }
        }
    }
}

#[tokio::test]
async fn members_share_partitions_and_a_newcomer_waits_for_the_revocation() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&b.addr).await;
    create_topic(&mut c, "t", 4).await;
    let mut a = Member::new("member-a");
    let r = a.beat(&mut c, "g", &["t"]).await;
    assert_eq!((r.error_code, r.member_epoch, a.count()), (NONE, 1, 4));
    assert!(r.heartbeat_interval_ms > 0);
    let mut m = Member::new("member-b");
    let r = m.beat(&mut c, "g", &["t"]).await;
    assert_eq!((r.error_code, r.member_epoch, m.count()), (NONE, 2, 0));
    a.beat(&mut c, "g", &["t"]).await;
    assert_eq!(
        (a.epoch, a.count()),
        (1, 2),
        "a revokes two and keeps its epoch"
    );
    exclusive(&[&a, &m]);
    a.beat(&mut c, "g", &["t"]).await;
    assert_eq!(a.epoch, 2);
    m.beat(&mut c, "g", &["t"]).await;
    assert_eq!(m.count(), 2);
    exclusive(&[&a, &m]);

    let d = c
        .call(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (NONE, "Stable"));
    assert_eq!(
        (g.group_epoch, g.assignment_epoch, g.assignor_name.as_str()),
        (2, 2, "uniform")
    );
    assert_eq!(g.members.len(), 2);
    assert!(
        g.members
            .iter()
            .all(|m| m.assignment.topic_partitions[0].topic_name.as_str() == "t")
    );

    let listed = c
        .call(
            &ListGroupsRequest::default().with_types_filter(vec![s("consumer")]),
            5,
        )
        .await;
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
    let classic = c
        .call(
            &ListGroupsRequest::default().with_types_filter(vec![s("classic")]),
            5,
        )
        .await;
    assert!(classic.groups.is_empty());
    b.terminate();
}

#[tokio::test]
async fn requests_are_checked_as_kafka_checks_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&b.addr).await;
    create_topic(&mut c, "t", 1).await;
    let base = Member::new("m").request("g", Some(&["t"]));
    let cases = [
        (
            base.clone().with_rebalance_timeout_ms(-1),
            INVALID_REQUEST,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            base.clone().with_topic_partitions(None),
            INVALID_REQUEST,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            base.clone().with_subscribed_topic_names(None),
            INVALID_REQUEST,
            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
        ),
        (
            base.clone().with_member_id(s("")),
            INVALID_REQUEST,
            "MemberId can't be empty.",
        ),
        (
            base.clone().with_member_epoch(-3),
            INVALID_REQUEST,
            "MemberEpoch is invalid.",
        ),
        (
            base.clone().with_server_assignor(Some(s("sticky"))),
            UNSUPPORTED_ASSIGNOR,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
    ];
    for (req, code, msg) in cases {
        let r = c.call(&req, 1).await;
        assert_eq!(
            (r.error_code, r.error_message.as_deref()),
            (code, Some(msg))
        );
    }
    let bad = base
        .clone()
        .with_subscribed_topic_names(Some(vec![]))
        .with_subscribed_topic_regex(Some(s("t(")));
    assert_eq!(c.call(&bad, 1).await.error_code, INVALID_REGULAR_EXPRESSION);
    // The failed joins left no group behind: a heartbeat past the join
    // finds none (Kafka's GROUP_ID_NOT_FOUND).
    let r = c
        .call(
            &Member {
                epoch: 3,
                ..Member::new("x")
            }
            .request("g", None),
            1,
        )
        .await;
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);
    let mut m = Member::new("m");
    m.beat(&mut c, "g", &["t"]).await;
    let r = c
        .call(
            &Member {
                epoch: 9,
                ..m.clone()
            }
            .request("g", None),
            1,
        )
        .await;
    assert_eq!(r.error_code, FENCED_MEMBER_EPOCH);
    b.terminate();
}

#[tokio::test]
async fn the_two_protocols_do_not_share_a_group_and_commits_need_the_member_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&b.addr).await;
    create_topic(&mut c, "t", 2).await;
    let mut m = Member::new("m");
    m.beat(&mut c, "g", &["t"]).await;
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default().with_name(s("range")),
        ]);
    assert_eq!(
        c.call(&join, 5).await.error_code,
        INCONSISTENT_GROUP_PROTOCOL
    );
    let r = c
        .call(&Member::new("n").request("classic-g", Some(&["t"])), 1)
        .await;
    assert_eq!(r.error_code, NONE, "a new id is a new consumer group");
    let mut j = c
        .call(&join.clone().with_group_id(GroupId(s("cg"))), 4)
        .await;
    if j.error_code == 79 {
        j = c
            .call(
                &join
                    .clone()
                    .with_group_id(GroupId(s("cg")))
                    .with_member_id(j.member_id),
                4,
            )
            .await;
    }
    assert_eq!(j.error_code, NONE);
    let r = c
        .call(&Member::new("n").request("cg", Some(&["t"])), 1)
        .await;
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Group cg is not a consumer group.")
    );

    let commit = |member: &str, epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id_or_member_epoch(epoch)
            .with_member_id(s(member))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(5),
                    ]),
            ])
    };
    let code = |r: OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(code(c.call(&commit("m", m.epoch), 9).await), NONE);
    assert_eq!(
        code(c.call(&commit("m", m.epoch - 1), 9).await),
        STALE_MEMBER_EPOCH
    );
    assert_eq!(
        code(c.call(&commit("x", m.epoch), 9).await),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        code(c.call(&commit("", -1), 9).await),
        UNKNOWN_MEMBER_ID,
        "not while members remain"
    );

    let fetch = |member: Option<&str>, epoch: i32| {
        OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(member.map(s))
                .with_member_epoch(epoch)
                .with_topics(None),
        ])
    };
    let r = c.call(&fetch(Some("m"), m.epoch), 9).await;
    assert_eq!(r.groups[0].error_code, NONE);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 5);
    let r = c.call(&fetch(Some("m"), m.epoch + 1), 9).await;
    assert_eq!(r.groups[0].error_code, STALE_MEMBER_EPOCH);
    let r = c.call(&fetch(None, -1), 9).await;
    assert_eq!(
        r.groups[0].error_code, NONE,
        "an admin fetch names no member"
    );
    b.terminate();
}

#[tokio::test]
async fn metadata_answers_a_topic_named_by_its_id() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&b.addr).await;
    let id = create_topic(&mut c, "by-id", 3).await;
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default()
            .with_topic_id(id)
            .with_name(None),
        MetadataRequestTopic::default()
            .with_topic_id(Uuid::from_bytes([7; 16]))
            .with_name(None),
    ]));
    let r = c.call(&req, 12).await;
    assert_eq!(r.topics[0].error_code, NONE);
    assert_eq!(r.topics[0].name.as_ref().map(|n| n.as_str()), Some("by-id"));
    assert_eq!(r.topics[0].partitions.len(), 3);
    assert_eq!(r.topics[1].error_code, 100, "UNKNOWN_TOPIC_ID");
    b.terminate();
}

#[tokio::test]
async fn a_group_survives_a_kill_9_with_its_epochs_and_assignments() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&b.addr).await;
    create_topic(&mut c, "t", 6).await;
    let (mut a, mut m) = (Member::new("a"), Member::new("b"));
    for _ in 0..3 {
        a.beat(&mut c, "g", &["t"]).await;
        m.beat(&mut c, "g", &["t"]).await;
    }
    assert_eq!((a.count(), m.count(), a.epoch, m.epoch), (3, 3, 2, 2));
    drop(c);
    b.kill9();

    let b = Process::spawn(dir.path(), &[]);
    let mut c = Client::connect(&b.addr).await;
    let (before_a, before_m) = (a.owned.clone(), m.owned.clone());
    let r = a.beat(&mut c, "g", &["t"]).await;
    assert_eq!(
        (r.error_code, r.member_epoch),
        (NONE, 2),
        "the member and its epoch are known"
    );
    let r = m.beat(&mut c, "g", &["t"]).await;
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    assert_eq!(
        (a.owned.clone(), m.owned.clone()),
        (before_a, before_m),
        "no rebalance"
    );
    // A third member joins: the group moves on from epoch 2.
    let mut n = Member::new("c");
    let r = n.beat(&mut c, "g", &["t"]).await;
    assert_eq!(r.member_epoch, 3);
    for _ in 0..3 {
        a.beat(&mut c, "g", &["t"]).await;
        m.beat(&mut c, "g", &["t"]).await;
        n.beat(&mut c, "g", &["t"]).await;
        exclusive(&[&a, &m, &n]);
    }
    assert_eq!((a.count(), m.count(), n.count()), (2, 2, 2));
    b.terminate();
}
