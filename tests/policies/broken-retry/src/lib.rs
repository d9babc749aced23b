//! Test policy `broken-retry`: apache37 with the KIP-360 retry-of-bump rule removed: a retry is fenced. The conformance runner must fail the retry cases (proves the runner can fail).
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Hostile;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "apache37-broken-retry".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        let d = rules::init_producer_id(current, &req, limits);
        if d.kind == kaas_policy_sdk::DecisionKind::RetryReturnsCurrent {
            return Decision::reject(rules::fenced(req.version, rules::INIT_FENCED_SINCE));
        }
        d
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
