//! Test policy `panic-message`: `describe()` panics with a known message, so
//! loading it must fail, and the host's error must carry the panic message
//! (the guest's bounded stderr reaches the host) instead of only "trapped".
//! Everything else is apache37's rules (never reached: the load fails).

use kaas_apache37_rules as rules;
use kaas_policy_sdk::PolicyInfo;

struct Exploding;

impl rules::Variant for Exploding {
    fn describe() -> PolicyInfo {
        panic!("describe exploded (panic-message test policy)")
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Exploding>);
