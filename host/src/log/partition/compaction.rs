//! A partition's side of log compaction (cleanup.policy=compact): which
//! segments may be cleaned, how dirty the log is, and one cleaning pass
//! that rewrites segments with only the records Kafka's cleaner keeps.
//!
//! The rules (Kafka 3.7's `LogCleaner`):
//! - Only whole segments below the *uncleanable* offset are cleaned: the
//!   active segment, the first unstable offset (nothing of an open
//!   transaction), the high watermark, and every segment newer than
//!   min.compaction.lag.ms are out of reach.
//! - The offset map holds the last offset of each key in the dirty part
//!   (from the cleaner checkpoint on); a record is kept when no later record
//!   of its key is in the map. Records without a key are removed.
//! - Records of aborted transactions are removed (and never enter the map).
//!   A COMMIT/ABORT marker stays while any record of its transaction does;
//!   then, like a tombstone, it gets a delete horizon (KIP-534: now +
//!   delete.retention.ms, in the batch's base timestamp) and is removed on
//!   a pass after the horizon.
//! - A batch left without records is removed, unless it is one of its
//!   producer's last batches (the producer state rebuilt from the log needs
//!   its sequence): then an empty batch keeps its offsets and sequence.
//!
//! Crash safety: a segment is rewritten into `<stem>.cleaned`, synced, and
//! renamed over its `.log` (the file the seal history names, so a sealed
//! segment stays valid), then the directory is synced: a crash leaves the
//! old segment or the new one, both whole. A leftover `.cleaned` file is
//! never read and is removed by the next pass. The swap happens under the
//! partition lock, behind the write gate (cluster mode: only a leader swaps).

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use super::*;
use crate::log::batch::records;
use crate::log::offset_map::{OffsetMap, Throttle};

/// How dirty a compacted partition's log is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dirtiness {
    /// Bytes of cleanable segments already cleaned (below the checkpoint).
    pub clean_bytes: u64,
    /// Bytes of cleanable segments not cleaned yet.
    pub dirty_bytes: u64,
    /// dirty / (clean + dirty); 0 for an empty cleanable range.
    pub ratio: f64,
    /// A dirty record is older than max.compaction.lag.ms.
    pub overdue: bool,
    /// The offset up to which segments may be cleaned.
    pub uncleanable: i64,
}

impl Dirtiness {
    /// Whether a pass is due by min.cleanable.dirty.ratio or
    /// max.compaction.lag.ms.
    pub fn due(&self, config: &LogConfig) -> bool {
        self.dirty_bytes > 0 && (self.ratio >= config.min_cleanable_dirty_ratio || self.overdue)
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleaned {
    pub segments: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    /// The cleaner checkpoint after the pass.
    pub clean_upto: i64,
    /// Whether the pass moved the checkpoint on (the cleaner then looks
    /// again at once rather than backing off).
    pub advanced: bool,
}

/// A segment as a pass sees it: its file (opened for the pass) and its
/// length.
#[derive(Clone)]
struct SegRef {
    base: i64,
    generation: u64,
    file: Arc<crate::log::open_files::CachedFile>,
    size: u64,
    next_offset: i64,
}

/// What a pass takes from the partition under its lock.
struct View {
    segments: Vec<SegRef>,
    first_dirty: i64,
    uncleanable: i64,
    aborted: Vec<AbortedTxn>,
    /// Base offsets of the batches the producer table remembers.
    producer_batches: HashSet<i64>,
}

/// Reads the batches of `seg` from `pos` on, one at a time.
fn for_each_batch(
    seg: &SegRef,
    throttle: &mut Throttle,
    mut f: impl FnMut(&BatchHeader, &[u8], &mut Throttle) -> io::Result<bool>,
) -> io::Result<u64> {
    let mut pos = 0u64;
    let mut head = [0u8; batch::HEADER_LEN];
    let mut buf = Vec::new();
    let file = seg.file.get()?;
    while pos + batch::HEADER_LEN as u64 <= seg.size {
        file.read_exact_at(&mut head, pos)?;
        let h = batch::parse_header(&head)
            .filter(|h| pos + h.size as u64 <= seg.size)
            .ok_or_else(|| io::Error::other("a segment being cleaned holds no whole batch"))?;
        buf.resize(h.size, 0);
        file.read_exact_at(&mut buf, pos)?;
        throttle.pace(h.size as u64);
        pos += h.size as u64;
        if !f(&h, &buf, throttle)? {
            break;
        }
    }
    Ok(pos)
}

fn in_aborted(aborted: &[AbortedTxn], h: &BatchHeader) -> bool {
    h.is_transactional()
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.base_offset <= a.last_offset
        })
}

