//! The host's own invariants over a policy's decision. A decision that breaks
//! one is refused before anything can be persisted; the policy runtime turns
//! the violation into an error naming the policy.
//!
//! The invariants (docs/txn-semantics.md §0.4, §0.5 and the ABI's rules):
//! - reply codes come from the set the API allows, in the request's version;
//! - an error reply carries pid -1 and epoch -1 and writes nothing (except a
//!   fence-and-abort, which writes its PrepareAbort and answers 51);
//! - a new producer id only ever comes from the host's candidate, at epoch 0;
//! - per producer id the epoch never decreases and moves by at most one;
//! - state transitions follow Kafka's table; per-state sanity checks hold;
//! - epoch 32767 is never handed to a client.

use std::fmt;

use super::types::{
    AddPartitionsRequest, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest, TxnState,
    may_follow,
};

/// Which API a decision answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    InitProducerId,
    AddPartitions,
    EndTxn,
    Complete,
    Reap,
}

/// A broken invariant, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(Violation(format!($($fmt)+)));
        }
    };
}

use crate::codes::{
    CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, NONE, PRODUCER_FENCED, UNKNOWN_SERVER_ERROR,
};

/// The highest epoch a client may ever hold; 32767 is the coordinator's.
pub const MAX_CLIENT_EPOCH: i16 = i16::MAX - 1;

/// Checks an InitProducerId decision.
pub fn init_producer_id(
    before: Option<&Entry>,
    req: &InitRequest,
    d: &Decision,
) -> Result<(), Violation> {
    let allowed = [
        NONE,
        UNKNOWN_SERVER_ERROR,
        INVALID_REQUEST,
        INVALID_PRODUCER_EPOCH,
        INVALID_TRANSACTION_TIMEOUT,
        CONCURRENT_TRANSACTIONS,
        PRODUCER_FENCED,
    ];
    // PRODUCER_FENCED (last) only from v4 on.
    let allowed = with_fenced(&allowed, req.version >= 4);
    reply_code(Api::InitProducerId, d, allowed, req.version)?;
    shape(d)?;
    fallback(before, d)?;
    match &req.transactional_id {
        None => {
            ensure!(
                d.entry.is_none(),
                "the idempotent path must not store an entry"
            );
            if d.reply.error_code == NONE {
                ensure!(
                    d.kind == DecisionKind::NewProducer,
                    "an idempotent success must be new-producer, not {:?}",
                    d.kind
                );
                ensure!(
                    d.reply.producer_id == req.candidate_producer_id && d.reply.producer_epoch == 0,
                    "an idempotent producer must get the candidate id {} at epoch 0, not ({}, {})",
                    req.candidate_producer_id,
                    d.reply.producer_id,
                    d.reply.producer_epoch
                );
            }
        }
        Some(txn_id) => {
            if let Some(next) = &d.entry {
                ensure!(
                    &next.transactional_id == txn_id,
                    "entry for {:?} written under {:?}",
                    next.transactional_id,
                    txn_id
                );
                transition(before, next, Some(req.candidate_producer_id), d.kind)?;
                if d.kind != DecisionKind::FenceAndAbort {
                    ensure!(
                        next.state == TxnState::Empty,
                        "a successful InitProducerId leaves the entry Empty, not {:?}",
                        next.state
                    );
                    ensure!(
                        d.reply.producer_id == next.producer_id
                            && d.reply.producer_epoch == next.producer_epoch,
                        "reply ({}, {}) differs from the persisted identity ({}, {})",
                        d.reply.producer_id,
                        d.reply.producer_epoch,
                        next.producer_id,
                        next.producer_epoch
                    );
                }
            } else if d.reply.error_code == NONE {
                ensure!(
                    false,
                    "a successful transactional InitProducerId must persist the entry"
                );
            }
            if d.reply.error_code == NONE {
                ensure!(
                    d.reply.producer_epoch <= MAX_CLIENT_EPOCH,
                    "epoch {} is reserved for fencing",
                    d.reply.producer_epoch
                );
            }
        }
    }
    Ok(())
}

