//! The consumer group protocol of KIP-848 (Kafka 4.0's default direction):
//! the coordinator computes the assignment, and members reconcile towards it
//! incrementally through ConsumerGroupHeartbeat, so a member joining or
//! leaving does not stop the group.
//!
//! - [`assignor`]: the server-side assignors (`uniform`, `range`).
//! - [`member`]: a member and its reconciliation towards its target.
//! - [`group`]: one group's heartbeat, leave and fencing rules.
//!
//! - [`model`]: a group's durable state, changed only by applying its
//!   records.
//!
//! Sans I/O like the classic [`super::state`]: the coordinator holds the
//! lock, journals the [`ConsumerRecord`]s a heartbeat computed, applies them
//! once written, and answers.

pub mod assignor;
pub mod group;
pub mod member;
pub mod model;
#[cfg(test)]
mod tests;

pub use assignor::{Assignment, TopicId};
pub use group::{ConsumerConfig, ConsumerGroup, ConsumerState, Heartbeat, Reply, Topics};
pub use member::{Member, MemberState, Progress, Subscription};
pub use model::{ConsumerModel, ConsumerRecord};
