//! Kafka 4's transaction-coordinator rules (docs/txn-semantics.md, "Transaction
//! version 2") as pure functions, on top of apache37's where they are the
//! same. Read from Kafka 4.0's TransactionCoordinator and TransactionMetadata
//! with the later fixes Kafka 4.4 carries (KAFKA-19367: a coordinator's
//! fence-and-abort bumps the epoch once; KAFKA-20090: it rotates the producer
//! id at an exhausted epoch), and with every field persisted (KAFKA-20310,
//! KAFKA-20357 cannot happen: the host keeps the previous and next producer
//! id and the last epoch in every state record).
//!
//! What transaction version 2 changes (a request's version is 2 for EndTxn
//! v5+ and for a partition leader's implicit add; the coordinator's own
//! aborts use the cluster's, which this policy finalizes at 2):
//! - every EndTxn bumps the epoch: Prepare is written at epoch + 1, the last
//!   epoch remembers the old one, and the client gets the bumped identity; at
//!   an exhausted epoch the Prepare is written at 32767 with the candidate as
//!   the next producer id, the completion switches to (next, 0), and the
//!   client gets (next, 0);
//! - a retry is recognised by epoch + 1 (or, after a rotation, by the previous
//!   producer id at 32766) and answered with the current identity;
//! - an ABORT of an idle entry at its current epoch is an "empty abort": a
//!   Prepare of no partitions, bumped like any other end;
//! - a fence (InitProducerId over an Ongoing transaction, the timeout
//!   reaper) bumps once, remembers the old epoch, and rotates at exhaustion.

use kaas_apache37_rules as apache37;
use kaas_policy_sdk::{
    AddPartitionsRequest, AddSource, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest,
    Limits, NO_PID, ProtocolFeature, Reply, TransactionalId, TxnState, code,
};

/// The features `describe()` reports.
pub const FEATURES: &[&str] = &[
    "kip-98",
    "kip-360",
    "kip-890",
    "transaction-version-2",
    "no-kafka-20310",
    "no-kafka-20357",
    "kafka-19367-fixed",
    "kafka-20090-fixed",
    "q1-reproduced",
    "q2-producer-fenced",
];

/// `transaction.version` 0 to 2, finalized at 2: Kafka 4 clients use
/// transaction version 2 against this policy.
pub fn protocol_features() -> Vec<ProtocolFeature> {
    vec![kaas_policy_sdk::transaction_version(0, 2, 2)]
}

/// EndTxn's first version of transaction version 2.
pub const END_TXN_TV2_SINCE: i16 = 5;

fn exhausted(epoch: i16, limits: &Limits) -> bool {
    epoch >= limits.exhausted_epoch
}

/// The end of a transaction under version 2 (Kafka's `prepareAbortOrCommit`):
/// `state` at epoch + 1, the old epoch remembered, the current pid as the
/// previous one; at an exhausted epoch the candidate becomes the next
/// producer id. None when no epoch is left or no candidate was offered
/// where one is needed.
fn prepare(entry: Entry, state: TxnState, candidate: i64, limits: &Limits) -> Option<Entry> {
    if entry.producer_epoch == i16::MAX {
        return None;
    }
    let next_producer_id = if exhausted(entry.producer_epoch, limits) {
        if candidate < 0 {
            return None;
        }
        candidate
    } else {
        NO_PID
    };
    Some(
        Entry {
            state,
            producer_epoch: entry.producer_epoch + 1,
            last_producer_id: entry.producer_id,
            last_producer_epoch: entry.producer_epoch,
            next_producer_id,
            ..entry
        }
        .with_failed_epoch_fence(false)
        .with_client_transaction_v2(true),
    )
}

/// The identity a client gets once `prepared` completes: (next, 0) when it
/// rotates, else its own.
fn completes_as(prepared: &Entry) -> Reply {
    if prepared.next_producer_id != NO_PID {
        Reply::ok(prepared.next_producer_id, 0)
    } else {
        Reply::ok(prepared.producer_id, prepared.producer_epoch)
    }
}

