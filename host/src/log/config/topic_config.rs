//! Kafka 3.7's topic-level configs: every name Kafka's `LogConfig`
//! defines, with its type, default and validator (read from Apache Kafka
//! 3.7.1: `storage/.../log/LogConfig.java`, `TopicConfig.java`), and what
//! kaas does with it ([`Support`]). Topic creation validates against this
//! table as Kafka does (unknown names: "Unknown topic config name: x";
//! bad values: "Invalid value V for configuration N: why", both
//! INVALID_CONFIG), and DescribeConfigs lists every entry.
//!
//! A config is either enforced, accepted as a documented no-op (what it
//! tunes does not exist here, so any valid value behaves as Kafka would), or
//! accepted only at its default until kaas implements it (any other value
//! is refused with a message saying so, never silently ignored).

/// The value type, as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    Int,
    Long,
    Double,
    String,
    List,
}

impl Kind {
    /// DescribeConfigs' `config_type` code.
    pub fn code(self) -> i8 {
        match self {
            Kind::Boolean => 1,
            Kind::String => 2,
            Kind::Int => 3,
            Kind::Long => 5,
            Kind::Double => 6,
            Kind::List => 7,
        }
    }
}

/// A value's validator.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    None,
    AtLeast(i64),
    Between(f64, f64),
    OneOf(&'static [&'static str]),
    /// A comma-separated list of these.
    ListOf(&'static [&'static str]),
    /// `*` or `partition:broker,...` (the throttled-replica lists).
    Replicas,
    /// A Kafka metadata version string such as `3.0-IV1`.
    Version,
}

