//! The coordinator's state machine, sans I/O: entries per transactional.id,
//! transitions in flight, and the two-phase update rule of docs/txn-semantics.md §0.5.
//!
//! Every decision comes from the loaded policy (already checked by the
//! policy runtime). The machine never applies a decision itself: it returns a
//! [`PlannedWrite`]; the caller makes the state record durable and hands the
//! outcome back to [`TxnMachine::finish`], which applies it and produces the
//! reply. So nothing is ever answered before it is durable, and the same
//! machine runs under the broker, the conformance runner and unit tests.
//! It may touch: its own map, the policy. Nothing else.

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::warn;

use super::record::{StateRecord, UnsyncedMarkers};
use super::tenant::TenantClasses;
use crate::invariant::invariant;
use crate::policy::{
    AddPartitionsRequest, Claim, Decision, DecisionKind, EndTxnRequest, Entry, InitRequest, Limits,
    Policy, PolicySlot, Reply, TopicPartition, TxnState, may_follow, state_name,
};

/// Kafka error codes the host itself answers with ([`crate::codes`]).
use crate::codes as code;

/// Kafka's default transaction.max.timeout.ms (15 minutes).
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;

/// Coordinator limits with Kafka's defaults (transaction.max.timeout.ms and
/// the exhaustion point); a broker uses [`limits`] with its
/// `--transaction-max-timeout-ms`.
pub const DEFAULT_LIMITS: Limits = limits(DEFAULT_MAX_TIMEOUT_MS);

/// The limits a policy is configured with, for a transaction.max.timeout.ms.
pub const fn limits(max_timeout_ms: i32) -> Limits {
    Limits {
        max_timeout_ms,
        exhausted_epoch: i16::MAX - 1,
    }
}

/// An InitProducerId as it arrives (claim fields raw, -1 = unset).
#[derive(Debug, Clone)]
pub struct InitProducerId {
    pub transactional_id: Option<String>,
    pub timeout_ms: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub version: i16,
}

/// Why a durable append failed (docs/txn-semantics.md §0.5 step 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// Not enough replicas / timed out: retriable, maps to COORDINATOR_NOT_AVAILABLE.
    NotEnoughReplicas,
    /// The coordinator lost ownership (or its epoch changed): NOT_COORDINATOR, nothing applied.
    NotCoordinator,
    /// The disk refused the write: NOT_COORDINATOR, as Kafka maps KAFKA_STORAGE_ERROR.
    Storage(String),
}

/// Markers the host must write before the transaction can complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub commit: bool,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

/// A write the caller must make durable, then pass to [`TxnMachine::finish`].
#[derive(Debug, Clone)]
pub struct PlannedWrite {
    /// The record to append to the state log.
    pub record: StateRecord,
    /// What the policy decided (for logs and the caller's side effects).
    pub kind: DecisionKind,
    entry: Entry,
    on_failure: Option<Entry>,
    reply: Reply,
    candidate_used: bool,
    /// Identity of the policy that decided it (the record's written_by),
    /// kept for the slot once it is applied, whatever policy decides by then.
    decided_by: String,
}

impl PlannedWrite {
    /// The entry that becomes current once the record is durable.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
}

/// The answer to a request, once nothing remains to be made durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub reply: Reply,
    /// Per-partition codes (VerifyOnly); empty = `reply.error_code` for all.
    pub partition_errors: Vec<i16>,
    /// Whether the candidate producer id was consumed.
    pub candidate_used: bool,
    /// The decision, if the policy made one.
    pub kind: Option<DecisionKind>,
    /// Markers to write now (after a Prepare* became durable).
    pub markers: Option<MarkerJob>,
    /// (pid, epoch) to fence on every partition this broker leads: set after
    /// any durable epoch raise to > 0.
    pub fence: Option<(i64, i16)>,
}

impl Answer {
    fn reply(reply: Reply) -> Self {
        Answer {
            reply,
            partition_errors: Vec::new(),
            candidate_used: false,
            kind: None,
            markers: None,
            fence: None,
        }
    }
    fn error(code: i16) -> Self {
        Answer::reply(Reply {
            error_code: code,
            producer_id: -1,
            producer_epoch: -1,
        })
    }
}

/// What a request leads to.
// Moved once per request; boxing the write would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer now; nothing to persist.
    Done(Answer),
    /// Persist this, then call `finish`.
    Write(PlannedWrite),
}

