//! The coordinator's natural types for policy calls, and how they map onto
//! the ABI (`kaas:txn-policy@3.0.0`).
//!
//! The coordinator, the state-record codec, the conformance runner and the
//! host's checks work with a full [`Entry`] (every persisted field) and full
//! requests. ABI 2.0 passes a policy only fixed-size facts, so a call needs
//! no allocation inside the guest: the policy sees and decides
//! [`wit::Entry`] (identity, state, timeout, the failed-fence flag), and
//! this module keeps the rest, deriving the transactional.id, the
//! partitions and both timestamps of a decided entry exactly as Kafka 3.7
//! (and apache37 under ABI 1.x) did. The derivation rules are documented for
//! policy authors in policy-wit/README.md ("Fields the host keeps").

use super::bindings::wit;

pub use wit::{
    AddSource, Claim, DecisionKind, Limits, PolicyInfo, ProtocolFeature, Reply, TxnState,
};

/// Whether a transaction entry may go from state `from` to `to`: the edges
/// of Kafka's state machine (`TransactionState.validPreviousStates`, Kafka
/// 4.0's TransactionMetadata.scala: 3.7's, plus PrepareAbort after an idle
/// state, transaction version 2's "empty abort"). Kafka's PrepareEpochFence is not
/// here: it is a pending state never persisted, and its fence's persisted
/// edge is Ongoing → PrepareAbort, which the table has. Dead is the edge of
/// transactional.id expiry, which kaas persists as a tombstone (the entry
/// goes), never as an entry; a policy may not write it
/// (`check::legal_transition`).
pub fn may_follow(from: TxnState, to: TxnState) -> bool {
    use TxnState::*;
    match to {
        Empty => matches!(from, Empty | CompleteCommit | CompleteAbort),
        Ongoing => matches!(from, Ongoing | Empty | CompleteCommit | CompleteAbort),
        PrepareCommit => from == Ongoing,
        PrepareAbort => matches!(from, Ongoing | Empty | CompleteCommit | CompleteAbort),
        CompleteCommit => from == PrepareCommit,
        CompleteAbort => from == PrepareAbort,
        Dead => matches!(from, Empty | CompleteCommit | CompleteAbort),
    }
}

/// One topic partition that belongs to a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

/// The full coordinator entry of one transactional.id: every field the host
/// persists in its state log, plus one in-memory flag (the WIT's
/// `stored-entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The transactional.id this entry belongs to.
    pub transactional_id: String,
    /// Current producer id.
    pub producer_id: i64,
    /// Current producer epoch; -1 for an entry that was never initialised.
    pub producer_epoch: i16,
    /// Producer id before the most recent transition that changed it; -1 when unknown.
    pub last_producer_id: i64,
    /// The epoch a client may still hold while it retries the most recent
    /// bump; -1 when no retry window is open.
    pub last_producer_epoch: i16,
    /// The producer id a Prepare* entry switches to when it completes
    /// (transaction version 2 rotation); -1 when none.
    pub next_producer_id: i64,
    /// The transaction version of the client's most recent transactional
    /// request (0, or 2 for EndTxn v5+ and implicit adds).
    pub client_transaction_version: i16,
    /// Coordinator state.
    pub state: TxnState,
    /// Partitions of the current transaction (empty unless Ongoing/Prepare*).
    pub partitions: Vec<TopicPartition>,
    /// Transaction timeout in milliseconds.
    pub timeout_ms: i32,
    /// When the current transaction started (ms since epoch), -1 if none.
    pub start_timestamp_ms: i64,
    /// When the entry last changed (ms since epoch).
    pub last_update_timestamp_ms: i64,
    /// In memory only: a failed fence already raised the epoch (KAFKA-9666).
    pub has_failed_epoch_fence: bool,
}

/// Facts of one InitProducerId request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitRequest {
    /// None on the idempotent path.
    pub transactional_id: Option<String>,
    /// None when both claim fields are -1 (always for v0-2).
    pub claim: Option<Claim>,
    /// Request version (0-5).
    pub version: i16,
    /// Requested transaction timeout.
    pub timeout_ms: i32,
    /// A fresh producer id the policy may use.
    pub candidate_producer_id: i64,
    /// The request's tenant class (`--tenant-class`).
    pub tenant: u8,
    /// The host's clock, ms since epoch (stamps the decided entry).
    pub now_ms: i64,
}