/// Checks an AddPartitions / AddOffsets decision.
pub fn add_partitions(
    before: Option<&Entry>,
    req: &AddPartitionsRequest,
    d: &Decision,
) -> Result<(), Violation> {
    let allowed = with_fenced(&TXN_CODES, req.version >= 2);
    reply_code(Api::AddPartitions, d, allowed, req.version)?;
    shape(d)?;
    fallback(before, d)?;
    if !d.partition_errors.is_empty() {
        ensure!(
            req.verify_only,
            "per-partition errors are only for VerifyOnly requests"
        );
        ensure!(
            d.partition_errors.len() == req.partitions.len(),
            "{} partition errors for {} partitions",
            d.partition_errors.len(),
            req.partitions.len()
        );
        for code in &d.partition_errors {
            ensure!(
                [NONE, INVALID_TXN_STATE].contains(code),
                "partition error {code} is not allowed for VerifyOnly"
            );
        }
    }
    if let Some(next) = &d.entry {
        ensure!(!req.verify_only, "a VerifyOnly check must not write");
        ensure!(
            next.transactional_id == req.transactional_id,
            "entry written under another transactional.id"
        );
        let Some(old) = before else {
            return Err(Violation("AddPartitions created an entry".into()));
        };
        ensure!(
            req.producer_id == old.producer_id && req.producer_epoch == old.producer_epoch,
            "AddPartitions accepted ({}, {}) for an entry at ({}, {})",
            req.producer_id,
            req.producer_epoch,
            old.producer_id,
            old.producer_epoch
        );
        transition(before, next, None, d.kind)?;
        ensure!(
            next.state == TxnState::Ongoing,
            "AddPartitions must lead to Ongoing, not {:?}",
            next.state
        );
        for p in &req.partitions {
            ensure!(
                next.partitions.contains(p),
                "requested partition {}-{} missing from the transaction",
                p.topic,
                p.partition
            );
        }
    }
    Ok(())
}

/// Checks an EndTxn decision.
pub fn end_txn(before: Option<&Entry>, req: &EndTxnRequest, d: &Decision) -> Result<(), Violation> {
    let allowed = with_fenced(&TXN_CODES, req.version >= 2);
    reply_code(Api::EndTxn, d, allowed, req.version)?;
    shape(d)?;
    fallback(before, d)?;
    if let Some(next) = &d.entry {
        let Some(old) = before else {
            return Err(Violation("EndTxn created an entry".into()));
        };
        ensure!(
            req.producer_id == old.producer_id && req.producer_epoch == old.producer_epoch,
            "EndTxn accepted ({}, {}) for an entry at ({}, {})",
            req.producer_id,
            req.producer_epoch,
            old.producer_id,
            old.producer_epoch
        );
        let want = if req.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        ensure!(
            next.state == want,
            "EndTxn(commit={}) must lead to {:?}, not {:?}",
            req.commit,
            want,
            next.state
        );
        transition(before, next, offered(req.candidate_producer_id), d.kind)?;
    }
    if req.version >= 5 && d.reply.error_code == NONE {
        end_txn_identity(before, d)?;
    }
    Ok(())
}

/// EndTxn v5+ sends the reply's identity to the client, which adopts it
/// unless the id is -1: it must be -1/-1 (transaction version 0), or the
/// identity the entry has after the decision, or, for a Prepare written with
/// a next producer id, the one it completes under (next, 0). Never 32767.
fn end_txn_identity(before: Option<&Entry>, d: &Decision) -> Result<(), Violation> {
    let got = (d.reply.producer_id, d.reply.producer_epoch);
    if got == (-1, -1) {
        return Ok(());
    }
    let want = match (&d.entry, before) {
        (Some(next), _) if next.next_producer_id != -1 => (next.next_producer_id, 0),
        (Some(next), _) => (next.producer_id, next.producer_epoch),
        (None, Some(old)) => (old.producer_id, old.producer_epoch),
        (None, None) => (-1, -1),
    };
    ensure!(
        got == want,
        "EndTxn v5 replies ({}, {}), but the entry's identity is ({}, {})",
        got.0,
        got.1,
        want.0,
        want.1
    );
    ensure!(
        got.1 <= MAX_CLIENT_EPOCH,
        "epoch {} is reserved for fencing",
        got.1
    );
    Ok(())
}

