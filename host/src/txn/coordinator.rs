//! The transaction coordinator as the broker runs it: the policy-driven
//! [`TxnMachine`], its durable [`TxnStore`], and the side effects of each
//! durable decision — the in-process fence ring (raise the pid's epoch and
//! clear its dedupe window on every partition this broker leads) and the
//! COMMIT/ABORT markers, after which the completion is persisted.
//!
//! Order of every transition: decide (policy, checked) → persist the state
//! record (fsync) → apply in memory → fence → answer → markers → persist
//! the completion. Nothing is answered before it is durable.
//!
//! Markers off the critical path: a transaction's markers are appended,
//! then its completion is recorded (unsynced) and applied at once, while
//! the markers' fdatasync runs; the client's next transaction does not wait
//! for it. Until it finishes, every record of the entry carries the
//! markers' partitions and offsets ([`UnsyncedMarkers`]). A crash can lose
//! a marker only together with everything after it in that partition's
//! file, so at load a partition whose log ends at or before its marker's
//! offset gets the marker again ([`Coordinator::resume`]); one that ends
//! after it has it. The next transaction's markers wait for the previous
//! ones' flush, so an entry has one such set at a time. A transaction that
//! wrote consumer offsets keeps the old order (its offsets journal entry is
//! durable before the completion), as does the high watermark: consumers see
//! a marker only once it is durable.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::machine::{Answer, AppendError, InitProducerId, MarkerJob, Step, TxnMachine};
use super::record::UnsyncedMarkers;
use super::store::TxnStore;
use crate::broker::Broker;
use crate::clock::now_ms;
use crate::fault;
use crate::policy::{AddPartitionsRequest, EndTxnRequest, Reply, TopicPartition};

/// Error codes the coordinator maps to.
mod code {
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const INVALID_TXN_STATE: i16 = 48;
}

/// The coordinator.
#[derive(Debug)]
pub struct Coordinator {
    machine: Mutex<TxnMachine>,
    store: TxnStore,
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
        store: TxnStore,
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

    /// The durable state log.
    pub fn store(&self) -> &TxnStore {
        &self.store
    }

    /// The state machine (short critical sections only; never held across an await).
    pub fn machine(&self) -> MutexGuard<'_, TxnMachine> {
        self.machine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a load: appends again every marker a crash lost (see the
    /// module docs), then finishes the markers of transactions found
    /// Prepare*. The repairs come first: a Prepare* transaction's markers
    /// go after the previous transaction's in the same partitions.
    pub fn resume(self: &Arc<Self>, broker: &Arc<Broker>) {
        // Whatever a loaded record names as unsynced may have been lost.
        let unsynced = self.machine().unsynced_markers();
        let jobs = std::mem::take(&mut *self.recovered.lock().unwrap_or_else(|p| p.into_inner()));
        // Appended here, before the broker answers anyone, so no new batch
        // can land where a lost marker belongs.
        let repaired: Vec<_> = unsynced
            .into_iter()
            .map(|(txn_id, markers)| {
                let appended = repair_markers(broker, &txn_id, &markers);
                (txn_id, markers, appended)
            })
            .collect();
        let broker = broker.clone();
        let me = self.clone();
        tokio::spawn(async move {
            for (txn_id, markers, (files, written)) in repaired {
                sync_unsynced(&broker, &me, &txn_id, &markers, files, written).await;
            }
            for job in jobs {
                tracing::info!(txn = %job.transactional_id, commit = job.commit, "finishing markers found at load");
                tokio::spawn(write_markers(broker.clone(), me.clone(), job));
            }
        });
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
    async fn resolve(self: &Arc<Self>, broker: &Arc<Broker>, step: Step) -> Answer {
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
                    tracing::error!(error = %e, "transaction state append failed");
                    AppendError::Storage(e.to_string())
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
            fence_ring(broker, pid, epoch);
        }
        if let Some(job) = answer.markers.clone() {
            tokio::spawn(write_markers(broker.clone(), self.clone(), job));
        }
        answer
    }

    /// InitProducerId (both paths).
    pub async fn init_producer_id(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        req: &InitProducerId,
    ) -> Reply {
        if let Some(id) = &req.transactional_id {
            self.await_markers(id).await;
        }
        // Allocated up front: two concurrent InitProducerIds must never be
        // offered the same candidate. An unused candidate is skipped.
        let candidate = match broker.producer_ids.allocate().await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "reserving producer ids failed");
                return Reply {
                    error_code: code::COORDINATOR_NOT_AVAILABLE,
                    producer_id: -1,
                    producer_epoch: -1,
                };
            }
        };
        let step = self.machine().init_producer_id(req, now_ms(), candidate);
        let answer = self.resolve(broker, step).await;
        answer.reply
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the error and per-partition codes.
    pub async fn add_partitions(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        req: &AddPartitionsRequest,
    ) -> (i16, Vec<i16>) {
        if !req.verify_only {
            self.await_markers(&req.transactional_id).await;
        }
        let step = self.machine().add_partitions(req);
        let a = self.resolve(broker, step).await;
        (a.reply.error_code, a.partition_errors)
    }

    /// EndTxn.
    pub async fn end_txn(self: &Arc<Self>, broker: &Arc<Broker>, req: &EndTxnRequest) -> i16 {
        self.await_markers(&req.transactional_id).await;
        let step = self.machine().end_txn(req);
        self.resolve(broker, step).await.reply.error_code
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
            now_ms: now_ms(),
        };
        let Step::Done(a) = self.machine().add_partitions(&req) else {
            return (0, code::INVALID_TXN_STATE);
        };
        let partition = a
            .partition_errors
            .first()
            .copied()
            .unwrap_or(code::INVALID_TXN_STATE);
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
    pub async fn reap(self: &Arc<Self>, broker: &Arc<Broker>) -> usize {
        let ids = self.machine().reap_candidates();
        let mut aborted = 0;
        for id in ids {
            let step = self.machine().reap(&id, now_ms());
            if matches!(step, Step::Write(_)) {
                aborted += 1;
            }
            self.resolve(broker, step).await;
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

    /// transactional.id expiry (spec §2.7): tombstones for ids idle longer
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

    /// Runs the reaper every `every` until the process ends.
    pub async fn run_reaper(broker: Arc<Broker>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let mut n = 0;
            for c in broker.txn.all() {
                n += c.reap(&broker).await;
            }
            if n > 0 {
                tracing::info!(aborted = n, "timed-out transactions aborted");
            }
        }
    }
}

