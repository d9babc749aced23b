//! The broker-level defaults of topic configs, under Kafka 3.7's broker
//! names (`log.retention.ms`, `log.cleanup.policy`, `message.max.bytes`,
//! ...; Kafka's `ServerTopicConfigSynonyms`). A topic config's value is, in
//! order: the topic's own override, the cluster-wide dynamic default
//! (AlterConfigs on the default broker resource), the static broker
//! setting (`kaas broker --override log.retention.ms=...`), the built-in
//! default. Within one layer the first synonym set wins (`log.retention.ms`
//! over `log.retention.minutes` over `log.retention.hours`), converted to
//! the topic config's unit.
//!
//! This module only names and converts; the log applies the result
//! ([`super::LogManager::set_dynamic_defaults`]) and DescribeConfigs reports
//! it. It touches nothing else.

use std::collections::BTreeMap;

/// Broker config name → value, as set in one layer.
pub type Layer = BTreeMap<String, String>;

/// One broker name of a topic config, and what its value is multiplied by
/// to give the topic config's (hours and minutes to milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synonym {
    pub name: &'static str,
    pub scale: i64,
}

const fn s(name: &'static str) -> Synonym {
    Synonym { name, scale: 1 }
}

/// A broker name whose value is in hours.
const fn hours(name: &'static str) -> Synonym {
    Synonym {
        name,
        scale: 3_600_000,
    }
}

/// A broker name whose value is in minutes.
const fn minutes(name: &'static str) -> Synonym {
    Synonym {
        name,
        scale: 60_000,
    }
}

/// Every topic config with broker-level names, highest priority first.
const SYNONYMS: &[(&str, &[Synonym])] = &[
    ("segment.bytes", &[s("log.segment.bytes")]),
    ("segment.ms", &[s("log.roll.ms"), hours("log.roll.hours")]),
    (
        "segment.jitter.ms",
        &[s("log.roll.jitter.ms"), hours("log.roll.jitter.hours")],
    ),
    ("segment.index.bytes", &[s("log.index.size.max.bytes")]),
    ("flush.messages", &[s("log.flush.interval.messages")]),
    (
        "flush.ms",
        &[
            s("log.flush.interval.ms"),
            s("log.flush.scheduler.interval.ms"),
        ],
    ),
    ("retention.bytes", &[s("log.retention.bytes")]),
    (
        "retention.ms",
        &[
            s("log.retention.ms"),
            minutes("log.retention.minutes"),
            hours("log.retention.hours"),
        ],
    ),
    ("max.message.bytes", &[s("message.max.bytes")]),
    ("index.interval.bytes", &[s("log.index.interval.bytes")]),
    (
        "delete.retention.ms",
        &[s("log.cleaner.delete.retention.ms")],
    ),
    (
        "min.compaction.lag.ms",
        &[s("log.cleaner.min.compaction.lag.ms")],
    ),
    (
        "max.compaction.lag.ms",
        &[s("log.cleaner.max.compaction.lag.ms")],
    ),
    ("file.delete.delay.ms", &[s("log.segment.delete.delay.ms")]),
    (
        "min.cleanable.dirty.ratio",
        &[s("log.cleaner.min.cleanable.ratio")],
    ),
    ("cleanup.policy", &[s("log.cleanup.policy")]),
    (
        "unclean.leader.election.enable",
        &[s("unclean.leader.election.enable")],
    ),
    ("min.insync.replicas", &[s("min.insync.replicas")]),
    ("compression.type", &[s("compression.type")]),
    ("preallocate", &[s("log.preallocate")]),
    ("message.format.version", &[s("log.message.format.version")]),
    ("message.timestamp.type", &[s("log.message.timestamp.type")]),
    (
        "message.timestamp.difference.max.ms",
        &[s("log.message.timestamp.difference.max.ms")],
    ),
    (
        "message.timestamp.before.max.ms",
        &[s("log.message.timestamp.before.max.ms")],
    ),
    (
        "message.timestamp.after.max.ms",
        &[s("log.message.timestamp.after.max.ms")],
    ),
    (
        "message.downconversion.enable",
        &[s("log.message.downconversion.enable")],
    ),
    ("local.retention.ms", &[s("log.local.retention.ms")]),
    ("local.retention.bytes", &[s("log.local.retention.bytes")]),
];

/// The broker names of topic config `topic`, highest priority first
/// (empty for a config without one, such as `remote.storage.enable`).
pub fn synonyms(topic: &str) -> &'static [Synonym] {
    SYNONYMS
        .iter()
        .find(|(t, _)| *t == topic)
        .map_or(&[], |(_, s)| s)
}

