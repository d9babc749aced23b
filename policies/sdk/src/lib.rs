//! Guest-side SDK for kaas transaction-coordinator policies.
//!
//! Why it exists: every policy crate needs the same generated bindings of
//! `policy-wit/` (the one source of the ABI), the Kafka error codes and a few
//! constructors for decisions. Keeping them here means a policy crate holds
//! only its rules. The bindings compile for the native target too, so rules
//! written against these types run in native unit tests and benchmarks.
//!
//! The SDK also keeps the limits the host gives once per instance
//! (`configure`, since ABI 2.0) and hands them to every decision of [`Policy`], so
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
    AddPartitionsRequest, AddSource, Claim, Decision, DecisionKind, EndTxnRequest, Entry,
    EntryFlags, InitRequest, Limits, PolicyInfo, ProtocolFeature, Reply, TenantClass,
    TransactionalId, TxnState, VerifyDecision, VerifyRequest,
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
        req: VerifyRequest,
        in_transaction: &[bool],
        limits: &Limits,
    ) -> VerifyDecision;
    /// EndTxn.
    fn end_txn(current: Option<Entry>, req: EndTxnRequest, limits: &Limits) -> Decision;
    /// Completion after every marker of a Prepare* entry is written.
    fn complete_transaction(current: Entry, limits: &Limits) -> Decision;
    /// The timeout reaper's look at an Ongoing entry. `candidate_producer_id`
    /// is a fresh id for a rotation (-1 when the host offers none).
    fn reap(
        current: Entry,
        start_timestamp_ms: i64,
        now_ms: i64,
        candidate_producer_id: i64,
        tenant: TenantClass,
        limits: &Limits,
    ) -> Decision;
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
        req: VerifyRequest,
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
    fn reap(
        current: Entry,
        start_timestamp_ms: i64,
        now_ms: i64,
        candidate_producer_id: i64,
        tenant: TenantClass,
    ) -> Decision {
        P::reap(
            current,
            start_timestamp_ms,
            now_ms,
            candidate_producer_id,
            tenant,
            &configured_limits(),
        )
    }
}

/// Exports a [`Policy`] implementation as the component's
/// `kaas:txn-policy/policy@3.0.0`.
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

/// The `transaction.version` feature: supported `min..=max`, finalized at
/// `level` (what a policy declares in `describe()`).
pub fn transaction_version(min: i16, max: i16, level: i16) -> ProtocolFeature {
    ProtocolFeature {
        name: "transaction.version".into(),
        min_version: min,
        max_version: max,
        finalized_level: level,
    }
}

impl Claim {
    /// No claim: -1/-1 on the wire.
    pub const NONE: Claim = Claim {
        producer_id: NO_PID,
        producer_epoch: NO_EPOCH,
    };

    /// `(pid, epoch)` as a claim, none as [`Claim::NONE`].
    pub fn of(claim: Option<(i64, i16)>) -> Claim {
        claim.map_or(Claim::NONE, |(producer_id, producer_epoch)| Claim {
            producer_id,
            producer_epoch,
        })
    }
}

impl InitRequest {
    /// The KIP-360 claim, or None when the request makes none (-1/-1).
    pub fn claim(&self) -> Option<Claim> {
        (self.claim.producer_id != NO_PID || self.claim.producer_epoch != NO_EPOCH)
            .then_some(self.claim)
    }
}

impl Entry {
    fn has(&self, flag: EntryFlags) -> bool {
        (self.flags & flag) == flag
    }

    fn with(mut self, flag: EntryFlags, on: bool) -> Self {
        let bits = if on {
            self.flags.bits() | flag.bits()
        } else {
            self.flags.bits() & !flag.bits()
        };
        self.flags = EntryFlags::from_bits_retain(bits);
        self
    }

    /// In memory only: a failed fence already raised the epoch (KAFKA-9666).
    pub fn has_failed_epoch_fence(&self) -> bool {
        self.has(EntryFlags::HAS_FAILED_EPOCH_FENCE)
    }

    /// The same entry with the failed-fence flag set or cleared.
    pub fn with_failed_epoch_fence(self, failed: bool) -> Self {
        self.with(EntryFlags::HAS_FAILED_EPOCH_FENCE, failed)
    }

    /// Whether the client's last transactional request used transaction
    /// version 2.
    pub fn client_transaction_v2(&self) -> bool {
        self.has(EntryFlags::CLIENT_TRANSACTION_V2)
    }

    /// The same entry with the client's transaction version recorded.
    pub fn with_client_transaction_v2(self, v2: bool) -> Self {
        self.with(EntryFlags::CLIENT_TRANSACTION_V2, v2)
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
