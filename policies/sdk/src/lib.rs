//! Guest-side SDK for kaas transaction-coordinator policies.
//!
//! Why it exists: every policy crate needs the same generated bindings of
//! `policy-wit/` (the one source of the ABI), the Kafka error codes and a few
//! constructors for decisions. Keeping them here means a policy crate holds
//! only its rules. The bindings compile for the native target too, so rules
//! written against these types run in native unit tests and benchmarks.
//!
//! This crate knows only the WIT: nothing of the host.

#![no_std]
extern crate alloc;

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
        export_macro_name: "export_policy",
        default_bindings_module: "kaas_policy_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::export_policy;
pub use bindings::exports::kaas::txn_policy::policy::Guest as Policy;
pub use bindings::kaas::txn_policy::types::{
    AddPartitionsRequest, Claim, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest, Limits,
    PolicyInfo, Reply, TopicPartition, TxnState,
};

/// Kafka error codes a policy may answer with (spec §0.3).
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
            partition_errors: alloc::vec::Vec::new(),
        }
    }

    /// A decision that persists `entry` and answers `reply`.
    pub fn write(kind: DecisionKind, entry: Entry, reply: Reply) -> Self {
        Decision {
            kind,
            reply,
            entry: Some(entry),
            on_append_failure: None,
            partition_errors: alloc::vec::Vec::new(),
        }
    }

    /// A successful decision that writes nothing.
    pub fn no_change(reply: Reply) -> Self {
        Decision {
            kind: DecisionKind::NoChange,
            reply,
            entry: None,
            on_append_failure: None,
            partition_errors: alloc::vec::Vec::new(),
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
