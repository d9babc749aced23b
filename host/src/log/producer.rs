//! Idempotent-producer state of one partition (docs/txn-semantics.md §3.2–§3.4): per producer
//! id the epoch, the last five batches (the dedupe window) and the open
//! transaction, and the checks a client batch must pass before it is
//! appended. Pure data: the partition log calls it under its lock, and
//! rebuilds it on restart from a snapshot plus the batch headers after it.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

use super::batch::BatchHeader;
use crate::invariant::invariant;

/// How many batches per producer are remembered for duplicate detection.
pub const DEDUPE_WINDOW: usize = 5;

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// State of one producer id on this partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// Current epoch; -1 when unknown.
    pub epoch: i16,
    /// Coordinator epoch of the last marker; -1 when none.
    pub coordinator_epoch: i32,
    /// The last batches, oldest first.
    pub batches: VecDeque<BatchMeta>,
    /// First offset of the open transaction on this partition, if any.
    pub txn_first_offset: Option<i64>,
    /// Timestamp of the last write (for expiry).
    pub last_timestamp: i64,
}

impl ProducerEntry {
    fn new() -> Self {
        ProducerEntry {
            epoch: -1,
            coordinator_epoch: -1,
            batches: VecDeque::new(),
            txn_first_offset: None,
            last_timestamp: -1,
        }
    }
}

/// Why a client batch is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerError {
    /// INVALID_PRODUCER_EPOCH(47): the batch's epoch is older than the partition's.
    StaleEpoch,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER(45).
    OutOfOrder,
    /// INVALID_TXN_STATE(48): a non-transactional batch inside an open transaction.
    TxnState,
    /// TRANSACTION_COORDINATOR_FENCED(52): a marker from a coordinator epoch
    /// older than the last marker's (a zombie coordinator).
    CoordinatorFenced,
}

/// What the checks decided for a client batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it.
    Append,
    /// Already appended: answer with the original batch, append nothing.
    Duplicate(BatchMeta),
}

/// A completed transaction (from a marker), for the aborted-transaction index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub marker_offset: i64,
    pub aborted: bool,
}

/// Producer states of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerTable {
    pub entries: BTreeMap<i64, ProducerEntry>,
}

impl ProducerTable {
    /// Checks a client batch (docs/txn-semantics.md §3.3 steps 1, 3, 4, 5).
    pub fn check(&self, h: &BatchHeader) -> Result<Verdict, ProducerError> {
        if !h.has_producer_id() {
            return Ok(Verdict::Append);
        }
        let Some(e) = self.entries.get(&h.producer_id) else {
            // No state: any sequence is accepted (KIP-360).
            return Ok(Verdict::Append);
        };
        let (first, last) = (h.base_sequence, h.last_sequence());
        if h.producer_epoch == e.epoch
            && let Some(dup) = e
                .batches
                .iter()
                .find(|b| b.first_seq == first && b.last_seq == last)
        {
            return Ok(Verdict::Duplicate(*dup));
        }
        if h.producer_epoch < e.epoch {
            return Err(ProducerError::StaleEpoch);
        }
        if h.producer_epoch > e.epoch {
            if e.epoch != -1 && first != 0 {
                return Err(ProducerError::OutOfOrder);
            }
        } else if e.epoch != -1 {
            match e.batches.back() {
                Some(prev) => {
                    let expected = if prev.last_seq == i32::MAX {
                        0
                    } else {
                        prev.last_seq + 1
                    };
                    if first != expected {
                        return Err(ProducerError::OutOfOrder);
                    }
                }
                None if first != 0 => return Err(ProducerError::OutOfOrder),
                None => {}
            }
        }
        if !h.is_transactional() && e.txn_first_offset.is_some() {
            return Err(ProducerError::TxnState);
        }
        Ok(Verdict::Append)
    }

    /// Whether the batch of `producer_id` at `epoch` starting at `seq` is
    /// still to come here: the partition knows nothing of the producer or
    /// only an older epoch, or `seq` is the next sequence it expects.
    pub fn awaits(&self, producer_id: i64, epoch: i16, seq: i32) -> bool {
        let Some(e) = self.entries.get(&producer_id) else {
            return true;
        };
        if e.epoch != epoch {
            return e.epoch < epoch;
        }
        e.batches.back().is_none_or(|b| {
            let next = if b.last_seq == i32::MAX {
                0
            } else {
                b.last_seq + 1
            };
            next == seq
        })
    }

    /// Records a data batch just appended (its offsets assigned), which
    /// [`Self::check`] let through: a known producer id's epoch never moves
    /// back (a bump raises it; a new producer id, KIP-360's after
    /// exhaustion included, is another entry).
    pub fn record(&mut self, h: &BatchHeader) {
        self.remember(h, true);
    }

