//! The Apache Kafka 3.7 transaction-coordinator rules (docs/txn-semantics.md
//! §1–§2) as pure
//! functions, in their own crate so other policies (strict, test policies)
//! and native benchmarks can reuse them without inheriting WIT exports.
//!
//! Same inputs, same decision: no clock, no I/O, no randomness. The host
//! supplies a candidate producer id (and, to the reaper, the clock); the
//! decision says what to persist and what to answer. Since ABI 2.0 the host
//! keeps each entry's transactional.id, partition set and timestamps and
//! derives them from the decided entry exactly as Kafka 3.7 does (see
//! policy-wit/README.md), so these rules decide the identity, state and
//! timeout. Deviations from 3.7 are listed in policies/apache37/README.md.

#![no_std]
extern crate alloc;

mod variant;

pub use variant::{Apache37Based, Variant};

use kaas_policy_sdk::{
    AddPartitionsRequest, Claim, Decision, DecisionKind, EndTxnRequest, Entry, EntryFlags,
    InitRequest, Limits, NO_EPOCH, NO_PID, ProtocolFeature, Reply, TransactionalId, TxnState,
    VerifyDecision, VerifyRequest, code,
};

/// The features these rules implement, as `describe()` reports them: every
/// policy built on them starts from this list and adds its own, so the
/// lists cannot drift apart.
pub const FEATURES: &[&str] = &[
    "kip-98",
    "kip-360",
    "kip-890-verify",
    "no-kafka-20357",
    "q1-reproduced",
    "q2-producer-fenced",
];

/// The protocol features these rules finalize: `transaction.version` 0
/// only (Kafka 3.7's transactions; a client never uses version 2 with them).
pub fn protocol_features() -> alloc::vec::Vec<ProtocolFeature> {
    alloc::vec![kaas_policy_sdk::transaction_version(0, 0, 0)]
}

/// PRODUCER_FENCED as a client of `version` understands it: InitProducerId
/// before v4 and AddPartitions/EndTxn before v2 get INVALID_PRODUCER_EPOCH.
pub fn fenced(version: i16, first_version_with_90: i16) -> i16 {
    if version < first_version_with_90 {
        code::INVALID_PRODUCER_EPOCH
    } else {
        code::PRODUCER_FENCED
    }
}

/// InitProducerId's first version that understands PRODUCER_FENCED.
pub const INIT_FENCED_SINCE: i16 = 4;
/// AddPartitions/AddOffsets/EndTxn's first version that understands PRODUCER_FENCED.
pub const TXN_FENCED_SINCE: i16 = 2;

/// An entry for an absent transactional.id (spec 1.3): the candidate pid at
/// epoch -1, nothing remembered.
pub fn fresh_entry(req: &InitRequest) -> Entry {
    Entry {
        producer_id: req.candidate_producer_id,
        producer_epoch: NO_EPOCH,
        last_producer_id: NO_PID,
        last_producer_epoch: NO_EPOCH,
        next_producer_id: NO_PID,
        state: TxnState::Empty,
        timeout_ms: req.timeout_ms,
        flags: EntryFlags::empty(),
    }
}

/// Claim validity, spec 1.4 S2: the claim names the current pid, or the
/// previous one with an exhausted epoch (a retried rotation), or the entry
/// was never initialised.
pub fn claim_is_valid(entry: &Entry, claim: &Claim, limits: &Limits) -> bool {
    entry.producer_epoch == NO_EPOCH
        || claim.producer_id == entry.producer_id
        || (claim.producer_id == entry.last_producer_id
            && claim.producer_epoch >= limits.exhausted_epoch)
}

