//! The partition leader's side of a transaction's completion: a
//! coordinator's COMMIT/ABORT markers applied to the partitions this broker
//! has open, each answered with the Kafka error code once the marker is
//! durable here. It is the one local marker writer: WriteTxnMarkers (API
//! 27) calls it for a remote coordinator, and this broker's own coordinator
//! calls it (through its [`super::port::MarkerSink`]) for the partitions it
//! leads, in both modes.
//!
//! It touches the partition logs (`Partition::append_marker`, which checks
//! the producer and coordinator epochs under the partition lock), the group
//! shards (a `__consumer_offsets` marker completes a producer's pending
//! transactional offsets; kaas keeps no log for that topic) and the group
//! commit, all through [`LeaderSide`]. Nothing is answered 0 before it is
//! durable and the write gate is still open. [`append_unsynced`] is the
//! single-node shortcut: the markers are appended and their fdatasync is
//! handed back to run after the transaction's completion.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use tokio::sync::Notify;

pub use super::port::MarkerSet;
use super::port::{Flush, Unflushed};
use super::record::UnsyncedMarkers;
use crate::codes;
use crate::group::coordinator::Durable;
use crate::log::partition::AppendError;
use crate::log::producer::ProducerError;
use crate::log::{GroupCommit, Partition};
use crate::policy::TopicPartition;

/// What a partition leader writes markers into (the broker implements it).
pub trait LeaderSide: Send + Sync {
    /// Partition `p` of `topic`, if it is open here.
    fn partition(&self, topic: &str, p: i32) -> Option<Arc<Partition>>;

    /// The code for a partition not open here.
    fn not_here(&self, topic: &str, p: i32) -> i16;

    /// Completes `producer_id`'s pending transactional offsets on offsets
    /// partition `partition`: the journal write to wait for, if any.
    fn complete_offsets(
        &self,
        producer_id: i64,
        partition: i32,
        commit: bool,
    ) -> io::Result<Option<Durable>>;

    /// The flusher of the partition files.
    fn group_commit(&self) -> &Arc<GroupCommit>;

    /// Woken when a high watermark advances.
    fn data_ready(&self) -> &Arc<Notify>;
}

/// Kafka's partitions of `__consumer_offsets` (and of kaas's group shards).
const OFFSETS_PARTITIONS: i32 = crate::group::shards::CLUSTER_SHARDS as i32;

/// The Kafka error code of a refused marker append.
pub fn marker_error_code(e: &AppendError) -> i16 {
    match e {
        AppendError::Producer(ProducerError::CoordinatorFenced) => {
            codes::TRANSACTION_COORDINATOR_FENCED
        }
        AppendError::Producer(ProducerError::StaleEpoch) => codes::INVALID_PRODUCER_EPOCH,
        AppendError::Producer(_) => codes::INVALID_TXN_STATE,
        AppendError::NotLeader => codes::NOT_LEADER_OR_FOLLOWER,
        AppendError::Batch(_) | AppendError::Io(_) => codes::KAFKA_STORAGE_ERROR,
    }
}

/// The code of a failed `complete_txn` on a group shard: a closed lease
/// gate (the shard moved, or is not open here) sends the coordinator to
/// the shard's new leader; anything else is the disk's.
pub fn offsets_error_code(e: &io::Error) -> i16 {
    if crate::lease_gate::is_closed(e) {
        codes::NOT_COORDINATOR
    } else {
        codes::KAFKA_STORAGE_ERROR
    }
}

/// What became of one partition before the sync.
enum Step {
    /// Decided: this code.
    Done(i16),
    /// Appended to the partition at the first offset, up to the second;
    /// durable after the sync.
    Appended(Arc<Partition>, i64, i64),
    /// The offsets journal write to wait for.
    Offsets(Durable),
}

/// One set's markers appended (or decided), not yet durable.
struct Pending {
    /// Per partition of the set, its answer once known.
    codes: Vec<Option<i16>>,
    /// (index, index of the first entry naming the same partition).
    repeats: Vec<(usize, usize)>,
    /// (index, partition, marker offset, log end after the marker).
    appended: Vec<(usize, Arc<Partition>, i64, i64)>,
    /// (index, offsets journal write).
    journal: Vec<(usize, Durable)>,
}