/// A coordinator's fence-and-abort under version 2 (InitProducerId over an
/// Ongoing transaction, the reaper): PrepareAbort one epoch up, the old epoch
/// remembered, rotated at an exhaustion. A failed append keeps the old entry
/// (version 2 re-bumps on the retry; no failed-fence epoch is kept).
fn fence_and_abort(entry: Entry, reply_code: i16, candidate: i64, limits: &Limits) -> Decision {
    let Some(prepared) = prepare(entry, TxnState::PrepareAbort, candidate, limits) else {
        return Decision::reject(code::UNKNOWN_SERVER_ERROR);
    };
    let reply = if reply_code == code::NONE {
        Reply::ok(prepared.producer_id, prepared.producer_epoch)
    } else {
        Reply::error(reply_code)
    };
    Decision::write(DecisionKind::FenceAndAbort, prepared, reply)
}

/// InitProducerId: apache37's (the same in Kafka 4), except that an Ongoing
/// transaction is fenced and aborted under version 2.
pub fn init_producer_id(current: Option<Entry>, req: &InitRequest, limits: &Limits) -> Decision {
    let ongoing = current.filter(|e| e.state == TxnState::Ongoing);
    let Some(entry) = ongoing else {
        return apache37::init_producer_id(current, req, limits);
    };
    // apache37's checks before the state, in its order.
    if req.transactional_id != TransactionalId::Present {
        return apache37::init_producer_id(current, req, limits);
    }
    if req.timeout_ms <= 0 || req.timeout_ms > limits.max_timeout_ms {
        return Decision::reject(code::INVALID_TRANSACTION_TIMEOUT);
    }
    if let Some(claim) = &req.claim()
        && !apache37::claim_is_valid(&entry, claim, limits)
    {
        return Decision::reject(apache37::fenced(req.version, apache37::INIT_FENCED_SINCE));
    }
    // Quirk Q1 as in apache37: the claim's epoch is not compared here.
    fence_and_abort(
        entry,
        code::CONCURRENT_TRANSACTIONS,
        req.candidate_producer_id,
        limits,
    )
}

/// AddPartitions / AddOffsets / a leader's implicit add: apache37's checks
/// and transitions; a write records the request's transaction version.
pub fn add_partitions(current: Option<Entry>, req: &AddPartitionsRequest) -> Decision {
    let mut d = apache37::add_partitions(current, req);
    if let Some(e) = d.entry.take() {
        d.entry = Some(e.with_client_transaction_v2(req.source == AddSource::Implicit));
    }
    d
}

