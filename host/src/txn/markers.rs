//! The partition leader's side of a transaction's completion (issue 15
//! items 1 and 3): a coordinator's COMMIT/ABORT markers applied to the
//! partitions this broker has open, each answered with the Kafka error code
//! once the marker is durable here. WriteTxnMarkers (API 27) calls it for
//! a remote coordinator; a coordinator may call it for the partitions it
//! leads itself.
//!
//! It touches the partition logs (`Partition::append_marker`, which checks
//! the producer and coordinator epochs under the partition lock), the group
//! shards (a `__consumer_offsets` marker completes a producer's pending
//! transactional offsets; kaas keeps no log for that topic) and the group
//! commit. Nothing is answered 0 before it is durable and the write gate is
//! still open.

use std::collections::HashMap;
use std::sync::Arc;

use crate::broker::Broker;
use crate::codes;
use crate::group::coordinator::Durable;
use crate::log::Partition;
use crate::log::partition::{AppendError, is_not_leader};
use crate::log::producer::ProducerError;
use crate::policy::TopicPartition;

/// Kafka's partitions of `__consumer_offsets` (and of kaas's group shards).
const OFFSETS_PARTITIONS: i32 = crate::group::shards::CLUSTER_SHARDS as i32;

/// One coordinator's markers for one producer: the transaction's result on
/// every partition named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerSet {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// true: COMMIT; false: ABORT.
    pub commit: bool,
    /// The epoch of the coordinator writing them (its shard's leader epoch;
    /// 0 on a single node).
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
}

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

/// The code of a failed `complete_txn` on a group shard.
fn offsets_error_code(e: &std::io::Error) -> i16 {
    if e.kind() == std::io::ErrorKind::NotConnected || is_not_leader(e) {
        crate::group::codes::NOT_COORDINATOR
    } else {
        codes::KAFKA_STORAGE_ERROR
    }
}

/// What became of one partition before the sync.
enum Step {
    /// Decided: this code.
    Done(i16),
    /// Appended to the partition, up to the offset; durable after the sync.
    Appended(Arc<Partition>, i64),
    /// The offsets journal write to wait for.
    Offsets(Durable),
}

/// One set's markers appended (or decided), not yet durable.
struct Pending {
    /// Per partition of the set, its answer once known.
    codes: Vec<Option<i16>>,
    /// (index, index of the first entry naming the same partition).
    repeats: Vec<(usize, usize)>,
    /// (index, partition, log end after the marker).
    appended: Vec<(usize, Arc<Partition>, i64)>,
    /// (index, offsets journal write).
    journal: Vec<(usize, Durable)>,
}

/// Applies `set` to every partition it names that this broker has open;
/// per partition (in `set`'s order) the Kafka error code once the marker
/// is durable here (0 = written and durable). All markers are appended
/// first, then made durable in one group-commit round (with the offsets
/// journal's writes alongside); a partition named twice gets one marker
/// and the same answer.
pub async fn write_here(broker: &Arc<Broker>, set: &MarkerSet) -> Vec<(TopicPartition, i16)> {
    let codes = write_all_here(broker, std::slice::from_ref(set))
        .await
        .pop()
        .unwrap_or_default();
    set.partitions.iter().cloned().zip(codes).collect()
}

/// [`write_here`] for several sets: appended in order (a producer's
/// markers land in the order given), then made durable in one round. Per
/// set, per partition, the code.
pub async fn write_all_here(broker: &Arc<Broker>, sets: &[MarkerSet]) -> Vec<Vec<i16>> {
    let now = crate::clock::now_ms();
    let mut files = Vec::new();
    let mut pending: Vec<Pending> = sets
        .iter()
        .map(|set| append_set(broker, set, now, &mut files))
        .collect();
    let sync = async {
        if files.is_empty() {
            Ok(())
        } else {
            broker.logs.group_commit().sync_all(files).await
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
        for (i, part, end) in std::mem::take(&mut p.appended) {
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
        broker.data_ready.notify_waiters();
    }
    out
}

/// Appends one set's markers; the files to sync go to `files`.
fn append_set(
    broker: &Broker,
    set: &MarkerSet,
    now: i64,
    files: &mut Vec<Arc<std::fs::File>>,
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
        match apply_one(broker, set, tp, now, files) {
            Step::Done(code) => put(&mut p.codes, i, code),
            Step::Appended(part, end) => p.appended.push((i, part, end)),
            Step::Offsets(d) => p.journal.push((i, d)),
        }
    }
    p
}

/// Records partition `i`'s answer.
fn put(codes_out: &mut [Option<i16>], i: usize, code: i16) {
    if let Some(slot) = codes_out.get_mut(i) {
        *slot = Some(code);
    }
}

/// Appends (or hands to the group shard) the marker for one partition.
fn apply_one(
    broker: &Broker,
    set: &MarkerSet,
    tp: &TopicPartition,
    now: i64,
    files: &mut Vec<Arc<std::fs::File>>,
) -> Step {
    if tp.topic == crate::group::offsets_topic::OFFSETS_TOPIC {
        if !(0..OFFSETS_PARTITIONS).contains(&tp.partition) {
            return Step::Done(codes::UNKNOWN_TOPIC_OR_PARTITION);
        }
        return match broker
            .groups
            .complete_txn(set.producer_id, tp.partition, set.commit)
        {
            Ok(Some(d)) => Step::Offsets(d),
            Ok(None) => Step::Done(0),
            Err(e) => {
                tracing::warn!(partition = tp.partition, error = %e, "completing transactional offsets failed");
                Step::Done(offsets_error_code(&e))
            }
        };
    }
    let Some(part) = broker.logs.partition(&tp.topic, tp.partition) else {
        return Step::Done(broker.not_here(&tp.topic, tp.partition));
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
            Step::Appended(part, a.end_offset)
        }
        Err(e) => {
            tracing::debug!(topic = %tp.topic, partition = tp.partition, producer_id = set.producer_id, error = %e, "marker refused");
            Step::Done(marker_error_code(&e))
        }
    }
}