/// InitProducerId, spec 1.9.
pub fn init_producer_id(current: Option<Entry>, req: &InitRequest, limits: &Limits) -> Decision {
    match req.transactional_id {
        // Idempotent path (1.2): any claim is ignored, nothing is stored.
        TransactionalId::Absent => {
            return Decision {
                kind: DecisionKind::NewProducer,
                ..Decision::no_change(Reply::ok(req.candidate_producer_id, 0))
            };
        }
        TransactionalId::Empty => return Decision::reject(code::INVALID_REQUEST),
        TransactionalId::Present => {}
    }
    if req.timeout_ms <= 0 || req.timeout_ms > limits.max_timeout_ms {
        return Decision::reject(code::INVALID_TRANSACTION_TIMEOUT);
    }
    let initializing = current.is_none();
    let entry = current.unwrap_or_else(|| fresh_entry(req));

    if let Some(claim) = &req.claim()
        && !claim_is_valid(&entry, claim, limits)
    {
        return Decision::reject(fenced(req.version, INIT_FENCED_SINCE));
    }
    match entry.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => {
            Decision::reject(code::CONCURRENT_TRANSACTIONS)
        }
        // Quirk Q1 reproduced: the claim's epoch is not compared here.
        TxnState::Ongoing => fence_and_abort(entry, code::CONCURRENT_TRANSACTIONS),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            if entry.producer_epoch >= limits.exhausted_epoch {
                match &req.claim() {
                    None => rotate(entry, req, NO_EPOCH),
                    Some(c) if c.producer_epoch == entry.producer_epoch => {
                        let last = entry.producer_epoch;
                        rotate(entry, req, last)
                    }
                    // Apache 3.7 answers UNKNOWN_SERVER_ERROR here (quirk Q2);
                    // we answer PRODUCER_FENCED (docs/txn-semantics.md §7.3, IX-12).
                    Some(_) => Decision::reject(fenced(req.version, INIT_FENCED_SINCE)),
                }
            } else {
                bump(entry, req, initializing)
            }
        }
        // Dead is never a committed state: an internal error, as in Apache.
        TxnState::Dead => Decision::reject(code::UNKNOWN_SERVER_ERROR),
    }
}

/// The bump function of spec 1.5 for an idle entry whose epoch is not exhausted.
fn bump(entry: Entry, req: &InitRequest, initializing: bool) -> Decision {
    let e = entry.producer_epoch;
    let (epoch, last_epoch, kind) = match &req.claim() {
        _ if e == NO_EPOCH => (0, NO_EPOCH, DecisionKind::Initialize),
        None => (e + 1, NO_EPOCH, DecisionKind::Bump),
        Some(c) if c.producer_epoch == e => (e + 1, e, DecisionKind::Bump),
        Some(c) if c.producer_epoch == entry.last_producer_epoch => (
            e,
            entry.last_producer_epoch,
            DecisionKind::RetryReturnsCurrent,
        ),
        Some(_) => return Decision::reject(fenced(req.version, INIT_FENCED_SINCE)),
    };
    let kind = if initializing {
        DecisionKind::Initialize
    } else {
        kind
    };
    // A retry returns the current identity and keeps the remembered previous
    // pid, so a second retry of the same rotation gets the same answer.
    let last_producer_id = if kind == DecisionKind::RetryReturnsCurrent {
        entry.last_producer_id
    } else {
        entry.producer_id
    };
    let next = Entry {
        producer_epoch: epoch,
        last_producer_id,
        last_producer_epoch: last_epoch,
        ..idle(entry, req)
    };
    let reply = Reply::ok(next.producer_id, next.producer_epoch);
    Decision::write(kind, next, reply)
}

/// Rotation (spec 1.6): the candidate pid at epoch 0, the old pid remembered.
fn rotate(entry: Entry, req: &InitRequest, last_epoch: i16) -> Decision {
    let old_pid = entry.producer_id;
    let next = Entry {
        producer_id: req.candidate_producer_id,
        producer_epoch: 0,
        last_producer_id: old_pid,
        last_producer_epoch: last_epoch,
        ..idle(entry, req)
    };
    let reply = Reply::ok(next.producer_id, 0);
    Decision::write(DecisionKind::Rotate, next, reply)
}

