//! Transactions: the policy-driven coordinator, and the partition leader's
//! side of a transaction's completion. Nothing here knows the broker: what
//! it needs from the log, the groups and the cluster comes through the
//! narrow traits of [`port`].
//!
//! - [`machine`]: the coordinator's state machine, sans I/O; the policy decides.
//! - [`record`]: the state-record codec: one coordinator entry as the state log keeps it.
//! - [`store`]: the durable state log (`__transaction_state/state.log`), group-committed.
//! - [`coordinator`]: the coordinator as the broker runs it: machine, store, fences, markers.
//! - [`port`]: the coordinator's ports: producer ids, fences, leaders, marker writers, state log.
//! - [`shards`]: which transactional ids (which shards) this broker coordinates.
//! - [`marker_routing`]: each marker to its partition's leader, here or a peer, until done.
//! - [`markers`]: the one local marker writer: markers into the partitions open here.
//! - [`route`]: which broker coordinates a transactional id, and the verification asked of it.
//! - [`tenant`]: the tenant class of a transactional id, for the policy.

pub mod coordinator;
pub mod machine;
pub mod marker_routing;
pub mod markers;
pub mod port;
pub mod record;
pub mod route;
pub mod shards;
pub mod store;
pub mod tenant;
