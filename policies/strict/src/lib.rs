//! `strict`: a fail-closed transaction-coordinator policy.
//!
//! Where apache37 is lenient (to match Apache Kafka 3.7 exactly), strict
//! refuses: claims on absent entries and on the idempotent path, stale claims
//! that would abort an Ongoing transaction (quirk Q1), and retries once the
//! retried identity has been used. Everything else is apache37's rules.

pub mod rules;

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{
    AddPartitionsRequest, Decision, EndTxnRequest, Entry, InitRequest, Limits, Policy, PolicyInfo,
    VerifyDecision,
};

/// The policy's name as `describe()` reports it.
pub const NAME: &str = "strict";

/// The exported policy.
#[derive(Debug)]
pub struct Strict;

impl Policy for Strict {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            features: vec![
                "kip-98".into(),
                "kip-360".into(),
                "kip-890-verify".into(),
                "no-kafka-20357".into(),
                "fail-closed".into(),
                "no-q1".into(),
            ],
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        rules::init_producer_id(current, &req, limits)
    }

    fn add_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        _limits: &Limits,
    ) -> Decision {
        apache::add_partitions(current, &req)
    }

    fn verify_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        in_transaction: &[bool],
        _limits: &Limits,
    ) -> VerifyDecision {
        apache::verify_partitions(current, &req, in_transaction)
    }

    fn end_txn(current: Option<Entry>, req: EndTxnRequest, _limits: &Limits) -> Decision {
        apache::end_txn(current, &req)
    }

    fn complete_transaction(current: Entry, _limits: &Limits) -> Decision {
        apache::complete_transaction(current)
    }

    fn reap(current: Entry, start_timestamp_ms: i64, now_ms: i64, _limits: &Limits) -> Decision {
        apache::reap(current, start_timestamp_ms, now_ms)
    }
}

#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(Strict);
