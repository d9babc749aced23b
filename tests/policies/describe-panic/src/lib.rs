//! Test policy `describe-panic`: its describe() panics, so it can never be
//! loaded; a hot swap to it must be refused and the old policy keep deciding.
//! Everything else is apache37's rules (never reached).

use kaas_apache37_rules as rules;
use kaas_policy_sdk::PolicyInfo;

struct Hostile;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        panic!("describe-panic policy: deliberate panic in describe()")
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
