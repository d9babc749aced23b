//! Answers the wire test kit found differing from Apache Kafka 3.7
//! (compat/kafka/differences): each test pins Kafka's answer.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::records::name;
use support::{Client, InProcess};

use kaas::log::FsyncMode;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// KIP-511 (AV-04): ApiVersions v3 whose client software name or version
/// is empty or not `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?` is
/// INVALID_REQUEST with no API keys; a valid one is answered in full.
#[tokio::test]
async fn api_versions_v3_refuses_an_invalid_client_software_name_or_version() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    for (name, version, valid) in [
        ("", "1", false),
        ("bad name", "1", false),
        ("client-", "1", false),
        ("-client", "1", false),
        ("kaas", "", false),
        ("kaas", "1+2", false),
        ("my-client.x", "1.0-rc1", true),
        ("a", "1", true),
    ] {
        let r = c
            .call(
                &ApiVersionsRequest::default()
                    .with_client_software_name(s(name))
                    .with_client_software_version(s(version)),
                3,
            )
            .await;
        let want = if valid { 0 } else { 42 };
        assert_eq!(r.error_code, want, "{name:?} {version:?}");
        assert_eq!(r.api_keys.is_empty(), !valid, "{name:?} {version:?}");
    }
    // Before v3 there are no such fields: nothing to refuse.
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 2).await.error_code,
        0
    );
    b.stop().await;
}

/// Metadata v12 of topics by name, without auto-creation: (error, id) each.
async fn metadata_by_name(c: &mut Client, names: &[&str]) -> Vec<(i16, uuid::Uuid)> {
    let req = MetadataRequest::default()
        .with_topics(Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(name(n))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(false);
    let r = c.call(&req, 12).await;
    r.topics
        .iter()
        .map(|t| (t.error_code, t.topic_id))
        .collect()
}

/// AD-07: a name given twice in one CreateTopics is one INVALID_REQUEST
/// result for that name, and neither entry is created; the other topics
/// of the request are.
#[tokio::test]
async fn create_topics_naming_a_topic_twice_creates_neither() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let topic = |n: &str, p: i32| {
        CreatableTopic::default()
            .with_name(name(n))
            .with_num_partitions(p)
            .with_replication_factor(1)
    };
    let r = c
        .call(
            &CreateTopicsRequest::default().with_topics(vec![
                topic("twice", 1),
                topic("twice", 2),
                topic("other", 1),
            ]),
            5,
        )
        .await;
    let got: Vec<_> = r
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.error_code))
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.contains(&("twice".into(), 42)), "{got:?}");
    assert!(got.contains(&("other".into(), 0)), "{got:?}");
    let md = metadata_by_name(&mut c, &["twice", "other"]).await;
    assert_eq!((md[0].0, md[1].0), (3, 0));
    b.stop().await;
}

/// DescribeConfigs of one resource: the result.
async fn describe(
    c: &mut Client,
    resource_type: i8,
    resource: &str,
    keys: Option<&[&str]>,
    synonyms: bool,
) -> describe_configs_response::DescribeConfigsResult {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(synonyms)
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(resource))
                .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
        ]);
    c.call(&req, 4).await.results.remove(0)
}

/// AD-14: a topic resource with an empty name is INVALID_TOPIC_EXCEPTION.
#[tokio::test]
async fn describe_configs_of_an_empty_topic_name_is_invalid_topic() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(describe(&mut c, 2, "", None, false).await.error_code, 17);
    assert_eq!(
        describe(&mut c, 2, "never", None, false).await.error_code,
        3
    );
    b.stop().await;
}

/// AD-15: the broker resource answers Kafka's common broker keys, with
/// Kafka's defaults where kaas follows them.
#[tokio::test]
async fn describe_broker_configs_answers_retention_hours() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let node = b.broker.config.node_id.to_string();
    let keys = ["log.retention.hours", "log.retention.ms", "log.roll.hours"];
    let r = describe(&mut c, 4, &node, Some(&keys), false).await;
    assert_eq!(r.error_code, 0);
    let get = |k: &str| {
        r.configs
            .iter()
            .find(|x| x.name.as_str() == k)
            .map(|x| (x.value.as_ref().map(|v| v.to_string()), x.config_source))
    };
    assert_eq!(get("log.retention.hours"), Some((Some("168".into()), 5)));
    assert_eq!(get("log.roll.hours"), Some((Some("168".into()), 5)));
    // Kafka's log.retention.ms has no default: null.
    assert_eq!(get("log.retention.ms"), Some((None, 5)));
    b.stop().await;
}