/// EndTxn: version 5+ is transaction version 2 (below, apache37's rules).
pub fn end_txn(current: Option<Entry>, req: &EndTxnRequest, limits: &Limits) -> Decision {
    if req.version < END_TXN_TV2_SINCE {
        // Transaction version 0's end: apache37's rules, and the entry
        // records that its client ended at version 0.
        let mut d = apache37::end_txn(current, req);
        if let Some(e) = d.entry.take() {
            d.entry = Some(e.with_client_transaction_v2(false));
        }
        return d;
    }
    if req.transactional_id != TransactionalId::Present {
        return Decision::reject(code::INVALID_REQUEST);
    }
    let Some(entry) = current else {
        return Decision::reject(code::INVALID_PRODUCER_ID_MAPPING);
    };
    let (cur, asked) = (
        i32::from(entry.producer_epoch),
        i32::from(req.producer_epoch),
    );
    // A retry of the end that rotated the producer id: the client still
    // holds the previous id at the exhausted epoch.
    let retry_on_overflow = req.producer_id != entry.producer_id
        && req.producer_id == entry.last_producer_id
        && exhausted(req.producer_epoch, limits)
        && entry.producer_epoch == 0;
    if req.producer_id != entry.producer_id && !retry_on_overflow {
        return Decision::reject(code::INVALID_PRODUCER_ID_MAPPING);
    }
    // A retry of the end that bumped the epoch.
    let retry_on_bump = !retry_on_overflow && cur == asked + 1;
    let current_epoch = !retry_on_overflow && cur == asked;
    let valid = match entry.state {
        TxnState::Ongoing | TxnState::Empty => current_epoch,
        TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
        TxnState::CompleteCommit | TxnState::CompleteAbort => {
            retry_on_bump || retry_on_overflow || current_epoch
        }
        TxnState::Dead => false,
    };
    if !valid {
        return Decision::reject(apache37::fenced(req.version, apache37::TXN_FENCED_SINCE));
    }
    let retry = retry_on_bump || retry_on_overflow;
    let done = Reply::ok(entry.producer_id, entry.producer_epoch);
    let end = |state: TxnState, kind: DecisionKind| match prepare(
        entry,
        state,
        req.candidate_producer_id,
        limits,
    ) {
        Some(p) => {
            let reply = completes_as(&p);
            Decision::write(kind, p, reply)
        }
        None => Decision::reject(code::UNKNOWN_SERVER_ERROR),
    };
    let abort = || end(TxnState::PrepareAbort, DecisionKind::PrepareAbort);
    match (entry.state, req.commit, retry) {
        (TxnState::Ongoing, true, false) => {
            end(TxnState::PrepareCommit, DecisionKind::PrepareCommit)
        }
        (TxnState::Ongoing, false, false) => abort(),
        // The empty abort: an idle entry's ABORT at its current epoch.
        (TxnState::Empty, false, false)
        | (TxnState::CompleteCommit, false, false)
        | (TxnState::CompleteAbort, false, false) => abort(),
        (TxnState::CompleteCommit, true, true) | (TxnState::CompleteAbort, false, true) => {
            Decision::no_change(done)
        }
        (TxnState::PrepareCommit, true, _) | (TxnState::PrepareAbort, false, _) => {
            Decision::reject(code::CONCURRENT_TRANSACTIONS)
        }
        (TxnState::Dead, _, _) => Decision::reject(code::UNKNOWN_SERVER_ERROR),
        _ => Decision::reject(code::INVALID_TXN_STATE),
    }
}

/// Markers are written: PrepareX becomes CompleteX, and a Prepare written
/// with a next producer id switches to it at epoch 0, remembering the old
/// id (the last epoch, 32766, stays for the client's retry).
pub fn complete_transaction(entry: Entry) -> Decision {
    let state = match entry.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort => TxnState::CompleteAbort,
        _ => return Decision::reject(code::INVALID_TXN_STATE),
    };
    let next = if entry.next_producer_id != NO_PID {
        Entry {
            state,
            producer_id: entry.next_producer_id,
            producer_epoch: 0,
            last_producer_id: entry.producer_id,
            next_producer_id: NO_PID,
            ..entry
        }
    } else {
        Entry { state, ..entry }
    }
    .with_failed_epoch_fence(false);
    let reply = Reply::ok(next.producer_id, next.producer_epoch);
    Decision::write(DecisionKind::Complete, next, reply)
}

