//! Test policy `v2`: a component that exports `kaas:txn-policy/policy@2.0.0`,
//! a WIT major version this host does not speak. The host must refuse it at
//! load, naming both versions. Its WIT is inline on purpose: it is not the
//! real ABI (policy-wit/), only enough of a future one to carry the version.

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

struct FutureMajor;

impl Guest for FutureMajor {
    fn describe() -> String {
        "future-major-v2".into()
    }
}

bindings::export!(FutureMajor with_types_in bindings);