/// The topic config broker name `broker` sets, and its scale.
pub fn topic_config_of(broker: &str) -> Option<(&'static str, Synonym)> {
    SYNONYMS
        .iter()
        .find_map(|(t, syns)| syns.iter().find(|s| s.name == broker).map(|s| (*t, *s)))
}

/// Whether `broker` may be set as a cluster-wide dynamic default: as in
/// Kafka 3.7, the first broker name of each topic config except
/// `log.message.format.version`.
pub fn dynamic(broker: &str) -> bool {
    broker != "log.message.format.version"
        && SYNONYMS
            .iter()
            .any(|(_, syns)| syns.first().is_some_and(|s| s.name == broker))
}

/// A broker value in the topic config's unit.
fn convert(syn: Synonym, value: &str) -> Result<String, String> {
    if syn.scale == 1 {
        return Ok(value.trim().to_string());
    }
    value
        .trim()
        .parse::<i64>()
        .ok()
        .and_then(|v| {
            if v < 0 {
                Some(-1)
            } else {
                v.checked_mul(syn.scale)
            }
        })
        .map(|v| v.to_string())
        .ok_or_else(|| format!("Invalid value {value} for configuration {}", syn.name))
}

/// Refuses a name that is not a broker-level topic default (Kafka's
/// message), and a value that does not convert.
pub fn check_layer(layer: &Layer) -> Result<(), String> {
    for (k, v) in layer {
        let (_, syn) =
            topic_config_of(k).ok_or_else(|| format!("Unknown broker config name: {k}"))?;
        convert(syn, v)?;
    }
    Ok(())
}

/// `layer` in topic config names: per topic config the value of its first
/// synonym set, converted.
pub fn as_topic_configs(layer: &Layer) -> Result<BTreeMap<String, String>, String> {
    check_layer(layer)?;
    let mut out = BTreeMap::new();
    for (topic, syns) in SYNONYMS {
        if let Some((syn, v)) = syns.iter().find_map(|s| layer.get(s.name).map(|v| (*s, v))) {
            out.insert(topic.to_string(), convert(syn, v)?);
        }
    }
    Ok(out)
}

/// Where a value comes from, as DescribeConfigs' `config_source` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    DynamicTopic = 1,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

/// One synonym as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub name: String,
    pub value: String,
    pub source: Source,
}

/// Kafka's built-in default of broker name `syns[i]` of a topic config
/// whose default is `default`, in that name's unit: a config with several
/// broker names has one only under its last (`log.retention.hours` 168;
/// `log.retention.ms` and `log.retention.minutes` have none, null).
fn builtin(syns: &[Synonym], i: usize, default: &str) -> Option<String> {
    let s = syns.get(i).filter(|_| i + 1 == syns.len())?;
    if s.scale == 1 {
        return Some(default.to_string());
    }
    default
        .parse::<i64>()
        .ok()
        .map(|v| (v / s.scale).to_string())
}

/// Kafka's built-in default of broker name `name` (None: null, or not a
/// broker-level topic default). `default`: the topic config's.
pub fn builtin_of(name: &str, default: &str) -> Option<String> {
    let (topic, _) = topic_config_of(name)?;
    let syns = synonyms(topic);
    let i = syns.iter().position(|s| s.name == name)?;
    builtin(syns, i, default)
}

/// The synonyms of broker name `name` of topic config `topic` as Kafka
/// lists them: each broker name of the config set in the dynamic layer,
/// then in the static one, then those with a built-in default; the
/// entries before the first one named `name` dropped (so with nothing
/// set, `log.retention.ms` lists nothing: only `log.retention.hours` has a
/// default).
pub fn broker_lineage(
    topic: &str,
    name: &str,
    default: &str,
    dynamic: &Layer,
    stat: &Layer,
) -> Vec<Found> {
    let syns = synonyms(topic);
    let mut out = Vec::new();
    for (layer, source) in [
        (dynamic, Source::DynamicDefaultBroker),
        (stat, Source::StaticBroker),
    ] {
        for s in syns {
            if let Some(v) = layer.get(s.name) {
                out.push(Found {
                    name: s.name.into(),
                    value: v.clone(),
                    source,
                });
            }
        }
    }
    for (i, s) in syns.iter().enumerate() {
        if let Some(v) = builtin(syns, i, default) {
            out.push(Found {
                name: s.name.into(),
                value: v,
                source: Source::Default,
            });
        }
    }
    let first = out.iter().position(|f| f.name == name).unwrap_or(out.len());
    out.split_off(first)
}

