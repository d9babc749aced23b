//! AlterConfigs (key 33) and IncrementalAlterConfigs (key 44): topic config
//! changes from any broker. AlterConfigs replaces a topic's whole override
//! set; the incremental form SETs, DELETEs, APPENDs to or SUBTRACTs from
//! single configs (APPEND and SUBTRACT on list configs only, as Kafka
//! allows). Either validates the result as CreateTopics does and, unless
//! `validate_only`, makes it durable and in force (`cluster::admin`).
//! The broker resource with an empty name (Kafka's cluster-wide default)
//! takes the dynamic broker defaults of topic configs (`log.retention.ms`,
//! `log.cleanup.policy`, ...: `log::config::broker_defaults`), agreed and applied
//! as a topic's are; a named broker and broker loggers are refused (kaas
//! takes other broker settings from its flags).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ResponseKind, alter_configs_response,
    incremental_alter_configs_response,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::cluster::admin::Refusal;
use crate::codes;
use crate::log::config::broker_defaults;
use crate::log::config::topic_config::{self, Kind};
use crate::security::Operation;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// One incremental operation on a config, as the request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub name: String,
    pub operation: i8,
    pub value: Option<String>,
}

/// What IncrementalAlterConfigs makes of a topic's `current` overrides
/// with `ops`, or Kafka's refusal of the first bad operation.
pub fn apply_incremental(
    current: &BTreeMap<String, String>,
    ops: &[Op],
) -> Result<BTreeMap<String, String>, Refusal> {
    edit(current, ops, |name| {
        topic_config::lookup(name).ok_or_else(|| format!("Unknown topic config name: {name}"))
    })
}

/// What IncrementalAlterConfigs makes of the dynamic broker defaults
/// `current` (Kafka's broker names) with `ops`.
pub fn apply_incremental_defaults(
    current: &BTreeMap<String, String>,
    ops: &[Op],
) -> Result<BTreeMap<String, String>, Refusal> {
    edit(current, ops, |name| {
        broker_defaults::topic_config_of(name)
            .and_then(|(topic, _)| topic_config::lookup(topic))
            .ok_or_else(|| format!("Unknown broker config name: {name}"))
    })
}

/// `ops` applied to `current`; `def` says what a name is (its type and
/// default), or refuses it.
fn edit(
    current: &BTreeMap<String, String>,
    ops: &[Op],
    def: impl Fn(&str) -> Result<&'static topic_config::Def, String>,
) -> Result<BTreeMap<String, String>, Refusal> {
    let invalid = |m: String| (codes::INVALID_CONFIG, m);
    let mut names = std::collections::BTreeSet::new();
    let mut out = current.clone();
    for op in ops {
        if !names.insert(op.name.as_str()) {
            return Err((
                codes::INVALID_REQUEST,
                format!("Error due to duplicate config keys: {}", op.name),
            ));
        }
        let def = def(&op.name).map_err(invalid)?;
        let list = def.kind == Kind::List;
        let value = || {
            op.value
                .clone()
                .ok_or_else(|| invalid(format!("Null value not supported for : {}", op.name)))
        };
        let listed = |m: &BTreeMap<String, String>| -> Vec<String> {
            m.get(&op.name)
                .cloned()
                .unwrap_or_else(|| def.default.to_string())
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect()
        };
        match op.operation {
            SET => {
                out.insert(op.name.clone(), value()?);
            }
            DELETE => {
                out.remove(&op.name);
            }
            APPEND | SUBTRACT if !list => {
                let verb = if op.operation == APPEND {
                    "append"
                } else {
                    "subtract"
                };
                return Err(invalid(format!(
                    "Config value {verb} is not allowed for config key: {}",
                    op.name
                )));
            }
            APPEND => {
                let mut values = listed(&out);
                for v in value()?.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                    if !values.iter().any(|x| x == v) {
                        values.push(v.to_string());
                    }
                }
                out.insert(op.name.clone(), values.join(","));
            }
            SUBTRACT => {
                let gone: Vec<String> = value()?.split(',').map(|v| v.trim().to_string()).collect();
                let values: Vec<String> = listed(&out)
                    .into_iter()
                    .filter(|v| !gone.contains(v))
                    .collect();
                out.insert(op.name.clone(), values.join(","));
            }
            other => {
                return Err((
                    codes::INVALID_REQUEST,
                    format!("unknown config operation {other}"),
                ));
            }
        }
    }
    Ok(out)
}

/// A change of a config set: the whole new set from the current one.
type Change<'a> =
    &'a dyn Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Refusal>;

