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
//!
//! In single-node mode this broker is the coordinator of every group (and,
//! for FindCoordinator, of every transactional id).

pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod journal;
pub mod live;
pub mod member;
pub mod now;
pub mod offsets;
pub mod offsets_topic;
pub mod outcome;
pub mod protocols;
pub mod record;
pub mod retention;
pub mod shards;
pub mod state;
pub mod subscription;
mod ticker;

pub use config::GroupConfig;
pub use coordinator::{Durable, GroupCoordinator};
pub use outcome::{GroupOverview, GroupSummary, JoinOutcome, Reply, SyncOutcome};
pub use record::Committed;
pub use shards::GroupShards;
pub use state::{GroupState, JoinRequest, SyncRequest};
