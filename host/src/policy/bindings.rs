//! Host-side bindings generated from `policy-wit/` (the one source of the
//! policy ABI). The record types double as the coordinator's entry type.

wasmtime::component::bindgen!({
    path: "../policy-wit",
    world: "txn-policy",
    additional_derives: [PartialEq, Eq],
});

pub use kaas::txn_policy::types::{
    AddPartitionsRequest, Claim, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest, Limits,
    PolicyInfo, Reply, TopicPartition, TxnState,
};

/// The WIT package this host speaks, as components name it in their exports.
pub const WIT_PACKAGE: &str = "kaas:txn-policy";
/// The version of that package this host was built against.
pub const WIT_VERSION: &str = "1.0.0";
/// The export interface a policy must provide.
pub const WIT_EXPORT: &str = "kaas:txn-policy/policy@1.0.0";