/// The in-process fence ring: raise `pid`'s epoch and clear its dedupe
/// window on every partition this broker leads, so a zombie's batches are
/// refused even where the new session never wrote.
pub fn fence_ring(broker: &Broker, producer_id: i64, epoch: i16) {
    let mut fenced = 0;
    for t in broker.logs.topics() {
        for p in &t.open_partitions() {
            if p.fence_producer(producer_id, epoch) {
                fenced += 1;
            }
        }
    }
    tracing::debug!(producer_id, epoch, fenced, "fence ring");
    // The other brokers' partitions (cluster::fences).
    broker.fences.broadcast(producer_id, epoch);
}

/// Waits for every journal write; the first failure's code, if any.
async fn wait_all(writes: Vec<crate::group::coordinator::Durable>) -> Option<i16> {
    let mut failed = None;
    for w in writes {
        if let Err(code) = w.wait().await {
            failed.get_or_insert(code);
        }
    }
    failed
}

/// Writes a transaction's markers to every partition, then records the
/// completion. With consumer offsets in the transaction the markers and the
/// offsets journal are durable first; otherwise the completion carries the
/// markers as unsynced and their fdatasync follows (module docs). Retries
/// storage errors.
fn write_markers(
    broker: Arc<Broker>,
    coord: Arc<Coordinator>,
    job: MarkerJob,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        if !broker.cluster.is_local() {
            if super::remote_markers::write_everywhere(&broker, &coord, &job).await {
                let step = coord
                    .machine()
                    .markers_written(&job.transactional_id, now_ms(), None);
                let a = coord.resolve(&broker, step).await;
                coord.completed.notify_waiters();
                if a.reply.error_code != 0 {
                    tracing::error!(txn = %job.transactional_id, code = a.reply.error_code, "completing the transaction failed");
                }
            }
            return;
        }
        // One set of unsynced markers per entry: the previous transaction's first.
        coord.await_synced(&job.transactional_id).await;
        let offsets_too = job
            .partitions
            .iter()
            .any(|tp| tp.topic == crate::group::offsets_topic::OFFSETS_TOPIC);
        let mut pending: Vec<TopicPartition> = job.partitions.clone();
        let mut delay = Duration::from_millis(10);
        // Appended, not yet durable (only without offsets): marker offsets,
        // files, and where each partition's high watermark goes once synced.
        let mut marker_offsets = Vec::new();
        let mut later_files = Vec::new();
        let mut later_written = Vec::new();
        while !pending.is_empty() {
            let mut files = Vec::new();
            let mut written = Vec::new();
            let mut retry = Vec::new();
            let mut offsets = Vec::new();
            for tp in pending.drain(..) {
                if tp.topic == crate::group::offsets_topic::OFFSETS_TOPIC {
                    match broker
                        .groups
                        .complete_txn(job.producer_id, tp.partition, job.commit)
                    {
                        Ok(Some(d)) => offsets.push(d),
                        Ok(None) => {}
                        Err(e) => {
                            tracing::error!(partition = tp.partition, error = %e, "journaling transactional offsets failed; retrying");
                            retry.push(tp);
                        }
                    }
                    continue;
                }
                let Some(part) = broker.logs.partition(&tp.topic, tp.partition) else {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, "marker for a partition that no longer exists; skipped");
                    continue;
                };
                match part.append_marker(
                    job.producer_id,
                    job.producer_epoch,
                    job.commit,
                    0,
                    now_ms(),
                ) {
                    Ok(a) => {
                        if let Some(f) = a.file {
                            if written.is_empty()
                                && job.partitions.len() > 1
                                && cfg!(feature = "fault-injection")
                            {
                                // Crash with one marker durable and the rest unwritten.
                                let _ = f.sync_data();
                                fault::point("markers-half-written");
                            }
                            files.push(f);
                        }
                        marker_offsets.push((tp, a.base_offset));
                        written.push((part, a.end_offset));
                    }
                    Err(crate::log::partition::AppendError::Producer(_)) => {
                        tracing::warn!(topic = %tp.topic, partition = tp.partition, "the partition holds a newer epoch; marker skipped");
                    }
                    Err(e) => {
                        tracing::error!(topic = %tp.topic, partition = tp.partition, error = %e, "marker append failed; retrying");
                        retry.push(tp);
                    }
                }
            }
            if offsets_too {
                // The offsets journal's fsync runs in the same group-commit round.
                let (synced, offsets_synced) = tokio::join!(
                    broker.logs.group_commit().sync_all(files),
                    wait_all(offsets)
                );
                if let Some(code) = offsets_synced {
                    tracing::error!(
                        code,
                        "offsets journal fsync failed; the transactional offsets stand unsynced"
                    );
                }
                markers_durable(&broker, synced, written);
            } else {
                later_files.extend(files);
                later_written.extend(written);
            }
            if !retry.is_empty() {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            pending = retry;
        }
        let unsynced = (!offsets_too && !marker_offsets.is_empty()).then_some(UnsyncedMarkers {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            commit: job.commit,
            markers: marker_offsets,
        });
        let step =
            coord
                .machine()
                .markers_written(&job.transactional_id, now_ms(), unsynced.clone());
        let a = coord.resolve(&broker, step).await;
        coord.completed.notify_waiters();
        if a.reply.error_code != 0 {
            tracing::error!(txn = %job.transactional_id, code = a.reply.error_code, "completing the transaction failed");
        }
        if let Some(markers) = unsynced {
            sync_unsynced(
                &broker,
                &coord,
                &job.transactional_id,
                &markers,
                later_files,
                later_written,
            )
            .await;
        }
    })
}

