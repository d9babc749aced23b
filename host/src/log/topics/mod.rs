//! Topics as the log keeps them, and their lifecycle on this broker's disk.
//!
//! - [`topic`]: a topic, the partitions of it open here, its metadata record, topic ids.
//! - [`creation`]: creating, growing and deleting topics, all or nothing.

mod creation;
pub(super) mod topic;
