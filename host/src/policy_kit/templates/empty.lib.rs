//! `{{name}}`: a kaas transaction-coordinator policy written from scratch
//! against the SDK's `Policy` trait.
//!
//! Every decision below is a legal, fail-closed placeholder: it refuses the
//! request (UNKNOWN_SERVER_ERROR) and writes nothing, so a broker running it
//! stays consistent but serves no transaction. Replace each body with your
//! rules. The contract (what each call gets, what the host checks, which
//! error codes each API may answer) is in wit/txn-policy.wit and kaas's
//! policy-wit/README.md. The conformance suite fails until the rules are
//! written. Keep the rules pure: the host gives you the clock (to `reap`),
//! a candidate producer id (to InitProducerId, and to EndTxn and `reap` when
//! an epoch is exhausted) and each request's tenant class; there is no I/O.

use kaas_policy_sdk::{
    AddPartitionsRequest, Decision, EndTxnRequest, Entry, InitRequest, Limits, Policy, PolicyInfo,
    TenantClass, VerifyDecision, VerifyRequest, code,
};

/// The policy's name as `describe()` reports it.
pub const NAME: &str = "{{name}}";

/// The exported policy.
#[derive(Debug)]
pub struct MyPolicy;

impl Policy for MyPolicy {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            features: vec![],
            // The features the broker advertises while this policy decides:
            // transaction.version 0 (Kafka 3.x transactions). Finalize
            // level 2 only if the rules implement Kafka 4's protocol.
            protocol_features: vec![kaas_policy_sdk::transaction_version(0, 0, 0)],
        }
    }

    /// InitProducerId. Write: the idempotent path (no transactional.id:
    /// answer the candidate pid at epoch 0 with `DecisionKind::NewProducer`),
    /// timeout validation against `limits.max_timeout_ms`, initialisation of
    /// an absent id from `req.candidate_producer_id`, epoch bumps, rotation
    /// at `limits.exhausted_epoch`, fencing of stale claims (KIP-360).
    fn init_producer_id(_current: Option<Entry>, _req: InitRequest, _limits: &Limits) -> Decision {
        Decision::reject(code::UNKNOWN_SERVER_ERROR)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (and, under transaction version
    /// 2, a partition leader's implicit add: `req.source`). Write: check the
    /// producer's (pid, epoch) against the entry, then start (Empty/Complete*
    /// -> Ongoing) or extend the transaction; `req.new_partitions` says how
    /// many requested partitions are not in it yet.
    fn add_partitions(
        _current: Option<Entry>,
        _req: AddPartitionsRequest,
        _limits: &Limits,
    ) -> Decision {
        Decision::reject(code::UNKNOWN_SERVER_ERROR)
    }

    /// The v4 VerifyOnly check (KIP-890). Write: the same identity checks,
    /// then one code per requested partition: 0 if `in_transaction[i]`,
    /// INVALID_TXN_STATE otherwise (`VerifyDecision::per_partition`).
    fn verify_partitions(
        _current: Option<Entry>,
        _req: VerifyRequest,
        _in_transaction: &[bool],
        _limits: &Limits,
    ) -> VerifyDecision {
        VerifyDecision::reject(code::UNKNOWN_SERVER_ERROR)
    }

    /// EndTxn. Write: identity checks, then Ongoing -> PrepareCommit or
    /// PrepareAbort (the host writes the markers and then calls
    /// `complete_transaction`), and the answers for retries.
    fn end_txn(_current: Option<Entry>, _req: EndTxnRequest, _limits: &Limits) -> Decision {
        Decision::reject(code::UNKNOWN_SERVER_ERROR)
    }

    /// Called once every marker of a Prepare* entry is written. Write:
    /// PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort.
    fn complete_transaction(_current: Entry, _limits: &Limits) -> Decision {
        Decision::reject(code::UNKNOWN_SERVER_ERROR)
    }

    /// The timeout reaper's look at an Ongoing entry. Write: when
    /// `now_ms - start_timestamp_ms` exceeds the entry's timeout, abort it
    /// (fence and PrepareAbort); otherwise no change.
    fn reap(
        _current: Entry,
        _start_timestamp_ms: i64,
        _now_ms: i64,
        _candidate_producer_id: i64,
        _tenant: TenantClass,
        _limits: &Limits,
    ) -> Decision {
        Decision::reject(code::UNKNOWN_SERVER_ERROR)
    }
}

// The component's export. Only for wasm32: natively (`cargo test`) the crate
// is a plain library.
#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(MyPolicy);

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_policy_sdk::{Claim, DEFAULT_LIMITS, DecisionKind, TransactionalId};

    // Replace these with tests of your rules: each asserts one decision.

    #[test]
    fn describe_names_this_policy() {
        assert_eq!(MyPolicy::describe().name, NAME);
    }

    #[test]
    fn placeholder_init_refuses_and_writes_nothing() {
        let req = InitRequest {
            transactional_id: TransactionalId::Present,
            claim: Claim::NONE,
            version: 4,
            timeout_ms: 60_000,
            candidate_producer_id: 2000,
            tenant: 0,
        };
        let d = MyPolicy::init_producer_id(None, req, &DEFAULT_LIMITS);
        assert_eq!(d.kind, DecisionKind::Reject);
        assert_eq!(d.reply.error_code, code::UNKNOWN_SERVER_ERROR);
        assert!(d.entry.is_none() && d.on_append_failure.is_none());
    }
}