/// Makes `markers` (appended to `files`) durable, lets consumers read up to
/// them, and stops naming them in the entry's records.
async fn sync_unsynced(
    broker: &Arc<Broker>,
    coord: &Coordinator,
    txn_id: &str,
    markers: &UnsyncedMarkers,
    files: Vec<Arc<std::fs::File>>,
    written: Vec<(Arc<crate::log::Partition>, i64)>,
) {
    let synced = broker.logs.group_commit().sync_lazily(files).await;
    markers_durable(broker, synced, written);
    coord.machine().markers_synced(txn_id, markers);
    coord.synced.notify_waiters();
}

/// After the markers' fdatasync: consumers may read up to them.
fn markers_durable(
    broker: &Broker,
    synced: std::io::Result<()>,
    written: Vec<(Arc<crate::log::Partition>, i64)>,
) {
    match synced {
        Ok(()) => {
            for (part, end) in written {
                part.advance_high_watermark(end);
            }
            broker.data_ready.notify_waiters();
        }
        Err(e) => {
            tracing::error!(error = %e, "marker fsync failed; rewriting is not possible, the markers stand unsynced");
        }
    }
}

/// At load: appends `markers`' marker again to every partition whose log
/// ends at or before it (lost in a crash with everything after it); returns
/// the files to sync and where each high watermark goes.
#[allow(clippy::type_complexity)]
fn repair_markers(
    broker: &Broker,
    txn_id: &str,
    markers: &UnsyncedMarkers,
) -> (
    Vec<Arc<std::fs::File>>,
    Vec<(Arc<crate::log::Partition>, i64)>,
) {
    let mut files = Vec::new();
    let mut written = Vec::new();
    for (tp, offset) in &markers.markers {
        let Some(part) = broker.logs.partition(&tp.topic, tp.partition) else {
            continue;
        };
        let end = part.log_end_offset();
        if end > *offset {
            continue; // the marker made it
        }
        tracing::warn!(txn = %txn_id, topic = %tp.topic, partition = tp.partition, marker_offset = offset, log_end = end, commit = markers.commit, "a marker was lost in a crash; appending it again");
        match part.append_marker(
            markers.producer_id,
            markers.producer_epoch,
            markers.commit,
            0,
            now_ms(),
        ) {
            Ok(a) => {
                files.extend(a.file);
                written.push((part, a.end_offset));
            }
            Err(e) => {
                tracing::error!(topic = %tp.topic, partition = tp.partition, error = %e, "appending a lost marker again failed");
            }
        }
    }
    (files, written)
}
