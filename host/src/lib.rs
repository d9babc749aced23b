//! kaas: a Kafka-wire-compatible broker whose transaction coordinator is
//! programmable: a policy component (the WIT package in `policy-wit/`) runs in
//! a wasmtime sandbox and decides every transition of every transaction.
//!
//! The modules, one line each (`scripts/structure` holds this map to the
//! `mod` declarations below):
//!
//! Requests in and out:
//! - [`server`]: the TCP server: connections, frames, dispatch, responses in order.
//! - [`wire`]: the Kafka wire protocol: versions, decoding, one handler per API.
//! - [`broker`]: the shared state every handler works on, and its background tasks.
//! - [`broker_ports`]: the broker's side of the narrow traits the subsystems take.
//! - [`codes`]: the Kafka error codes the broker answers with (declared only here).
//! - [`names`]: topic names, response strings and API names as Kafka spells them.
//! - [`fetch_sessions`]: incremental fetch sessions (KIP-227).
//! - [`topic_ids`]: topics by id, for the requests that name a topic by its id alone.
//!
//! Transactions and their policy:
//! - [`txn`]: the transaction coordinator: state machine, state log, markers, shards.
//! - [`policy`]: the sandbox that runs a policy and checks every decision it returns.
//! - [`swap`]: policy hot swap: vets an offered policy and makes it the current one.
//! - [`admin`]: the loopback admin endpoint (`--admin-listen`) and its client.
//! - [`pid`]: the producer-id allocator (blocks reserved durably).
//! - [`conformance`]: `kaas conformance`: data-driven vectors through the real runtime.
//! - [`policy_kit`]: `kaas policy new`: a policy crate that builds outside this repository.
//! - [`txn_describe`]: `kaas txn describe`: an operator's view of one transactional id.
//!
//! Storage, groups, cluster, security:
//! - [`log`]: partition logs (segments, indexes, producer state, recovery) and durability.
//! - [`fd_budget`]: the file-descriptor budget segment files and connections share.
//! - [`group`]: consumer groups (classic and consumer protocols) and committed offsets.
//! - [`cluster`]: who leads what: single node, or cluster mode agreed in etcd.
//! - [`lease_gate`]: whether this broker may still write for something it leads.
//! - [`security`]: sessions, authentication (TLS, SASL) and ACL authorization.
//! - [`quota`]: client quotas: the table, Kafka's rates and throttle times.
//!
//! Throughout:
//! - [`config`]: one broker's settings and their defaults.
//! - [`metrics`]: the request-path counters and the Prometheus text helpers.
//! - [`exposition`]: the broker-wide Prometheus page (`--metrics-listen`).
//! - [`clock`]: the wall clock, read in one place.
//! - [`ratelimit`]: limits on repeated events: log lines, and the retry backoff.
//! - [`invariant`]: `invariant!`, an assertion of what the code relies on (test builds).
//! - [`fault`]: test-only fault points (the `fault-injection` feature).

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
pub mod invariant;
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
