//! The transaction coordinator as the broker runs it: the policy-driven
//! [`TxnMachine`], its durable [`TxnStore`], and the side effects of each
//! durable decision — the in-process fence ring (raise the pid's epoch and
//! clear its dedupe window on every partition this broker leads) and the
//! COMMIT/ABORT markers, after which the completion is persisted.
//!
//! Its collaborators come through the ports of [`super::port`] (an
//! `Arc<dyn CoordinatorPorts>` each call takes, and the [`StateLog`] it
//! owns); it never sees the broker.
//!
//! Order of every transition: decide (policy, checked) → persist the state
//! record (fsync) → apply in memory → fence → answer → markers → persist
//! the completion. Nothing is answered before it is durable.
//!
//! Markers off the critical path: a transaction's markers are appended,
//! then its completion is recorded (unsynced) and applied at once, while
//! the markers' fdatasync runs; the client's next transaction does not wait
//! for it. Until it finishes, every record of the entry carries the
//! markers' partitions and offsets ([`UnsyncedMarkers`]). The shortcut is
//! the local marker writer's ([`MarkerSink::append_here`]) and only taken
//! where [`LeaderView::defers_marker_sync`] says so (single-node mode).
//! A crash can lose
//! a marker only together with everything after it in that partition's
//! file, so at load a partition whose log ends at or before its marker's
//! offset gets the marker again ([`Coordinator::resume`]); one that ends
//! after it has it. The next transaction's markers wait for the previous
//! ones' flush, so an entry has one such set at a time. A transaction that
//! wrote consumer offsets keeps the old order (its offsets journal entry is
//! durable before the completion), as does the high watermark: consumers see
//! a marker only once it is durable.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::machine::{Answer, AppendError, InitProducerId, MarkerJob, Step, TxnMachine};
use super::marker_routing::MarkerVerdict;
use super::port::{BoxFuture, CoordinatorPorts, MarkerSet, StateLog, Unflushed};
use super::record::UnsyncedMarkers;
use crate::clock::now_ms;
use crate::codes;
use crate::fault;
use crate::group::offsets_topic::OFFSETS_TOPIC;
use crate::policy::{AddPartitionsRequest, EndTxnRequest, Reply, TopicPartition};

/// The coordinator.
#[derive(Debug)]
pub struct Coordinator {
    machine: Mutex<TxnMachine>,
    store: Box<dyn StateLog>,
    /// Marker jobs found Prepare* at load, to finish once the broker runs.
    recovered: Mutex<Vec<MarkerJob>>,
    /// Woken whenever a transaction's completion is durable.
    completed: tokio::sync::Notify,
    /// Woken whenever a transaction's markers become durable.
    synced: tokio::sync::Notify,
    /// transactional.id.expiration.ms.
    expiration_ms: i64,
    /// The coordinator epoch its markers carry: the shard's leader epoch in
    /// cluster mode, 0 in single-node mode.
    coordinator_epoch: i32,
}

/// How long a request waits for a transaction's markers before it is
/// answered CONCURRENT_TRANSACTIONS, as Kafka would answer at once.
const MARKER_WAIT: Duration = Duration::from_millis(500);

impl Coordinator {
    /// A coordinator over `machine`, loaded from `store`'s records, that
    /// expires transactional ids idle for `expiration_ms`.
    pub fn new(
        mut machine: TxnMachine,
        store: Box<dyn StateLog>,
        records: Vec<super::record::StateRecord>,
        expiration_ms: i64,
        coordinator_epoch: i32,
    ) -> Self {
        let jobs = machine.load(records);
        Coordinator {
            machine: Mutex::new(machine),
            store,
            recovered: Mutex::new(jobs),
            completed: tokio::sync::Notify::new(),
            synced: tokio::sync::Notify::new(),
            expiration_ms: expiration_ms.max(0),
            coordinator_epoch,
        }
    }

    /// The coordinator epoch its markers carry.
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// This broker no longer coordinates the shard: every later write of
    /// this coordinator fails, and its marker writers stop.
    pub fn retire(&self) {
        self.store.retire();
    }