/// A transition in flight (Kafka's pendingState).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    /// A state-record append is in flight.
    Append,
    /// Prepare* is durable; markers are being written.
    Markers(MarkerJob),
    /// Set by tests and the conformance runner to model an in-flight transition.
    External,
}

#[derive(Debug, Clone)]
struct Slot {
    entry: Entry,
    pending: Option<Pending>,
    /// Identity of the policy whose decision produced this entry.
    written_by: Option<String>,
    /// The last transaction's markers while not known durable; every
    /// record of the entry carries them meanwhile.
    unsynced: Option<UnsyncedMarkers>,
}

/// The coordinator's entries and the policy slot that decides over them.
#[derive(Debug)]
pub struct TxnMachine {
    /// Read once per decision (see [`PolicySlot`]): a hot swap takes
    /// effect between two decisions, never within one.
    policy: Arc<PolicySlot>,
    limits: Limits,
    /// Each decision's tenant class, from the transactional.id.
    tenants: Arc<TenantClasses>,
    slots: BTreeMap<String, Slot>,
    /// Ids with no entry yet whose first write is in flight: pending like an
    /// entry's transition (Kafka creates the metadata before writing it, so
    /// a second InitProducerId meanwhile gets CONCURRENT_TRANSACTIONS).
    creating: std::collections::BTreeSet<String>,
}

impl TxnMachine {
    /// An empty machine deciding with `policy` (a slot of its own).
    pub fn new(policy: Arc<Policy>, limits: Limits) -> Self {
        Self::with_slot(PolicySlot::new(policy), limits)
    }

    /// An empty machine deciding with whatever policy `slot` holds at each
    /// decision.
    pub fn with_slot(slot: Arc<PolicySlot>, limits: Limits) -> Self {
        TxnMachine {
            policy: slot,
            limits,
            tenants: Arc::default(),
            slots: BTreeMap::new(),
            creating: Default::default(),
        }
    }

    /// The same machine, naming each decision's tenant class from `tenants`.
    pub fn with_tenants(mut self, tenants: Arc<TenantClasses>) -> Self {
        self.tenants = tenants;
        self
    }

    /// The tenant class of `txn_id`.
    pub fn tenant_of(&self, txn_id: &str) -> u8 {
        self.tenants.class_of(txn_id)
    }

    /// Whether a decision about `txn_id` may rotate its producer id (its
    /// epoch is exhausted), so the caller should offer a candidate id.
    pub fn wants_candidate(&self, txn_id: &str) -> bool {
        self.entry(txn_id)
            .is_some_and(|e| e.producer_epoch >= self.limits.exhausted_epoch)
    }