    /// Records a data batch found in the log (recovery, a takeover's
    /// replay). The log's order stands even where an epoch goes back: a
    /// producer id whose state had expired may have written again at an
    /// older epoch (Kafka's replication-origin append accepts it too).
    pub fn replay(&mut self, h: &BatchHeader) {
        self.remember(h, false);
    }

    fn remember(&mut self, h: &BatchHeader, checked: bool) {
        if !h.has_producer_id() {
            return;
        }
        let e = match self.entries.entry(h.producer_id) {
            Entry::Occupied(e) => {
                let e = e.into_mut();
                invariant!(
                    !checked || h.producer_epoch >= e.epoch,
                    "producer {}: epoch moves back {} -> {} (a checked append)",
                    h.producer_id,
                    e.epoch,
                    h.producer_epoch
                );
                e
            }
            Entry::Vacant(e) => e.insert(ProducerEntry::new()),
        };
        if h.producer_epoch != e.epoch {
            e.batches.clear();
            e.epoch = h.producer_epoch;
        }
        e.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
        });
        while e.batches.len() > DEDUPE_WINDOW {
            e.batches.pop_front();
        }
        if h.is_transactional() && e.txn_first_offset.is_none() {
            e.txn_first_offset = Some(h.base_offset);
        }
        e.last_timestamp = h.max_timestamp;
    }

    /// Checks a marker (docs/txn-semantics.md §3.4), as Kafka's partition leader does, in
    /// this order: a lower producer epoch is INVALID_PRODUCER_EPOCH; a
    /// coordinator epoch lower than the last marker's is a zombie
    /// coordinator's (TRANSACTION_COORDINATOR_FENCED). Equal ones pass.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), ProducerError> {
        match self.entries.get(&producer_id) {
            Some(e) if epoch < e.epoch => Err(ProducerError::StaleEpoch),
            Some(e) if coordinator_epoch < e.coordinator_epoch => {
                Err(ProducerError::CoordinatorFenced)
            }
            _ => Ok(()),
        }
    }

    /// Records an appended marker at `offset` written at `timestamp`:
    /// raises the epoch, closes the open transaction, and counts as a write
    /// for expiry.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        offset: i64,
        aborted: bool,
        timestamp: i64,
    ) -> Option<CompletedTxn> {
        let e = self
            .entries
            .entry(producer_id)
            .or_insert_with(ProducerEntry::new);
        if epoch > e.epoch {
            e.batches.clear();
            e.epoch = epoch;
        }
        e.coordinator_epoch = coordinator_epoch;
        e.last_timestamp = e.last_timestamp.max(timestamp);
        e.txn_first_offset.take().map(|first_offset| CompletedTxn {
            producer_id,
            first_offset,
            marker_offset: offset,
            aborted,
        })
    }

    /// The fence ring: raise the epoch and clear the dedupe window, so a
    /// zombie's batches at an older epoch are refused. Only for an id with
    /// state here: a fence must not add an entry to every partition of the
    /// cluster for each bump (one InitProducerId would cost memory on every
    /// partition); a zombie's first batch on a partition it never wrote is
    /// a transactional batch, verified with the coordinator, which refuses
    /// the old epoch.
    pub fn fence(&mut self, producer_id: i64, epoch: i16) -> bool {
        let Some(e) = self.entries.get_mut(&producer_id) else {
            return false;
        };
        if epoch > e.epoch {
            e.epoch = epoch;
            e.batches.clear();
            true
        } else {
            false
        }
    }

    /// Kafka's producer-state expiry (`producer.id.expiration.ms`): drops
    /// every producer id with no open transaction here whose last write is
    /// `expiration_ms` or more before `now_ms` (by the batch timestamps, as
    /// Kafka measures it). A later batch from it is from an unknown
    /// producer: any sequence is accepted. Returns how many were dropped.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| {
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.entries.len()
    }

    /// Drops the state of every producer id at or above `first` (ids never
    /// handed out: see `pid::ProducerIdAllocator::issued`); returns how many.
    pub fn forget_from(&mut self, first: i64) -> usize {
        self.entries.split_off(&first).len()
    }

    /// First offset of the earliest open transaction (drives the LSO).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.entries
            .values()
            .filter_map(|e| e.txn_first_offset)
            .min()
    }

    /// Serializes the table (the producer-state snapshot body).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for (pid, e) in &self.entries {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&e.txn_first_offset.unwrap_or(-1).to_be_bytes());
            out.extend_from_slice(&e.last_timestamp.to_be_bytes());
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.base_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.max_timestamp.to_be_bytes());
            }
        }
        out
    }

    /// Parses what [`encode`](Self::encode) wrote; None if malformed.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Cursor { b, at: 0 };
        let n = u32::from_be_bytes(r.take()?) as usize;
        if n > b.len() / 31 + 1 {
            return None;
        }
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let pid = i64::from_be_bytes(r.take()?);
            let epoch = i16::from_be_bytes(r.take()?);
            let coordinator_epoch = i32::from_be_bytes(r.take()?);
            let txn = i64::from_be_bytes(r.take()?);
            let last_timestamp = i64::from_be_bytes(r.take()?);
            let count = r.take::<1>()?[0] as usize;
            if count > DEDUPE_WINDOW {
                return None;
            }
            let mut batches = VecDeque::with_capacity(count);
            for _ in 0..count {
                batches.push_back(BatchMeta {
                    first_seq: i32::from_be_bytes(r.take()?),
                    last_seq: i32::from_be_bytes(r.take()?),
                    base_offset: i64::from_be_bytes(r.take()?),
                    last_offset: i64::from_be_bytes(r.take()?),
                    max_timestamp: i64::from_be_bytes(r.take()?),
                });
            }
            let txn_first_offset = (txn >= 0).then_some(txn);
            entries.insert(
                pid,
                ProducerEntry {
                    epoch,
                    coordinator_epoch,
                    batches,
                    txn_first_offset,
                    last_timestamp,
                },
            );
        }
        (r.at == b.len()).then_some(ProducerTable { entries })
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let s = self.b.get(self.at..self.at + N)?;
        self.at += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{data_batch, parse_header};

    fn header(pid: i64, epoch: i16, seq: i32, n: usize, offset: i64) -> BatchHeader {
        let recs: Vec<(Option<&[u8]>, &[u8])> = (0..n).map(|_| (None, &b"v"[..])).collect();
        let mut h =
            parse_header(&data_batch(&recs, 1, Some((pid, epoch, seq)), false)).expect("header");
        h.base_offset = offset;
        h
    }

    fn table_with(batches: &[(i16, i32, usize)]) -> ProducerTable {
        let mut t = ProducerTable::default();
        let mut offset = 0;
        for &(epoch, seq, n) in batches {
            t.record(&header(1, epoch, seq, n, offset));
            offset += n as i64;
        }
        t
    }

    #[test]
    fn any_sequence_is_accepted_without_state_then_sequences_must_follow() {
        let t = table_with(&[]);
        assert_eq!(t.check(&header(1, 0, 17, 3, 0)), Ok(Verdict::Append)); // PS-01
        let t = table_with(&[(0, 17, 3)]);
        assert_eq!(t.check(&header(1, 0, 20, 5, 3)), Ok(Verdict::Append)); // PS-02
        assert_eq!(
            t.check(&header(1, 0, 30, 1, 3)),
            Err(ProducerError::OutOfOrder)
        ); // PS-03
    }

    #[test]
    fn a_retry_inside_the_window_returns_the_original_offset_and_older_ones_are_out_of_order() {
        let t = table_with(&[(0, 20, 5), (0, 25, 1), (0, 26, 1), (0, 27, 1), (0, 28, 1)]);
        match t.check(&header(1, 0, 25, 1, 99)) {
            Ok(Verdict::Duplicate(meta)) => assert_eq!(meta.base_offset, 5), // PS-04
            other => panic!("expected a duplicate, got {other:?}"),
        }
        let t = table_with(&[
            (0, 20, 5),
            (0, 25, 1),
            (0, 26, 1),
            (0, 27, 1),
            (0, 28, 1),
            (0, 29, 1),
        ]);
        assert_eq!(
            t.check(&header(1, 0, 20, 5, 99)),
            Err(ProducerError::OutOfOrder)
        ); // PS-05
    }

    #[test]
    fn epochs_fence_and_reset_the_window() {
        let t = table_with(&[(3, 0, 1)]);
        assert_eq!(
            t.check(&header(1, 2, 1, 1, 1)),
            Err(ProducerError::StaleEpoch)
        ); // PS-06
        assert_eq!(t.check(&header(1, 4, 0, 1, 1)), Ok(Verdict::Append)); // PS-07
        assert_eq!(
            t.check(&header(1, 4, 5, 1, 1)),
            Err(ProducerError::OutOfOrder)
        ); // PS-08
    }

    #[test]
    fn sequence_wraps_after_i32_max() {
        let t = table_with(&[(0, i32::MAX, 1)]);
        assert_eq!(t.check(&header(1, 0, 0, 1, 1)), Ok(Verdict::Append)); // PS-09
    }

    #[test]
    fn a_marker_from_an_older_coordinator_epoch_is_fenced_after_the_producer_epoch_check() {
        let mut t = table_with(&[(3, 0, 1)]);
        assert_eq!(t.check_marker(1, 3, -1), Ok(()), "no marker yet");
        t.record_marker(1, 3, 5, 1, false, 0);
        assert_eq!(t.entries[&1].coordinator_epoch, 5);
        assert_eq!(
            t.check_marker(1, 3, 4),
            Err(ProducerError::CoordinatorFenced)
        );
        assert_eq!(t.check_marker(1, 3, 5), Ok(()), "the same coordinator");
        assert_eq!(t.check_marker(1, 4, 6), Ok(()), "a newer one");
        assert_eq!(
            t.check_marker(1, 2, 4),
            Err(ProducerError::StaleEpoch),
            "the producer epoch is checked first"
        );
        assert_eq!(t.check_marker(2, 0, 0), Ok(()), "another producer");
    }

    #[test]
    fn fence_bumps_epoch_and_clears_window() {
        let mut t = table_with(&[(0, 0, 1), (0, 1, 1)]);
        assert!(t.fence(1, 1));
        assert!(t.entries[&1].batches.is_empty());
        assert_eq!(
            t.check(&header(1, 0, 2, 1, 2)),
            Err(ProducerError::StaleEpoch),
            "the zombie is refused"
        );
        assert_eq!(
            t.check(&header(1, 0, 1, 1, 2)),
            Err(ProducerError::StaleEpoch),
            "its retry is no longer a duplicate"
        );
        assert!(!t.fence(1, 1), "fencing at the same epoch is a no-op");
    }

    #[test]
    #[cfg_attr(
        not(any(debug_assertions, feature = "fault-injection")),
        ignore = "unchecked build"
    )]
    #[should_panic(expected = "producer 1: epoch moves back 3 -> 2")]
    fn a_checked_append_moving_an_epoch_back_breaks_an_invariant() {
        let mut t = table_with(&[(3, 0, 1)]);
        t.record(&header(1, 2, 1, 1, 1));
    }

    #[test]
    fn a_replay_follows_the_log_even_where_an_epoch_goes_back() {
        // Producer 1 at epoch 3 expired here, then wrote again at epoch 2.
        let mut t = table_with(&[(3, 0, 1)]);
        t.replay(&header(1, 2, 0, 1, 1));
        assert_eq!(t.entries[&1].epoch, 2);
        assert_eq!(t.entries[&1].batches.len(), 1);
    }

    #[test]
    fn fencing_an_id_without_state_here_adds_no_entry() {
        let mut t = table_with(&[(0, 0, 1)]);
        assert!(!t.fence(42, 3));
        assert!(!t.entries.contains_key(&42));
    }

    #[test]
    fn forgetting_ids_from_one_on_keeps_the_ones_below() {
        let mut t = table_with(&[(0, 0, 1), (0, 1, 1)]);
        t.record_marker(7, 1, 0, 5, false, 0);
        t.record_marker(9, 1, 0, 6, false, 0);
        assert_eq!(t.forget_from(7), 2);
        assert_eq!(t.entries.keys().copied().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn expiry_drops_idle_producers_but_not_an_open_transaction() {
        let mut t = ProducerTable::default();
        let at = |pid: i64, ts: i64, txn: bool| {
            let b = data_batch(&[(None, &b"v"[..])], ts, Some((pid, 0, 0)), txn);
            parse_header(&b).expect("header")
        };
        t.record(&at(1, 1_000, false));
        t.record(&at(2, 1_000, true));
        t.record(&at(3, 5_000, false));
        // At 11 000, 1 and 2 have been idle 10 s (2 has a transaction
        // open), 3 only 6 s.
        assert_eq!(t.expire(11_000, 10_000), 1);
        assert_eq!(t.entries.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
        // The marker closes 2's transaction and counts as its last write.
        t.record_marker(2, 0, 0, 9, false, 12_000);
        assert_eq!(t.expire(21_999, 10_000), 1, "3 goes, 2 wrote 9.999 s ago");
        assert_eq!(t.entries.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(t.expire(22_000, 10_000), 1);
        assert!(t.entries.is_empty());
    }

    #[test]
    fn snapshots_round_trip() {
        let mut t = table_with(&[(0, 0, 2), (0, 2, 3)]);
        t.record_marker(9, 4, 2, 10, true, 0);
        assert_eq!(ProducerTable::decode(&t.encode()), Some(t.clone()));
        let bytes = t.encode();
        for cut in 0..bytes.len() {
            assert_eq!(ProducerTable::decode(&bytes[..cut]), None);
        }
    }
}
