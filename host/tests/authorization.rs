//! Per-API authorization: every API is authorized as Kafka 3.7 does it. The
//! in-process broker runs with the authorizer enabled and the ACLs of each
//! test; every connection is `User:ANONYMOUS` (PLAINTEXT), so "without the
//! ACL" and "with it" are two brokers, or two resources.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;
use kaas::security::acl::{AclBinding, CLUSTER_NAME, PatternType, Permission};
use kaas::security::{Operation, Principal, ResourceType};
use support::records::{name, produce};
use support::{Client, InProcess};

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const OPERATION_NOT_ATTEMPTED: i16 = 55;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// `User:ANONYMOUS` may `op` on the literal resource.
fn allow(resource_type: ResourceType, resource_name: &str, operation: Operation) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: resource_name.into(),
        pattern_type: PatternType::Literal,
        principal: Principal::anonymous(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    }
}

fn topic(n: &str, op: Operation) -> AclBinding {
    allow(ResourceType::Topic, n, op)
}

fn cluster(op: Operation) -> AclBinding {
    allow(ResourceType::Cluster, CLUSTER_NAME, op)
}

/// A broker enforcing `acls`, with topics `names` (2 partitions each)
/// created beforehand by the broker itself.
async fn start(dir: &std::path::Path, acls: Vec<AclBinding>, names: &[&str]) -> InProcess {
    let b = InProcess::start_with(dir, FsyncMode::Always, |c| {
        c.authorizer.enabled = true;
        c.acls = acls;
    })
    .await;
    for n in names {
        kaas::cluster::admin::create_topic(
            b.broker.topic_admin(),
            n,
            2,
            &kaas::cluster::admin::Replication::Factor(-1),
            Default::default(),
            false,
        )
        .expect("create");
    }
    b
}

async fn connect(b: &InProcess) -> Client {
    Client::connect(&b.addr.to_string()).await
}

fn plain_batch() -> Vec<u8> {
    data_batch(&[(None, b"v")], 1, None, false)
}

#[tokio::test]
async fn produce_needs_write_on_the_topic_checked_before_its_existence() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![topic("t", Operation::Write)],
        &["t", "secret"],
    )
    .await;
    let mut c = connect(&b).await;
    assert_eq!(produce(&mut c, "t", 0, plain_batch()).await.0, 0);
    assert_eq!(
        produce(&mut c, "secret", 0, plain_batch()).await.0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce(&mut c, "no-such-topic", 0, plain_batch()).await.0,
        TOPIC_AUTHORIZATION_FAILED,
        "an unknown topic without WRITE is 29, not 3"
    );
    assert_eq!(
        b.broker
            .logs
            .partition("secret", 0)
            .expect("p")
            .high_watermark(),
        0
    );
    b.stop().await;
}

#[tokio::test]
async fn a_transactional_produce_needs_write_on_its_transactional_id() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), vec![topic("t", Operation::Write)], &["t"]).await;
    let mut c = connect(&b).await;
    let batch = data_batch(&[(None, b"v")], 1, Some((0, 0, 0)), true);
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(s("x"))))
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name("t"))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(batch.clone()))),
                    PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(Bytes::from(batch))),
                ]),
        ]);
    let resp = c.call(&req, 9).await;
    let codes: Vec<i16> = resp.responses[0]
        .partition_responses
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![TRANSACTIONAL_ID_AUTHORIZATION_FAILED; 2]);
    b.stop().await;
}

fn fetch_request(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

fn list_offsets_request(topic: &str) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ])
}

#[tokio::test]
async fn fetch_needs_read_and_list_offsets_describe() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            topic("open", Operation::Read),
            topic("open", Operation::Describe),
        ],
        &["open", "closed"],
    )
    .await;
    let mut c = connect(&b).await;
    let code = |r: &FetchResponse| r.responses[0].partitions[0].error_code;
    assert_eq!(code(&c.call(&fetch_request("open"), 12).await), 0);
    assert_eq!(
        code(&c.call(&fetch_request("closed"), 12).await),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        code(&c.call(&fetch_request("unknown"), 12).await),
        TOPIC_AUTHORIZATION_FAILED
    );
    let lo = |r: &ListOffsetsResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(lo(&c.call(&list_offsets_request("open"), 7).await), 0);
    assert_eq!(
        lo(&c.call(&list_offsets_request("closed"), 7).await),
        TOPIC_AUTHORIZATION_FAILED
    );
    b.stop().await;
}

fn metadata_of(names: Option<&[&str]>, auto_create: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(names.map(|ns| {
            ns.iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(name(n))))
                .collect()
        }))
        .with_allow_auto_topic_creation(auto_create)
}