/// The fields every successful InitProducerId resets (the host clears the
/// partitions and the start timestamp of an Empty entry).
fn idle(entry: Entry, req: &InitRequest) -> Entry {
    Entry {
        state: TxnState::Empty,
        timeout_ms: req.timeout_ms,
        ..entry
    }
    .with_failed_epoch_fence(false)
}

/// Fence an Ongoing transaction and abort it (spec 1.7): PrepareAbort at
/// epoch + 1 (or the epoch a failed fence already reached), retry window
/// closed. If the append fails, the raised epoch stays in memory.
pub fn fence_and_abort(entry: Entry, reply_code: i16) -> Decision {
    let epoch = if entry.has_failed_epoch_fence() {
        entry.producer_epoch
    } else if entry.producer_epoch == i16::MAX {
        // IX-13: no epoch is left to fence with. Apache: internal error.
        return Decision::reject(code::UNKNOWN_SERVER_ERROR);
    } else {
        entry.producer_epoch + 1
    };
    let fenced_ongoing = Entry {
        producer_epoch: epoch,
        last_producer_epoch: NO_EPOCH,
        ..entry
    }
    .with_failed_epoch_fence(true);
    let prepare = Entry {
        state: TxnState::PrepareAbort,
        producer_epoch: epoch,
        last_producer_epoch: NO_EPOCH,
        ..entry
    }
    .with_failed_epoch_fence(false);
    let reply = if reply_code == code::NONE {
        Reply::ok(prepare.producer_id, epoch)
    } else {
        Reply::error(reply_code)
    };
    Decision {
        on_append_failure: Some(fenced_ongoing),
        ..Decision::write(DecisionKind::FenceAndAbort, prepare, reply)
    }
}

/// Who an add or a VerifyOnly check says it is.
#[derive(Debug, Clone, Copy)]
struct Claimant {
    transactional_id: TransactionalId,
    producer_id: i64,
    producer_epoch: i16,
    version: i16,
}

impl From<&AddPartitionsRequest> for Claimant {
    fn from(r: &AddPartitionsRequest) -> Self {
        Claimant {
            transactional_id: r.transactional_id,
            producer_id: r.producer_id,
            producer_epoch: r.producer_epoch,
            version: r.version,
        }
    }
}

impl From<&VerifyRequest> for Claimant {
    fn from(r: &VerifyRequest) -> Self {
        Claimant {
            transactional_id: r.transactional_id,
            producer_id: r.producer_id,
            producer_epoch: r.producer_epoch,
            version: r.version,
        }
    }
}

/// The checks AddPartitions, AddOffsets and VerifyOnly share (spec 2.1 rows
/// 1, 3–6): the entry the request may act on, or the error to answer.
fn partitions_target(current: Option<Entry>, req: Claimant) -> Result<Entry, i16> {
    if req.transactional_id != TransactionalId::Present {
        return Err(code::INVALID_REQUEST);
    }
    let Some(entry) = current else {
        return Err(code::INVALID_PRODUCER_ID_MAPPING);
    };
    if req.producer_id != entry.producer_id {
        return Err(code::INVALID_PRODUCER_ID_MAPPING);
    }
    if req.producer_epoch != entry.producer_epoch {
        return Err(fenced(req.version, TXN_FENCED_SINCE));
    }
    if entry.state.is_preparing() {
        return Err(code::CONCURRENT_TRANSACTIONS);
    }
    Ok(entry)
}

