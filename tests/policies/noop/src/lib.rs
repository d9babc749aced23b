//! Test policy `noop`: the floor for benchmarks: InitProducerId does no work and hands the entry it was given straight back (same argument and result traffic as a real decision).
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Hostile;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "noop".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        let _ = limits;
        Decision {
            kind: kaas_policy_sdk::DecisionKind::NoChange,
            reply: kaas_policy_sdk::Reply::ok(req.candidate_producer_id, 0),
            entry: current,
            on_append_failure: None,
        }
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