    /// The policy deciding now.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.current()
    }

    /// The slot this machine reads its policy from.
    pub fn slot(&self) -> &Arc<PolicySlot> {
        &self.policy
    }

    /// The limits every decision is made under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The identity of the policy that made `txn_id`'s last transition, if known.
    pub fn written_by(&self, txn_id: &str) -> Option<&str> {
        self.slots.get(txn_id).and_then(|s| s.written_by.as_deref())
    }

    /// The current entry of `txn_id`.
    pub fn entry(&self, txn_id: &str) -> Option<&Entry> {
        self.slots.get(txn_id).map(|s| &s.entry)
    }

    /// Whether `txn_id`'s markers are being written (Prepare* durable,
    /// completion not yet).
    pub fn awaiting_markers(&self, txn_id: &str) -> bool {
        self.slots
            .get(txn_id)
            .is_some_and(|s| matches!(s.pending, Some(Pending::Markers(_))))
    }

    /// Whether a transition of `txn_id` is in flight.
    pub fn is_pending(&self, txn_id: &str) -> bool {
        self.slots.get(txn_id).is_some_and(|s| s.pending.is_some())
            || self.creating.contains(txn_id)
    }

    /// Each entry with the identity of the policy that made its last transition.
    pub fn entries_with_writer(&self) -> impl Iterator<Item = (&Entry, Option<&str>)> {
        self.slots
            .values()
            .map(|s| (&s.entry, s.written_by.as_deref()))
    }

    /// Every entry (for snapshots and admin APIs).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.slots.values().map(|s| &s.entry)
    }

    /// Installs an entry as if loaded from the log (tests, conformance, load).
    pub fn install(&mut self, entry: Entry) {
        self.slots.insert(
            entry.transactional_id.clone(),
            Slot {
                entry,
                pending: None,
                written_by: None,
                unsynced: None,
            },
        );
    }

    /// Marks `txn_id` as having a transition in flight (tests and conformance).
    pub fn set_external_pending(&mut self, txn_id: &str) {
        if let Some(s) = self.slots.get_mut(txn_id) {
            s.pending = Some(Pending::External);
        }
    }

    /// Replays state records (coordinator load, docs/txn-semantics.md §2.8). Entries found in
    /// Prepare* get their completion pending and their markers returned, to
    /// be written again.
    pub fn load(&mut self, records: impl IntoIterator<Item = StateRecord>) -> Vec<MarkerJob> {
        self.slots.clear();
        self.creating.clear();
        for record in records {
            match record {
                StateRecord::Upsert {
                    entry,
                    written_by,
                    unsynced_markers,
                    ..
                } => {
                    let id = entry.transactional_id.clone();
                    self.install(entry);
                    if let Some(slot) = self.slots.get_mut(&id) {
                        slot.written_by = written_by;
                        slot.unsynced = unsynced_markers;
                    }
                }
                StateRecord::Tombstone { transactional_id } => {
                    self.slots.remove(&transactional_id);
                }
            }
        }
        let mut jobs = Vec::new();
        for slot in self.slots.values_mut() {
            if let Some(job) = marker_job(&slot.entry) {
                slot.pending = Some(Pending::Markers(job.clone()));
                jobs.push(job);
            }
        }
        jobs
    }

    /// One record per entry: what a compacted state log holds.
    /// Each record keeps the identity of the policy that made its entry's
    /// last transition (not the one deciding now: a swap may lie between).
    pub fn snapshot(&self) -> Vec<StateRecord> {
        self.slots
            .values()
            .map(|s| {
                StateRecord::upsert(&s.entry, s.written_by.as_deref())
                    .with_unsynced_markers(s.unsynced.clone())
            })
            .collect()
    }

    /// Every entry's markers not known durable (after a load: the ones a
    /// crash may have lost).
    pub fn unsynced_markers(&self) -> Vec<(String, UnsyncedMarkers)> {
        self.slots
            .iter()
            .filter_map(|(id, s)| s.unsynced.clone().map(|m| (id.clone(), m)))
            .collect()
    }

    /// Whether `txn_id`'s last markers are not known durable yet.
    pub fn has_unsynced_markers(&self, txn_id: &str) -> bool {
        self.slots.get(txn_id).is_some_and(|s| s.unsynced.is_some())
    }

    /// `markers` reached the disk: records stop carrying them (unless a
    /// newer set replaced them meanwhile).
    pub fn markers_synced(&mut self, txn_id: &str, markers: &UnsyncedMarkers) {
        if let Some(slot) = self.slots.get_mut(txn_id)
            && slot.unsynced.as_ref() == Some(markers)
        {
            slot.unsynced = None;
        }
    }

    /// InitProducerId (docs/txn-semantics.md §1).
    pub fn init_producer_id(&mut self, req: &InitProducerId, now_ms: i64, candidate: i64) -> Step {
        // F3: a half-set claim is malformed on every path.
        let claim = match (req.producer_id, req.producer_epoch) {
            (-1, -1) => None,
            (-1, _) | (_, -1) => return Step::Done(Answer::error(code::INVALID_REQUEST)),
            (producer_id, producer_epoch) => Some(Claim {
                producer_id,
                producer_epoch,
            }),
        };
        if let Some(id) = &req.transactional_id
            && self.is_pending(id)
        {
            return Step::Done(Answer::error(code::CONCURRENT_TRANSACTIONS));
        }
        let facts = InitRequest {
            transactional_id: req.transactional_id.clone(),
            claim,
            version: req.version,
            timeout_ms: req.timeout_ms,
            candidate_producer_id: candidate,
            tenant: req
                .transactional_id
                .as_deref()
                .map_or(0, |id| self.tenant_of(id)),
            now_ms,
        };
        let current = req
            .transactional_id
            .as_deref()
            .and_then(|id| self.entry(id))
            .cloned();
        let policy = self.policy.current();
        let decision = policy.init_producer_id(current.as_ref(), &facts, self.limits);
        let used = |d: &Decision| {
            d.kind == DecisionKind::NewProducer
                || d.entry
                    .as_ref()
                    .is_some_and(|e| e.producer_id == candidate || e.next_producer_id == candidate)
        };
        match decision {
            Ok(d) => {
                let candidate_used =
                    used(&d) && current.as_ref().is_none_or(|c| c.producer_id != candidate);
                self.plan(&policy, req.transactional_id.as_deref(), d, candidate_used)
            }
            Err(e) => self.policy_failed(&policy, e),
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (docs/txn-semantics.md §2.1–2.2), VerifyOnly included.
    pub fn add_partitions(&mut self, req: &AddPartitionsRequest) -> Step {
        if !req.verify_only && self.is_pending(&req.transactional_id) {
            return Step::Done(Answer::error(code::CONCURRENT_TRANSACTIONS));
        }
        let current = self.entry(&req.transactional_id).cloned();
        let policy = self.policy.current();
        let tenant = self.tenant_of(&req.transactional_id);
        let req = if tenant == req.tenant {
            std::borrow::Cow::Borrowed(req)
        } else {
            std::borrow::Cow::Owned(AddPartitionsRequest {
                tenant,
                ..req.clone()
            })
        };
        match policy.add_partitions(current.as_ref(), &req, self.limits) {
            Ok(d) => self.plan(&policy, Some(&req.transactional_id), d, false),
            Err(e) => self.policy_failed(&policy, e),
        }
    }

    /// EndTxn (docs/txn-semantics.md §2.4). `candidate`: a fresh producer id
    /// for a rotation ([`Self::wants_candidate`]), -1 when none is offered.
    pub fn end_txn(&mut self, req: &EndTxnRequest, candidate: i64) -> Step {
        if self.is_pending(&req.transactional_id) {
            return Step::Done(Answer::error(code::CONCURRENT_TRANSACTIONS));
        }
        let current = self.entry(&req.transactional_id).cloned();
        let policy = self.policy.current();
        let req = EndTxnRequest {
            candidate_producer_id: candidate,
            tenant: self.tenant_of(&req.transactional_id),
            ..req.clone()
        };
        match policy.end_txn(current.as_ref(), &req, self.limits) {
            Ok(d) => {
                let used = candidate >= 0
                    && d.entry
                        .as_ref()
                        .is_some_and(|e| e.next_producer_id == candidate);
                self.plan(&policy, Some(&req.transactional_id), d, used)
            }
            Err(e) => self.policy_failed(&policy, e),
        }
    }

    /// Every marker of `txn_id`'s Prepare* is written: plan the completion.
    /// `unsynced`: the markers, when they are appended but not yet durable
    /// (the completion record and every later one carry them until
    /// [`Self::markers_synced`]).
    pub fn markers_written(
        &mut self,
        txn_id: &str,
        now_ms: i64,
        unsynced: Option<UnsyncedMarkers>,
    ) -> Step {
        let Some(slot) = self.slots.get_mut(txn_id) else {
            return Step::Done(Answer::error(code::NOT_COORDINATOR));
        };
        if unsynced.is_some() {
            slot.unsynced = unsynced;
        }
        if !matches!(slot.pending, Some(Pending::Markers(_))) {
            return Step::Done(Answer::error(code::UNKNOWN_SERVER_ERROR));
        }
        let current = slot.entry.clone();
        let policy = self.policy.current();
        match policy.complete_transaction(&current, now_ms, self.limits) {
            Ok(d) => self.plan(&policy, Some(txn_id), d, false),
            Err(e) => self.policy_failed(&policy, e),
        }
    }

    /// Ongoing entries with nothing in flight: the reaper asks the policy about each.
    pub fn reap_candidates(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter(|(_, s)| s.pending.is_none() && s.entry.state == TxnState::Ongoing)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// transactional.id expiry (docs/txn-semantics.md §2.7): every entry in Empty,
    /// CompleteCommit or CompleteAbort with nothing in flight whose last
    /// update is at least `expiration_ms` old gets its transition pending
    /// (requests answer CONCURRENT_TRANSACTIONS, IT-14) and a tombstone to
    /// persist; [`Self::finish_expiry`] removes it once durable.
    pub fn begin_expiry(&mut self, now_ms: i64, expiration_ms: i64) -> Vec<StateRecord> {
        let mut tombstones = Vec::new();
        for (id, slot) in self.slots.iter_mut() {
            let idle = matches!(
                slot.entry.state,
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
            );
            if idle
                && slot.pending.is_none()
                && slot.unsynced.is_none()
                && slot.entry.last_update_timestamp_ms <= now_ms.saturating_sub(expiration_ms)
            {
                slot.pending = Some(Pending::Append);
                tombstones.push(StateRecord::Tombstone {
                    transactional_id: id.clone(),
                });
            }
        }
        tombstones
    }

    /// The tombstone of `txn_id` was appended (`durable`) or not: the entry
    /// is removed (the id is absent from now on, IT-18), or stays as it was.
    pub fn finish_expiry(&mut self, txn_id: &str, durable: bool) {
        if durable {
            if let Some(slot) = self.slots.remove(txn_id) {
                // begin_expiry chose it idle, and pending it stayed so.
                invariant!(
                    may_follow(slot.entry.state, TxnState::Dead),
                    "{txn_id}: expired in {}, which Dead may not follow",
                    state_name(slot.entry.state)
                );
            }
        } else if let Some(slot) = self.slots.get_mut(txn_id) {
            slot.pending = None;
        }
    }

    /// The timeout reaper's look at one entry (docs/txn-semantics.md §2.6).
    /// `candidate`: a fresh producer id for a rotation, -1 when none.
    pub fn reap(&mut self, txn_id: &str, now_ms: i64, candidate: i64) -> Step {
        let Some(slot) = self.slots.get(txn_id) else {
            return Step::Done(Answer::error(code::NONE));
        };
        if slot.pending.is_some() || slot.entry.state != TxnState::Ongoing {
            return Step::Done(Answer::error(code::NONE));
        }
        let current = slot.entry.clone();
        let policy = self.policy.current();
        let tenant = self.tenant_of(txn_id);
        match policy.reap(&current, now_ms, candidate, tenant, self.limits) {
            Ok(d) => {
                let used = candidate >= 0
                    && d.entry
                        .as_ref()
                        .is_some_and(|e| e.next_producer_id == candidate);
                self.plan(&policy, Some(txn_id), d, used)
            }
            Err(e) => self.policy_failed(&policy, e),
        }
    }

    /// Answers a policy's trap or illegal decision; its log line is
    /// rate-limited per policy (every one is counted in the policy's
    /// `kaas_policy_traps_total` / `kaas_policy_violations_total`).
    fn policy_failed(&self, policy: &Policy, e: crate::policy::PolicyError) -> Step {
        if let Some(suppressed) = policy.stats().may_log() {
            warn!(error = %e, suppressed, "policy decision refused; answering UNKNOWN_SERVER_ERROR");
        }
        Step::Done(Answer::error(code::UNKNOWN_SERVER_ERROR))
    }

    /// `policy`: the one that made `d` (read once for this decision).
    fn plan(
        &mut self,
        policy: &Policy,
        txn_id: Option<&str>,
        d: Decision,
        candidate_used: bool,
    ) -> Step {
        let (Some(entry), Some(txn_id)) = (d.entry, txn_id) else {
            return Step::Done(Answer {
                reply: d.reply,
                partition_errors: d.partition_errors,
                candidate_used,
                kind: Some(d.kind),
                markers: None,
                fence: None,
            });
        };
        let mut unsynced = None;
        if let Some(slot) = self.slots.get_mut(txn_id) {
            slot.pending = Some(Pending::Append);
            unsynced = slot.unsynced.clone();
        } else {
            self.creating.insert(txn_id.to_owned());
        }
        let by = policy.identity().to_string();
        Step::Write(PlannedWrite {
            record: StateRecord::upsert(&entry, Some(&by)).with_unsynced_markers(unsynced),
            kind: d.kind,
            entry,
            on_failure: d.on_append_failure,
            reply: d.reply,
            candidate_used,
            decided_by: by,
        })
    }

    /// Applies a planned write once its append finished (docs/txn-semantics.md §0.5 steps 3–4).
    pub fn finish(&mut self, write: PlannedWrite, outcome: Result<(), AppendError>) -> Answer {
        let txn_id = write.entry.transactional_id.clone();
        self.creating.remove(&txn_id);
        let before = self
            .slots
            .get(&txn_id)
            .map(|s| (s.entry.producer_id, s.entry.producer_epoch, s.entry.state));
        match outcome {
            Ok(()) => {
                applied_edge(&txn_id, before.map(|b| b.2), write.entry.state);
                let markers = marker_job(&write.entry);
                let raised = match before {
                    Some((pid, epoch, _)) => {
                        write.entry.producer_id != pid || write.entry.producer_epoch > epoch
                    }
                    None => true,
                };
                let fence = (raised && write.entry.producer_epoch > 0)
                    .then_some((write.entry.producer_id, write.entry.producer_epoch));
                let pending = markers.clone().map(Pending::Markers);
                let written_by = Some(write.decided_by);
                // Still unsynced unless their flush finished meanwhile.
                // (moved: the slot is replaced just below).
                let unsynced = self.slots.get_mut(&txn_id).and_then(|s| s.unsynced.take());
                self.slots.insert(
                    txn_id,
                    Slot {
                        entry: write.entry,
                        pending,
                        written_by,
                        unsynced,
                    },
                );
                Answer {
                    reply: write.reply,
                    partition_errors: Vec::new(),
                    candidate_used: write.candidate_used,
                    kind: Some(write.kind),
                    markers,
                    fence,
                }
            }
            Err(err) => {
                let code = match err {
                    AppendError::NotEnoughReplicas => code::COORDINATOR_NOT_AVAILABLE,
                    AppendError::NotCoordinator | AppendError::Storage(_) => code::NOT_COORDINATOR,
                };
                if let Some(slot) = self.slots.get_mut(&txn_id) {
                    slot.pending = None;
                    if err == AppendError::NotEnoughReplicas
                        && let Some(keep) = write.on_failure
                    {
                        // The host's check let only the epoch change.
                        invariant!(
                            keep.state == slot.entry.state,
                            "{txn_id}: a failed append's fallback moves {} -> {}",
                            state_name(slot.entry.state),
                            state_name(keep.state)
                        );
                        slot.entry = keep;
                    }
                }
                Answer {
                    candidate_used: write.candidate_used,
                    ..Answer::error(code)
                }
            }
        }
    }
}

/// Asserts that an entry applied in memory moves along an edge of the
/// state machine ([`may_follow`]; Dead is expiry's, never written) or, new,
/// starts Empty: the host's check (`policy::check`) refused every other
/// decision before it was written, and an entry cannot change while its
/// write is in flight (it is pending).
fn applied_edge(txn_id: &str, from: Option<TxnState>, to: TxnState) {
    invariant!(
        to != TxnState::Dead
            && match from {
                Some(from) => may_follow(from, to),
                None => to == TxnState::Empty,
            },
        "{txn_id}: entry applied {} -> {}, not an edge of the transaction state machine",
        from.map_or("(none)", state_name),
        state_name(to)
    );
}

/// The markers a Prepare* entry still needs.
fn marker_job(entry: &Entry) -> Option<MarkerJob> {
    let commit = match entry.state {
        TxnState::PrepareCommit => true,
        TxnState::PrepareAbort => false,
        _ => return None,
    };
    Some(MarkerJob {
        transactional_id: entry.transactional_id.clone(),
        commit,
        producer_id: entry.producer_id,
        producer_epoch: entry.producer_epoch,
        partitions: entry.partitions.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_edge_of_the_state_machine_applies() {
        use TxnState::*;
        applied_edge("t", None, Empty);
        for (from, to) in [
            (Empty, Ongoing),
            (Ongoing, Ongoing),
            (Ongoing, PrepareCommit),
            (Ongoing, PrepareAbort),
            (PrepareCommit, CompleteCommit),
            (PrepareAbort, CompleteAbort),
            (CompleteCommit, Empty),
            (CompleteAbort, Ongoing),
        ] {
            applied_edge("t", Some(from), to);
        }
    }

    #[test]
    #[cfg_attr(
        not(any(debug_assertions, feature = "fault-injection")),
        ignore = "unchecked build"
    )]
    #[should_panic(expected = "t: entry applied Ongoing -> Empty, not an edge")]
    fn applying_a_state_off_the_machine_breaks_an_invariant() {
        applied_edge("t", Some(TxnState::Ongoing), TxnState::Empty);
    }

    #[test]
    #[cfg_attr(
        not(any(debug_assertions, feature = "fault-injection")),
        ignore = "unchecked build"
    )]
    #[should_panic(expected = "t: entry applied (none) -> Ongoing")]
    fn a_new_entry_not_empty_breaks_an_invariant() {
        applied_edge("t", None, TxnState::Ongoing);
    }

    #[test]
    #[cfg_attr(
        not(any(debug_assertions, feature = "fault-injection")),
        ignore = "unchecked build"
    )]
    #[should_panic(expected = "t: entry applied Empty -> Dead")]
    fn a_written_dead_entry_breaks_an_invariant() {
        applied_edge("t", Some(TxnState::Empty), TxnState::Dead);
    }
}
