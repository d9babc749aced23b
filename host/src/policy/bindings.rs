//! Host-side bindings generated from `policy-wit/` (the one source of the
//! policy ABI). They are the wire format of a call only: the coordinator
//! works with the natural types of [`super::types`], which map onto these.
//! Also which package version a component exports, checked at load.

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

/// Finds the component's `kaas:txn-policy/policy@X.Y.Z` export and refuses a
/// major version this host does not speak.
pub(super) fn check_wit_version(
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
) -> anyhow::Result<String> {
    let prefix = format!("{WIT_PACKAGE}/policy@");
    let ty = component.component_type();
    let mut names = Vec::new();
    for (name, item) in ty.exports(engine) {
        names.push(name.to_string());
        let _ = item;
        if let Some(version) = name.strip_prefix(&prefix) {
            let major = |v: &str| v.split('.').next().map(str::to_owned);
            if major(version) != major(WIT_VERSION) {
                anyhow::bail!(
                    "this policy was built for {WIT_PACKAGE}@{version}, but this kaas speaks \
                     {WIT_PACKAGE}@{WIT_VERSION} (major {}); rebuild the policy against policy-wit {}.x",
                    major(WIT_VERSION).unwrap_or_default(),
                    major(WIT_VERSION).unwrap_or_default(),
                );
            }
            return Ok(version.to_string());
        }
    }
    anyhow::bail!(
        "not a kaas transaction policy: it does not export {WIT_EXPORT} (its exports: {names:?})"
    )
}