/// What kaas does with a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Applied by the log ([`crate::log::LogConfig`]).
    Enforced,
    /// Accepted and stored; what it tunes does not exist here (the reason).
    NoOp(&'static str),
    /// Only the default (or, for cleanup.policy, the listed values) until
    /// kaas implements it; the reason says what is missing.
    DefaultOnly(&'static str),
}

/// One topic config.
#[derive(Debug, Clone, Copy)]
pub struct Def {
    pub name: &'static str,
    pub kind: Kind,
    /// The default, as Kafka's DescribeConfigs prints it.
    pub default: &'static str,
    pub check: Check,
    pub support: Support,
}

const LONG_MAX: &str = "9223372036854775807";

const fn def(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    check: Check,
    support: Support,
) -> Def {
    Def {
        name,
        kind,
        default,
        check,
        support,
    }
}

const COMPACTION: Support = Support::Enforced;

/// Every topic config of Kafka 3.7, in Kafka's order.
pub const TOPIC_CONFIGS: &[Def] = &[
    def(
        "segment.bytes",
        Kind::Int,
        "1073741824",
        Check::AtLeast(14),
        Support::Enforced,
    ),
    def(
        "segment.ms",
        Kind::Long,
        "604800000",
        Check::AtLeast(1),
        Support::Enforced,
    ),
    def(
        "segment.jitter.ms",
        Kind::Long,
        "0",
        Check::AtLeast(0),
        Support::NoOp("rolls are not jittered: each partition rolls at segment.ms"),
    ),
    def(
        "segment.index.bytes",
        Kind::Int,
        "10485760",
        Check::AtLeast(4),
        Support::NoOp("kaas lays out its own index files"),
    ),
    def(
        "flush.messages",
        Kind::Long,
        LONG_MAX,
        Check::AtLeast(1),
        Support::NoOp("durability follows --fsync (every acknowledged batch is synced by default)"),
    ),
    def(
        "flush.ms",
        Kind::Long,
        LONG_MAX,
        Check::AtLeast(0),
        Support::NoOp("durability follows --fsync (every acknowledged batch is synced by default)"),
    ),
    def(
        "retention.bytes",
        Kind::Long,
        "-1",
        Check::None,
        Support::Enforced,
    ),
    def(
        "retention.ms",
        Kind::Long,
        "604800000",
        Check::AtLeast(-1),
        Support::Enforced,
    ),
    def(
        "max.message.bytes",
        Kind::Int,
        "1048588",
        Check::AtLeast(0),
        Support::Enforced,
    ),
    def(
        "index.interval.bytes",
        Kind::Int,
        "4096",
        Check::AtLeast(0),
        Support::NoOp("kaas lays out its own index files"),
    ),
    def(
        "delete.retention.ms",
        Kind::Long,
        "86400000",
        Check::AtLeast(0),
        COMPACTION,
    ),
    def(
        "min.compaction.lag.ms",
        Kind::Long,
        "0",
        Check::AtLeast(0),
        COMPACTION,
    ),
    def(
        "max.compaction.lag.ms",
        Kind::Long,
        LONG_MAX,
        Check::AtLeast(1),
        COMPACTION,
    ),
    def(
        "file.delete.delay.ms",
        Kind::Long,
        "60000",
        Check::AtLeast(0),
        Support::NoOp("segments are deleted at once"),
    ),
    def(
        "min.cleanable.dirty.ratio",
        Kind::Double,
        "0.5",
        Check::Between(0.0, 1.0),
        COMPACTION,
    ),
    def(
        "cleanup.policy",
        Kind::List,
        "delete",
        Check::ListOf(&["compact", "delete"]),
        Support::Enforced,
    ),
    def(
        "unclean.leader.election.enable",
        Kind::Boolean,
        "false",
        Check::None,
        Support::NoOp(
            "every leader reads the one copy on the shared volume: no election loses data",
        ),
    ),
    def(
        "min.insync.replicas",
        Kind::Int,
        "1",
        Check::AtLeast(1),
        Support::Enforced,
    ),
    def(
        "compression.type",
        Kind::String,
        "producer",
        Check::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        Support::Enforced,
    ),
    def(
        "preallocate",
        Kind::Boolean,
        "false",
        Check::None,
        Support::NoOp("segments keep a zero-filled tail of their own"),
    ),
    def(
        "message.format.version",
        Kind::String,
        "3.0-IV1",
        Check::Version,
        Support::NoOp("deprecated; every batch is magic 2"),
    ),
    def(
        "message.timestamp.type",
        Kind::String,
        "CreateTime",
        Check::OneOf(&["CreateTime", "LogAppendTime"]),
        Support::Enforced,
    ),
    def(
        "message.timestamp.difference.max.ms",
        Kind::Long,
        LONG_MAX,
        Check::AtLeast(0),
        Support::Enforced,
    ),
    def(
        "message.timestamp.before.max.ms",
        Kind::Long,
        LONG_MAX,
        Check::AtLeast(0),
        Support::Enforced,
    ),
    def(
        "message.timestamp.after.max.ms",
        Kind::Long,
        LONG_MAX,
        Check::AtLeast(0),
        Support::Enforced,
    ),
    def(
        "leader.replication.throttled.replicas",
        Kind::List,
        "",
        Check::Replicas,
        Support::NoOp("no replication traffic: replicas share one volume"),
    ),
    def(
        "follower.replication.throttled.replicas",
        Kind::List,
        "",
        Check::Replicas,
        Support::NoOp("no replication traffic: replicas share one volume"),
    ),
    def(
        "message.downconversion.enable",
        Kind::Boolean,
        "true",
        Check::None,
        Support::NoOp("every batch is stored and served as magic 2: nothing to convert"),
    ),
    def(
        "remote.storage.enable",
        Kind::Boolean,
        "false",
        Check::None,
        Support::DefaultOnly("tiered storage is not supported"),
    ),
    def(
        "local.retention.ms",
        Kind::Long,
        "-2",
        Check::AtLeast(-2),
        Support::NoOp("no tiered storage: everything is local"),
    ),
    def(
        "local.retention.bytes",
        Kind::Long,
        "-2",
        Check::AtLeast(-2),
        Support::NoOp("no tiered storage: everything is local"),
    ),
];

/// The definition of `name`, if Kafka has such a topic config.
pub fn lookup(name: &str) -> Option<&'static Def> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks `value` for `name` as Kafka's ConfigDef would, then against what
/// kaas supports. The error is Kafka's message (INVALID_CONFIG).
pub fn validate(name: &str, value: &str) -> Result<&'static Def, String> {
    let Some(d) = lookup(name) else {
        return Err(format!("Unknown topic config name: {name}"));
    };
    let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
    let trimmed = value.trim();
    match d.kind {
        Kind::Boolean => {
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                return Err(invalid("Expected value to be either true or false"));
            }
        }
        Kind::Int => {
            let n: i32 = trimmed
                .parse()
                .map_err(|_| invalid("Not a number of type INT"))?;
            at_least(d.check, i64::from(n)).map_err(|e| invalid(&e))?;
        }
        Kind::Long => {
            let n: i64 = trimmed
                .parse()
                .map_err(|_| invalid("Not a number of type LONG"))?;
            at_least(d.check, n).map_err(|e| invalid(&e))?;
        }
        Kind::Double => {
            let x: f64 = trimmed
                .parse()
                .map_err(|_| invalid("Not a number of type DOUBLE"))?;
            if let Check::Between(lo, hi) = d.check {
                if x < lo {
                    return Err(invalid(&format!("Value must be at least {lo}")));
                }
                if x > hi {
                    return Err(invalid(&format!("Value must be no more than {hi}")));
                }
            }
        }
        Kind::String => match d.check {
            Check::OneOf(allowed) if !allowed.contains(&trimmed) => {
                return Err(invalid(&format!(
                    "String must be one of: {}",
                    allowed.join(", ")
                )));
            }
            Check::Version if !is_version(trimmed) => {
                return Err(invalid(&format!(
                    "Version {trimmed} is not a valid version"
                )));
            }
            _ => {}
        },
        Kind::List => match d.check {
            Check::ListOf(allowed) => {
                for item in trimmed.split(',').map(str::trim) {
                    if !allowed.contains(&item) {
                        return Err(format!(
                            "Invalid value {item} for configuration {name}: String must be one of: {}",
                            allowed.join(", ")
                        ));
                    }
                }
            }
            Check::Replicas if !is_replica_list(trimmed) => {
                return Err(invalid(&format!(
                    "{name} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],..."
                )));
            }
            _ => {}
        },
    }
    if let Support::DefaultOnly(why) = d.support
        && !is_default(d, trimmed)
    {
        return Err(format!(
            "{name}={value} is not supported by this broker ({why}); only {} is",
            d.default
        ));
    }
    Ok(d)
}