/// The synonyms of topic config `topic` as Kafka lists them, highest
/// priority first: the topic's override, then its first broker name's
/// [`broker_lineage`]. A config without broker names (such as
/// `remote.storage.enable`) lists only its override.
pub fn lineage(
    topic: &str,
    default: &str,
    overrides: Option<&BTreeMap<String, String>>,
    dynamic: &Layer,
    stat: &Layer,
) -> Vec<Found> {
    let mut out = Vec::new();
    if let Some(v) = overrides.and_then(|o| o.get(topic)) {
        out.push(Found {
            name: topic.into(),
            value: v.clone(),
            source: Source::DynamicTopic,
        });
    }
    if let Some(primary) = synonyms(topic).first() {
        out.extend(broker_lineage(topic, primary.name, default, dynamic, stat));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(kv: &[(&str, &str)]) -> Layer {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn hours_and_minutes_convert_and_the_first_synonym_wins() {
        let got = as_topic_configs(&layer(&[
            ("log.retention.hours", "2"),
            ("log.roll.hours", "1"),
            ("log.cleanup.policy", "compact"),
        ]))
        .unwrap();
        assert_eq!(got["retention.ms"], "7200000");
        assert_eq!(got["segment.ms"], "3600000");
        assert_eq!(got["cleanup.policy"], "compact");
        let got = as_topic_configs(&layer(&[
            ("log.retention.hours", "2"),
            ("log.retention.minutes", "3"),
            ("log.retention.ms", "5"),
        ]))
        .unwrap();
        assert_eq!(got["retention.ms"], "5", "ms over minutes over hours");
        let got = as_topic_configs(&layer(&[("log.retention.hours", "-1")])).unwrap();
        assert_eq!(got["retention.ms"], "-1", "forever stays forever");
    }

    #[test]
    fn unknown_names_and_bad_numbers_are_refused() {
        let e = as_topic_configs(&layer(&[("log.retention.weeks", "1")])).unwrap_err();
        assert_eq!(e, "Unknown broker config name: log.retention.weeks");
        assert!(as_topic_configs(&layer(&[("log.retention.hours", "x")])).is_err());
        assert!(
            as_topic_configs(&layer(&[("log.retention.hours", &i64::MAX.to_string())])).is_err()
        );
    }

    #[test]
    fn only_the_first_name_of_each_config_is_dynamic() {
        assert!(dynamic("log.retention.ms"));
        assert!(dynamic("log.cleanup.policy"));
        assert!(dynamic("message.max.bytes"));
        assert!(!dynamic("log.retention.hours"));
        assert!(!dynamic("log.message.format.version"));
        assert!(!dynamic("num.partitions"));
    }

    fn shape(got: &[Found]) -> Vec<(&str, &str, Source)> {
        got.iter()
            .map(|f| (f.name.as_str(), f.value.as_str(), f.source))
            .collect()
    }

    #[test]
    fn lineage_lists_every_layer_in_priority_order() {
        let o: BTreeMap<String, String> = layer(&[("retention.ms", "1")]);
        let got = lineage(
            "retention.ms",
            "604800000",
            Some(&o),
            &layer(&[("log.retention.ms", "2")]),
            &layer(&[("log.retention.hours", "3")]),
        );
        assert_eq!(
            shape(&got),
            vec![
                ("retention.ms", "1", Source::DynamicTopic),
                ("log.retention.ms", "2", Source::DynamicDefaultBroker),
                ("log.retention.hours", "3", Source::StaticBroker),
                ("log.retention.hours", "168", Source::Default),
            ]
        );
        let got = lineage(
            "remote.storage.enable",
            "false",
            None,
            &Layer::new(),
            &Layer::new(),
        );
        assert!(got.is_empty());
    }

    #[test]
    fn broker_names_without_a_default_list_nothing_before_their_own_name() {
        let none = Layer::new();
        let o: BTreeMap<String, String> = layer(&[("retention.ms", "1")]);
        // Kafka: only the override; log.retention.ms has no default.
        let got = lineage("retention.ms", "604800000", Some(&o), &none, &none);
        assert_eq!(
            shape(&got),
            vec![("retention.ms", "1", Source::DynamicTopic)]
        );
        let hours = layer(&[("log.retention.hours", "3")]);
        assert!(lineage("retention.ms", "604800000", None, &none, &hours).is_empty());
        assert_eq!(
            shape(&lineage("cleanup.policy", "delete", None, &none, &none)),
            vec![("log.cleanup.policy", "delete", Source::Default)]
        );
        let got = broker_lineage(
            "retention.ms",
            "log.retention.hours",
            "604800000",
            &none,
            &hours,
        );
        assert_eq!(
            shape(&got),
            vec![
                ("log.retention.hours", "3", Source::StaticBroker),
                ("log.retention.hours", "168", Source::Default),
            ]
        );
        assert_eq!(
            builtin_of("log.retention.hours", "604800000").as_deref(),
            Some("168")
        );
        assert_eq!(builtin_of("log.retention.ms", "604800000"), None);
        assert_eq!(
            builtin_of("log.roll.jitter.hours", "0").as_deref(),
            Some("0")
        );
    }
}