impl Partition {
    fn cleanable_view(&self, st: &State, now_ms: i64) -> View {
        let hw = self.high_watermark();
        let active = st
            .segments
            .keys()
            .next_back()
            .copied()
            .unwrap_or(st.log_start);
        let mut uncleanable = active.min(hw);
        if let Some(f) = st.producers.first_unstable_offset() {
            uncleanable = uncleanable.min(f);
        }
        let lag = self.config().min_compaction_lag_ms;
        if lag > 0
            && let Some(s) = st
                .segments
                .values()
                .find(|s| s.max_timestamp > now_ms.saturating_sub(lag))
        {
            uncleanable = uncleanable.min(s.base_offset);
        }
        let segments: Vec<SegRef> = st
            .segments
            .values()
            .filter(|s| s.base_offset != active && s.next_offset <= uncleanable)
            .map(|s| SegRef {
                base: s.base_offset,
                generation: s.generation,
                file: s.file.clone(),
                size: s.size,
                next_offset: s.next_offset,
            })
            .collect();
        let upper = segments.last().map_or(st.log_start, |s| s.next_offset);
        View {
            first_dirty: st.clean_upto.clamp(st.log_start, upper.max(st.log_start)),
            uncleanable: upper,
            segments,
            aborted: st.aborted.clone(),
            producer_batches: st
                .producers
                .entries
                .values()
                .flat_map(|e| e.batches.iter().map(|b| b.base_offset))
                .collect(),
        }
    }

    /// How dirty the log is (for the cleaner's choice and /metrics).
    pub fn dirtiness(&self, now_ms: i64) -> Dirtiness {
        let st = self.lock();
        let v = self.cleanable_view(&st, now_ms);
        let (mut clean, mut dirty) = (0u64, 0u64);
        let mut oldest_dirty = None;
        for s in &v.segments {
            if s.next_offset <= v.first_dirty {
                clean += s.size;
            } else {
                dirty += s.size;
                if oldest_dirty.is_none() {
                    oldest_dirty = st.segments.get(&s.base).map(|g| g.first_max_timestamp);
                }
            }
        }
        let lag = self.config().max_compaction_lag_ms;
        let overdue = oldest_dirty
            .filter(|&t| t >= 0)
            .is_some_and(|t| lag < i64::MAX && t < now_ms.saturating_sub(lag));
        Dirtiness {
            clean_bytes: clean,
            dirty_bytes: dirty,
            ratio: if clean + dirty == 0 {
                0.0
            } else {
                dirty as f64 / (clean + dirty) as f64
            },
            overdue,
            uncleanable: v.uncleanable,
        }
    }

