//! `apache40`: Apache Kafka 4's transaction coordinator (KIP-890 part 2,
//! transaction version 2) without Kafka 4.0's failover bugs: every field the
//! retry rules read (previous and next producer id, last epoch, the client's
//! transaction version) is in the entry the host persists, so a retry gets
//! the same answer before and after a coordinator failover (KAFKA-20310,
//! KAFKA-20357). It finalizes `transaction.version` 2, so Kafka 4 clients use
//! the new protocol against it; requests of transaction version 0 (EndTxn
//! before v5, a client's AddPartitions/AddOffsets) keep apache37's rules.
//! The rules are in [`rules`]; this file is the `describe()` and the WIT
//! export glue.

pub mod rules;

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{
    AddPartitionsRequest, Decision, EndTxnRequest, Entry, InitRequest, Limits, PolicyInfo,
    TenantClass,
};

/// The policy's name as `describe()` reports it.
pub const NAME: &str = "apache40";

/// The exported policy.
#[derive(Debug)]
pub struct Apache40;

impl apache::Variant for Apache40 {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            features: rules::FEATURES.iter().map(|&f| f.into()).collect(),
            protocol_features: rules::protocol_features(),
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
        rules::add_partitions(current, &req)
    }

    fn end_txn(current: Option<Entry>, req: EndTxnRequest, limits: &Limits) -> Decision {
        rules::end_txn(current, &req, limits)
    }

    fn complete_transaction(current: Entry, _limits: &Limits) -> Decision {
        rules::complete_transaction(current)
    }

    fn reap(
        current: Entry,
        start_timestamp_ms: i64,
        now_ms: i64,
        candidate_producer_id: i64,
        _tenant: TenantClass,
        limits: &Limits,
    ) -> Decision {
        rules::reap(
            current,
            start_timestamp_ms,
            now_ms,
            candidate_producer_id,
            limits,
        )
    }
}

#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(apache::Apache37Based<Apache40>);
