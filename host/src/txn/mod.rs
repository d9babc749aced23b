//! Transactions: the policy-driven state machine ([`machine`], sans I/O,
//! with the state-record codec of [`record`]), its durable log ([`store`],
//! files), the coordinator that drives both ([`coordinator`]) through the
//! ports of [`port`], its shards ([`shards`]), the marker writers (the
//! partition leader's side in [`markers`], the coordinator's routing in
//! [`marker_routing`]) and the verification a partition leader asks of a
//! coordinator ([`route`]). Nothing here knows the broker: what it needs
//! from the log, the groups and the cluster comes through narrow traits.

pub mod coordinator;
pub mod machine;
pub mod marker_routing;
pub mod markers;
pub mod port;
pub mod record;
pub mod route;
pub mod shards;
pub mod store;