/// Facts of AddPartitionsToTxn and AddOffsetsToTxn (and VerifyOnly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
    pub version: i16,
    /// True for the v4 VerifyOnly check a partition leader makes.
    pub verify_only: bool,
    /// Where the add comes from (ignored for VerifyOnly).
    pub source: AddSource,
    /// The request's tenant class (`--tenant-class`).
    pub tenant: u8,
    pub now_ms: i64,
}

/// Facts of EndTxn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// True for COMMIT, false for ABORT.
    pub commit: bool,
    pub version: i16,
    /// A fresh producer id the policy may use for a rotation.
    pub candidate_producer_id: i64,
    /// The request's tenant class (`--tenant-class`).
    pub tenant: u8,
    pub now_ms: i64,
}

/// A policy's decision with full entries, as the host checks and applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub reply: Reply,
    /// The entry to persist; none means nothing is written.
    pub entry: Option<Entry>,
    /// The entry to keep in memory if persisting `entry` fails.
    pub on_append_failure: Option<Entry>,
    /// Per-partition error codes (VerifyOnly); empty means the reply's code
    /// applies to every partition.
    pub partition_errors: Vec<i16>,
}

// ------------------------------------------------------------ host -> ABI

/// What a policy sees of an entry.
pub(crate) fn view(e: &Entry) -> wit::Entry {
    let mut flags = wit::EntryFlags::empty();
    if e.has_failed_epoch_fence {
        flags |= wit::EntryFlags::HAS_FAILED_EPOCH_FENCE;
    }
    if e.client_transaction_version >= 2 {
        flags |= wit::EntryFlags::CLIENT_TRANSACTION_V2;
    }
    wit::Entry {
        producer_id: e.producer_id,
        producer_epoch: e.producer_epoch,
        last_producer_id: e.last_producer_id,
        last_producer_epoch: e.last_producer_epoch,
        next_producer_id: e.next_producer_id,
        state: e.state,
        timeout_ms: e.timeout_ms,
        flags,
    }
}

/// No claim on the wire: -1/-1.
const NO_CLAIM: Claim = Claim {
    producer_id: -1,
    producer_epoch: -1,
};

fn transactional_id(id: Option<&str>) -> wit::TransactionalId {
    match id {
        None => wit::TransactionalId::Absent,
        Some("") => wit::TransactionalId::Empty,
        Some(_) => wit::TransactionalId::Present,
    }
}

pub(crate) fn init_request(req: &InitRequest) -> wit::InitRequest {
    wit::InitRequest {
        transactional_id: transactional_id(req.transactional_id.as_deref()),
        claim: req.claim.unwrap_or(NO_CLAIM),
        version: req.version,
        timeout_ms: req.timeout_ms,
        candidate_producer_id: req.candidate_producer_id,
        tenant: req.tenant,
    }
}

/// The stored partitions of `current` (none for an absent entry).
fn stored(current: Option<&Entry>) -> &[TopicPartition] {
    current.map_or(&[], |e| &e.partitions)
}

pub(crate) fn add_partitions_request(
    current: Option<&Entry>,
    req: &AddPartitionsRequest,
) -> wit::AddPartitionsRequest {
    let have = stored(current);
    let requested = &req.partitions;
    let new_partitions = requested
        .iter()
        .enumerate()
        .filter(|(i, p)| !have.contains(p) && !requested[..*i].contains(p))
        .count();
    wit::AddPartitionsRequest {
        transactional_id: transactional_id(Some(&req.transactional_id)),
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
        version: req.version,
        new_partitions: u32::try_from(new_partitions).unwrap_or(u32::MAX),
        source: req.source,
        tenant: req.tenant,
    }
}

pub(crate) fn verify_request(req: &AddPartitionsRequest) -> wit::VerifyRequest {
    wit::VerifyRequest {
        transactional_id: transactional_id(Some(&req.transactional_id)),
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
        version: req.version,
    }
}

/// VerifyOnly: whether each requested partition is among the stored ones.
pub(crate) fn in_transaction(current: Option<&Entry>, req: &AddPartitionsRequest) -> Vec<bool> {
    let have = stored(current);
    req.partitions.iter().map(|p| have.contains(p)).collect()
}

pub(crate) fn end_txn_request(req: &EndTxnRequest) -> wit::EndTxnRequest {
    wit::EndTxnRequest {
        transactional_id: transactional_id(Some(&req.transactional_id)),
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
        commit: req.commit,
        version: req.version,
        candidate_producer_id: req.candidate_producer_id,
        tenant: req.tenant,
    }
}

// ------------------------------------------------------------ ABI -> host

