//! Host-side bindings generated from `policy-wit/` (the one source of the
//! policy ABI). They are the wire format of a call only: the coordinator
//! works with the natural types of [`super::types`], which map onto these.

wasmtime::component::bindgen!({
    path: "../policy-wit",
    world: "txn-policy",
    additional_derives: [PartialEq, Eq],
});

/// The generated WIT types (`wit::Entry` is the policy's view of an entry).
pub use kaas::txn_policy::types as wit;

/// The WIT package this host speaks, as components name it in their exports.
pub const WIT_PACKAGE: &str = "kaas:txn-policy";
/// The version of that package this host was built against.
pub const WIT_VERSION: &str = "3.0.0";
/// The export interface a policy must provide.
pub const WIT_EXPORT: &str = "kaas:txn-policy/policy@3.0.0";
