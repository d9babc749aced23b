//! Group and transaction answers the wire test kit found differing from
//! Apache Kafka: each test pins Kafka's answer to one request shape.

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
