//! Test policy `broken-retry`: apache37 with the KIP-360 retry-of-bump rule removed: a retry is fenced. The conformance runner must fail the retry cases (proves the runner can fail).
//! Everything except InitProducerId is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{
    AddPartitionsRequest, Decision, EndTxnRequest, Entry, InitRequest, Limits, Policy, PolicyInfo,
    VerifyDecision,
};

struct Hostile;

impl Policy for Hostile {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "apache37-broken-retry".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        let d = rules::init_producer_id(current, &req, limits);
        if d.kind == kaas_policy_sdk::DecisionKind::RetryReturnsCurrent {
            return Decision::reject(rules::fenced(req.version, rules::INIT_FENCED_SINCE));
        }
        d
    }

    fn add_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        _limits: &Limits,
    ) -> Decision {
        rules::add_partitions(current, &req)
    }

    fn verify_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        in_transaction: &[bool],
        _limits: &Limits,
    ) -> VerifyDecision {
        rules::verify_partitions(current, &req, in_transaction)
    }

    fn end_txn(current: Option<Entry>, req: EndTxnRequest, _limits: &Limits) -> Decision {
        rules::end_txn(current, &req)
    }

    fn complete_transaction(current: Entry, _limits: &Limits) -> Decision {
        rules::complete_transaction(current)
    }

    fn reap(current: Entry, start_timestamp_ms: i64, now_ms: i64, _limits: &Limits) -> Decision {
        rules::reap(current, start_timestamp_ms, now_ms)
    }
}

kaas_policy_sdk::export_policy!(Hostile);
