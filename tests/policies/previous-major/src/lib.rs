//! Test policy `previous-major`: a component that exports
//! `kaas:txn-policy/policy@2.0.0`, the WIT major version before the one this
//! host speaks (3.x): a policy built against the old ABI. The host must
//! refuse it at load, naming both versions. Its WIT is inline on purpose:
//! only enough of the old package to carry the version (the real 2.0
//! interface is in git history, policy-wit/ before the 3.0 change).

#[allow(missing_docs, unsafe_code, clippy::all)]
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package kaas:txn-policy@2.0.0;

            interface policy {
                describe: func() -> string;
            }

            world txn-policy-v2 {
                export policy;
            }
        ",
        world: "txn-policy-v2",
    });
}

use bindings::exports::kaas::txn_policy::policy::Guest;

struct PreviousMajor;

impl Guest for PreviousMajor {
    fn describe() -> String {
        "previous-major".into()
    }
}

// The export glue is generated in this crate (not the SDK's), so its
// unsafe ABI shims are this crate's code to the unsafe_code lint.
#[allow(unsafe_code)]
mod export {
    use super::{PreviousMajor, bindings};
    bindings::export!(PreviousMajor with_types_in bindings);
}