    /// One cleaning pass (blocking; the cleaner thread's): maps the dirty
    /// part into `map`, then rewrites every cleanable segment the map covers.
    /// Returns None when nothing is cleanable.
    pub fn clean(
        &self,
        map: &mut OffsetMap,
        throttle: &mut Throttle,
        now_ms: i64,
    ) -> io::Result<Option<Cleaned>> {
        let view = {
            let st = self.lock();
            self.cleanable_view(&st, now_ms)
        };
        if view.segments.is_empty() {
            return Ok(None);
        }
        self.remove_leftovers();
        let mut stats = Cleaned::default();
        // 1. The offset map over the dirty part, as far as it holds.
        map.clear();
        let mut map_end = view.uncleanable;
        'segments: for seg in view
            .segments
            .iter()
            .filter(|s| s.next_offset > view.first_dirty)
        {
            let mut full_at = None;
            stats.bytes_read += for_each_batch(seg, throttle, |h, bytes, _| {
                if h.last_offset() < view.first_dirty
                    || h.is_control()
                    || in_aborted(&view.aborted, h)
                {
                    return Ok(true);
                }
                let d = records::decode(bytes, h)?;
                // Whole batches only: a batch whose keys do not all fit ends the map.
                let keys: Vec<(&[u8], i64)> = d
                    .records
                    .iter()
                    .filter_map(|r| Some((d.key(r)?, h.base_offset + i64::from(r.offset_delta))))
                    .filter(|&(_, o)| o >= view.first_dirty)
                    .collect();
                if !map.fits(keys.len()) {
                    full_at = Some(h.base_offset);
                    return Ok(false);
                }
                for (k, o) in keys {
                    map.put(k, o);
                }
                Ok(true)
            })?;
            if let Some(at) = full_at {
                map_end = at;
                break 'segments;
            }
        }
        if map_end <= view.first_dirty && view.first_dirty < view.uncleanable {
            tracing::warn!(topic = %self.topic, partition = self.id, offset = map_end, "the cleaner's offset map cannot hold one batch's keys; raise log.cleaner.dedupe.buffer.size");
            return Ok(None);
        }
        // 2. Rewrite the segments the map covers, oldest first.
        let horizon = now_ms.saturating_add(self.config().delete_retention_ms);
        let mut txn_has_data: HashMap<i64, bool> = HashMap::new();
        for seg in view.segments.iter().filter(|s| s.base < map_end) {
            let tmp = self.dir.join(format!(
                "{}.cleaned",
                crate::log::segment::stem_of(seg.base, seg.generation)
            ));
            let out = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            let mut w = BufWriter::with_capacity(512 << 10, out);
            let mut written = 0u64;
            let mut changed = false;
            let mut dropped_markers = Vec::new();
            stats.bytes_read += for_each_batch(seg, throttle, |h, bytes, throttle| {
                let kept = self.filter_batch(
                    h,
                    bytes,
                    &view,
                    map,
                    map_end,
                    now_ms,
                    horizon,
                    &mut txn_has_data,
                    &mut stats.records_removed,
                    &mut dropped_markers,
                )?;
                match kept {
                    Kept::Same => {
                        w.write_all(bytes)?;
                        written += bytes.len() as u64;
                    }
                    Kept::Rewritten(b) => {
                        changed = true;
                        throttle.pace(b.len() as u64);
                        w.write_all(&b)?;
                        written += b.len() as u64;
                    }
                    Kept::Dropped => changed = true,
                }
                Ok(true)
            })?;
            let out = w.into_inner().map_err(|e| e.into_error())?;
            if !changed {
                drop(out);
                let _ = fs::remove_file(&tmp);
                continue;
            }
            out.sync_data()?;
            drop(out);
            crate::fault::point("cleaner-before-swap");
            if self.swap(seg, &tmp, written, &dropped_markers)? {
                stats.segments += 1;
                stats.bytes_written += written;
            }
        }
        // 3. The checkpoint: everything below map_end is clean now.
        let mut st = self.lock();
        stats.advanced = map_end > st.clean_upto;
        st.clean_upto = st.clean_upto.max(map_end);
        stats.clean_upto = st.clean_upto;
        if self.gate.open() {
            write_atomically(
                &self.dir.join(super::state_files::CHECKPOINT),
                st.clean_upto.to_string().as_bytes(),
            )?;
        }
        Ok(Some(stats))
    }