    /// Whether [`Self::retire`] was called.
    pub fn is_retired(&self) -> bool {
        self.store.is_retired()
    }

    /// The state machine (short critical sections only; never held across an await).
    pub fn machine(&self) -> MutexGuard<'_, TxnMachine> {
        self.machine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a load: appends again every marker a crash lost (see the
    /// module docs), then finishes the markers of transactions found
    /// Prepare*. The repairs come first: a Prepare* transaction's markers
    /// go after the previous transaction's in the same partitions.
    pub fn resume(self: &Arc<Self>, host: &Arc<dyn CoordinatorPorts>) {
        // Whatever a loaded record names as unsynced may have been lost.
        let unsynced = self.machine().unsynced_markers();
        let jobs = std::mem::take(&mut *self.recovered.lock().unwrap_or_else(|p| p.into_inner()));
        // Appended here, before the broker answers anyone, so no new batch
        // can land where a lost marker belongs.
        let repaired: Vec<_> = unsynced
            .into_iter()
            .map(|(txn_id, markers)| {
                let flush = host.repair(&txn_id, &markers);
                (txn_id, markers, flush)
            })
            .collect();
        let host = host.clone();
        let me = self.clone();
        tokio::spawn(async move {
            for (txn_id, markers, flush) in repaired {
                flush.await;
                me.markers_synced(&txn_id, &markers);
            }
            for job in jobs {
                tracing::info!(txn = %job.transactional_id, commit = job.commit, "finishing markers found at load");
                tokio::spawn(write_markers(host.clone(), me.clone(), job));
            }
        });
    }

    /// `txn_id`'s unsynced `markers` are durable: its records stop naming them.
    fn markers_synced(&self, txn_id: &str, markers: &UnsyncedMarkers) {
        self.machine().markers_synced(txn_id, markers);
        self.synced.notify_waiters();
    }

    /// Waits until `txn_id`'s previous markers are durable.
    async fn await_synced(&self, txn_id: &str) {
        loop {
            let notified = self.synced.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.machine().has_unsynced_markers(txn_id) {
                return;
            }
            notified.await;
        }
    }

    /// Waits (bounded) while `txn_id`'s markers are being written, so a
    /// client's next request is decided on the completed entry instead of
    /// bouncing off CONCURRENT_TRANSACTIONS and backing off. The decision
    /// itself is unchanged: after the wait the policy decides as usual.
    async fn await_markers(&self, txn_id: &str) {
        let deadline = tokio::time::Instant::now() + MARKER_WAIT;
        loop {
            let notified = self.completed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.machine().awaiting_markers(txn_id) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Persists a planned write (if any), applies it, runs side effects.
    async fn resolve(self: &Arc<Self>, host: &Arc<dyn CoordinatorPorts>, step: Step) -> Answer {
        let answer = match step {
            Step::Done(a) => a,
            Step::Write(w) => {
                let kind = w.kind;
                let appended = if kind == crate::policy::DecisionKind::Complete {
                    // Markers are durable already: see txn::store's docs.
                    self.store.append_unsynced(&w.record)
                } else {
                    self.store.append(&w.record).await
                };
                let outcome = appended.map_err(|e| {
                    if crate::lease_gate::is_closed(&e) {
                        tracing::info!(error = %e, "the shard moved; transaction state not appended");
                        AppendError::NotCoordinator
                    } else {
                        tracing::error!(error = %e, "transaction state append failed");
                        AppendError::Storage(e.to_string())
                    }
                });
                // Durable, not yet applied or answered: the KAFKA-20357 window.
                fault::point(
                    &format!("after-append-{kind:?}")
                        .to_lowercase()
                        .replace("decisionkind::", ""),
                );
                self.machine().finish(w, outcome)
            }
        };
        if let Some((pid, epoch)) = answer.fence {
            host.fence(pid, epoch);
        }
        if let Some(job) = answer.markers.clone() {
            tokio::spawn(write_markers(host.clone(), self.clone(), job));
        }
        answer
    }

    /// Records `job`'s completion once its markers are written (and, with
    /// `unsynced`, before they are durable).
    async fn complete(
        self: &Arc<Self>,
        host: &Arc<dyn CoordinatorPorts>,
        job: &MarkerJob,
        unsynced: Option<UnsyncedMarkers>,
    ) {
        let step = self
            .machine()
            .markers_written(&job.transactional_id, now_ms(), unsynced);
        let a = self.resolve(host, step).await;
        self.completed.notify_waiters();
        if a.reply.error_code != 0 {
            tracing::error!(txn = %job.transactional_id, code = a.reply.error_code, "completing the transaction failed");
        }
    }

    /// InitProducerId (both paths).
    pub async fn init_producer_id(
        self: &Arc<Self>,
        host: &Arc<dyn CoordinatorPorts>,
        req: &InitProducerId,
    ) -> Reply {
        if let Some(id) = &req.transactional_id {
            self.await_markers(id).await;
        }
        // Allocated up front: two concurrent InitProducerIds must never be
        // offered the same candidate. An unused candidate is skipped.
        let candidate = match host.allocate().await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "reserving producer ids failed");
                return Reply {
                    error_code: codes::COORDINATOR_NOT_AVAILABLE,
                    producer_id: -1,
                    producer_epoch: -1,
                };
            }
        };
        let step = self.machine().init_producer_id(req, now_ms(), candidate);
        let answer = self.resolve(host, step).await;
        answer.reply
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the error and per-partition codes.
    pub async fn add_partitions(
        self: &Arc<Self>,
        host: &Arc<dyn CoordinatorPorts>,
        req: &AddPartitionsRequest,
    ) -> (i16, Vec<i16>) {
        if !req.verify_only {
            self.await_markers(&req.transactional_id).await;
        }
        let step = self.machine().add_partitions(req);
        let a = self.resolve(host, step).await;
        (a.reply.error_code, a.partition_errors)
    }

    /// EndTxn.
    pub async fn end_txn(
        self: &Arc<Self>,
        host: &Arc<dyn CoordinatorPorts>,
        req: &EndTxnRequest,
    ) -> i16 {
        self.await_markers(&req.transactional_id).await;
        let candidate = match self.candidate_for(host, &req.transactional_id).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        let step = self.machine().end_txn(req, candidate);
        self.resolve(host, step).await.reply.error_code
    }

    /// A fresh producer id when a decision about `txn_id` may rotate (its
    /// epoch is exhausted), else -1: ids are allocated only where a policy
    /// can use one.
    async fn candidate_for(
        &self,
        host: &Arc<dyn CoordinatorPorts>,
        txn_id: &str,
    ) -> Result<i64, i16> {
        if !self.machine().wants_candidate(txn_id) {
            return Ok(-1);
        }
        host.allocate().await.map_err(|e| {
            tracing::error!(error = %e, "reserving producer ids failed");
            codes::COORDINATOR_NOT_AVAILABLE
        })
    }

    /// The VerifyOnly check of one partition: the coordinator's code and,
    /// when that is NONE, the partition's (0 = in the transaction).
    fn verify_only(
        &self,
        txn_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: TopicPartition,
    ) -> (i16, i16) {
        let req = AddPartitionsRequest {
            transactional_id: txn_id.into(),
            producer_id,
            producer_epoch,
            partitions: vec![tp],
            version: 4,
            verify_only: true,
            source: crate::policy::AddSource::AddPartitions,
            tenant: 0,
            now_ms: now_ms(),
        };
        let Step::Done(a) = self.machine().add_partitions(&req) else {
            return (0, codes::INVALID_TXN_STATE);
        };
        let partition = a
            .partition_errors
            .first()
            .copied()
            .unwrap_or(codes::INVALID_TXN_STATE);
        (a.reply.error_code, partition)
    }

    /// The VerifyOnly answer for one partition: 0 when (pid, epoch) of
    /// `txn_id` has `tp` in its ongoing transaction, else the coordinator's
    /// code or, when that is NONE, the partition's (mapped by
    /// [`super::route::produce_code`] / [`super::route::offsets_code`]).
    pub fn verify_only_code(
        &self,
        txn_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: TopicPartition,
    ) -> i16 {
        match self.verify_only(txn_id, producer_id, producer_epoch, tp) {
            (0, p) => p,
            (c, _) => c,
        }
    }

    /// One reaper pass: every overdue Ongoing transaction is fenced and aborted.
    pub async fn reap(self: &Arc<Self>, host: &Arc<dyn CoordinatorPorts>) -> usize {
        let ids = self.machine().reap_candidates();
        let mut aborted = 0;
        for id in ids {
            let Ok(candidate) = self.candidate_for(host, &id).await else {
                continue;
            };
            let step = self.machine().reap(&id, now_ms(), candidate);
            if matches!(step, Step::Write(_)) {
                aborted += 1;
            }
            self.resolve(host, step).await;
        }
        self.expire().await;
        if self.store.compaction_worth_checking() {
            let live = self.machine().snapshot();
            if let Err(e) = self.store.maybe_compact(&live) {
                tracing::error!(error = %e, "compacting the transaction state log failed");
            }
        }
        aborted
    }

    /// transactional.id expiry (docs/txn-semantics.md §2.7): tombstones for ids idle longer
    /// than `transactional.id.expiration.ms`, each removed once durable.
    async fn expire(&self) {
        let tombstones = self.machine().begin_expiry(now_ms(), self.expiration_ms);
        for t in tombstones {
            let id = t.transactional_id().to_string();
            let durable = match self.store.append(&t).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(txn = %id, error = %e, "appending an expiry tombstone failed");
                    false
                }
            };
            self.machine().finish_expiry(&id, durable);
            if durable {
                tracing::info!(txn = %id, "transactional.id expired");
            }
        }
    }
}