#[tokio::test]
async fn metadata_hides_topics_without_describe() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            topic("seen", Operation::Describe),
            topic("wanted", Operation::Describe),
        ],
        &["seen", "hidden"],
    )
    .await;
    let mut c = connect(&b).await;
    let all = c.call(&metadata_of(None, false), 12).await;
    let listed: Vec<String> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(listed, vec!["seen".to_string()]);
    let named = c
        .call(&metadata_of(Some(&["hidden", "nowhere"]), true), 12)
        .await;
    let codes: Vec<i16> = named.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![TOPIC_AUTHORIZATION_FAILED; 2],
        "existing or not, an undescribable topic is 29"
    );
    assert!(named.topics[0].topic_id.is_nil(), "no id leaks");
    // Describable but not creatable: not auto-created.
    let wanted = c.call(&metadata_of(Some(&["wanted"]), true), 12).await;
    assert_eq!(wanted.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(b.broker.logs.topic("wanted").is_none());
    b.stop().await;

    // CREATE on the cluster lets it auto-create.
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            topic("wanted", Operation::Describe),
            cluster(Operation::Create),
        ],
        &[],
    )
    .await;
    let mut c = connect(&b).await;
    let wanted = c.call(&metadata_of(Some(&["wanted"]), true), 12).await;
    assert_eq!(wanted.topics[0].error_code, 0);
    assert!(b.broker.logs.topic("wanted").is_some());
    b.stop().await;
}

fn init_txn(txn: Option<&str>) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(txn.map(|t| TransactionalId(s(t))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

#[tokio::test]
async fn init_producer_id_needs_write_on_the_transactional_id_or_an_idempotent_right() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![allow(
            ResourceType::TransactionalId,
            "mine",
            Operation::Write,
        )],
        &[],
    )
    .await;
    let mut c = connect(&b).await;
    assert_eq!(c.call(&init_txn(Some("mine")), 4).await.error_code, 0);
    assert_eq!(
        c.call(&init_txn(Some("theirs")), 4).await.error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        c.call(&init_txn(None), 4).await.error_code,
        CLUSTER_AUTHORIZATION_FAILED,
        "idempotent without IDEMPOTENT_WRITE nor any topic WRITE"
    );
    b.stop().await;

    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), vec![topic("any", Operation::Write)], &[]).await;
    let mut c = connect(&b).await;
    assert_eq!(
        c.call(&init_txn(None), 4).await.error_code,
        0,
        "WRITE on some topic is enough (KIP-679)"
    );
    b.stop().await;
}

fn add_partitions(txn: &str, pid: i64, epoch: i16, topics: &[&str]) -> AddPartitionsToTxnRequest {
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(txn)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(
            topics
                .iter()
                .map(|t| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(name(t))
                        .with_partitions(vec![0])
                })
                .collect(),
        )
}

#[tokio::test]
async fn transaction_apis_need_write_on_the_transactional_id_and_their_resources() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            allow(ResourceType::TransactionalId, "x", Operation::Write),
            allow(ResourceType::TransactionalId, "x", Operation::Describe),
            topic("t", Operation::Write),
        ],
        &["t", "other"],
    )
    .await;
    let mut c = connect(&b).await;
    let r = c.call(&init_txn(Some("x")), 4).await;
    assert_eq!(r.error_code, 0);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);

    // FindCoordinator: DESCRIBE on the transactional id.
    let find = |key: &str, key_type: i8| {
        FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![s(key)])
    };
    let code = |r: FindCoordinatorResponse| r.coordinators[0].error_code;
    assert_eq!(code(c.call(&find("x", 1), 4).await), 0);
    assert_eq!(
        code(c.call(&find("y", 1), 4).await),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        code(c.call(&find("g", 0), 4).await),
        GROUP_AUTHORIZATION_FAILED
    );

    // AddPartitionsToTxn: the topic without WRITE fails, the rest is not
    // attempted; another transactional id is 53.
    let r = c
        .call(&add_partitions("x", pid, epoch, &["t", "other"]), 3)
        .await;
    let codes: Vec<(String, i16)> = r
        .results_by_topic_v3_and_below
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.results_by_partition[0].partition_error_code,
            )
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            ("t".to_string(), OPERATION_NOT_ATTEMPTED),
            ("other".to_string(), TOPIC_AUTHORIZATION_FAILED)
        ]
    );
    let r = c.call(&add_partitions("y", pid, epoch, &["t"]), 3).await;
    assert_eq!(
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    let r = c.call(&add_partitions("x", pid, epoch, &["t"]), 3).await;
    assert_eq!(
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );

    // AddOffsetsToTxn: READ on the group.
    let add_offsets = |txn: &str| {
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s(txn)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(s("g")))
    };
    assert_eq!(
        c.call(&add_offsets("y"), 3).await.error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        c.call(&add_offsets("x"), 3).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );

    // TxnOffsetCommit: every partition 53 without WRITE on the id.
    let toc = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("y")))
        .with_group_id(GroupId(s("g")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_topics(vec![
            kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    let r = c.call(&toc, 3).await;
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );

    // EndTxn: WRITE on the id.
    let end = |txn: &str| {
        EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(txn)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(false)
    };
    assert_eq!(
        c.call(&end("y"), 3).await.error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(c.call(&end("x"), 3).await.error_code, 0);

    // Between brokers: v4 and WriteTxnMarkers need CLUSTER_ACTION.
    let v4 = AddPartitionsToTxnRequest::default().with_transactions(vec![
        kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s("x")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(true)
            .with_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![0]),
            ]),
    ]);
    assert_eq!(
        c.call(&v4, 4).await.error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );
    let markers = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(false)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    let r = c.call(&markers, 1).await;
    assert_eq!(
        r.markers[0].topics[0].partitions[0].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );
    b.stop().await;
}