/// What a decision is made about: the entry before it, its id, the
/// partitions the request adds (AddPartitions only) and the host's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub before: Option<&'a Entry>,
    pub transactional_id: &'a str,
    pub added: &'a [TopicPartition],
    pub now_ms: i64,
}

impl<'a> Context<'a> {
    /// A decision about an existing entry that adds no partitions
    /// (completion, reaper).
    pub fn of(current: &'a Entry, now_ms: i64) -> Self {
        Context {
            before: Some(current),
            transactional_id: &current.transactional_id,
            added: &[],
            now_ms,
        }
    }
}

/// The full entry a policy's decided `v` becomes: the host's fields derived
/// as Kafka 3.7 does (policy-wit/README.md, "Fields the host keeps").
fn decided(cx: &Context<'_>, v: wit::Entry) -> Entry {
    let before = cx.before;
    let ongoing_before = before.filter(|b| b.state == TxnState::Ongoing);
    let partitions = match v.state {
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => Vec::new(),
        TxnState::Ongoing => {
            let mut p = ongoing_before.map_or_else(Vec::new, |b| b.partitions.clone());
            for q in cx.added {
                if !p.contains(q) {
                    p.push(q.clone());
                }
            }
            p
        }
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::Dead => {
            stored(before).to_vec()
        }
    };
    let start_timestamp_ms = match v.state {
        TxnState::Empty => -1,
        TxnState::Ongoing => ongoing_before.map_or(cx.now_ms, |b| b.start_timestamp_ms),
        // Transaction version 2's "empty abort" (an EndTxn ABORT of an idle
        // entry) starts and prepares a transaction of no partitions now.
        TxnState::PrepareCommit | TxnState::PrepareAbort
            if before.is_some_and(|b| {
                matches!(
                    b.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                )
            }) =>
        {
            cx.now_ms
        }
        _ => before.map_or(-1, |b| b.start_timestamp_ms),
    };
    entry(cx, v, partitions, start_timestamp_ms, cx.now_ms)
}

/// The policy's fields of `v` with the host's.
fn entry(
    cx: &Context<'_>,
    v: wit::Entry,
    partitions: Vec<TopicPartition>,
    start_timestamp_ms: i64,
    last_update_timestamp_ms: i64,
) -> Entry {
    Entry {
        transactional_id: cx.transactional_id.to_owned(),
        producer_id: v.producer_id,
        producer_epoch: v.producer_epoch,
        last_producer_id: v.last_producer_id,
        last_producer_epoch: v.last_producer_epoch,
        next_producer_id: v.next_producer_id,
        client_transaction_version: if v.flags.contains(wit::EntryFlags::CLIENT_TRANSACTION_V2) {
            2
        } else {
            0
        },
        state: v.state,
        partitions,
        timeout_ms: v.timeout_ms,
        start_timestamp_ms,
        last_update_timestamp_ms,
        has_failed_epoch_fence: v.flags.contains(wit::EntryFlags::HAS_FAILED_EPOCH_FENCE),
    }
}

/// The in-memory entry kept after a failed append: the old entry with the
/// policy's fields of `v` (partitions and timestamps unchanged).
fn kept(cx: &Context<'_>, v: wit::Entry) -> Entry {
    let (partitions, start_timestamp_ms, last_update_timestamp_ms) = match cx.before {
        Some(b) => (
            b.partitions.clone(),
            b.start_timestamp_ms,
            b.last_update_timestamp_ms,
        ),
        None => (Vec::new(), -1, cx.now_ms),
    };
    entry(
        cx,
        v,
        partitions,
        start_timestamp_ms,
        last_update_timestamp_ms,
    )
}

/// A policy's decision with its entries completed by the host.
pub(crate) fn decision(cx: &Context<'_>, d: wit::Decision) -> Decision {
    Decision {
        kind: d.kind,
        reply: d.reply,
        entry: d.entry.map(|v| decided(cx, v)),
        on_append_failure: d.on_append_failure.map(|v| kept(cx, v)),
        partition_errors: Vec::new(),
    }
}