fn at_least(check: Check, n: i64) -> Result<(), String> {
    match check {
        Check::AtLeast(min) if n < min => Err(format!("Value must be at least {min}")),
        _ => Ok(()),
    }
}

/// Whether `value` means the default (a list in any order, a number or a
/// boolean however it is written).
fn is_default(d: &Def, value: &str) -> bool {
    match d.kind {
        Kind::Boolean => value.eq_ignore_ascii_case(d.default),
        Kind::Int | Kind::Long => value.parse::<i64>().ok() == d.default.parse::<i64>().ok(),
        Kind::Double => value.parse::<f64>().ok() == d.default.parse::<f64>().ok(),
        Kind::List => {
            let set = |s: &str| {
                let mut v: Vec<String> = s
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect();
                v.sort();
                v.dedup();
                v
            };
            set(value) == set(d.default)
        }
        Kind::String => value == d.default,
    }
}

/// `3.0-IV1`, `2.8`, `3.7-IV4`, `0.10.0-IV1`: a release with an optional
/// `-IVn`, the release being major.minor, or 0.minor.patch before 1.0. As
/// Kafka's MetadataVersion parses it, parts past those are not looked at:
/// `0.10.0.0` is 0.10.0 and `2.8.1` is 2.8.
fn is_version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    let wanted = if s.starts_with("0.") { 3 } else { 2 };
    let Some((last, release)) = parts.get(..wanted).and_then(<[&str]>::split_last) else {
        return false;
    };
    let (last, iv) = match last.split_once('-') {
        Some((n, iv)) => (n, Some(iv)),
        None => (*last, None),
    };
    let number = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    release.iter().all(|p| number(p))
        && number(last)
        && iv.is_none_or(|iv| iv.strip_prefix("IV").is_some_and(number))
}

