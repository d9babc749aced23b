//! Cluster mode: the producer batches a partition refused as
//! NOT_LEADER_OR_FOLLOWER (not written), so that no later batch of the same
//! producer is appended or answered out of order before the refused one
//! comes again.
//!
//! Why: a client takes NOT_LEADER_OR_FOLLOWER as "not written". If a batch
//! pipelined behind the refused one is then appended (or refused as out of
//! order because the refused one is missing), the client sees a sequence
//! gap the broker made; librdkafka answers that with an idempotent epoch
//! bump and re-sends every unacknowledged batch under the new epoch, also
//! those that were written, past any dedupe window: duplicates. Kafka does
//! not show this because a replica that stopped leading stays so until it
//! is made leader again; here the lease gate can reopen (a late keep-alive
//! answer) and a partition can be taken back within one client pipeline.
//!
//! One [`Refusals`] lives per partition slot of a topic, shared by every
//! `Partition` opened there, and is fed also while the partition is not
//! held here. It touches nothing but its own map (bounded: at most
//! [`MAX_PRODUCERS`] marks, each kept at most [`HOLD_BACK_FOR`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::batch::BatchHeader;
use super::producer::ProducerTable;

/// Producers remembered per partition; a refusal past that is not
/// remembered (the old behaviour: the gap may show).
pub const MAX_PRODUCERS: usize = 1024;

/// How long a refusal holds the producer's later batches back: Kafka's
/// default request timeout, by which every request the client sent before
/// it saw the refusal has arrived or been given up.
pub const HOLD_BACK_FOR: Duration = Duration::from_secs(30);

/// The first refused batch of one producer epoch.
#[derive(Debug, Clone, Copy)]
struct Mark {
    epoch: i16,
    seq: i32,
    at: Instant,
}

impl Mark {
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.at) >= HOLD_BACK_FOR
    }
}

/// The refused batches of one partition, by producer id.
#[derive(Debug, Default)]
pub struct Refusals {
    marks: Mutex<BTreeMap<i64, Mark>>,
    /// Whether `marks` may hold any: appends skip the lock while not.
    any: AtomicBool,
}

impl Refusals {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i64, Mark>> {
        self.marks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Batch `h` was refused as not leader, unwritten. `producers` is the
    /// partition's producer state when it is held here (None: it is not).
    /// The earliest refused batch of the producer's epoch is the one kept:
    /// the later ones are behind it in the client's pipeline.
    pub fn refused(&self, h: &BatchHeader, producers: Option<&ProducerTable>) {
        if !h.has_producer_id() {
            return;
        }
        let now = Instant::now();
        let mut marks = self.lock();
        if let Some(m) = marks.get(&h.producer_id)
            && !m.expired(now)
            && m.epoch == h.producer_epoch
            && m.seq <= h.base_sequence
            && producers.is_none_or(|p| p.awaits(h.producer_id, m.epoch, m.seq))
        {
            return;
        }
        if marks.len() >= MAX_PRODUCERS && !marks.contains_key(&h.producer_id) {
            marks.retain(|_, m| !m.expired(now));
            if marks.len() >= MAX_PRODUCERS {
                return;
            }
        }
        marks.insert(
            h.producer_id,
            Mark {
                epoch: h.producer_epoch,
                seq: h.base_sequence,
                at: now,
            },
        );
        self.any.store(true, Ordering::Release);
    }

    /// Whether `h` (not a duplicate) must be refused as not leader because
    /// an earlier batch of its producer was refused and has not come
    /// again: appending `h`, or answering it out of order, would show the
    /// client a gap. The refused batch itself, a new epoch, or a mark the
    /// partition's state has moved past lets the producer through again.
    pub fn holds_back(&self, h: &BatchHeader, producers: &ProducerTable) -> bool {
        if !h.has_producer_id() || !self.any.load(Ordering::Acquire) {
            return false;
        }
        let mut marks = self.lock();
        let Some(m) = marks.get(&h.producer_id).copied() else {
            return false;
        };
        if h.producer_epoch < m.epoch {
            // A zombie's batch (refused as stale by the producer state)
            // neither is held back nor ends the mark of the current epoch.
            return false;
        }
        let stands = !m.expired(Instant::now())
            && m.epoch == h.producer_epoch
            && m.seq != h.base_sequence
            && producers.awaits(h.producer_id, m.epoch, m.seq);
        if !stands {
            marks.remove(&h.producer_id);
            if marks.is_empty() {
                self.any.store(false, Ordering::Release);
            }
        }
        stands
    }

    /// How many producers are remembered (tests).
    #[cfg(test)]
    pub fn remembered(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{data_batch, parse_header};

    fn header(pid: i64, epoch: i16, seq: i32) -> BatchHeader {
        parse_header(&data_batch(
            &[(None, b"v")],
            1,
            Some((pid, epoch, seq)),
            false,
        ))
        .expect("header")
    }

    #[test]
    fn the_earliest_refused_batch_of_an_epoch_is_the_one_remembered() {
        let r = Refusals::default();
        let none = ProducerTable::default();
        r.refused(&header(1, 0, 5), None);
        r.refused(&header(1, 0, 6), None);
        assert!(r.holds_back(&header(1, 0, 6), &none), "6 is behind 5");
        assert!(
            !r.holds_back(&header(1, 0, 5), &none),
            "5 itself goes through"
        );
        assert!(
            !r.holds_back(&header(1, 0, 6), &none),
            "and clears the mark"
        );
    }

    #[test]
    fn an_older_epoch_neither_is_held_back_nor_ends_the_mark() {
        let r = Refusals::default();
        let none = ProducerTable::default();
        r.refused(&header(1, 3, 5), None);
        assert!(!r.holds_back(&header(1, 2, 9), &none), "a zombie's batch");
        assert!(
            r.holds_back(&header(1, 3, 6), &none),
            "the mark still stands"
        );
        assert!(
            !r.holds_back(&header(1, 4, 0), &none),
            "a new epoch ends it"
        );
        assert!(!r.holds_back(&header(1, 3, 6), &none));
    }

    #[test]
    fn the_remembered_producers_are_bounded() {
        let r = Refusals::default();
        for pid in 0..(MAX_PRODUCERS as i64 + 10) {
            r.refused(&header(pid, 0, 0), None);
        }
        assert_eq!(r.remembered(), MAX_PRODUCERS);
    }
}