/// The candidate producer id a call offered (-1: none).
fn offered(candidate: i64) -> Option<i64> {
    (candidate >= 0).then_some(candidate)
}

/// Checks the completion decision after markers.
pub fn complete_transaction(before: &Entry, d: &Decision) -> Result<(), Violation> {
    reply_code(
        Api::Complete,
        d,
        &[NONE, UNKNOWN_SERVER_ERROR, INVALID_TXN_STATE],
        0,
    )?;
    shape(d)?;
    fallback(Some(before), d)?;
    if let Some(next) = &d.entry {
        let want = match before.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => return Err(Violation(format!("completion of an entry in {other:?}"))),
        };
        ensure!(
            next.state == want,
            "completion of {:?} must be {:?}, not {:?}",
            before.state,
            want,
            next.state
        );
        transition(Some(before), next, None, d.kind)?;
    }
    Ok(())
}

/// Checks the reaper's decision (`candidate`: the producer id it offered, -1 none).
pub fn reap(before: &Entry, candidate: i64, d: &Decision) -> Result<(), Violation> {
    reply_code(Api::Reap, d, &[NONE, UNKNOWN_SERVER_ERROR], 0)?;
    shape(d)?;
    fallback(Some(before), d)?;
    if let Some(next) = &d.entry {
        ensure!(
            d.kind == DecisionKind::FenceAndAbort,
            "the reaper may only fence and abort, not {:?}",
            d.kind
        );
        transition(Some(before), next, offered(candidate), d.kind)?;
    }
    Ok(())
}

/// AddPartitions / AddOffsets / EndTxn reply codes; PRODUCER_FENCED (last)
/// only from v2 on.
const TXN_CODES: [i16; 8] = [
    NONE,
    UNKNOWN_SERVER_ERROR,
    INVALID_REQUEST,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    INVALID_PRODUCER_ID_MAPPING,
    CONCURRENT_TRANSACTIONS,
    PRODUCER_FENCED,
];

/// `codes`, whose last element is PRODUCER_FENCED, with or without it.
fn with_fenced(codes: &[i16], fenced: bool) -> &[i16] {
    if fenced {
        codes
    } else {
        &codes[..codes.len() - 1]
    }
}

fn reply_code(api: Api, d: &Decision, allowed: &[i16], version: i16) -> Result<(), Violation> {
    let code = d.reply.error_code;
    ensure!(
        allowed.contains(&code),
        "error code {code} is not one {api:?} v{version} may answer (allowed: {allowed:?})"
    );
    Ok(())
}

/// Consistency between kind, reply and the entries a decision carries.
fn shape(d: &Decision) -> Result<(), Violation> {
    let error = d.reply.error_code != NONE;
    if error {
        ensure!(
            d.reply.producer_id == -1 && d.reply.producer_epoch == -1,
            "an error reply must carry pid -1 and epoch -1, not ({}, {})",
            d.reply.producer_id,
            d.reply.producer_epoch
        );
        ensure!(
            d.entry.is_none() || d.kind == DecisionKind::FenceAndAbort,
            "an error reply must not write (kind {:?})",
            d.kind
        );
    }
    match d.kind {
        DecisionKind::Reject => {
            ensure!(error, "a reject must carry an error code");
            ensure!(
                d.entry.is_none() && d.on_append_failure.is_none(),
                "a reject must not write"
            );
        }
        DecisionKind::NoChange | DecisionKind::NewProducer => {
            ensure!(
                d.entry.is_none() && d.on_append_failure.is_none(),
                "{:?} must not write",
                d.kind
            );
        }
        _ => ensure!(
            d.entry.is_some(),
            "{:?} must carry the entry to persist",
            d.kind
        ),
    }
    if d.on_append_failure.is_some() {
        ensure!(
            d.entry.is_some(),
            "on-append-failure without an entry to append"
        );
    }
    Ok(())
}