/// A VerifyOnly decision (never an entry).
pub(crate) fn verify_decision(d: wit::VerifyDecision) -> Decision {
    Decision {
        kind: d.kind,
        reply: d.reply,
        entry: None,
        on_append_failure: None,
        partition_errors: d.partition_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn may_follow_is_kafkas_state_table() {
        use TxnState::*;
        // Kafka 4.0's validPreviousStates, target <- previous states (its
        // PrepareAbort also follows PrepareEpochFence, never persisted; the
        // idle states are 4.0's, for transaction version 2's empty abort).
        let kafka: [(TxnState, &[TxnState]); 7] = [
            (Empty, &[Empty, CompleteCommit, CompleteAbort]),
            (Ongoing, &[Ongoing, Empty, CompleteCommit, CompleteAbort]),
            (PrepareCommit, &[Ongoing]),
            (
                PrepareAbort,
                &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            ),
            (CompleteCommit, &[PrepareCommit]),
            (CompleteAbort, &[PrepareAbort]),
            (Dead, &[Empty, CompleteAbort, CompleteCommit]),
        ];
        for (to, previous) in kafka {
            for from in kafka.map(|(s, _)| s) {
                assert_eq!(
                    may_follow(from, to),
                    previous.contains(&from),
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    fn entry(state: TxnState, partitions: Vec<TopicPartition>, start: i64) -> Entry {
        Entry {
            transactional_id: "T".into(),
            producer_id: 1000,
            producer_epoch: 5,
            last_producer_id: 1000,
            last_producer_epoch: 4,
            next_producer_id: -1,
            client_transaction_version: 0,
            state,
            partitions,
            timeout_ms: 60_000,
            start_timestamp_ms: start,
            last_update_timestamp_ms: 7,
            has_failed_epoch_fence: false,
        }
    }

    fn cx<'a>(before: Option<&'a Entry>, added: &'a [TopicPartition]) -> Context<'a> {
        Context {
            before,
            transactional_id: "T",
            added,
            now_ms: 100,
        }
    }

    #[test]
    fn new_partitions_counts_distinct_requested_partitions_not_yet_stored() {
        let ongoing = entry(TxnState::Ongoing, vec![tp("a", 0)], 50);
        let req = AddPartitionsRequest {
            transactional_id: "T".into(),
            producer_id: 1000,
            producer_epoch: 5,
            partitions: vec![tp("a", 0), tp("b", 1), tp("b", 1), tp("c", 2)],
            version: 3,
            verify_only: false,
            source: AddSource::AddPartitions,
            tenant: 0,
            now_ms: 100,
        };
        let facts = add_partitions_request(Some(&ongoing), &req);
        assert_eq!(facts.new_partitions, 2);
        assert_eq!(add_partitions_request(None, &req).new_partitions, 3);
        assert_eq!(
            in_transaction(Some(&ongoing), &req),
            vec![true, false, false, false]
        );
    }

    #[test]
    fn the_host_derives_partitions_and_timestamps_as_kafka_does() {
        let added = [tp("b", 1), tp("a", 0)];
        // Ongoing grows in request order and keeps its start.
        let ongoing = entry(TxnState::Ongoing, vec![tp("a", 0)], 50);
        let e = decided(&cx(Some(&ongoing), &added), view(&ongoing));
        assert_eq!(e.partitions, vec![tp("a", 0), tp("b", 1)]);
        assert_eq!(
            (e.start_timestamp_ms, e.last_update_timestamp_ms),
            (50, 100)
        );
        // A transaction starts now from an idle entry.
        let done = entry(TxnState::CompleteCommit, Vec::new(), 50);
        let v = wit::Entry {
            state: TxnState::Ongoing,
            ..view(&done)
        };
        let e = decided(&cx(Some(&done), &added), v);
        assert_eq!(e.partitions, vec![tp("b", 1), tp("a", 0)]);
        assert_eq!(e.start_timestamp_ms, 100);
        // Prepare keeps; Complete clears; Empty has no start.
        let v = wit::Entry {
            state: TxnState::PrepareAbort,
            ..view(&ongoing)
        };
        let e = decided(&cx(Some(&ongoing), &[]), v);
        assert_eq!((e.partitions.len(), e.start_timestamp_ms), (1, 50));
        let prepared = entry(TxnState::PrepareCommit, vec![tp("a", 0)], 50);
        let v = wit::Entry {
            state: TxnState::CompleteCommit,
            ..view(&prepared)
        };
        let e = decided(&cx(Some(&prepared), &[]), v);
        assert_eq!((e.partitions.len(), e.start_timestamp_ms), (0, 50));
        let v = wit::Entry {
            state: TxnState::Empty,
            ..view(&done)
        };
        assert_eq!(decided(&cx(Some(&done), &[]), v).start_timestamp_ms, -1);
        // A failed append keeps the old partitions and timestamps.
        let k = kept(&cx(Some(&ongoing), &[]), view(&ongoing));
        assert_eq!(k, ongoing);
    }
}
