//! Test policy `illegal`: InitProducerId returns illegal decisions (epoch goes down, a pid that is not the candidate); the host's invariant checks must refuse them.
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{
    AddPartitionsRequest, Decision, EndTxnRequest, Entry, InitRequest, Limits, Policy, PolicyInfo,
};

struct Hostile;

impl Policy for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-illegal".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: Limits) -> Decision {
        let mut d = rules::init_producer_id(current, &req, &limits);
        if let Some(e) = d.entry.as_mut() {
            if req.transactional_id.as_deref() == Some("foreign-pid") {
                e.producer_id = req.candidate_producer_id + 7777;
                e.producer_epoch = 0;
            } else {
                e.producer_epoch -= 2;
            }
            d.reply.producer_id = e.producer_id;
            d.reply.producer_epoch = e.producer_epoch;
        }
        d
    }

    fn add_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        _limits: Limits,
    ) -> Decision {
        rules::add_partitions(current, &req)
    }

    fn end_txn(current: Option<Entry>, req: EndTxnRequest, _limits: Limits) -> Decision {
        rules::end_txn(current, &req)
    }

    fn complete_transaction(current: Entry, now_ms: i64, _limits: Limits) -> Decision {
        rules::complete_transaction(current, now_ms)
    }

    fn reap(current: Entry, now_ms: i64, _limits: Limits) -> Decision {
        rules::reap(current, now_ms)
    }
}

kaas_policy_sdk::export_policy!(Hostile);
