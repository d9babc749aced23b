//! Topic configs as Kafka 3.7 names and validates them, over the wire:
//! CreateTopics refuses unknown names and bad values with Kafka's
//! INVALID_CONFIG messages, refuses what kaas does not do yet
//! (LogAppendTime) instead of ignoring it, accepts the documented no-ops, and
//! DescribeConfigs lists every topic config with its source.

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
    let (code, msg) = create(&mut c, "t3", &[("compression.type", "gzip")]).await;
    assert_eq!(code, INVALID_CONFIG);
    assert!(
        msg.as_deref().is_some_and(|m| m.contains("not supported")),
        "{msg:?}"
    );

    // A documented no-op and an enforced config are accepted.
    let (code, msg) = create(
        &mut c,
        "t4",
        &[("flush.messages", "1"), ("retention.ms", "3600000")],
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
    let ratio = get("min.cleanable.dirty.ratio");
    assert_eq!(ratio.value.as_ref().map(|v| v.as_str()), Some("0.5"));
    assert_eq!(ratio.config_source, SOURCE_DEFAULT);
    assert_eq!(ratio.config_type, 6, "DOUBLE");
    b.stop().await;
}