/// AddPartitionsToTxn / AddOffsetsToTxn, spec 2.1 (rows 1, 3–9). The host
/// adds the requested partitions to the transaction's set when the decided
/// entry is Ongoing, and stamps the start time when it becomes Ongoing.
pub fn add_partitions(current: Option<Entry>, req: &AddPartitionsRequest) -> Decision {
    let entry = match partitions_target(current, req.into()) {
        Ok(entry) => entry,
        Err(code) => return Decision::reject(code),
    };
    if entry.state == TxnState::Dead {
        return Decision::reject(code::UNKNOWN_SERVER_ERROR);
    }
    if entry.state == TxnState::Ongoing && req.new_partitions == 0 {
        return Decision::no_change(Reply::ok(entry.producer_id, entry.producer_epoch));
    }
    let next = Entry {
        state: TxnState::Ongoing,
        ..entry
    };
    let reply = Reply::ok(next.producer_id, next.producer_epoch);
    Decision::write(DecisionKind::AddPartitions, next, reply)
}

/// The v4 VerifyOnly check (KIP-890): a partition is verified when the
/// transaction is Ongoing and already holds it.
pub fn verify_partitions(
    current: Option<Entry>,
    req: &VerifyRequest,
    in_transaction: &[bool],
) -> VerifyDecision {
    let entry = match partitions_target(current, req.into()) {
        Ok(entry) => entry,
        Err(code) => return VerifyDecision::reject(code),
    };
    let ongoing = entry.state == TxnState::Ongoing;
    VerifyDecision::per_partition(
        in_transaction
            .iter()
            .map(|&included| {
                if ongoing && included {
                    code::NONE
                } else {
                    code::INVALID_TXN_STATE
                }
            })
            .collect(),
    )
}

/// EndTxn from a client, spec 2.4.
pub fn end_txn(current: Option<Entry>, req: &EndTxnRequest) -> Decision {
    if req.transactional_id != TransactionalId::Present {
        return Decision::reject(code::INVALID_REQUEST);
    }
    let Some(entry) = current else {
        return Decision::reject(code::INVALID_PRODUCER_ID_MAPPING);
    };
    if req.producer_id != entry.producer_id {
        return Decision::reject(code::INVALID_PRODUCER_ID_MAPPING);
    }
    if req.producer_epoch != entry.producer_epoch {
        return Decision::reject(fenced(req.version, TXN_FENCED_SINCE));
    }
    // EndTxn v5 sends the identity to the client: Kafka's transaction
    // version 0 path answers -1/-1 there (nothing for the client to adopt).
    let ok = if req.version >= 5 {
        Reply::ok(NO_PID, NO_EPOCH)
    } else {
        Reply::ok(entry.producer_id, entry.producer_epoch)
    };
    match (entry.state, req.commit) {
        (TxnState::Ongoing, commit) => {
            let (state, kind) = if commit {
                (TxnState::PrepareCommit, DecisionKind::PrepareCommit)
            } else {
                (TxnState::PrepareAbort, DecisionKind::PrepareAbort)
            };
            Decision::write(kind, Entry { state, ..entry }, ok)
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
            Decision::no_change(ok)
        }
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Decision::reject(code::CONCURRENT_TRANSACTIONS)
        }
        (TxnState::Dead, _) => Decision::reject(code::UNKNOWN_SERVER_ERROR),
        _ => Decision::reject(code::INVALID_TXN_STATE),
    }
}

/// Markers are written: PrepareX becomes CompleteX (2.5); the host clears
/// the partitions.
pub fn complete_transaction(entry: Entry) -> Decision {
    let state = match entry.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort => TxnState::CompleteAbort,
        _ => return Decision::reject(code::INVALID_TXN_STATE),
    };
    let next = Entry { state, ..entry }.with_failed_epoch_fence(false);
    let reply = Reply::ok(next.producer_id, next.producer_epoch);
    Decision::write(DecisionKind::Complete, next, reply)
}

