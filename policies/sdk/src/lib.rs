//! Guest-side SDK for kaas transaction-coordinator policies.
//!
//! Why it exists: every policy crate needs the same generated bindings of
//! `policy-wit/` (the one source of the ABI), the Kafka error codes and a few
//! constructors for decisions. Keeping them here means a policy crate holds
//! only its rules. The bindings compile for the native target too, so rules
//! written against these types run in native unit tests and benchmarks.
//!
//! The SDK also keeps the limits the host gives once per instance
//! (`configure`, ABI 2.0) and hands them to every decision of [`Policy`], so
//! rules still see limits as a plain argument.
//!
//! This crate knows only the WIT: nothing of the host.

#![no_std]
extern crate alloc;

use core::sync::atomic::{AtomicI16, AtomicI32, Ordering};

/// Bindings generated from `policy-wit/txn-policy.wit`.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unsafe_code,
    unreachable_pub,
    clippy::all
)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../policy-wit",
        world: "txn-policy",
        pub_export_macro: true,
        export_macro_name: "export_guest",
        default_bindings_module: "kaas_policy_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

use alloc::vec::Vec;
pub use bindings::kaas::txn_policy::types::{
    AddPartitionsRequest, Claim, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest, Limits,
    PolicyInfo, Reply, TransactionalId, TxnState, VerifyDecision,
};

/// What a policy implements. The SDK's export glue calls these with the
/// limits the host configured; a policy never stores anything itself.
pub trait Policy {
    /// Name, version and features.
    fn describe() -> PolicyInfo;
    /// InitProducerId.
    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision;
    /// AddPartitionsToTxn / AddOffsetsToTxn.
    fn add_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        limits: &Limits,
    ) -> Decision;
    /// The v4 VerifyOnly check: `in_transaction[i]` says whether the i-th
    /// requested partition is among the entry's stored partitions.
    fn verify_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        in_transaction: &[bool],
        limits: &Limits,
    ) -> VerifyDecision;
    /// EndTxn.
    fn end_txn(current: Option<Entry>, req: EndTxnRequest, limits: &Limits) -> Decision;
    /// Completion after every marker of a Prepare* entry is written.
    fn complete_transaction(current: Entry, limits: &Limits) -> Decision;
    /// The timeout reaper's look at an Ongoing entry.
    fn reap(current: Entry, start_timestamp_ms: i64, now_ms: i64, limits: &Limits) -> Decision;
}

/// Kafka's defaults, in force until the host calls `configure`.
pub const DEFAULT_LIMITS: Limits = Limits {
    max_timeout_ms: 900_000,
    exhausted_epoch: i16::MAX - 1,
};

static MAX_TIMEOUT_MS: AtomicI32 = AtomicI32::new(DEFAULT_LIMITS.max_timeout_ms);
static EXHAUSTED_EPOCH: AtomicI16 = AtomicI16::new(DEFAULT_LIMITS.exhausted_epoch);

/// The limits the host configured on this instance (Kafka's defaults before).
pub fn configured_limits() -> Limits {
    Limits {
        max_timeout_ms: MAX_TIMEOUT_MS.load(Ordering::Relaxed),
        exhausted_epoch: EXHAUSTED_EPOCH.load(Ordering::Relaxed),
    }
}

/// Adapts a [`Policy`] to the generated export trait; used by [`export_policy!`].
#[derive(Debug)]
pub struct Exported<P>(core::marker::PhantomData<P>);

impl<P: Policy> bindings::exports::kaas::txn_policy::policy::Guest for Exported<P> {
    fn describe() -> PolicyInfo {
        P::describe()
    }
    fn configure(limits: Limits) {
        MAX_TIMEOUT_MS.store(limits.max_timeout_ms, Ordering::Relaxed);
        EXHAUSTED_EPOCH.store(limits.exhausted_epoch, Ordering::Relaxed);
    }
    fn init_producer_id(current: Option<Entry>, req: InitRequest) -> Decision {
        P::init_producer_id(current, req, &configured_limits())
    }
    fn add_partitions(current: Option<Entry>, req: AddPartitionsRequest) -> Decision {
        P::add_partitions(current, req, &configured_limits())
    }
    fn verify_partitions(
        current: Option<Entry>,
        req: AddPartitionsRequest,
        in_transaction: Vec<bool>,
    ) -> VerifyDecision {
        P::verify_partitions(current, req, &in_transaction, &configured_limits())
    }
    fn end_txn(current: Option<Entry>, req: EndTxnRequest) -> Decision {
        P::end_txn(current, req, &configured_limits())
    }
    fn complete_transaction(current: Entry) -> Decision {
        P::complete_transaction(current, &configured_limits())
    }
    fn reap(current: Entry, start_timestamp_ms: i64, now_ms: i64) -> Decision {
        P::reap(current, start_timestamp_ms, now_ms, &configured_limits())
    }
}

/// Exports a [`Policy`] implementation as the component's
/// `kaas:txn-policy/policy@2.0.0`.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        type __KaasPolicyExport = $crate::Exported<$policy>;
        $crate::bindings::export_guest!(__KaasPolicyExport with_types_in $crate::bindings);
    };
}

/// Kafka error codes a policy may answer with (docs/txn-semantics.md §0.3).
pub mod code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const INVALID_REQUEST: i16 = 42;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    pub const PRODUCER_FENCED: i16 = 90;
}

/// Kafka's NO_PRODUCER_ID / NO_PRODUCER_EPOCH.
pub const NO_PID: i64 = -1;
pub const NO_EPOCH: i16 = -1;

impl Reply {
    /// A successful reply carrying an identity.
    pub fn ok(producer_id: i64, producer_epoch: i16) -> Self {
        Reply {
            error_code: code::NONE,
            producer_id,
            producer_epoch,
        }
    }

    /// An error reply (identity -1/-1 as Kafka sends it).
    pub fn error(error_code: i16) -> Self {
        Reply {
            error_code,
            producer_id: NO_PID,
            producer_epoch: NO_EPOCH,
        }
    }
}

impl Decision {
    /// A decision that changes nothing and answers `error_code`.
    pub fn reject(error_code: i16) -> Self {
        Decision {
            kind: DecisionKind::Reject,
            reply: Reply::error(error_code),
            entry: None,
            on_append_failure: None,
        }
    }

    /// A decision that persists `entry` and answers `reply`.
    pub fn write(kind: DecisionKind, entry: Entry, reply: Reply) -> Self {
        Decision {
            kind,
            reply,
            entry: Some(entry),
            on_append_failure: None,
        }
    }

    /// A successful decision that writes nothing.
    pub fn no_change(reply: Reply) -> Self {
        Decision {
            kind: DecisionKind::NoChange,
            reply,
            entry: None,
            on_append_failure: None,
        }
    }
}

impl VerifyDecision {
    /// The VerifyOnly check fails as a whole with `error_code`.
    pub fn reject(error_code: i16) -> Self {
        VerifyDecision {
            kind: DecisionKind::Reject,
            reply: Reply::error(error_code),
            partition_errors: Vec::new(),
        }
    }

    /// The check passes with one code per requested partition.
    pub fn per_partition(partition_errors: Vec<i16>) -> Self {
        VerifyDecision {
            kind: DecisionKind::NoChange,
            reply: Reply::ok(NO_PID, NO_EPOCH),
            partition_errors,
        }
    }
}

impl TxnState {
    /// Empty, CompleteCommit or CompleteAbort: no transaction in progress.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// PrepareCommit or PrepareAbort: markers are being written.
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}
