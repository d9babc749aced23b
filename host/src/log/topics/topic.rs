//! Topics as the log keeps them: a topic and the partitions of it open
//! here, its metadata record (`__topics/<topic>.json`), the creation
//! errors and limits, name and config validation, and topic ids.

use crate::log::*;

/// A topic and the partitions of it this broker has open.
#[derive(Debug)]
pub struct Topic {
    pub name: String,
    /// 16 bytes, stable for the topic's life (Metadata v10+).
    pub id: [u8; 16],
    /// Partitions of the topic, open here or not.
    pub partition_count: i32,
    /// One slot per partition: the partition when this broker has it open
    /// (single-node mode: always; cluster mode: while it leads it).
    pub(in crate::log) slots: Vec<RwLock<Option<Arc<Partition>>>>,
    /// One per slot: the producer batches refused there, shared by every
    /// partition opened in the slot ([`refusals`]).
    pub(in crate::log) refusals: Vec<Arc<refusals::Refusals>>,
    pub config: LogConfig,
    /// The configs as given (DescribeConfigs shows them as dynamic).
    pub overrides: BTreeMap<String, String>,
}

impl Topic {
    pub(in crate::log) fn new(
        name: &str,
        id: [u8; 16],
        count: i32,
        config: LogConfig,
        overrides: BTreeMap<String, String>,
        mut open: Vec<Option<Arc<Partition>>>,
        mut refused: Vec<Arc<refusals::Refusals>>,
    ) -> Topic {
        let n = usize::try_from(count).unwrap_or(0);
        open.resize(n, None);
        refused.resize_with(n, Default::default);
        Topic {
            name: name.into(),
            id,
            partition_count: count,
            slots: open.into_iter().map(RwLock::new).collect(),
            refusals: refused,
            config,
            overrides,
        }
    }

    /// Partition `id` if it is open on this broker.
    pub fn partition(&self, id: i32) -> Option<Arc<Partition>> {
        let slot = self.slots.get(usize::try_from(id).ok()?)?;
        slot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The partitions open on this broker, by id.
    pub fn open_partitions(&self) -> Vec<Arc<Partition>> {
        self.slots
            .iter()
            .filter_map(|s| s.read().unwrap_or_else(|p| p.into_inner()).clone())
            .collect()
    }

    /// The refusals of slot `id` (a fresh set for an id out of range).
    pub(in crate::log) fn refusals(&self, id: i32) -> Arc<refusals::Refusals> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.refusals.get(i))
            .cloned()
            .unwrap_or_default()
    }

    pub(in crate::log) fn take(&self, id: i32) -> Option<Arc<Partition>> {
        let slot = self.slots.get(usize::try_from(id).ok()?)?;
        slot.write().unwrap_or_else(|p| p.into_inner()).take()
    }

    pub(in crate::log) fn put(&self, id: i32, p: Arc<Partition>) -> bool {
        let Some(slot) = usize::try_from(id).ok().and_then(|i| self.slots.get(i)) else {
            return false;
        };
        *slot.write().unwrap_or_else(|p| p.into_inner()) = Some(p);
        true
    }
}

/// A topic's durable description: `__topics/<name>.json` in single-node
/// mode, `topics/<name>` in etcd in cluster mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: i32,
    pub id: String,
    pub configs: BTreeMap<String, String>,
    /// The replication factor (absent in records of earlier builds, and
    /// left out when 1, so such records read back byte for byte).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub replication_factor: i16,
    /// Each partition's stored replica set, preferred leader first (cluster
    /// mode: a manual assignment, or the placement chain of a replication
    /// factor above 1); an empty or missing entry: the partition floats
    /// (see `cluster::replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<Vec<i32>>,
}

fn one() -> i16 {
    1
}

fn is_one(n: &i16) -> bool {
    *n == 1
}

impl TopicMeta {
    /// A record with replication factor 1 and no stored replica sets.
    pub fn new(name: &str, partitions: i32, id: String, configs: BTreeMap<String, String>) -> Self {
        TopicMeta {
            name: name.into(),
            partitions,
            id,
            configs,
            replication_factor: 1,
            replicas: Vec::new(),
        }
    }

    /// Partition `p`'s stored replica set (empty: it floats).
    pub fn stored_replicas(&self, p: i32) -> &[i32] {
        usize::try_from(p)
            .ok()
            .and_then(|i| self.replicas.get(i))
            .map_or(&[], Vec::as_slice)
    }
}

/// Why a topic could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("topic {0} already exists")]
    Exists(String),
    #[error("invalid topic name {0:?}")]
    InvalidName(String),
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// INVALID_REPLICATION_FACTOR, with Kafka's message.
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// INVALID_REPLICA_ASSIGNMENT, with Kafka's message.
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("storage: {0}")]
    Io(#[from] io::Error),
    #[error(
        "{requested} more partitions would take the broker past its limit of {max} \
         ({existing} exist; --max-partitions)"
    )]
    PartitionLimit {
        requested: usize,
        existing: usize,
        max: usize,
    },
    #[error(transparent)]
    FdBudget(#[from] crate::fd_budget::Shortfall),
}