/// AD-34: a topic config's synonyms list a broker name only as Kafka
/// does: a set topic retention.ms has no default-config synonym (Kafka's
/// log.retention.ms has no default), cleanup.policy has log.cleanup.policy.
#[tokio::test]
async fn describe_topic_config_synonyms_list_what_kafka_lists() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let r = c
        .call(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(name("t"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)
                    .with_configs(vec![
                        CreatableTopicConfig::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("3600000"))),
                    ]),
            ]),
            5,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    let r = describe(
        &mut c,
        2,
        "t",
        Some(&["retention.ms", "cleanup.policy", "segment.ms"]),
        true,
    )
    .await;
    let synonyms = |k: &str| -> Vec<String> {
        r.configs
            .iter()
            .find(|x| x.name.as_str() == k)
            .expect("asked key")
            .synonyms
            .iter()
            .map(|y| {
                format!(
                    "{}={} ({})",
                    y.name.as_str(),
                    y.value.as_ref().map_or("null", |v| v.as_str()),
                    y.source
                )
            })
            .collect()
    };
    assert_eq!(synonyms("retention.ms"), ["retention.ms=3600000 (1)"]);
    assert_eq!(
        synonyms("cleanup.policy"),
        ["log.cleanup.policy=delete (5)"]
    );
    assert!(synonyms("segment.ms").is_empty());
    b.stop().await;
}

/// AD-33: a DeleteTopics v6 entry with both a name and an id, or with
/// neither, is INVALID_REQUEST and deletes nothing.
#[tokio::test]
async fn delete_topics_entry_with_name_and_id_or_neither_is_invalid() {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    support::records::create(&mut c, "t", 1).await;
    let id = metadata_by_name(&mut c, &["t"]).await[0].1;
    assert!(!id.is_nil());
    let delete = async |c: &mut Client, state: DeleteTopicState| {
        let r = c
            .call(&DeleteTopicsRequest::default().with_topics(vec![state]), 6)
            .await;
        r.responses
            .iter()
            .map(|x| (x.error_code, x.topic_id == id))
            .collect::<Vec<_>>()
    };
    let both = DeleteTopicState::default()
        .with_name(Some(name("t")))
        .with_topic_id(id);
    assert_eq!(delete(&mut c, both).await, [(42, true)]);
    assert_eq!(
        metadata_by_name(&mut c, &["t"]).await[0].0,
        0,
        "not deleted"
    );
    assert_eq!(
        delete(&mut c, DeleteTopicState::default()).await,
        [(42, false)]
    );
    let by_id = DeleteTopicState::default().with_topic_id(id);
    assert_eq!(delete(&mut c, by_id).await, [(0, true)]);
    b.stop().await;
}

/// AD-36: Metadata v12 naming a topic by id only resolves the id; once
/// the topic is deleted the id is UNKNOWN_TOPIC_ID with a null name.
#[tokio::test]
async fn metadata_v12_by_topic_id_resolves_the_id() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    support::records::create(&mut c, "t", 2).await;
    let id = metadata_by_name(&mut c, &["t"]).await[0].1;
    let by_id = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_topic_id(id),
        ]))
        .with_allow_auto_topic_creation(false);
    let r = c.call(&by_id, 12).await;
    let t = &r.topics[0];
    assert_eq!(t.error_code, 0);
    assert_eq!(t.name.as_ref().map(|n| n.0.as_str()), Some("t"));
    assert_eq!((t.topic_id, t.partitions.len()), (id, 2));
    let d = c
        .call(
            &DeleteTopicsRequest::default().with_topic_names(vec![name("t")]),
            5,
        )
        .await;
    assert_eq!(d.responses[0].error_code, 0);
    let r = c.call(&by_id, 12).await;
    let t = &r.topics[0];
    assert_eq!(
        (t.error_code, t.name.is_none(), t.topic_id),
        (100, true, id)
    );
    b.stop().await;
}

