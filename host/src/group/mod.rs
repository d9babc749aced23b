//! Consumer groups: Kafka's classic group protocol, the consumer group
//! protocol (KIP-848) and committed offsets, in one model whose state
//! changes only from records the journal accepted (docs/design.md, "One
//! group model, records first").
//!
//! - [`protocols`]: a group of either protocol, the one type the
//!   coordinator's one map holds.
//! - [`state`]: a classic group's state machine, sans I/O (JoinGroup,
//!   SyncGroup, Heartbeat, LeaveGroup, timeouts, static membership).
//! - [`member`]: one member of a classic group, and the outbox its parked
//!   requests are answered through.
//! - [`consumer`]: the consumer group protocol (KIP-848): its model and
//!   records, rules, members and assignors.
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
//! - [`live`]: what replaying the journal yields (per group: metadata,
//!   offsets, a consumer group's model), kept up to date on every append.
//! - [`offsets`]: the durable offsets OffsetFetch serves.
//! - [`offsets_topic`]: the `__consumer_offsets` partition a group maps to.
//! - [`retention`]: which offsets have expired.
//! - [`subscription`]: the topics a consumer member subscribes to.
//! - [`config`]: the coordinator's settings, with Kafka's names.
//! - [`now`]: the time an operation runs at (monotonic and wall clock).
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