/// Applies `set` to every partition it names that this broker has open;
/// per partition (in `set`'s order) the Kafka error code once the marker
/// is durable here (0 = written and durable). All markers are appended
/// first, then made durable in one group-commit round (with the offsets
/// journal's writes alongside); a partition named twice gets one marker
/// and the same answer.
pub async fn write_here(host: &dyn LeaderSide, set: &MarkerSet) -> Vec<(TopicPartition, i16)> {
    let codes = write_all_here(host, std::slice::from_ref(set))
        .await
        .pop()
        .unwrap_or_default();
    set.partitions.iter().cloned().zip(codes).collect()
}

/// [`write_here`] for several sets: appended in order (a producer's
/// markers land in the order given), then made durable in one round. Per
/// set, per partition, the code.
pub async fn write_all_here(host: &dyn LeaderSide, sets: &[MarkerSet]) -> Vec<Vec<i16>> {
    let now = crate::clock::now_ms();
    let mut files = Vec::new();
    let mut pending: Vec<Pending> = sets
        .iter()
        .map(|set| append_set(host, set, now, &mut files, Mode::Durable))
        .collect();
    let sync = async {
        if files.is_empty() {
            Ok(())
        } else {
            host.group_commit().sync_all(files).await
        }
    };
    let journal: Vec<(usize, usize, Durable)> = pending
        .iter_mut()
        .enumerate()
        .flat_map(|(s, p)| {
            std::mem::take(&mut p.journal)
                .into_iter()
                .map(move |(i, d)| (s, i, d))
        })
        .collect();
    let offsets = async {
        let mut done = Vec::with_capacity(journal.len());
        for (s, i, d) in journal {
            done.push((s, i, d.wait().await.err().unwrap_or(codes::NONE)));
        }
        done
    };
    let (synced, offsets) = tokio::join!(sync, offsets);
    for (s, i, code) in offsets {
        if let Some(p) = pending.get_mut(s) {
            put(&mut p.codes, i, code);
        }
    }
    if let Err(e) = &synced {
        tracing::error!(error = %e, "marker fsync failed");
    }
    let mut advanced = false;
    let mut out = Vec::with_capacity(pending.len());
    for mut p in pending {
        for (i, part, _, end) in std::mem::take(&mut p.appended) {
            let code = match &synced {
                Err(_) => codes::KAFKA_STORAGE_ERROR,
                Ok(()) if !part.may_acknowledge() => codes::NOT_LEADER_OR_FOLLOWER,
                Ok(()) => {
                    part.advance_high_watermark(end);
                    advanced = true;
                    codes::NONE
                }
            };
            put(&mut p.codes, i, code);
        }
        for (i, j) in std::mem::take(&mut p.repeats) {
            if let Some(code) = p.codes.get(j).copied().flatten() {
                put(&mut p.codes, i, code);
            }
        }
        out.push(
            p.codes
                .into_iter()
                .map(|c| c.unwrap_or(codes::UNKNOWN_SERVER_ERROR))
                .collect(),
        );
    }
    if advanced {
        host.data_ready().notify_waiters();
    }
    out
}

/// Appends `set`'s markers (no offsets partitions: those are refused
/// UNKNOWN_TOPIC_OR_PARTITION here) without waiting for the disk: per
/// partition, the marker's offset or the refusal's code, and the flush
/// that makes them durable and lets consumers read up to them.
pub fn append_unsynced(host: &dyn LeaderSide, set: &MarkerSet) -> Unflushed {
    let mut files = Vec::new();
    let mut p = append_set(
        host,
        set,
        crate::clock::now_ms(),
        &mut files,
        Mode::Unsynced,
    );
    let mut results: Vec<Option<Result<i64, i16>>> = p.codes.iter().map(|c| c.map(Err)).collect();
    let mut written = Vec::with_capacity(p.appended.len());
    for (i, part, offset, end) in std::mem::take(&mut p.appended) {
        put(&mut results, i, Ok(offset));
        written.push((part, end));
    }
    for (i, j) in std::mem::take(&mut p.repeats) {
        if let Some(first) = results.get(j).cloned().flatten() {
            put(&mut results, i, first);
        }
    }
    let results = set
        .partitions
        .iter()
        .cloned()
        .zip(
            results
                .into_iter()
                .map(|r| r.unwrap_or(Err(codes::UNKNOWN_SERVER_ERROR))),
        )
        .collect();
    Unflushed {
        results,
        flush: flush(host, files, written),
    }
}

