//! Topic configs as Kafka 3.7 names and validates them, over the wire:
//! CreateTopics refuses unknown names and bad values with Kafka's
//! INVALID_CONFIG messages, refuses what kaas does not do yet
//! (min.insync.replicas above 1) instead of ignoring it, accepts the
//! documented no-ops, and DescribeConfigs lists every topic config with its
//! source. A compression.type=zstd topic stores zstd batches and is not
//! served to a Fetch below v10.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kaas::log::FsyncMode;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, InProcess};

const INVALID_CONFIG: i16 = 40;
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// CreateTopics v5 of `name` with `configs`: (error code, message).
async fn create(c: &mut Client, name: &str, configs: &[(&str, &str)]) -> (i16, Option<String>) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            ),
    ]);
    let resp = c.call(&req, 5).await;
    let t = &resp.topics[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
    )
}

#[tokio::test]
async fn create_topics_validates_configs_as_kafka_37_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;

    let (code, msg) = create(&mut c, "t1", &[("segment.size", "1")]).await;
    assert_eq!(code, INVALID_CONFIG);
    assert_eq!(
        msg.as_deref(),
        Some("Unknown topic config name: segment.size")
    );

    let (code, msg) = create(&mut c, "t2", &[("retention.ms", "-5")]).await;
    assert_eq!(code, INVALID_CONFIG);
    assert_eq!(
        msg.as_deref(),
        Some("Invalid value -5 for configuration retention.ms: Value must be at least -1")
    );

    // What kaas does not do yet is refused, said so, and never silently ignored.
    let (code, msg) = create(&mut c, "t3", &[("remote.storage.enable", "true")]).await;
    assert_eq!(code, INVALID_CONFIG);
    assert!(
        msg.as_deref().is_some_and(|m| m.contains("not supported")),
        "{msg:?}"
    );
    let (code, msg) = create(&mut c, "t3", &[("compression.type", "brotli")]).await;
    assert_eq!(code, INVALID_CONFIG);
    assert_eq!(
        msg.as_deref(),
        Some(
            "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
        )
    );

    // A documented no-op and enforced configs are accepted.
    let (code, msg) = create(
        &mut c,
        "t4",
        &[
            ("flush.messages", "1"),
            ("retention.ms", "3600000"),
            ("compression.type", "gzip"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{msg:?}");

    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t4")),
    ]);
    let resp = c.call(&req, 3).await;
    let r = &resp.results[0];
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.configs.len(),
        31,
        "every Kafka 3.7 topic config is listed"
    );
    let get = |name: &str| {
        r.configs
            .iter()
            .find(|e| e.name.as_str() == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let flush = get("flush.messages");
    assert_eq!(flush.value.as_ref().map(|v| v.as_str()), Some("1"));
    assert_eq!(flush.config_source, SOURCE_DYNAMIC_TOPIC);
    let retention = get("retention.ms");
    assert_eq!(
        retention.value.as_ref().map(|v| v.as_str()),
        Some("3600000")
    );
    assert_eq!(retention.config_source, SOURCE_DYNAMIC_TOPIC);
    let compression = get("compression.type");
    assert_eq!(compression.value.as_ref().map(|v| v.as_str()), Some("gzip"));
    assert_eq!(compression.config_source, SOURCE_DYNAMIC_TOPIC);
    let ratio = get("min.cleanable.dirty.ratio");
    assert_eq!(ratio.value.as_ref().map(|v| v.as_str()), Some("0.5"));
    assert_eq!(ratio.config_source, SOURCE_DEFAULT);
    assert_eq!(ratio.config_type, 6, "DOUBLE");
    assert!(ratio.synonyms.is_empty(), "synonyms only when asked");
    assert_eq!(ratio.documentation, None, "documentation only when asked");

    // Asked for synonyms and documentation (v3+): every layer that sets
    // the config, highest priority first, and a line saying what it does.
    let resp = c
        .call(
            &req.clone()
                .with_include_synonyms(true)
                .with_include_documentation(true),
            4,
        )
        .await;
    let r = &resp.results[0];
    let flush = r
        .configs
        .iter()
        .find(|e| e.name.as_str() == "flush.messages")
        .expect("flush.messages");
    let synonyms: Vec<(&str, Option<&str>, i8)> = flush
        .synonyms
        .iter()
        .map(|y| {
            (
                y.name.as_str(),
                y.value.as_ref().map(|v| v.as_str()),
                y.source,
            )
        })
        .collect();
    assert_eq!(
        synonyms,
        vec![
            ("flush.messages", Some("1"), SOURCE_DYNAMIC_TOPIC),
            (
                "log.flush.interval.messages",
                Some("9223372036854775807"),
                SOURCE_DEFAULT
            ),
        ]
    );
    assert!(!flush.read_only, "topic configs are alterable");
    assert!(
        flush
            .documentation
            .as_ref()
            .is_some_and(|d| d.contains("--fsync")),
        "{:?}",
        flush.documentation
    );
    assert!(r.configs.iter().all(|e| e.documentation.is_some()));
    b.stop().await;
}

/// IncrementalAlterConfigs v1 of the default broker resource (an empty
/// name): the error code.
async fn alter_default(
    c: &mut Client,
    name: &str,
    op: i8,
    value: Option<&str>,
    validate_only: bool,
) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(s(""))
                .with_configs(vec![
                    AlterableConfig::default()
                        .with_name(s(name))
                        .with_config_operation(op)
                        .with_value(value.map(s)),
                ]),
        ]);
    let resp = c.call(&req, 1).await;
    resp.responses[0].error_code
}