/// The timeout reaper: an Ongoing transaction past its timeout is fenced and
/// aborted under version 2.
pub fn reap(
    entry: Entry,
    start_timestamp_ms: i64,
    now_ms: i64,
    candidate: i64,
    limits: &Limits,
) -> Decision {
    let overdue = entry.state == TxnState::Ongoing
        && start_timestamp_ms.saturating_add(i64::from(entry.timeout_ms)) < now_ms;
    if overdue {
        fence_and_abort(entry, code::NONE, candidate, limits)
    } else {
        Decision::no_change(Reply::ok(entry.producer_id, entry.producer_epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_policy_sdk::{Claim, EntryFlags, NO_EPOCH};

    const LIMITS: Limits = kaas_policy_sdk::DEFAULT_LIMITS;

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

    fn end(pid: i64, epoch: i16, commit: bool, candidate: i64) -> EndTxnRequest {
        EndTxnRequest {
            transactional_id: TransactionalId::Present,
            producer_id: pid,
            producer_epoch: epoch,
            commit,
            version: 5,
            candidate_producer_id: candidate,
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
    fn every_end_bumps_the_epoch_and_a_retry_gets_the_bumped_identity() {
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, 4);
        let d = end_txn(Some(ongoing), &end(1000, 5, true, -1), &LIMITS);
        assert_eq!(d.kind, DecisionKind::PrepareCommit);
        assert_eq!(identity(&d), (0, 1000, 6));
        let p = d.entry.expect("prepare");
        assert_eq!((p.producer_epoch, p.last_producer_epoch), (6, 5));
        assert!(p.client_transaction_v2());
        let done = complete_transaction(p).entry.expect("complete");
        assert_eq!(
            (done.state, done.producer_id, done.producer_epoch),
            (TxnState::CompleteCommit, 1000, 6)
        );
        let retry = end_txn(Some(done), &end(1000, 5, true, -1), &LIMITS);
        assert_eq!(
            (retry.kind, identity(&retry)),
            (DecisionKind::NoChange, (0, 1000, 6))
        );
        let wrong = end_txn(Some(done), &end(1000, 5, false, -1), &LIMITS);
        assert_eq!(wrong.reply.error_code, code::INVALID_TXN_STATE);
        let stale = end_txn(Some(done), &end(1000, 4, true, -1), &LIMITS);
        assert_eq!(stale.reply.error_code, code::PRODUCER_FENCED);
    }

    #[test]
    fn an_end_at_the_exhausted_epoch_rotates_to_the_candidate() {
        let ongoing = entry(TxnState::Ongoing, 1000, 32766, 1000, 32765);
        let d = end_txn(Some(ongoing), &end(1000, 32766, true, 2000), &LIMITS);
        assert_eq!(identity(&d), (0, 2000, 0));
        let p = d.entry.expect("prepare");
        assert_eq!(
            (p.producer_id, p.producer_epoch, p.next_producer_id),
            (1000, 32767, 2000)
        );
        let done = complete_transaction(p).entry.expect("complete");
        assert_eq!(
            (
                done.producer_id,
                done.producer_epoch,
                done.last_producer_id,
                done.last_producer_epoch
            ),
            (2000, 0, 1000, 32766)
        );
        // The client's retry with the old identity gets the rotated one.
        let retry = end_txn(Some(done), &end(1000, 32766, true, -1), &LIMITS);
        assert_eq!(
            (retry.kind, identity(&retry)),
            (DecisionKind::NoChange, (0, 2000, 0))
        );
        // Without a candidate no rotation can be written.
        let none = end_txn(Some(ongoing), &end(1000, 32766, true, -1), &LIMITS);
        assert_eq!(none.reply.error_code, code::UNKNOWN_SERVER_ERROR);
    }

    #[test]
    fn an_abort_of_an_idle_entry_is_an_empty_abort_and_a_commit_is_refused() {
        for state in [
            TxnState::Empty,
            TxnState::CompleteCommit,
            TxnState::CompleteAbort,
        ] {
            let idle = entry(state, 1000, 6, 1000, 5);
            let d = end_txn(Some(idle), &end(1000, 6, false, -1), &LIMITS);
            assert_eq!(
                (d.kind, identity(&d)),
                (DecisionKind::PrepareAbort, (0, 1000, 7)),
                "{state:?}"
            );
            let c = end_txn(Some(idle), &end(1000, 6, true, -1), &LIMITS);
            assert_eq!(c.reply.error_code, code::INVALID_TXN_STATE, "{state:?}");
        }
        let empty = entry(TxnState::Empty, 1000, 6, 1000, 5);
        let d = end_txn(Some(empty), &end(1000, 5, false, -1), &LIMITS);
        assert_eq!(d.reply.error_code, code::PRODUCER_FENCED);
    }

    #[test]
    fn the_checks_run_producer_id_then_epoch() {
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, 4);
        let other = end_txn(Some(ongoing), &end(999, 5, true, -1), &LIMITS);
        assert_eq!(other.reply.error_code, code::INVALID_PRODUCER_ID_MAPPING);
        let stale = end_txn(Some(ongoing), &end(1000, 4, true, -1), &LIMITS);
        assert_eq!(stale.reply.error_code, code::PRODUCER_FENCED);
        assert_eq!(
            end_txn(None, &end(1000, 5, true, -1), &LIMITS)
                .reply
                .error_code,
            code::INVALID_PRODUCER_ID_MAPPING
        );
    }

    #[test]
    fn a_version_4_end_keeps_apache37s_rules() {
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, 4);
        let v4 = EndTxnRequest {
            version: 4,
            ..end(1000, 5, true, -1)
        };
        let d = end_txn(Some(ongoing), &v4, &LIMITS);
        assert_eq!(d, apache37::end_txn(Some(ongoing), &v4));
        assert_eq!(d.entry.map(|e| e.producer_epoch), Some(5));
        // A version 0 end of a transaction a version 2 client started
        // records version 0.
        let v2_started = ongoing.with_client_transaction_v2(true);
        let d = end_txn(Some(v2_started), &v4, &LIMITS);
        assert!(!d.entry.expect("prepare").client_transaction_v2());
    }

    #[test]
    fn a_fence_bumps_once_remembers_the_epoch_and_rotates_at_exhaustion() {
        let init = |claim, candidate| InitRequest {
            transactional_id: TransactionalId::Present,
            claim: Claim::of(claim),
            version: 5,
            timeout_ms: 60_000,
            candidate_producer_id: candidate,
            tenant: 0,
        };
        let ongoing = entry(TxnState::Ongoing, 1000, 5, 1000, NO_EPOCH);
        let d = init_producer_id(Some(ongoing), &init(None, 2000), &LIMITS);
        assert_eq!(
            (d.kind, d.reply.error_code),
            (DecisionKind::FenceAndAbort, code::CONCURRENT_TRANSACTIONS)
        );
        let p = d.entry.expect("prepare abort");
        assert_eq!(
            (
                p.state,
                p.producer_epoch,
                p.last_producer_epoch,
                p.next_producer_id
            ),
            (TxnState::PrepareAbort, 6, 5, NO_PID)
        );
        assert!(d.on_append_failure.is_none());
        let worn = entry(TxnState::Ongoing, 1000, 32766, 1000, 32765);
        let d = init_producer_id(Some(worn), &init(None, 2000), &LIMITS);
        let p = d.entry.expect("prepare abort");
        assert_eq!((p.producer_epoch, p.next_producer_id), (32767, 2000));
        let r = reap(ongoing, 0, 60_001, -1, &LIMITS);
        assert_eq!(
            (r.kind, identity(&r)),
            (DecisionKind::FenceAndAbort, (0, 1000, 6))
        );
    }

    #[test]
    fn an_implicit_add_records_transaction_version_2() {
        let idle = entry(TxnState::CompleteCommit, 1000, 6, 1000, 5);
        let add = |source| AddPartitionsRequest {
            transactional_id: TransactionalId::Present,
            producer_id: 1000,
            producer_epoch: 6,
            version: 5,
            new_partitions: 1,
            source,
            tenant: 0,
        };
        let d = add_partitions(Some(idle), &add(AddSource::Implicit));
        assert!(d.entry.expect("ongoing").client_transaction_v2());
        let d = add_partitions(Some(idle), &add(AddSource::AddPartitions));
        assert!(!d.entry.expect("ongoing").client_transaction_v2());
    }
}
