//! DescribeConfigs (key 32): a topic's configs and the broker's, each with
//! its value, where the value comes from (the topic's override, the
//! cluster-wide dynamic default, the static broker setting, the built-in
//! default), whether it may be altered, its synonyms (v1+, when asked: every
//! layer that sets it, highest priority first) and its type and
//! documentation (v3+, when asked). Nothing kaas holds is a secret, so no
//! value is hidden; `is_sensitive` is false throughout.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::log::LogConfig;
use crate::log::config::broker_defaults::{self, Found, Layer, Source};
use crate::log::config::{config_docs, topic_config};
use crate::security::Operation;

mod flags;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;

/// One config as the response reports it.
struct Described {
    name: String,
    /// None: null (a broker name without a value or a default).
    value: Option<String>,
    read_only: bool,
    kind: i8,
    doc: Option<&'static str>,
    /// Highest priority first; the first is where `value` comes from.
    lineage: Vec<Found>,
}

/// The value of an enforced config as the log applies it (a value a
/// newer check refused is skipped there, so this is the truth). `written`:
/// the value where it comes from (the first of its lineage).
fn applied(c: &LogConfig, name: &str, written: Option<&str>) -> Option<String> {
    Some(match name {
        "cleanup.policy" => cleanup_policy(c, written),
        "compression.type" => {
            crate::log::batch::recompress::compression_type_name(c.compression).to_string()
        }
        "max.message.bytes" => c.max_message_bytes.to_string(),
        "retention.bytes" => c.retention_bytes.to_string(),
        "retention.ms" => c.retention_ms.to_string(),
        "segment.bytes" => c.segment_bytes.to_string(),
        "segment.ms" => c.segment_ms.to_string(),
        _ => return None,
    })
}

/// cleanup.policy, a list: as it was written (items trimmed, in their
/// order, as Kafka parses and prints a LIST config: `delete,compact` stays
/// so) when that is what the log applies, else as the log applies it.
fn cleanup_policy(c: &LogConfig, written: Option<&str>) -> String {
    let items: Vec<&str> = written
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    let applies = |policy: &str| items.contains(&policy);
    if written.is_some() && applies("compact") == c.compact && applies("delete") == c.delete {
        items.join(",")
    } else {
        c.cleanup_policy()
    }
}

/// Every topic config of Kafka 3.7 as it stands for a topic with
/// `overrides` (None: the defaults a new topic would get).
fn topic_configs(
    config: &LogConfig,
    overrides: Option<&BTreeMap<String, String>>,
    dynamic: &Layer,
    stat: &Layer,
) -> Vec<Described> {
    let defaults = |layer: &Layer| broker_defaults::as_topic_configs(layer).unwrap_or_default();
    let (dynamic_topic, static_topic) = (defaults(dynamic), defaults(stat));
    topic_config::TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let lineage = broker_defaults::lineage(d.name, d.default, overrides, dynamic, stat);
            let written = lineage.first().map(|f| f.value.as_str());
            let value = applied(config, d.name, written).unwrap_or_else(|| {
                overrides
                    .and_then(|o| o.get(d.name))
                    .or_else(|| dynamic_topic.get(d.name))
                    .or_else(|| static_topic.get(d.name))
                    .cloned()
                    .unwrap_or_else(|| d.default.to_string())
            });
            Described {
                name: d.name.into(),
                value: Some(value),
                read_only: false,
                kind: d.kind.code(),
                doc: config_docs::doc(d.name),
                lineage,
            }
        })
        .collect()
}