/// `name`'s (value, source) in topic `topic`'s DescribeConfigs.
async fn described(c: &mut Client, topic: &str, name: &str) -> (String, i8) {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configuration_keys(Some(vec![s(name)])),
    ]);
    let resp = c.call(&req, 4).await;
    let e = &resp.results[0].configs[0];
    (
        e.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
        e.config_source,
    )
}

#[tokio::test]
async fn a_cluster_wide_dynamic_default_applies_to_topics_without_an_override() {
    const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(create(&mut c, "plain", &[]).await.0, 0);
    assert_eq!(
        create(&mut c, "own", &[("retention.ms", "5000")]).await.0,
        0
    );

    assert_eq!(
        alter_default(&mut c, "log.retention.ms", SET, Some("60000"), true).await,
        0
    );
    assert_eq!(
        described(&mut c, "plain", "retention.ms").await.1,
        SOURCE_DEFAULT,
        "validate_only"
    );
    assert_eq!(
        alter_default(&mut c, "log.retention.hours", SET, Some("1"), false).await,
        INVALID_CONFIG,
        "not dynamic in Kafka 3.7"
    );
    assert_eq!(
        alter_default(&mut c, "log.cleanup.policy", SET, Some("shred"), false).await,
        INVALID_CONFIG
    );

    assert_eq!(
        alter_default(&mut c, "log.retention.ms", SET, Some("60000"), false).await,
        0
    );
    assert_eq!(
        described(&mut c, "plain", "retention.ms").await,
        ("60000".to_string(), SOURCE_DYNAMIC_DEFAULT_BROKER)
    );
    assert_eq!(
        described(&mut c, "own", "retention.ms").await,
        ("5000".to_string(), SOURCE_DYNAMIC_TOPIC)
    );
    // A topic created now starts from it.
    assert_eq!(create(&mut c, "later", &[]).await.0, 0);
    assert_eq!(described(&mut c, "later", "retention.ms").await.0, "60000");

    // The default broker resource describes what is set there.
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("")),
    ]);
    let resp = c.call(&req, 4).await;
    let names: Vec<&str> = resp.results[0]
        .configs
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, vec!["log.retention.ms"]);

    // A named broker is refused: kaas keeps these cluster-wide.
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let named = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1"))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(s("log.retention.ms"))
                    .with_value(Some(s("1"))),
            ]),
    ]);
    let resp = c.call(&named, 1).await;
    assert_eq!(resp.responses[0].error_code, 42, "INVALID_REQUEST");

    assert_eq!(
        alter_default(&mut c, "log.retention.ms", DELETE, None, false).await,
        0
    );
    assert_eq!(
        described(&mut c, "plain", "retention.ms").await.1,
        SOURCE_DEFAULT
    );
    b.stop().await;
}

/// cleanup.policy is a list: Kafka describes it as it was set (its items
/// trimmed, in their order), so an IncrementalAlterConfigs APPEND of
/// `compact` to the default `delete` reads back `delete,compact`, as
/// Kafka's Java admin client shows it (test_java_client.py).
#[tokio::test]
async fn cleanup_policy_is_described_in_the_order_it_was_set() {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    const APPEND: i8 = 2;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    for (topic, set, shown) in [
        ("dc", "delete,compact", "delete,compact"),
        ("cd", "compact,delete", "compact,delete"),
        ("spaced", "delete , compact", "delete,compact"),
        ("one", "compact", "compact"),
    ] {
        assert_eq!(create(&mut c, topic, &[("cleanup.policy", set)]).await.0, 0);
        assert_eq!(
            described(&mut c, topic, "cleanup.policy").await,
            (shown.to_string(), SOURCE_DYNAMIC_TOPIC),
            "{topic}"
        );
    }

    assert_eq!(create(&mut c, "plain", &[]).await.0, 0);
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("plain"))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(s("cleanup.policy"))
                    .with_config_operation(APPEND)
                    .with_value(Some(s("compact"))),
            ]),
    ]);
    let resp = c.call(&req, 1).await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert_eq!(
        described(&mut c, "plain", "cleanup.policy").await,
        ("delete,compact".to_string(), SOURCE_DYNAMIC_TOPIC)
    );
    b.stop().await;
}
/// Fetch of `topic`-0 from offset 0 at `version`: (error code, records).
async fn fetch(c: &mut Client, topic: &str, version: i16) -> (i16, Vec<u8>) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_replica_id(BrokerId(-1))
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(-1)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let resp = c.call(&req, version).await;
    let p = &resp.responses[0].partitions[0];
    (
        p.error_code,
        p.records.as_ref().map(|r| r.to_vec()).unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_zstd_topic_stores_zstd_and_is_not_served_to_fetch_below_v10() {
    const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let (code, msg) = create(&mut c, "z", &[("compression.type", "zstd")]).await;
    assert_eq!(code, 0, "{msg:?}");
    let batch = kaas::log::batch::data_batch(&[(None, b"value")], 1000, None, false);
    let (code, _) = support::records::produce(&mut c, "z", 0, batch).await;
    assert_eq!(code, 0);

    let (code, records) = fetch(&mut c, "z", 10).await;
    assert_eq!(code, 0);
    let h = kaas::log::batch::parse_header(&records).expect("a batch");
    assert_eq!(h.compression(), 4, "stored and served zstd");
    let (code, records) = fetch(&mut c, "z", 9).await;
    assert_eq!(
        (code, records.len()),
        (UNSUPPORTED_COMPRESSION_TYPE, 0),
        "a v9 client may not read zstd"
    );
    b.stop().await;
}