    /// What a pass keeps of one batch.
    #[allow(clippy::too_many_arguments)]
    fn filter_batch(
        &self,
        h: &BatchHeader,
        bytes: &[u8],
        view: &View,
        map: &OffsetMap,
        map_end: i64,
        now_ms: i64,
        horizon: i64,
        txn_has_data: &mut HashMap<i64, bool>,
        removed: &mut u64,
        dropped_markers: &mut Vec<(i64, i64)>,
    ) -> io::Result<Kept> {
        let covered = h.last_offset() < map_end;
        let keep_empty = view.producer_batches.contains(&h.base_offset);
        let d = records::decode(bytes, h)?;
        if h.is_control() {
            let had_data = txn_has_data.remove(&h.producer_id).unwrap_or(false);
            if had_data || !covered {
                return Ok(Kept::Same);
            }
            return Ok(match d.delete_horizon() {
                Some(t) if now_ms >= t => {
                    *removed += d.records.len() as u64;
                    dropped_markers.push((h.producer_id, h.base_offset));
                    Kept::Dropped
                }
                Some(_) => Kept::Same,
                None => Kept::Rewritten(records::rebuild(
                    &d,
                    &(0..d.records.len()).collect::<Vec<_>>(),
                    Some(horizon),
                )?),
            });
        }
        let aborted = in_aborted(&view.aborted, h);
        let mut keep = Vec::with_capacity(d.records.len());
        let mut tombstones = false;
        if !aborted {
            for (i, r) in d.records.iter().enumerate() {
                let Some(key) = d.key(r) else { continue };
                let offset = h.base_offset + i64::from(r.offset_delta);
                if map.get(key).is_some_and(|latest| offset < latest) {
                    continue;
                }
                if r.tombstone && covered {
                    if d.delete_horizon().is_some_and(|t| now_ms >= t) {
                        continue;
                    }
                    tombstones = true;
                }
                keep.push(i);
            }
        }
        if h.is_transactional() && !aborted && !keep.is_empty() {
            txn_has_data.insert(h.producer_id, true);
        }
        *removed += (d.records.len() - keep.len()) as u64;
        let set_horizon = tombstones && d.delete_horizon().is_none();
        // Before "unchanged": a batch emptied by an earlier pass goes once
        // its producer has written five batches since.
        if keep.is_empty() && !keep_empty {
            return Ok(Kept::Dropped);
        }
        if keep.len() == d.records.len() && !set_horizon {
            return Ok(Kept::Same);
        }
        let horizon = if set_horizon {
            Some(horizon)
        } else {
            d.delete_horizon()
        };
        Ok(Kept::Rewritten(records::rebuild(&d, &keep, horizon)?))
    }

    /// Puts the cleaned file `tmp` (`len` bytes) in place of `seg`, under
    /// the lock and behind the gate; false (and `tmp` removed) when the
    /// segment changed meanwhile (retention deleted it).
    ///
    /// `dropped`: the (producer, offset) of the transaction markers the
    /// cleaned copy no longer holds. Their aborted-transaction entries go
    /// first, from memory and from the producer snapshot: a read_committed
    /// client told of an aborted transaction skips its producer's batches
    /// until it meets the ABORT marker, so an entry whose marker is gone
    /// would hide everything the producer wrote after it. (The marker goes
    /// only once its transaction's records have gone in an earlier pass,
    /// so a crash between the two steps leaves a marker without an entry,
    /// which hides nothing.)
    fn swap(&self, seg: &SegRef, tmp: &Path, len: u64, dropped: &[(i64, i64)]) -> io::Result<bool> {
        let mut st = self.lock();
        let same = st
            .segments
            .get(&seg.base)
            .is_some_and(|s| Arc::ptr_eq(&s.file, &seg.file) && s.generation == seg.generation);
        if !same {
            let _ = fs::remove_file(tmp);
            return Ok(false);
        }
        self.check_gate()?;
        self.unmark_clean(&mut st)?;
        if !dropped.is_empty() {
            let gone = |a: &AbortedTxn| dropped.contains(&(a.producer_id, a.last_offset));
            st.aborted.retain(|a| !gone(a));
            if let Some((offset, table, mut aborted)) =
                super::state_files::read_snapshot(&self.dir, self.generation)
                && aborted.iter().any(gone)
            {
                aborted.retain(|a| !gone(a));
                super::state_files::write_snapshot(
                    &self.dir,
                    self.generation,
                    offset,
                    &table,
                    &aborted,
                )?;
            }
        }
        let stem = crate::log::segment::stem_of(seg.base, seg.generation);
        if len == 0 {
            // Nothing left: the segment goes (the log start stays where it is).
            if let Some(s) = st.segments.remove(&seg.base) {
                s.delete()?;
            }
            let _ = fs::remove_file(tmp);
        } else {
            fs::rename(tmp, self.dir.join(format!("{stem}.log")))?;
            super::super::sync::sync_dir(&self.dir)?;
            crate::fault::point("cleaner-after-rename");
            let mut fresh = Segment::open(
                &self.files,
                &self.dir,
                seg.base,
                seg.generation,
                false,
                chunk(&self.config()),
                Some(len),
            )?;
            fresh.write_indexes()?;
            st.segments.insert(seg.base, fresh);
        }
        Ok(true)
    }

    /// Removes `.cleaned` files a stopped pass left.
    fn remove_leftovers(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.filter_map(|e| e.ok()) {
            if e.file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(".cleaned"))
            {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// What a pass does with one batch.
enum Kept {
    Same,
    Rewritten(Vec<u8>),
    Dropped,
}