/// The flush of markers appended to `files`: fdatasync (lazily, in the
/// group commit's next round), then each partition's high watermark up to
/// its marker.
fn flush(
    host: &dyn LeaderSide,
    files: Vec<Arc<std::fs::File>>,
    written: Vec<(Arc<Partition>, i64)>,
) -> Flush {
    let group_commit = host.group_commit().clone();
    let data_ready = host.data_ready().clone();
    Box::pin(async move {
        match group_commit.sync_lazily(files).await {
            Ok(()) => {
                for (part, end) in written {
                    part.advance_high_watermark(end);
                }
                data_ready.notify_waiters();
            }
            Err(e) => {
                tracing::error!(error = %e, "marker fsync failed; rewriting is not possible, the markers stand unsynced");
            }
        }
    })
}

/// At load: appends `markers`' marker again to every partition whose log
/// ends at or before it (lost in a crash with everything after it); the
/// flush makes them durable.
pub fn repair(host: &dyn LeaderSide, txn_id: &str, markers: &UnsyncedMarkers) -> Flush {
    let mut files = Vec::new();
    let mut written = Vec::new();
    for (tp, offset) in &markers.markers {
        let Some(part) = host.partition(&tp.topic, tp.partition) else {
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
            crate::clock::now_ms(),
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
    flush(host, files, written)
}

/// Appends one set's markers; the files to sync go to `files`. Unsynced,
/// the fault point `markers-half-written` crashes the process with the
/// first marker durable and the rest unwritten.
fn append_set(
    host: &dyn LeaderSide,
    set: &MarkerSet,
    now: i64,
    files: &mut Vec<Arc<std::fs::File>>,
    mode: Mode,
) -> Pending {
    let n = set.partitions.len();
    let mut p = Pending {
        codes: vec![None; n],
        repeats: Vec::new(),
        appended: Vec::new(),
        journal: Vec::new(),
    };
    let mut first: HashMap<&TopicPartition, usize> = HashMap::with_capacity(n);
    for (i, tp) in set.partitions.iter().enumerate() {
        if let Some(&j) = first.get(tp) {
            p.repeats.push((i, j));
            continue;
        }
        first.insert(tp, i);
        let before = files.len();
        match apply_one(host, set, tp, now, files, mode) {
            Step::Done(code) => put(&mut p.codes, i, code),
            Step::Appended(part, offset, end) => {
                if mode == Mode::Unsynced
                    && cfg!(feature = "fault-injection")
                    && n > 1
                    && p.appended.is_empty()
                    && let Some(f) = files.get(before)
                {
                    let _ = f.sync_data();
                    crate::fault::point("markers-half-written");
                }
                p.appended.push((i, part, offset, end));
            }
            Step::Offsets(d) => p.journal.push((i, d)),
        }
    }
    p
}

/// Records partition `i`'s answer.
fn put<T>(answers: &mut [Option<T>], i: usize, answer: T) {
    if let Some(slot) = answers.get_mut(i) {
        *slot = Some(answer);
    }
}

/// How a set's markers are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Synced before the answer, with the offsets journal alongside.
    Durable,
    /// Appended now, synced by the returned flush ([`append_unsynced`]):
    /// no offsets partitions (their journal entry must be durable before
    /// the completion), and the `markers-half-written` fault point.
    Unsynced,
}

/// Appends (or hands to the group shard) the marker for one partition.
fn apply_one(
    host: &dyn LeaderSide,
    set: &MarkerSet,
    tp: &TopicPartition,
    now: i64,
    files: &mut Vec<Arc<std::fs::File>>,
    mode: Mode,
) -> Step {
    if tp.topic == crate::group::offsets_topic::OFFSETS_TOPIC {
        if mode == Mode::Unsynced {
            // Offsets take the durable path (write_here); refused here.
            return Step::Done(codes::UNKNOWN_TOPIC_OR_PARTITION);
        }
        if !(0..OFFSETS_PARTITIONS).contains(&tp.partition) {
            return Step::Done(codes::UNKNOWN_TOPIC_OR_PARTITION);
        }
        return match host.complete_offsets(set.producer_id, tp.partition, set.commit) {
            Ok(Some(d)) => Step::Offsets(d),
            Ok(None) => Step::Done(0),
            Err(e) => {
                tracing::warn!(partition = tp.partition, error = %e, "completing transactional offsets failed");
                Step::Done(offsets_error_code(&e))
            }
        };
    }
    let Some(part) = host.partition(&tp.topic, tp.partition) else {
        return Step::Done(host.not_here(&tp.topic, tp.partition));
    };
    match part.append_marker(
        set.producer_id,
        set.producer_epoch,
        set.commit,
        set.coordinator_epoch,
        now,
    ) {
        Ok(a) => {
            files.extend(a.file);
            Step::Appended(part, a.base_offset, a.end_offset)
        }
        Err(e) => {
            tracing::debug!(topic = %tp.topic, partition = tp.partition, producer_id = set.producer_id, error = %e, "marker refused");
            Step::Done(marker_error_code(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::group::GroupShards;
    use crate::group::config::GroupConfig;
    use crate::group::record::Committed;
    use crate::log::FsyncMode;

    /// A leader with group shards and no partitions.
    struct Groups {
        shards: GroupShards,
        group_commit: Arc<GroupCommit>,
        data_ready: Arc<Notify>,
    }

    impl LeaderSide for Groups {
        fn partition(&self, _topic: &str, _p: i32) -> Option<Arc<Partition>> {
            None
        }
        fn not_here(&self, _topic: &str, _p: i32) -> i16 {
            codes::UNKNOWN_TOPIC_OR_PARTITION
        }
        fn complete_offsets(
            &self,
            producer_id: i64,
            partition: i32,
            commit: bool,
        ) -> io::Result<Option<Durable>> {
            self.shards.complete_txn(producer_id, partition, commit)
        }
        fn group_commit(&self) -> &Arc<GroupCommit> {
            &self.group_commit
        }
        fn data_ready(&self) -> &Arc<Notify> {
            &self.data_ready
        }
    }

    fn commit_marker(producer_id: i64, offsets_partition: i32) -> MarkerSet {
        MarkerSet {
            producer_id,
            producer_epoch: 0,
            commit: true,
            coordinator_epoch: 0,
            partitions: vec![TopicPartition {
                topic: crate::group::offsets_topic::OFFSETS_TOPIC.into(),
                partition: offsets_partition,
            }],
        }
    }

    #[tokio::test]
    async fn a_group_shard_that_lost_its_lease_answers_txn_offsets_not_coordinator() {
        let dir = tempfile::tempdir().expect("tmp");
        let group_commit = GroupCommit::new(FsyncMode::Always);
        let host = Groups {
            shards: GroupShards::cluster(dir.path(), GroupConfig::default(), group_commit.clone()),
            group_commit,
            data_ready: Arc::new(Notify::new()),
        };
        let lease = Arc::new(AtomicBool::new(true));
        let held = lease.clone();
        let shard = host.shards.shard_of("my-group");
        host.shards
            .open_shard(shard, Arc::new(move || held.load(Ordering::SeqCst)))
            .expect("open");
        let c = host.shards.for_group("my-group").expect("local");
        let offset = Committed {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_ms: 1,
            expire_ms: None,
        };
        c.txn_commit(
            "my-group",
            -1,
            "",
            None,
            7,
            0,
            vec![("t".into(), 0, offset)],
        )
        .expect("staged")
        .wait()
        .await
        .expect("durable");
        // The lease lapses before the transaction's marker arrives: the
        // coordinator must look for the shard's new leader, not give up
        // on a storage error.
        lease.store(false, Ordering::SeqCst);
        let partition = i32::try_from(shard).expect("shard");
        let codes = write_all_here(&host, &[commit_marker(7, partition)]).await;
        assert_eq!(codes, vec![vec![codes::NOT_COORDINATOR]]);
        // A shard not open here at all answers the same.
        host.shards.close_shard(shard);
        let codes = write_all_here(&host, &[commit_marker(7, partition)]).await;
        assert_eq!(codes, vec![vec![codes::NOT_COORDINATOR]]);
    }
}
