//! The group coordinator's settings, under the Kafka broker configs of the
//! same meaning, and their Kafka defaults.

use std::time::Duration;

use super::consumer::ConsumerConfig;

/// Group coordinator settings (Kafka broker configs of the same meaning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// group.min.session.timeout.ms
    pub min_session_timeout: Duration,
    /// group.max.session.timeout.ms
    pub max_session_timeout: Duration,
    /// group.initial.rebalance.delay.ms
    pub initial_rebalance_delay: Duration,
    /// group.max.size
    pub max_size: usize,
    /// offset.metadata.max.bytes
    pub offset_metadata_max_bytes: usize,
    /// offsets.retention.minutes
    pub offsets_retention: Duration,
    /// offsets.retention.check.interval.ms
    pub offsets_retention_check: Duration,
    /// The journal is compacted once it is at least this big (and four
    /// times its live contents).
    pub compact_bytes: u64,
    /// The consumer group protocol's settings (KIP-848).
    pub consumer: ConsumerConfig,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout: Duration::from_millis(6_000),
            max_session_timeout: Duration::from_millis(1_800_000),
            initial_rebalance_delay: Duration::from_millis(3_000),
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4096,
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
            offsets_retention_check: Duration::from_secs(600),
            compact_bytes: 64 << 20,
            consumer: ConsumerConfig::default(),
        }
    }
}