fn join(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::new()),
        ])
}

fn commit(group: &str, topic: &str) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ])
}

#[tokio::test]
async fn group_apis_need_their_group_and_topic_acls() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            allow(ResourceType::Group, "g", Operation::Read),
            allow(ResourceType::Group, "g", Operation::Describe),
            allow(ResourceType::Group, "r", Operation::Read),
            topic("t", Operation::Read),
        ],
        &["t", "u"],
    )
    .await;
    let mut c = connect(&b).await;
    // JoinGroup: READ on the group (v4: the first answer asks for a member id).
    assert_eq!(
        c.call(&join("h"), 5).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    assert_ne!(
        c.call(&join("g"), 5).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("h")))
        .with_member_id(s("m"))
        .with_generation_id(1);
    assert_eq!(c.call(&hb, 4).await.error_code, GROUP_AUTHORIZATION_FAILED);
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("h")))
        .with_member_id(s("m"));
    assert_eq!(
        c.call(&leave, 1).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("h")))
        .with_member_id(s("m"))
        .with_generation_id(1);
    assert_eq!(
        c.call(&sync, 3).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );

    // OffsetCommit: READ on the group, then READ on each topic.
    let code = |r: OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(
        code(c.call(&commit("h", "t"), 8).await),
        GROUP_AUTHORIZATION_FAILED
    );
    assert_eq!(
        code(c.call(&commit("g", "u"), 8).await),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(code(c.call(&commit("g", "t"), 8).await), 0);

    // DescribeGroups: DESCRIBE per group.
    let dg = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g")), GroupId(s("h"))]);
    let r = c.call(&dg, 5).await;
    let codes: Vec<i16> = r.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(codes, vec![0, GROUP_AUTHORIZATION_FAILED]);

    // ListGroups: only describable groups; READ on "r" implies DESCRIBE
    // (Kafka's implied operations), "h" is not listed.
    assert_eq!(code(c.call(&commit("r", "t"), 8).await), 0);
    let listed = c.call(&ListGroupsRequest::default(), 4).await;
    let ids: Vec<String> = listed
        .groups
        .iter()
        .map(|g| g.group_id.0.to_string())
        .collect();
    assert_eq!(ids, vec!["g".to_string(), "r".to_string()]);

    // DeleteGroups: DELETE per group.
    let del = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]);
    assert_eq!(
        c.call(&del, 2).await.results[0].error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    b.stop().await;
}

#[tokio::test]
async fn admin_apis_need_their_acls() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            topic("mine", Operation::Create),
            topic("t", Operation::Describe),
        ],
        &["t"],
    )
    .await;
    let mut c = connect(&b).await;
    let create = |n: &str| {
        CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(name(n))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ])
    };
    let r = c.call(&create("theirs"), 7).await;
    assert_eq!(r.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(b.broker.logs.topic("theirs").is_none());
    let r = c.call(&create("mine"), 7).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(
        r.topics[0].topic_config_error_code, TOPIC_AUTHORIZATION_FAILED,
        "no DESCRIBE_CONFIGS: configs are not shown"
    );

    let del = DeleteTopicsRequest::default().with_topic_names(vec![name("t"), name("hidden")]);
    let r = c.call(&del, 5).await;
    let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![TOPIC_AUTHORIZATION_FAILED; 2]);
    assert!(b.broker.logs.topic("t").is_some());

    let cp = CreatePartitionsRequest::default().with_topics(vec![
        CreatePartitionsTopic::default()
            .with_name(name("t"))
            .with_count(4),
    ]);
    assert_eq!(
        c.call(&cp, 3).await.results[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );

    let dr = DeleteRecordsRequest::default().with_topics(vec![
        DeleteRecordsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![
                DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(0),
            ]),
    ]);
    assert_eq!(
        c.call(&dr, 2).await.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );

    let dc = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t")),
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1")),
    ]);
    let r = c.call(&dc, 4).await;
    let codes: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
    assert_eq!(
        codes,
        vec![TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED]
    );
    b.stop().await;
}

