//! Group coordinator shards over the wire (cluster mode): a broker with
//! sharded groups (cluster mode) answers only for the groups of the shards
//! open on it; every other group gets NOT_COORDINATOR, per group in the
//! batched APIs, and FindCoordinator does not name this broker for it.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

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
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, InProcess};

use kaas::log::FsyncMode;

const NONE: i16 = 0;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const GROUP_ID_NOT_FOUND: i16 = 69;

/// "my-group": Java hashCode -1906497762, abs % 50 = 12 (open here).
const LOCAL: &str = "my-group";
/// "group": hashCode 98629247 % 50 = 47 (not open here).
const REMOTE: &str = "group";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

async fn sharded_broker(dir: &std::path::Path) -> InProcess {
    let b = InProcess::start_with(dir, FsyncMode::Always, |c| {
        c.sharded_groups = true;
    })
    .await;
    b.broker
        .groups
        .open_shard(12, Arc::new(|| true))
        .expect("shard 12 opens");
    b
}

async fn commit(c: &mut Client, group: &str) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(7),
                ]),
        ]);
    let r = c.call(&req, 8).await;
    r.topics[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_outside_local_shards_answer_not_coordinator() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = sharded_broker(dir.path()).await;
    assert_eq!(b.broker.groups.shard_of(LOCAL), 12);
    assert_eq!(b.broker.groups.shard_of(REMOTE), 47);
    let mut c = Client::connect(&b.addr.to_string()).await;
    let created = c
        .call(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
            5,
        )
        .await;
    assert_eq!(created.topics[0].error_code, NONE);

    // FindCoordinator: this broker for the local group only (v3 and v4).
    let find = |key: &str| {
        FindCoordinatorRequest::default()
            .with_key(s(key))
            .with_key_type(0)
    };
    let r = c.call(&find(LOCAL), 3).await;
    assert_eq!((r.error_code, r.node_id.0), (NONE, 1));
    let r = c.call(&find(REMOTE), 3).await;
    assert_eq!((r.error_code, r.node_id.0), (COORDINATOR_NOT_AVAILABLE, -1));
    let r = c
        .call(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s(LOCAL), s(REMOTE)]),
            4,
        )
        .await;
    let codes: Vec<(i16, i32)> = r
        .coordinators
        .iter()
        .map(|c| (c.error_code, c.node_id.0))
        .collect();
    assert_eq!(codes, vec![(NONE, 1), (COORDINATOR_NOT_AVAILABLE, -1)]);

    // OffsetCommit.
    assert_eq!(commit(&mut c, LOCAL).await, NONE);
    assert_eq!(commit(&mut c, REMOTE).await, NOT_COORDINATOR);

    // JoinGroup, SyncGroup, Heartbeat, LeaveGroup of the remote group.
    let join = JoinGroupRequest::default()
        .with_group_id(gid(REMOTE))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(bytes::Bytes::new()),
        ]);
    assert_eq!(c.call(&join, 5).await.error_code, NOT_COORDINATOR);
    let sync = SyncGroupRequest::default()
        .with_group_id(gid(REMOTE))
        .with_member_id(s("m"));
    assert_eq!(c.call(&sync, 3).await.error_code, NOT_COORDINATOR);
    let hb = HeartbeatRequest::default()
        .with_group_id(gid(REMOTE))
        .with_member_id(s("m"));
    assert_eq!(c.call(&hb, 3).await.error_code, NOT_COORDINATOR);
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid(REMOTE))
        .with_members(vec![MemberIdentity::default().with_member_id(s("m"))]);
    assert_eq!(c.call(&leave, 3).await.error_code, NOT_COORDINATOR);

    // OffsetDelete.
    let del = |g: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(gid(g))
            .with_topics(vec![
                OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0),
                    ]),
            ])
    };
    assert_eq!(c.call(&del(REMOTE), 0).await.error_code, NOT_COORDINATOR);

    // OffsetFetch: v7 for one group, v8 per group.
    let one = OffsetFetchRequest::default()
        .with_group_id(gid(REMOTE))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0]),
        ]));
    assert_eq!(c.call(&one, 7).await.error_code, NOT_COORDINATOR);
    let many = OffsetFetchRequest::default().with_groups(
        [LOCAL, REMOTE]
            .iter()
            .map(|g| {
                OffsetFetchRequestGroup::default()
                    .with_group_id(gid(g))
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopics::default()
                            .with_name(TopicName(s("t")))
                            .with_partition_indexes(vec![0]),
                    ]))
            })
            .collect(),
    );
    let r = c.call(&many, 8).await;
    assert_eq!(r.groups[0].error_code, NONE);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 7);
    assert_eq!(r.groups[1].error_code, NOT_COORDINATOR);

    // DescribeGroups: per group.
    let r = c
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![gid(LOCAL), gid(REMOTE)]),
            5,
        )
        .await;
    let codes: Vec<i16> = r.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(codes, vec![NONE, NOT_COORDINATOR]);

    // ListGroups: the local shards' groups.
    let r = c.call(&ListGroupsRequest::default(), 4).await;
    let listed: Vec<String> = r.groups.iter().map(|g| g.group_id.to_string()).collect();
    assert_eq!(listed, vec![LOCAL.to_string()]);

    // DeleteGroups: per group (the local one is Empty, so it goes).
    let r = c
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![
                gid(REMOTE),
                gid(LOCAL),
                gid("never-seen"),
            ]),
            2,
        )
        .await;
    let codes: Vec<i16> = r.results.iter().map(|g| g.error_code).collect();
    let never_seen = if b.broker.groups.shard_of("never-seen") == 12 {
        GROUP_ID_NOT_FOUND
    } else {
        NOT_COORDINATOR
    };
    assert_eq!(codes, vec![NOT_COORDINATOR, NONE, never_seen]);

    // Once the broker gains shard 47, the remote group is served here.
    b.broker
        .groups
        .open_shard(47, Arc::new(|| true))
        .expect("shard 47 opens");
    assert_eq!(commit(&mut c, REMOTE).await, NONE);
    let r = c.call(&find(REMOTE), 3).await;
    assert_eq!(r.error_code, NONE);
    // And once it loses shard 12, the local one is not.
    b.broker.groups.close_shard(12);
    assert_eq!(commit(&mut c, LOCAL).await, NOT_COORDINATOR);
    b.stop().await;
}