/// `*`, empty, or `partition:broker` pairs separated by commas.
fn is_replica_list(s: &str) -> bool {
    s.is_empty()
        || s == "*"
        || s.split(',').all(|pair| {
            pair.trim().split_once(':').is_some_and(|(p, b)| {
                [p, b]
                    .iter()
                    .all(|x| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit()))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kafka_37_topic_config_is_known_and_its_default_valid() {
        assert_eq!(TOPIC_CONFIGS.len(), 31);
        for d in TOPIC_CONFIGS {
            assert!(
                validate(d.name, d.default).is_ok(),
                "{}'s default {} is refused",
                d.name,
                d.default
            );
        }
    }

    #[test]
    fn unknown_names_and_bad_values_get_kafkas_messages() {
        assert_eq!(
            validate("segment.size", "1").unwrap_err(),
            "Unknown topic config name: segment.size"
        );
        assert_eq!(
            validate("segment.bytes", "13").unwrap_err(),
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14"
        );
        assert_eq!(
            validate("retention.ms", "soon").unwrap_err(),
            "Invalid value soon for configuration retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            validate("preallocate", "yes").unwrap_err(),
            "Invalid value yes for configuration preallocate: Expected value to be either true or false"
        );
        assert_eq!(
            validate("cleanup.policy", "delete,purge").unwrap_err(),
            "Invalid value purge for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("message.format.version", "three").is_err());
        assert!(validate("leader.replication.throttled.replicas", "0:1,1:2").is_ok());
        assert!(validate("leader.replication.throttled.replicas", "0-1").is_err());
    }

    #[test]
    fn message_format_version_is_read_as_kafka_reads_it() {
        // Kafka looks at the first three parts of a 0.x version and the
        // first two of a later one, so librdkafka's test 0092 may set
        // "0.10.0.0" (and kafka-configs users "2.8.1").
        for v in [
            "0.10.0.0",
            "0.10.0",
            "0.10.0-IV1",
            "0.8.2.2",
            "1.0.1",
            "2.8",
            "3.0-IV1",
            "3.7.0",
        ] {
            assert!(validate("message.format.version", v).is_ok(), "{v}");
        }
        for v in ["three", "0.10", "3", "3.x", "0.10.x.0", "", "3.0-V1"] {
            assert_eq!(
                validate("message.format.version", v).unwrap_err(),
                format!(
                    "Invalid value {v} for configuration message.format.version: Version {v} is not a valid version"
                ),
            );
        }
    }

    #[test]
    fn min_insync_replicas_is_accepted_from_one_up() {
        assert_eq!(
            validate("min.insync.replicas", "0").unwrap_err(),
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
        );
        assert!(validate("min.insync.replicas", "3").is_ok());
    }

    #[test]
    fn what_kaas_does_not_do_yet_is_refused_not_ignored() {
        let e = validate("remote.storage.enable", "true").unwrap_err();
        assert!(e.contains("not supported by this broker"), "{e}");
        // Their defaults, however written, and the no-ops, are accepted.
        for (name, value) in [
            ("cleanup.policy", "delete"),
            ("cleanup.policy", "compact"),
            ("cleanup.policy", "compact,delete"),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("segment.ms", "60000"),
            ("message.timestamp.type", "CreateTime"),
            ("message.timestamp.type", "LogAppendTime"),
            ("message.timestamp.after.max.ms", "3600000"),
            ("compression.type", "gzip"),
            ("compression.type", "uncompressed"),
            ("compression.type", "producer"),
            ("remote.storage.enable", "FALSE"),
            ("flush.messages", "1"),
            ("delete.retention.ms", "100"),
            ("unclean.leader.election.enable", "true"),
            ("min.insync.replicas", "3"),
        ] {
            assert!(validate(name, value).is_ok(), "{name}={value}");
        }
    }
}
