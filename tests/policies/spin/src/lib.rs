//! Test policy `spin`: InitProducerId never returns (an infinite loop); the host's fuel and epoch deadline must stop it.
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Hostile;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-spin".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        let _ = (&current, limits);
        let mut n: u64 = req.candidate_producer_id as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
