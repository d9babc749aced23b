//! Test policy `trap`: InitProducerId panics, which traps the instance; the host must answer an error and replace the instance.
//! It decides normally (apache37) only for a requested timeout of
//! [`NO_TRAP_TIMEOUT_MS`], so a test can show the replaced instance answering
//! (ABI 2.0 does not pass the transactional.id, which 1.x keyed this on).
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Hostile;

/// The requested transaction timeout for which this policy does not panic.
pub const NO_TRAP_TIMEOUT_MS: i32 = 77_777;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-trap".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        if req.timeout_ms == NO_TRAP_TIMEOUT_MS {
            return rules::init_producer_id(current, &req, limits);
        }
        panic!(
            "hostile-trap policy: deliberate panic for a {} ms timeout",
            req.timeout_ms
        )
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
