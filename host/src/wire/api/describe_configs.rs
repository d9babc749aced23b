//! DescribeConfigs (key 32): topic configs (overrides as dynamic topic
//! config, the rest as defaults) and the broker's defaults.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind,
};

use super::sb;
use crate::broker::Broker;
use crate::codes;
use crate::log::LogConfig;
use crate::security::Operation;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_BOOLEAN: i8 = 1;

/// Every Kafka 3.7 topic config of `t`: the enforced ones as the log
/// applies them, the others as set (or their defaults).
fn topic_entries(t: &crate::log::Topic) -> Vec<(&'static str, String, i8)> {
    let c: &LogConfig = &t.config;
    crate::log::topic_config::TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let value = match d.name {
                "cleanup.policy" => c.cleanup_policy(),
                "max.message.bytes" => c.max_message_bytes.to_string(),
                "retention.bytes" => c.retention_bytes.to_string(),
                "retention.ms" => c.retention_ms.to_string(),
                "segment.bytes" => c.segment_bytes.to_string(),
                "segment.ms" => c.segment_ms.to_string(),
                name => t
                    .overrides
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| d.default.to_string()),
            };
            (d.name, value, d.kind.code())
        })
        .collect()
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeConfigsRequest,
    version: i16,
) -> ResponseKind {
    // DESCRIBE_CONFIGS on the topic, or on the cluster for a broker
    //, before anything is looked up.
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeConfigs);
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let wanted = |k: &str| {
                r.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|w| w.as_str() == k))
            };
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let entry = |k: &str, v: String, source: i8, ty: i8| {
                DescribeConfigsResourceResult::default()
                    .with_name(sb(k))
                    .with_value(Some(sb(&v)))
                    .with_config_source(source)
                    .with_config_type(ty)
                    .with_read_only(source != SOURCE_DYNAMIC_TOPIC)
            };
            let denied = match r.resource_type {
                TOPIC if !checks.topic(Operation::DescribeConfigs, &name) => Some((
                    codes::TOPIC_AUTHORIZATION_FAILED,
                    "Topic authorization failed.",
                )),
                BROKER | BROKER_LOGGER if !checks.cluster(Operation::DescribeConfigs) => Some((
                    codes::CLUSTER_AUTHORIZATION_FAILED,
                    "Cluster authorization failed.",
                )),
                _ => None,
            };
            if let Some((code, msg)) = denied {
                return base.with_error_code(code).with_error_message(Some(sb(msg)));
            }
            match r.resource_type {
                TOPIC => match broker.logs.topic(&name) {
                    None => base
                        .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                        .with_error_message(Some(sb("unknown topic"))),
                    Some(t) => base.with_configs(
                        topic_entries(&t)
                            .into_iter()
                            .filter(|(k, _, _)| wanted(k))
                            .map(|(k, v, ty)| {
                                let source = if t.overrides.contains_key(k) {
                                    SOURCE_DYNAMIC_TOPIC
                                } else {
                                    SOURCE_DEFAULT
                                };
                                entry(k, v, source, ty)
                            })
                            .collect(),
                    ),
                },
                BROKER => {
                    let c = &broker.config;
                    let d = &c.log;
                    let entries = vec![
                        (
                            "auto.create.topics.enable",
                            c.auto_create_topics.to_string(),
                            TYPE_BOOLEAN,
                        ),
                        (
                            "log.retention.bytes",
                            d.retention_bytes.to_string(),
                            TYPE_LONG,
                        ),
                        ("log.retention.ms", d.retention_ms.to_string(), TYPE_LONG),
                        ("log.segment.bytes", d.segment_bytes.to_string(), TYPE_INT),
                        (
                            "message.max.bytes",
                            d.max_message_bytes.to_string(),
                            TYPE_INT,
                        ),
                        ("num.partitions", c.default_partitions.to_string(), TYPE_INT),
                        (
                            "default.replication.factor",
                            c.default_replication_factor.to_string(),
                            TYPE_INT,
                        ),
                        (
                            "socket.request.max.bytes",
                            c.max_request_bytes.to_string(),
                            TYPE_INT,
                        ),
                        // What the policy is configured with (and so enforces).
                        (
                            "transaction.max.timeout.ms",
                            broker.txn.limits().max_timeout_ms.to_string(),
                            TYPE_INT,
                        ),
                        ("broker.id", c.node_id.to_string(), TYPE_INT),
                        ("log.dirs", c.data_dir.display().to_string(), TYPE_STRING),
                    ];
                    base.with_configs(
                        entries
                            .into_iter()
                            .filter(|(k, _, _)| wanted(k))
                            .map(|(k, v, ty)| entry(k, v, SOURCE_STATIC_BROKER, ty))
                            .collect(),
                    )
                }
                other => base
                    .with_error_code(codes::INVALID_REQUEST)
                    .with_error_message(Some(sb(&format!(
                        "resource type {other} is not supported"
                    )))),
            }
        })
        .collect();
    let mut results: Vec<DescribeConfigsResult> = results;
    if version < 3 {
        for r in &mut results {
            for c in &mut r.configs {
                c.config_type = 0;
            }
        }
    }
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}