/// AV-01, AD-30, AD-31: the replica-management, feature, token and
/// client-metrics APIs of 3.7, answered in kaas's model.
#[tokio::test]
async fn replica_management_feature_and_token_apis_answer_as_kafka() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let node = b.broker.config.node_id;
    support::records::create(&mut c, "t", 1).await;

    let av = c.call(&support::api_versions_v3(), 3).await;
    for (key, lo, hi) in [
        (43, 0, 2),
        (45, 0, 0),
        (46, 0, 0),
        (57, 0, 1),
        (74, 0, 0),
        (34, 1, 2),
    ] {
        assert!(
            av.api_keys
                .iter()
                .any(|k| (k.api_key, k.min_version, k.max_version) == (key, lo, hi)),
            "key {key}"
        );
    }

    let elect = |t: &str| {
        ElectLeadersRequest::default()
            .with_election_type(0)
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic(name(t))
                    .with_partitions(vec![0]),
            ]))
    };
    let codes = |r: &ElectLeadersResponse| {
        r.replica_election_results
            .iter()
            .flat_map(|x| x.partition_result.iter().map(|p| p.error_code))
            .collect::<Vec<_>>()
    };
    assert_eq!(codes(&c.call(&elect("t"), 1).await), [84]);
    assert_eq!(codes(&c.call(&elect("never"), 1).await), [3]);
    let all = c
        .call(
            &ElectLeadersRequest::default().with_topic_partitions(None),
            2,
        )
        .await;
    assert!(all.replica_election_results.is_empty());

    let list = c
        .call(
            &ListPartitionReassignmentsRequest::default().with_topics(None),
            0,
        )
        .await;
    assert_eq!((list.error_code, list.topics.len()), (0, 0));
    for (replicas, want) in [
        (Some(vec![BrokerId(node)]), 0),
        (None, 85),
        (Some(vec![BrokerId(node + 1000)]), 39),
    ] {
        let r = c
            .call(
                &AlterPartitionReassignmentsRequest::default().with_topics(vec![
                    ReassignableTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            ReassignablePartition::default()
                                .with_partition_index(0)
                                .with_replicas(replicas),
                        ]),
                ]),
                0,
            )
            .await;
        assert_eq!(
            (r.error_code, r.responses[0].partitions[0].error_code),
            (0, want)
        );
    }

    // PLAINTEXT: Kafka refuses the channel before the configuration.
    let t = c
        .call(
            &CreateDelegationTokenRequest::default().with_max_lifetime_ms(-1),
            3,
        )
        .await;
    assert_eq!(t.error_code, 64);
    let d = c
        .call(
            &DescribeDelegationTokenRequest::default().with_owners(None),
            3,
        )
        .await;
    assert_eq!(d.error_code, 64);

    let u = c
        .call(
            &UpdateFeaturesRequest::default().with_feature_updates(vec![
                FeatureUpdateKey::default()
                    .with_feature(s("no.such.feature"))
                    .with_max_version_level(3),
            ]),
            1,
        )
        .await;
    assert_eq!((u.error_code, u.results[0].error_code), (0, 95));

    let path = std::fs::canonicalize(dir.path()).expect("canonical");
    let move_to = |p: &str| {
        AlterReplicaLogDirsRequest::default().with_dirs(vec![
            AlterReplicaLogDir::default()
                .with_path(s(p))
                .with_topics(vec![
                    AlterReplicaLogDirTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![0, 7]),
                ]),
        ])
    };
    let r = c.call(&move_to(&path.display().to_string()), 2).await;
    let got: Vec<_> = r.results[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(got, [0, 9]);
    let r = c.call(&move_to("/elsewhere"), 2).await;
    assert_eq!(r.results[0].partitions[0].error_code, 57);

    let m = c.call(&ListConfigResourcesRequest::default(), 0).await;
    assert_eq!((m.error_code, m.config_resources.len()), (0, 0));
    b.stop().await;
}

/// MF-11: a Metadata v1 whose topics array length is -2 is read as null
/// (all topics), as Kafka reads any negative nullable array length.
#[tokio::test]
async fn metadata_v1_with_a_negative_topics_length_is_all_topics() {
    use kafka_protocol::protocol::Decodable;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    support::records::create(&mut c, "t", 1).await;
    let mut body = Vec::new();
    body.extend_from_slice(&3i16.to_be_bytes()); // Metadata
    body.extend_from_slice(&1i16.to_be_bytes()); // v1
    body.extend_from_slice(&61i32.to_be_bytes()); // correlation id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    body.extend_from_slice(&(-2i32).to_be_bytes()); // topics: -2
    c.send_raw(&body).await; // the client adds the size
    let mut resp = c.read_frame().await.expect("answered, not closed");
    let header = ResponseHeader::decode(&mut resp, 0).expect("header");
    assert_eq!(header.correlation_id, 61);
    let r = MetadataResponse::decode(&mut resp, 1).expect("metadata v1");
    let names: Vec<_> = r
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(names, ["t"]);
    b.stop().await;
}