/// The broker's configs: every broker name of every topic config (the
/// first of each alterable on the default resource; `log.retention.hours`
/// as well as `log.retention.ms`, each with its own value or Kafka's
/// default, or null) and the settings kaas takes from its flags
/// (read-only).
fn broker_configs(broker: &Broker) -> Vec<Described> {
    let c = &broker.config;
    let dynamic = broker.logs.dynamic_defaults();
    let stat = &c.log_overrides;
    let mut out = Vec::new();
    for t in topic_configs(&broker.logs.defaults(), None, &dynamic, stat) {
        let Some(def) = topic_config::lookup(&t.name) else {
            continue;
        };
        let syns = broker_defaults::synonyms(&t.name);
        for (i, syn) in syns.iter().enumerate() {
            let lineage =
                broker_defaults::broker_lineage(&t.name, syn.name, def.default, &dynamic, stat);
            // A config with one broker name: its value as the log applies it.
            let value = if syns.len() == 1 {
                t.value.clone()
            } else {
                lineage.first().map(|f| f.value.clone())
            };
            out.push(Described {
                name: syn.name.into(),
                value,
                read_only: !broker_defaults::dynamic(syn.name),
                kind: if syn.scale == 1 { t.kind } else { TYPE_INT },
                doc: if i == 0 { t.doc } else { None },
                lineage,
            });
        }
    }
    let flag = |name: &str, value: String, kind: i8, doc: &'static str| Described {
        name: name.into(),
        value: Some(value.clone()),
        read_only: true,
        kind,
        doc: Some(doc),
        lineage: vec![Found {
            name: name.into(),
            value,
            source: Source::StaticBroker,
        }],
    };
    out.extend(
        flags::broker_flags(c, broker.txn.limits().max_timeout_ms)
            .into_iter()
            .map(|(n, v, k, d)| flag(n, v, k, d)),
    );
    out
}

/// The cluster-wide dynamic defaults, as Kafka describes the default broker
/// resource: only what is set there.
fn default_broker_configs(broker: &Broker) -> Vec<Described> {
    broker
        .logs
        .dynamic_defaults()
        .into_iter()
        .map(|(name, value)| {
            let topic = broker_defaults::topic_config_of(&name).map(|(t, _)| t);
            let def = topic.and_then(topic_config::lookup);
            Described {
                lineage: vec![Found {
                    name: name.clone(),
                    value: value.clone(),
                    source: Source::DynamicDefaultBroker,
                }],
                read_only: false,
                kind: def.map_or(TYPE_STRING, |d| d.kind.code()),
                doc: topic.and_then(config_docs::doc),
                name,
                value: Some(value),
            }
        })
        .collect()
}

/// `d` in the response's shape for `version`.
fn encode(d: Described, version: i16, synonyms: bool, docs: bool) -> DescribeConfigsResourceResult {
    let source = d.lineage.first().map_or(Source::Default, |f| f.source);
    let mut r = DescribeConfigsResourceResult::default()
        .with_name(str_bytes(&d.name))
        .with_value(d.value.as_deref().map(str_bytes))
        .with_read_only(d.read_only)
        .with_config_source(source as i8)
        .with_is_sensitive(false);
    if synonyms {
        r.synonyms = d
            .lineage
            .into_iter()
            .map(|f| {
                DescribeConfigsSynonym::default()
                    .with_name(str_bytes(&f.name))
                    .with_value(Some(str_bytes(&f.value)))
                    .with_source(f.source as i8)
            })
            .collect();
    }
    r.documentation = None;
    if version >= 3 {
        r.config_type = d.kind;
        if docs {
            r.documentation = d.doc.map(str_bytes);
        }
    }
    r
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeConfigsRequest,
    version: i16,
) -> ResponseKind {
    // DESCRIBE_CONFIGS on the topic, or on the cluster for a broker,
    // before anything is looked up.
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
                return base
                    .with_error_code(code)
                    .with_error_message(Some(str_bytes(msg)));
            }
            let described = match r.resource_type {
                TOPIC if !crate::log::valid_topic_name(&name) => {
                    return base
                        .with_error_code(codes::INVALID_TOPIC_EXCEPTION)
                        .with_error_message(Some(str_bytes(&format!(
                            "invalid topic name {name:?}"
                        ))));
                }
                TOPIC => match broker.logs.topic(&name) {
                    None => {
                        return base
                            .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_error_message(Some(str_bytes("unknown topic")));
                    }
                    Some(t) => topic_configs(
                        &t.config,
                        Some(&t.overrides),
                        &broker.logs.dynamic_defaults(),
                        &broker.config.log_overrides,
                    ),
                },
                BROKER if name.is_empty() => default_broker_configs(broker),
                BROKER => broker_configs(broker),
                other => {
                    return base
                        .with_error_code(codes::INVALID_REQUEST)
                        .with_error_message(Some(str_bytes(&format!(
                            "resource type {other} is not supported"
                        ))));
                }
            };
            base.with_configs(
                described
                    .into_iter()
                    .filter(|d| wanted(&d.name))
                    .map(|d| encode(d, version, req.include_synonyms, req.include_documentation))
                    .collect(),
            )
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}
