//! Test policy `illegal`: InitProducerId returns illegal decisions (a first init gets a pid that is not the candidate; any other write lowers the epoch); the host's invariant checks must refuse them.
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Hostile;

impl rules::Variant for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-illegal".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        let initializing = current.is_none();
        let mut d = rules::init_producer_id(current, &req, limits);
        if let Some(e) = d.entry.as_mut() {
            if initializing {
                // A first InitProducerId gets a pid that is not the candidate.
                e.producer_id = req.candidate_producer_id + 7777;
                e.producer_epoch = 0;
            } else {
                // Any other write lowers the epoch.
                e.producer_epoch -= 2;
            }
            d.reply.producer_id = e.producer_id;
            d.reply.producer_epoch = e.producer_epoch;
        }
        d
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Hostile>);
