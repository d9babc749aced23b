//! `{{name}}`: a kaas transaction-coordinator policy that starts as Apache
//! Kafka 3.7's rules (the bundled `kaas-apache37-rules`) with no change.
//!
//! Implement [`Variant`](rules::Variant) methods for the decisions you want
//! to differ; every method you leave out decides as apache37 does. Keep the
//! rules plain Rust (no I/O, no clock, no randomness: the host gives you
//! everything) so `cargo test` checks them natively.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::PolicyInfo;

/// The policy's name as `describe()` reports it (and conformance, logs and
/// /metrics show it).
pub const NAME: &str = "{{name}}";

/// The exported policy.
#[derive(Debug)]
pub struct MyPolicy;

impl rules::Variant for MyPolicy {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            // Free-form; say what your policy does differently.
            features: vec![
                "kip-98".into(),
                "kip-360".into(),
                "kip-890-verify".into(),
                "no-kafka-20357".into(),
            ],
            protocol_features: rules::protocol_features(),
        }
    }

    // Example: refuse transaction timeouts over 60 s (apache37 allows up to
    // the broker's transaction.max.timeout.ms). Uncomment, add
    // `use kaas_policy_sdk::{code, Decision, Entry, InitRequest, Limits};`,
    // declare the conformance cases this changes in differences.json and
    // add a test below.
    //
    // fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
    //     if req.timeout_ms > 60_000 {
    //         return Decision::reject(code::INVALID_TRANSACTION_TIMEOUT);
    //     }
    //     rules::init_producer_id(current, &req, limits)
    // }
}

// The component's export. Only for wasm32: natively (`cargo test`) the crate
// is a plain library.
#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(rules::Apache37Based<MyPolicy>);

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_policy_sdk::{
        Claim, DecisionKind, EndTxnRequest, InitRequest, Limits, Policy as _, TransactionalId,
        TxnState, code,
    };

    type Exported = rules::Apache37Based<MyPolicy>;

    const LIMITS: Limits = kaas_policy_sdk::DEFAULT_LIMITS;

    fn init(timeout_ms: i32) -> InitRequest {
        InitRequest {
            transactional_id: TransactionalId::Present,
            claim: Claim::NONE,
            version: 4,
            timeout_ms,
            candidate_producer_id: 2000,
            tenant: 0,
        }
    }

    #[test]
    fn describe_names_this_policy() {
        assert_eq!(Exported::describe().name, NAME);
    }

    #[test]
    fn first_init_takes_the_candidate_pid_at_epoch_0() {
        let d = Exported::init_producer_id(None, init(60_000), &LIMITS);
        assert_eq!(d.kind, DecisionKind::Initialize);
        assert_eq!(
            (
                d.reply.error_code,
                d.reply.producer_id,
                d.reply.producer_epoch
            ),
            (code::NONE, 2000, 0)
        );
        let entry = d.entry.expect("an initialised id is persisted");
        assert_eq!(entry.state, TxnState::Empty);
    }

    #[test]
    fn timeout_over_the_broker_maximum_is_refused() {
        let d = Exported::init_producer_id(None, init(LIMITS.max_timeout_ms + 1), &LIMITS);
        assert_eq!(d.reply.error_code, code::INVALID_TRANSACTION_TIMEOUT);
        assert!(d.entry.is_none());
    }

    #[test]
    fn end_txn_for_an_unknown_id_is_refused() {
        let req = EndTxnRequest {
            transactional_id: TransactionalId::Present,
            producer_id: 1000,
            producer_epoch: 0,
            commit: true,
            version: 4,
            candidate_producer_id: -1,
            tenant: 0,
        };
        let d = Exported::end_txn(None, req, &LIMITS);
        assert_eq!(d.reply.error_code, code::INVALID_PRODUCER_ID_MAPPING);
        assert!(d.entry.is_none());
    }
}
