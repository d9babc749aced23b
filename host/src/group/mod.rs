//! Consumer groups: Kafka's classic group protocol and committed offsets.
//!
//! - [`state`]: one group's state machine, sans I/O (JoinGroup, SyncGroup,
//!   Heartbeat, LeaveGroup, timeouts, static membership).
//! - [`member`]: one member of a group.
//! - [`outcome`]: what the coordinator answers, before wire encoding.
//! - [`coordinator`]: the groups of one shard and their offsets behind one
//!   lock; the API the wire handlers call.
//! - [`shards`]: which shards (and so which groups) this broker
//!   coordinates: one in single-node mode, those the cluster gave it in
//!   cluster mode.
//! - [`ticker`]: the background task that fires deadlines.
//! - [`journal`] and [`record`]: the durable, group-committed offsets
//!   journal (`<data dir>/__groups/offsets.log`; a shard's sealed
//!   generations under `__groups/shard-<n>/` in cluster mode) and its
//!   record format.
//! - [`offsets`]: the durable offsets OffsetFetch serves.
//! - [`retention`]: which offsets have expired.
//! - [`subscription`]: the topics a consumer member subscribes to.
//! - [`codes`]: the Kafka error codes of this module.
//!
//! In single-node mode this broker is the coordinator of every group (and,
//! for FindCoordinator, of every transactional id).

pub mod codes;
pub mod coordinator;
pub mod journal;
pub mod member;
pub mod offsets;
pub mod offsets_topic;
pub mod outcome;
pub mod record;
pub mod retention;
pub mod shards;
pub mod state;
pub mod subscription;
mod ticker;

use std::time::Duration;

pub use coordinator::{Durable, GroupCoordinator};
pub use outcome::{GroupOverview, GroupSummary, JoinOutcome, Reply, SyncOutcome};
pub use record::Committed;
pub use shards::GroupShards;
pub use state::{GroupState, JoinRequest, SyncRequest};

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
        }
    }
}