/// The timeout reaper (2.6): an Ongoing transaction past its timeout is
/// fenced and aborted exactly like a rejoin does it.
pub fn reap(entry: Entry, start_timestamp_ms: i64, now_ms: i64) -> Decision {
    let overdue = entry.state == TxnState::Ongoing
        && start_timestamp_ms.saturating_add(i64::from(entry.timeout_ms)) < now_ms;
    if overdue {
        fence_and_abort(entry, code::NONE)
    } else {
        Decision::no_change(Reply::ok(entry.producer_id, entry.producer_epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_timeout_ms: 900_000,
        exhausted_epoch: 32766,
    };

    fn entry(state: TxnState, pid: i64, epoch: i16, last_pid: i64, last_epoch: i16) -> Entry {
        Entry {
            producer_id: pid,
            producer_epoch: epoch,
            last_producer_id: last_pid,
            last_producer_epoch: last_epoch,
            next_producer_id: NO_PID,
            state,
            timeout_ms: 60_000,
            flags: EntryFlags::empty(),
        }
    }

    fn init(claim: Option<(i64, i16)>) -> InitRequest {
        InitRequest {
            transactional_id: TransactionalId::Present,
            claim: Claim::of(claim),
            version: 4,
            timeout_ms: 60_000,
            candidate_producer_id: 2000,
            tenant: 0,
        }
    }

    fn identity(d: &Decision) -> (i16, i64, i16) {
        (
            d.reply.error_code,
            d.reply.producer_id,
            d.reply.producer_epoch,
        )
    }

    #[test]
    fn bump_table_rows_of_spec_1_5() {
        let e = || Some(entry(TxnState::Empty, 1000, 5, 1000, 4));
        assert_eq!(
            identity(&init_producer_id(e(), &init(None), &LIMITS)),
            (0, 1000, 6)
        );
        assert_eq!(
            identity(&init_producer_id(e(), &init(Some((1000, 5))), &LIMITS)),
            (0, 1000, 6)
        );
        assert_eq!(
            identity(&init_producer_id(e(), &init(Some((1000, 4))), &LIMITS)),
            (0, 1000, 5)
        );
        assert_eq!(
            identity(&init_producer_id(e(), &init(Some((1000, 3))), &LIMITS)).0,
            code::PRODUCER_FENCED
        );
        assert_eq!(
            identity(&init_producer_id(e(), &init(Some((1000, 9))), &LIMITS)).0,
            code::PRODUCER_FENCED
        );
    }

    #[test]
    fn a_bump_without_claim_closes_the_retry_window() {
        let d = init_producer_id(
            Some(entry(TxnState::Empty, 1000, 5, 1000, 4)),
            &init(None),
            &LIMITS,
        );
        assert_eq!(d.entry.map(|e| e.last_producer_epoch), Some(NO_EPOCH));
    }

    #[test]
    fn rotation_uses_the_candidate_and_remembers_the_old_identity() {
        let d = init_producer_id(
            Some(entry(TxnState::CompleteCommit, 1000, 32766, 1000, -1)),
            &init(Some((1000, 32766))),
            &LIMITS,
        );
        assert_eq!(d.kind, DecisionKind::Rotate);
        let e = d.entry.expect("rotation persists");
        assert_eq!(
            (
                e.producer_id,
                e.producer_epoch,
                e.last_producer_id,
                e.last_producer_epoch
            ),
            (2000, 0, 1000, 32766)
        );
        let retry = init_producer_id(Some(e), &init(Some((1000, 32766))), &LIMITS);
        assert_eq!(
            (retry.kind, identity(&retry)),
            (DecisionKind::RetryReturnsCurrent, (0, 2000, 0))
        );
    }

    #[test]
    fn fencing_an_ongoing_transaction_prepares_an_abort_one_epoch_up() {
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, 4);
        let d = init_producer_id(Some(ongoing), &init(None), &LIMITS);
        assert_eq!(d.kind, DecisionKind::FenceAndAbort);
        assert_eq!(d.reply.error_code, code::CONCURRENT_TRANSACTIONS);
        let e = d.entry.expect("fence persists");
        assert_eq!(
            (e.state, e.producer_epoch, e.last_producer_epoch),
            (TxnState::PrepareAbort, 6, NO_EPOCH)
        );
        assert_eq!(e.timeout_ms, ongoing.timeout_ms);
        let keep = d.on_append_failure.expect("failed fence keeps the epoch");
        assert!(
            keep.has_failed_epoch_fence()
                && keep.producer_epoch == 6
                && keep.state == TxnState::Ongoing
        );
        let again = init_producer_id(Some(keep), &init(None), &LIMITS);
        assert_eq!(
            again.entry.map(|e| e.producer_epoch),
            Some(6),
            "a failed fence is reused, not bumped twice"
        );
    }

    #[test]
    fn old_versions_get_invalid_producer_epoch_instead_of_fenced() {
        let mut req = init(Some((1000, 3)));
        req.version = 3;
        let d = init_producer_id(
            Some(entry(TxnState::Empty, 1000, 5, 1000, -1)),
            &req,
            &LIMITS,
        );
        assert_eq!(d.reply.error_code, code::INVALID_PRODUCER_EPOCH);
    }

    fn add(epoch: i16, new_partitions: u32) -> AddPartitionsRequest {
        AddPartitionsRequest {
            transactional_id: TransactionalId::Present,
            producer_id: 1000,
            producer_epoch: epoch,
            version: 3,
            new_partitions,
            source: kaas_policy_sdk::AddSource::AddPartitions,
            tenant: 0,
        }
    }

    fn verify(epoch: i16) -> VerifyRequest {
        VerifyRequest {
            transactional_id: TransactionalId::Present,
            producer_id: 1000,
            producer_epoch: epoch,
            version: 4,
        }
    }

    #[test]
    fn add_partitions_starts_or_grows_a_transaction_and_is_a_no_op_when_nothing_is_new() {
        let empty = entry(TxnState::Empty, 1000, 5, 1000, -1);
        let d = add_partitions(Some(empty), &add(5, 2));
        assert_eq!(d.kind, DecisionKind::AddPartitions);
        assert_eq!(d.entry.map(|e| e.state), Some(TxnState::Ongoing));
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, -1);
        assert_eq!(
            add_partitions(Some(ongoing), &add(5, 1)).kind,
            DecisionKind::AddPartitions
        );
        let d = add_partitions(Some(ongoing), &add(5, 0));
        assert_eq!(
            (d.kind, identity(&d)),
            (DecisionKind::NoChange, (0, 1000, 5))
        );
        assert_eq!(
            add_partitions(Some(ongoing), &add(4, 1)).reply.error_code,
            code::PRODUCER_FENCED
        );
        let empty_id = AddPartitionsRequest {
            transactional_id: TransactionalId::Empty,
            ..add(5, 1)
        };
        assert_eq!(
            add_partitions(None, &empty_id).reply.error_code,
            code::INVALID_REQUEST
        );
    }

    #[test]
    fn verify_only_accepts_exactly_the_partitions_of_an_ongoing_transaction() {
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, -1);
        let d = verify_partitions(Some(ongoing), &verify(5), &[true, false]);
        assert_eq!(d.kind, DecisionKind::NoChange);
        assert_eq!(d.partition_errors, [code::NONE, code::INVALID_TXN_STATE]);
        let done = entry(TxnState::CompleteCommit, 1000, 5, 1000, -1);
        let d = verify_partitions(Some(done), &verify(5), &[true]);
        assert_eq!(d.partition_errors, [code::INVALID_TXN_STATE]);
        let d = verify_partitions(None, &verify(5), &[false]);
        assert_eq!(
            (d.kind, d.reply.error_code),
            (DecisionKind::Reject, code::INVALID_PRODUCER_ID_MAPPING)
        );
    }

    #[test]
    fn the_reaper_fences_only_an_ongoing_transaction_past_its_timeout() {
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, -1);
        assert_eq!(reap(ongoing, 0, 60_000).kind, DecisionKind::NoChange);
        let d = reap(ongoing, 0, 60_001);
        assert_eq!(
            (d.kind, identity(&d)),
            (DecisionKind::FenceAndAbort, (0, 1000, 6))
        );
    }
}
