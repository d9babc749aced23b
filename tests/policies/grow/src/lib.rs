//! Test policy `grow`: InitProducerId allocates memory without bound; the host's memory limit must stop it.
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Hostile;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-grow".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        let _ = (&current, &req, limits);
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