/// KIP-430's bit field of `ops`.
fn bits(ops: &[Operation]) -> i32 {
    ops.iter().fold(0, |b, op| b | (1 << op.code()))
}

#[tokio::test]
async fn authorized_operations_are_what_the_acls_allow_where_asked() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            topic("t", Operation::Read),
            allow(ResourceType::Group, "g", Operation::Read),
        ],
        &["t"],
    )
    .await;
    let mut c = connect(&b).await;
    // Metadata v10: per topic and, without DESCRIBE on the cluster, 0.
    let req = metadata_of(Some(&["t"]), false)
        .with_include_topic_authorized_operations(true)
        .with_include_cluster_authorized_operations(true);
    let r = c.call(&req, 10).await;
    assert_eq!(
        r.topics[0].topic_authorized_operations,
        bits(&[Operation::Read, Operation::Describe]),
        "READ implies DESCRIBE"
    );
    assert_eq!(r.cluster_authorized_operations, 0);
    let r = c.call(&metadata_of(Some(&["t"]), false), 10).await;
    assert_eq!(
        r.topics[0].topic_authorized_operations,
        i32::MIN,
        "not asked"
    );
    // DescribeCluster: every live broker, and 0 without DESCRIBE on the cluster.
    let req = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let r = c.call(&req, 1).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.endpoint_type, 1);
    assert_eq!(r.brokers.len(), 1);
    assert_eq!(r.brokers[0].port, i32::from(b.addr.port()));
    assert_eq!(r.cluster_authorized_operations, 0);
    let r = c.call(&req.clone().with_endpoint_type(2), 1).await;
    assert_eq!(
        r.error_code, 114,
        "MISMATCHED_ENDPOINT_TYPE: no controller endpoints"
    );
    // DescribeGroups v3+: the group's operations as the ACLs allow them.
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(s("g"))])
        .with_include_authorized_operations(true);
    let r = c.call(&req, 5).await;
    assert_eq!(
        r.groups[0].authorized_operations,
        bits(&[Operation::Read, Operation::Describe])
    );
    b.stop().await;

    // With DESCRIBE and ALTER_CONFIGS on the cluster: those and DESCRIBE_CONFIGS
    // (which ALTER_CONFIGS implies, as on Kafka), nothing more.
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![
            cluster(Operation::Describe),
            cluster(Operation::AlterConfigs),
        ],
        &[],
    )
    .await;
    let mut c = connect(&b).await;
    let req = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let r = c.call(&req, 0).await;
    assert_eq!(
        r.cluster_authorized_operations,
        bits(&[
            Operation::Describe,
            Operation::AlterConfigs,
            Operation::DescribeConfigs
        ])
    );
    b.stop().await;
}

#[tokio::test]
async fn describe_log_dirs_reports_partition_sizes_to_a_caller_that_may_describe_the_cluster() {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        dir.path(),
        vec![topic("t", Operation::Write), cluster(Operation::Describe)],
        &["t", "u"],
    )
    .await;
    let mut c = connect(&b).await;
    for _ in 0..3 {
        assert_eq!(produce(&mut c, "t", 1, plain_batch()).await.0, 0);
    }
    let on_disk = b.broker.logs.partition("t", 1).expect("p").size_bytes() as i64;
    assert!(on_disk > 0);
    // Every partition (a null list), v4: sizes and the volume's bytes.
    let all = DescribeLogDirsRequest::default().with_topics(None);
    let r = c.call(&all, 4).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.results.len(), 1);
    let d = &r.results[0];
    assert_eq!(d.error_code, 0);
    assert!(d.total_bytes > 0 && d.usable_bytes > 0 && d.usable_bytes <= d.total_bytes);
    let sizes: Vec<(String, i32, i64, i64)> = d
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_size,
                    p.offset_lag,
                )
            })
        })
        .collect();
    assert_eq!(sizes.len(), 4, "{sizes:?}");
    assert!(sizes.contains(&("t".into(), 1, on_disk, 0)), "{sizes:?}");
    // Named partitions: just those that exist here.
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![1, 7]),
        DescribableLogDirTopic::default()
            .with_topic(name("nope"))
            .with_partitions(vec![0]),
    ]));
    let r = c.call(&req, 1).await;
    let d = &r.results[0];
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].partitions.len(), 1);
    assert_eq!(d.topics[0].partitions[0].partition_size, on_disk);
    b.stop().await;

    // Without DESCRIBE on the cluster: nothing, and the error where v3+ carries one.
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), vec![], &["t"]).await;
    let mut c = connect(&b).await;
    let all = DescribeLogDirsRequest::default().with_topics(None);
    let r = c.call(&all, 3).await;
    assert_eq!(r.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(r.results.is_empty());
    let r = c.call(&all, 1).await;
    assert!(r.results.is_empty());
    b.stop().await;
}