/// Writes a transaction's markers to every partition, then records the
/// completion. Where the leader view allows it and no consumer offsets are
/// in the transaction, the completion carries the markers as unsynced and
/// their fdatasync follows (module docs); otherwise every marker (and the
/// offsets journal) is durable first, wherever it is led.
fn write_markers(
    host: Arc<dyn CoordinatorPorts>,
    coord: Arc<Coordinator>,
    job: MarkerJob,
) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        // One set of unsynced markers per entry: the previous transaction's first.
        coord.await_synced(&job.transactional_id).await;
        let offsets_too = job.partitions.iter().any(|tp| tp.topic == OFFSETS_TOPIC);
        if offsets_too || !host.defers_marker_sync() {
            let retired = || coord.is_retired();
            if super::marker_routing::write_everywhere(
                &host,
                &job,
                coord.coordinator_epoch,
                retired,
            )
            .await
            {
                coord.complete(&host, &job, None).await;
            }
            return;
        }
        let mut pending: Vec<TopicPartition> = job.partitions.clone();
        let mut backoff = super::marker_routing::MARKER_RETRY;
        let mut marker_offsets = Vec::new();
        let mut flushes = Vec::new();
        while !pending.is_empty() {
            let set = MarkerSet {
                producer_id: job.producer_id,
                producer_epoch: job.producer_epoch,
                commit: job.commit,
                coordinator_epoch: coord.coordinator_epoch,
                partitions: std::mem::take(&mut pending),
            };
            let Unflushed { results, flush } = host.append_here(&set);
            flushes.push(flush);
            let mut retry = Vec::new();
            for (tp, result) in results {
                match result {
                    Ok(offset) => marker_offsets.push((tp, offset)),
                    // Single node: coordinator epoch 0, nothing can fence it.
                    Err(code) => match super::marker_routing::verdict(&*host, &tp, code) {
                        MarkerVerdict::Written | MarkerVerdict::Skip | MarkerVerdict::Fenced => {}
                        MarkerVerdict::Retry => retry.push(tp),
                    },
                }
            }
            if !retry.is_empty() {
                tokio::time::sleep(backoff.failed()).await;
            }
            pending = retry;
        }
        let unsynced = (!marker_offsets.is_empty()).then_some(UnsyncedMarkers {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            commit: job.commit,
            markers: marker_offsets,
        });
        coord.complete(&host, &job, unsynced.clone()).await;
        for flush in flushes {
            flush.await;
        }
        if let Some(markers) = unsynced {
            coord.markers_synced(&job.transactional_id, &markers);
        }
    })
}