/// What topic creation may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicLimits {
    /// Most partitions on this broker.
    pub max_partitions: usize,
    /// Open files left free after a creation (see
    /// [`crate::fd_budget::check`]).
    pub fd_reserve: u64,
}

impl Default for TopicLimits {
    fn default() -> Self {
        TopicLimits {
            max_partitions: 10_000,
            fd_reserve: crate::fd_budget::reserve_for(1024),
        }
    }
}

/// Kafka's topic-name rule: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// [`parse_configs`] for configs stored by an earlier build, which may have
/// accepted values this one refuses: each such entry is skipped (and
/// logged) instead of keeping the topic from opening.
pub fn parse_stored_configs(
    topic: &str,
    defaults: &LogConfig,
    stored: &BTreeMap<String, String>,
) -> LogConfig {
    let kept = valid_entries(
        stored,
        |m| parse_configs(defaults, m),
        |k, v, error| {
            tracing::warn!(topic, config = %k, value = %v, %error, "a stored topic config is no longer valid; the default applies");
        },
    );
    parse_configs(defaults, &kept).unwrap_or_else(|_| defaults.clone())
}

/// The entries of `stored` that `check` accepts: all of them when it
/// accepts the whole map, else those it accepts added one at a time, each
/// refused one handed to `refused` (name, value, why).
pub(in crate::log) fn valid_entries(
    stored: &BTreeMap<String, String>,
    check: impl Fn(&BTreeMap<String, String>) -> Result<LogConfig, String>,
    refused: impl Fn(&str, &str, &str),
) -> BTreeMap<String, String> {
    if check(stored).is_ok() {
        return stored.clone();
    }
    let mut kept = BTreeMap::new();
    for (k, v) in stored {
        let mut with = kept.clone();
        with.insert(k.clone(), v.clone());
        match check(&with) {
            Ok(_) => kept = with,
            Err(error) => refused(k, v, &error),
        }
    }
    kept
}

/// The log config of a topic with `overrides` over `defaults`: every
/// name and value checked as Kafka 3.7 checks them
/// ([`crate::log::config::topic_config`]); the enforced ones applied.
pub fn parse_configs(
    defaults: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, String> {
    let mut c = defaults.clone();
    let mut difference = None;
    for (k, v) in overrides {
        crate::log::config::topic_config::validate(k, v)?;
        let v = v.trim();
        let num = |v: &str| {
            v.parse::<i64>()
                .map_err(|_| format!("{k}={v} is not a number"))
        };
        match k.as_str() {
            "segment.bytes" => {
                let n = num(v)?;
                // Kafka's floor is 14; kaas's segments need room for an index header.
                if n < 1024 {
                    return Err(format!(
                        "Invalid value {n} for configuration segment.bytes: this broker needs at least 1024"
                    ));
                }
                c.segment_bytes = n as u64;
            }
            "max.message.bytes" => c.max_message_bytes = num(v)? as usize,
            "retention.ms" => c.retention_ms = num(v)?,
            "retention.bytes" => c.retention_bytes = num(v)?,
            "segment.ms" => c.segment_ms = num(v)?,
            "cleanup.policy" => {
                let policies = || v.split(',').map(str::trim);
                c.compact = policies().any(|p| p == "compact");
                c.delete = policies().any(|p| p == "delete");
            }
            "delete.retention.ms" => c.delete_retention_ms = num(v)?,
            "min.compaction.lag.ms" => c.min_compaction_lag_ms = num(v)?,
            "max.compaction.lag.ms" => c.max_compaction_lag_ms = num(v)?,
            "min.cleanable.dirty.ratio" => {
                c.min_cleanable_dirty_ratio = v
                    .parse::<f64>()
                    .map_err(|_| format!("{k}={v} is not a number"))?
            }
            "message.timestamp.type" => c.log_append_time = v == "LogAppendTime",
            "compression.type" => c.compression = crate::log::batch::recompress::codec_of(v),
            "message.timestamp.before.max.ms" => c.timestamp_before_max_ms = num(v)?,
            "message.timestamp.after.max.ms" => c.timestamp_after_max_ms = num(v)?,
            "message.timestamp.difference.max.ms" => difference = Some(num(v)?),
            "min.insync.replicas" => {
                c.min_insync_replicas =
                    i32::try_from(num(v)?).map_err(|_| format!("{k}={v} is out of range"))?
            }
            // Validated above: a no-op here, or only its default.
            _ => {}
        }
    }
    // Kafka 3.7 (KIP-937): the deprecated difference.max.ms bounds both
    // sides where before/after.max.ms are left at their default.
    if let Some(d) = difference {
        if !overrides.contains_key("message.timestamp.before.max.ms") {
            c.timestamp_before_max_ms = d;
        }
        if !overrides.contains_key("message.timestamp.after.max.ms") {
            c.timestamp_after_max_ms = d;
        }
    }
    Ok(c)
}

pub(in crate::log) fn new_topic_id(name: &str) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let d = Sha256::digest(format!("{name}/{nanos}/{}", std::process::id()));
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    id
}

pub fn parse_id(s: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(b) = hex::decode(s)
        && b.len() == 16
    {
        id.copy_from_slice(&b);
    }
    id
}