/// One resource's outcome: checks the resource and the caller's right to
/// alter it, then runs `change` on the topic's overrides, or
/// `change_defaults` on the cluster-wide broker defaults (the broker
/// resource with an empty name, as Kafka names the default).
fn alter(
    broker: &Arc<Broker>,
    checks: &mut super::Checks<'_>,
    resource_type: i8,
    name: &str,
    change: Change<'_>,
    change_defaults: Change<'_>,
    validate_only: bool,
) -> Result<(), Refusal> {
    match resource_type {
        TOPIC => {
            if !checks.topic(Operation::AlterConfigs, name) {
                return Err((
                    codes::TOPIC_AUTHORIZATION_FAILED,
                    "Topic authorization failed.".into(),
                ));
            }
            crate::cluster::admin::alter_topic_configs(
                broker.topic_admin(),
                name,
                change,
                validate_only,
            )
        }
        BROKER | BROKER_LOGGER => {
            if !checks.cluster(Operation::AlterConfigs) {
                return Err((
                    codes::CLUSTER_AUTHORIZATION_FAILED,
                    "Cluster authorization failed.".into(),
                ));
            }
            if resource_type == BROKER_LOGGER {
                return Err((
                    codes::INVALID_REQUEST,
                    "kaas sets its log levels from RUST_LOG at start; broker loggers cannot be altered"
                        .into(),
                ));
            }
            if !name.is_empty() {
                return Err((
                    codes::INVALID_REQUEST,
                    format!(
                        "kaas keeps dynamic broker configs cluster-wide: alter the default broker \
                         resource (an empty name), not broker {name}; other broker settings are flags \
                         (kaas broker --help)"
                    ),
                ));
            }
            crate::cluster::admin::alter_broker_defaults(
                broker.topic_admin(),
                change_defaults,
                validate_only,
            )
        }
        other => Err((
            codes::INVALID_REQUEST,
            format!("unsupported resource type {other}"),
        )),
    }
}

fn message(r: &Result<(), Refusal>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match r {
        Ok(()) => (codes::NONE, None),
        Err((code, m)) => (*code, Some(str_bytes(m))),
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: AlterConfigsRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::AlterConfigs);
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let mut whole = BTreeMap::new();
            let mut dup = None;
            for c in &r.configs {
                let v = c.value.as_ref().map(|v| v.to_string());
                if whole.insert(c.name.to_string(), v).is_some() {
                    dup = Some(c.name.to_string());
                }
            }
            let result = match dup {
                Some(d) => Err((
                    codes::INVALID_REQUEST,
                    format!("Error due to duplicate config keys: {d}"),
                )),
                None => {
                    let replace = |_: &BTreeMap<String, String>| {
                        whole
                            .iter()
                            .map(|(k, v)| match v {
                                Some(v) => Ok((k.clone(), v.clone())),
                                None => Err((
                                    codes::INVALID_CONFIG,
                                    format!("Null value not supported for : {k}"),
                                )),
                            })
                            .collect()
                    };
                    alter(
                        broker,
                        &mut checks,
                        r.resource_type,
                        &name,
                        &replace,
                        &replace,
                        req.validate_only,
                    )
                }
            };
            let (code, msg) = message(&result);
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(msg)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
        })
        .collect();
    ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))
}

pub fn handle_incremental(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::IncrementalAlterConfigs);
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let ops: Vec<Op> = r
                .configs
                .iter()
                .map(|c| Op {
                    name: c.name.to_string(),
                    operation: c.config_operation,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect();
            let result = alter(
                broker,
                &mut checks,
                r.resource_type,
                &r.resource_name,
                &|current| apply_incremental(current, &ops),
                &|current| apply_incremental_defaults(current, &ops),
                req.validate_only,
            );
            let (code, msg) = message(&result);
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(msg)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
        })
        .collect();
    ResponseKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, operation: i8, value: Option<&str>) -> Op {
        Op {
            name: name.into(),
            operation,
            value: value.map(Into::into),
        }
    }

    #[test]
    fn incremental_operations_edit_the_overrides_as_kafka_does() {
        let current: BTreeMap<String, String> = [("retention.ms".to_string(), "1000".to_string())]
            .into_iter()
            .collect();
        let out = apply_incremental(
            &current,
            &[
                op("retention.ms", DELETE, None),
                op("segment.ms", SET, Some("60000")),
                op("cleanup.policy", APPEND, Some("compact")),
            ],
        )
        .expect("applies");
        assert_eq!(out.get("retention.ms"), None);
        assert_eq!(out.get("segment.ms").map(String::as_str), Some("60000"));
        assert_eq!(
            out.get("cleanup.policy").map(String::as_str),
            Some("delete,compact"),
            "APPEND starts from the default"
        );
        let out = apply_incremental(&out, &[op("cleanup.policy", SUBTRACT, Some("delete"))])
            .expect("subtracts");
        assert_eq!(
            out.get("cleanup.policy").map(String::as_str),
            Some("compact")
        );
    }

    #[test]
    fn append_to_a_scalar_and_unknown_or_repeated_names_are_refused() {
        let none = BTreeMap::new();
        let e = apply_incremental(&none, &[op("retention.ms", APPEND, Some("1"))]).unwrap_err();
        assert_eq!(e.0, codes::INVALID_CONFIG);
        assert!(e.1.contains("append is not allowed"), "{}", e.1);
        let e = apply_incremental(&none, &[op("no.such.config", SET, Some("1"))]).unwrap_err();
        assert_eq!(
            e,
            (
                codes::INVALID_CONFIG,
                "Unknown topic config name: no.such.config".into()
            )
        );
        let e = apply_incremental(
            &none,
            &[
                op("retention.ms", SET, Some("1")),
                op("retention.ms", DELETE, None),
            ],
        )
        .unwrap_err();
        assert_eq!(e.0, codes::INVALID_REQUEST);
    }
}