/// The in-memory fallback of a failed append may only keep the old entry
/// with its epoch raised by at most one (the failed fence of KAFKA-9666).
fn fallback(before: Option<&Entry>, d: &Decision) -> Result<(), Violation> {
    let Some(keep) = &d.on_append_failure else {
        return Ok(());
    };
    let Some(old) = before else {
        return Err(Violation(
            "on-append-failure for an entry that does not exist".into(),
        ));
    };
    ensure!(
        keep.transactional_id == old.transactional_id
            && keep.producer_id == old.producer_id
            && keep.state == old.state,
        "on-append-failure may only change the epoch of the current entry"
    );
    let step = i32::from(keep.producer_epoch) - i32::from(old.producer_epoch);
    ensure!(
        (0..=1).contains(&step),
        "on-append-failure moves the epoch {} -> {}",
        old.producer_epoch,
        keep.producer_epoch
    );
    ensure!(
        keep.partitions == old.partitions,
        "on-append-failure may not change the partitions"
    );
    Ok(())
}

/// Whether a policy may write `to` after `from`: an edge of Kafka's state
/// table ([`may_follow`], docs/txn-semantics.md §0.4; the fence path
/// Ongoing → PrepareAbort at a raised epoch is one) other than expiry's
/// Dead, which only the host takes (by a tombstone).
pub fn legal_transition(from: TxnState, to: TxnState) -> bool {
    to != TxnState::Dead && may_follow(from, to)
}

/// Identity, epoch, state-table and per-state sanity rules for one write.
fn transition(
    before: Option<&Entry>,
    next: &Entry,
    candidate: Option<i64>,
    kind: DecisionKind,
) -> Result<(), Violation> {
    ensure!(
        next.producer_epoch >= 0,
        "persisted epoch {} is below 0",
        next.producer_epoch
    );
    ensure!(
        next.timeout_ms > 0,
        "persisted timeout {} is not positive",
        next.timeout_ms
    );
    ensure!(
        !next.has_failed_epoch_fence,
        "has-failed-epoch-fence is in-memory only and cannot be persisted"
    );
    ensure!(
        matches!(next.client_transaction_version, 0 | 2),
        "client transaction version {} is neither 0 nor 2",
        next.client_transaction_version
    );
    next_producer_id(before, next, candidate)?;
    match before {
        None => {
            ensure!(
                Some(next.producer_id) == candidate,
                "a new entry's pid {} is not the candidate {candidate:?}",
                next.producer_id
            );
            ensure!(
                next.producer_epoch == 0,
                "a new entry starts at epoch 0, not {}",
                next.producer_epoch
            );
            ensure!(
                next.state == TxnState::Empty,
                "a new entry starts Empty, not {:?}",
                next.state
            );
        }
        Some(old) => {
            ensure!(
                next.transactional_id == old.transactional_id,
                "entry {:?} rewritten as {:?}",
                old.transactional_id,
                next.transactional_id
            );
            ensure!(
                legal_transition(old.state, next.state),
                "illegal transition {:?} -> {:?}",
                old.state,
                next.state
            );
            if next.producer_id == old.producer_id {
                let step = i32::from(next.producer_epoch) - i32::from(old.producer_epoch);
                ensure!(
                    step >= 0,
                    "epoch of pid {} went down: {} -> {}",
                    old.producer_id,
                    old.producer_epoch,
                    next.producer_epoch
                );
                ensure!(
                    step <= 1,
                    "epoch of pid {} jumped {} -> {}",
                    old.producer_id,
                    old.producer_epoch,
                    next.producer_epoch
                );
            } else if old.next_producer_id != -1 && next.producer_id == old.next_producer_id {
                // Transaction version 2: a Prepare that exhausted the epoch
                // completes under the next producer id it was written with.
                ensure!(
                    kind == DecisionKind::Complete,
                    "only the completion may switch to the next producer id (kind {kind:?})"
                );
                ensure!(
                    next.producer_epoch == 0,
                    "the next producer id starts at epoch 0, not {}",
                    next.producer_epoch
                );
                ensure!(
                    next.last_producer_id == old.producer_id,
                    "a switch to the next producer id must remember the old pid {}",
                    old.producer_id
                );
            } else {
                ensure!(
                    Some(next.producer_id) == candidate,
                    "new pid {} is neither the current {} nor the candidate {candidate:?}",
                    next.producer_id,
                    old.producer_id
                );
                ensure!(
                    next.producer_epoch == 0,
                    "a new pid starts at epoch 0, not {}",
                    next.producer_epoch
                );
                ensure!(
                    matches!(kind, DecisionKind::Rotate | DecisionKind::Initialize),
                    "only a rotation may change the pid (kind {kind:?})"
                );
                ensure!(
                    next.last_producer_id == old.producer_id,
                    "a rotation must remember the old pid {}",
                    old.producer_id
                );
            }
            per_state(old, next)?;
        }
    }
    if next.state == TxnState::Empty {
        ensure!(
            next.partitions.is_empty(),
            "an Empty entry holds no partitions"
        );
        ensure!(
            next.start_timestamp_ms == -1,
            "an Empty entry has no start timestamp"
        );
    }
    Ok(())
}

