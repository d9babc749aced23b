//! Policies that are apache37 except where they say otherwise: implement
//! [`Variant`] (`describe` plus the decisions that differ; every other
//! decision defaults to these rules) and export `Apache37Based<YourType>`.
//! apache37 itself, strict and the test policies are built this way.

use core::marker::PhantomData;

use kaas_policy_sdk::{
    AddPartitionsRequest, Decision, EndTxnRequest, Entry, InitRequest, Limits, Policy, PolicyInfo,
    TenantClass, VerifyDecision, VerifyRequest,
};

/// A policy as its differences from apache37.
pub trait Variant {
    /// Name, version and features.
    fn describe() -> PolicyInfo;

    /// InitProducerId.
    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        crate::init_producer_id(current, &req, limits)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn.
    fn add_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        _limits: &Limits,
    ) -> Decision {
        crate::add_partitions(current, &req)
    }

    /// The v4 VerifyOnly check.
    fn verify_partitions(
        current: Option<Entry>,
        req: VerifyRequest,
        in_transaction: &[bool],
        _limits: &Limits,
    ) -> VerifyDecision {
        crate::verify_partitions(current, &req, in_transaction)
    }

    /// EndTxn.
    fn end_txn(current: Option<Entry>, req: EndTxnRequest, _limits: &Limits) -> Decision {
        crate::end_txn(current, &req)
    }

    /// Completion after the markers.
    fn complete_transaction(current: Entry, _limits: &Limits) -> Decision {
        crate::complete_transaction(current)
    }

    /// The timeout reaper (apache37 never rotates here: the candidate and
    /// the tenant class are not used).
    fn reap(
        current: Entry,
        start_timestamp_ms: i64,
        now_ms: i64,
        _candidate_producer_id: i64,
        _tenant: TenantClass,
        _limits: &Limits,
    ) -> Decision {
        crate::reap(current, start_timestamp_ms, now_ms)
    }
}

/// The SDK [`Policy`] of a [`Variant`]: what `export_policy!` takes.
#[derive(Debug)]
pub struct Apache37Based<V>(PhantomData<V>);

impl<V: Variant> Policy for Apache37Based<V> {
    fn describe() -> PolicyInfo {
        V::describe()
    }
    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        V::init_producer_id(current, req, limits)
    }
    fn add_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        limits: &Limits,
    ) -> Decision {
        V::add_partitions(current, req, limits)
    }
    fn verify_partitions(
        current: Option<Entry>,
        req: VerifyRequest,
        in_transaction: &[bool],
        limits: &Limits,
    ) -> VerifyDecision {
        V::verify_partitions(current, req, in_transaction, limits)
    }
    fn end_txn(current: Option<Entry>, req: EndTxnRequest, limits: &Limits) -> Decision {
        V::end_txn(current, req, limits)
    }
    fn complete_transaction(current: Entry, limits: &Limits) -> Decision {
        V::complete_transaction(current, limits)
    }
    fn reap(
        current: Entry,
        start_timestamp_ms: i64,
        now_ms: i64,
        candidate_producer_id: i64,
        tenant: TenantClass,
        limits: &Limits,
    ) -> Decision {
        V::reap(
            current,
            start_timestamp_ms,
            now_ms,
            candidate_producer_id,
            tenant,
            limits,
        )
    }
}
