//! kaas: a Kafka-wire-compatible broker whose transaction coordinator is
//! programmable.
//!
//! Major components and how they connect:
//! - [`policy`]: the wasmtime sandbox that runs a policy component (the WIT
//!   package in `policy-wit/`) and checks every decision it returns against
//!   the host's invariants.
//! - [`txn`]: the coordinator, sans I/O. [`txn::machine::TxnMachine`] asks the
//!   policy, plans a durable write, and applies it once the caller reports it
//!   durable; [`txn::record`] is the versioned state-record codec.
//! - [`conformance`]: data-driven vectors run through the real runtime and
//!   machine (`kaas conformance`).
//! - [`policy_kit`]: `kaas policy new`, a policy crate that builds outside
//!   this repository.
//!
//! - [`server`] and [`wire`]: the Kafka wire protocol over TCP, one file per
//!   API under `wire/api/`.
//! - [`log`]: partition logs (segments, indexes, producer state, recovery)
//!   and group-committed durability.
//! - [`broker`]: the shared state handlers work on.
//! - [`group`]: consumer groups (the classic group protocol) and durable
//!   committed offsets.
//! - [`quota`]: client quotas (the table, Kafka's rates and throttle
//!   times); `wire::throttling` applies them to requests.
//! - [`swap`] and [`admin`]: hot swap of the policy (vetting, the
//!   loopback admin endpoint); [`txn_describe`]: `kaas txn describe`.
//!
//! What the code relies on is asserted where the state changes with
//! `invariant!` (`invariant.rs`): checked in every test build, compiled out
//! of a production build.

pub mod admin;
pub mod broker;
mod broker_ports;
pub mod clock;
pub mod cluster;
pub mod codes;
pub mod config;
pub mod conformance;
pub mod exposition;
pub mod fault;
pub mod fd_budget;
pub mod fetch_sessions;
pub mod group;
mod invariant;
pub mod lease_gate;
pub mod log;
pub mod metrics;
pub mod names;
pub mod pid;
pub mod policy;
pub mod policy_kit;
pub mod quota;
pub mod ratelimit;
pub mod security;
pub mod server;
pub mod swap;
pub mod topic_ids;
pub mod txn;
pub mod txn_describe;
pub mod wire;

/// The apache37 policy component embedded at build time (empty when the
/// component had not been built; see build.rs).
pub const EMBEDDED_APACHE37: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/apache37.wasm"));