/// A next producer id (transaction version 2's rotation at the end of a
/// transaction) is held only by a Prepare* entry, comes from the candidate
/// the call offered (or was already held), and is not the current pid.
fn next_producer_id(
    before: Option<&Entry>,
    next: &Entry,
    candidate: Option<i64>,
) -> Result<(), Violation> {
    if next.next_producer_id == -1 {
        return Ok(());
    }
    ensure!(
        matches!(next.state, TxnState::PrepareCommit | TxnState::PrepareAbort),
        "only a Prepare entry may hold a next producer id, not {:?}",
        next.state
    );
    let held = before.is_some_and(|b| b.next_producer_id == next.next_producer_id);
    ensure!(
        held || Some(next.next_producer_id) == candidate,
        "next producer id {} is neither held already nor the candidate {candidate:?}",
        next.next_producer_id
    );
    ensure!(
        next.next_producer_id != next.producer_id,
        "the next producer id {} is the current one",
        next.next_producer_id
    );
    Ok(())
}

/// Spec §0.5's sanity checks when a target is applied.
fn per_state(old: &Entry, next: &Entry) -> Result<(), Violation> {
    match next.state {
        TxnState::Ongoing => {
            ensure!(
                next.producer_id == old.producer_id && next.producer_epoch == old.producer_epoch,
                "Ongoing must keep pid and epoch"
            );
            ensure!(
                next.timeout_ms == old.timeout_ms,
                "Ongoing must keep the timeout"
            );
            ensure!(
                !next.partitions.is_empty(),
                "an Ongoing transaction holds at least one partition"
            );
            if old.state == TxnState::Ongoing {
                ensure!(
                    old.partitions.iter().all(|p| next.partitions.contains(p)),
                    "Ongoing partitions may only grow"
                );
                ensure!(
                    next.start_timestamp_ms == old.start_timestamp_ms,
                    "Ongoing must keep its start timestamp"
                );
            }
        }
        TxnState::PrepareCommit | TxnState::PrepareAbort => {
            ensure!(
                next.producer_id == old.producer_id,
                "Prepare must keep the pid"
            );
            // An idle entry's Prepare (transaction version 2's empty abort)
            // starts a transaction of no partitions now.
            let from_idle = old.state != TxnState::Ongoing;
            ensure!(
                next.partitions == old.partitions
                    && next.timeout_ms == old.timeout_ms
                    && (from_idle || next.start_timestamp_ms == old.start_timestamp_ms),
                "Prepare must keep partitions, timeout and start timestamp"
            );
            if next.producer_epoch != old.producer_epoch && !old.has_failed_epoch_fence {
                ensure!(
                    next.state == TxnState::PrepareAbort || next.client_transaction_version >= 2,
                    "only a fence (PrepareAbort) or a transaction-version-2 end may raise the epoch"
                );
            }
        }
        TxnState::CompleteCommit | TxnState::CompleteAbort => {
            let switched = old.next_producer_id != -1 && next.producer_id == old.next_producer_id;
            ensure!(
                (switched
                    || (next.producer_id == old.producer_id
                        && next.producer_epoch == old.producer_epoch))
                    && next.timeout_ms == old.timeout_ms,
                "Complete must keep pid, epoch and timeout (or switch to the next producer id)"
            );
            ensure!(
                next.start_timestamp_ms != -1,
                "Complete needs the transaction's start timestamp"
            );
            ensure!(next.partitions.is_empty(), "Complete clears the partitions");
        }
        TxnState::Empty | TxnState::Dead => {}
    }
    Ok(())
}
