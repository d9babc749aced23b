//! A partition's read paths: Fetch's reads (bounded by bytes and by the
//! isolation level's last offset) and the timestamp lookups of ListOffsets.

use super::*;

impl Partition {
    /// Reads batches from `offset`, at most about `max_bytes` (at least one
    /// whole batch), below the HW, or below the LSO when `read_committed`.
    /// (Tests; Fetch uses [`Self::read_limited`].)
    #[cfg(test)]
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<ReadResult, ReadError> {
        self.read_limited(offset, max_bytes, true, read_committed)
    }

    /// Reads whole batches from `offset` within `max_bytes`, below the HW,
    /// or below the LSO when `read_committed`. With `min_one` the first
    /// batch is returned whole even if it alone exceeds `max_bytes` (Kafka
    /// allows that for the first batch of a response, so a consumer makes
    /// progress); without it such a read returns no records.
    pub fn read_limited(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        read_committed: bool,
    ) -> Result<ReadResult, ReadError> {
        let hw = self.high_watermark();
        let st = self.lock();
        let lso = st
            .producers
            .first_unstable_offset()
            .map_or(hw, |f| f.min(hw));
        self.check_offsets(&st, lso, hw);
        let end = st.log_end();
        if offset < st.log_start || offset > end {
            return Err(ReadError::OutOfRange {
                offset,
                start: st.log_start,
                end,
            });
        }
        let upper = if read_committed { lso } else { hw };
        let mut result = ReadResult {
            records: Vec::new(),
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: st.log_start,
            aborted: Vec::new(),
        };
        if offset >= upper {
            return Ok(result);
        }
        // From the segment holding `offset` on, as far as max_bytes goes:
        // a segment read to its end (a cleaned one may hold only an empty
        // batch, which a client cannot move past on its own) is followed
        // by the next one.
        let mut started = false;
        for (_, seg) in st
            .segments
            .range(..=offset)
            .next_back()
            .into_iter()
            .chain(st.segments.range(offset + 1..))
        {
            let pos = if started {
                0
            } else if seg.next_offset <= offset {
                continue;
            } else {
                match seg.position_of(offset)? {
                    Some(pos) => pos,
                    None => continue,
                }
            };
            started = true;
            let room = max_bytes.saturating_sub(result.records.len());
            let first = result.records.is_empty();
            if !first && room < batch::HEADER_LEN {
                break;
            }
            let got = seg.read(pos, room, min_one && first, upper)?;
            let whole = pos + got.len() as u64 == seg.size;
            if first {
                result.records = got; // the common case: one segment, no copy
            } else {
                result.records.extend_from_slice(&got);
            }
            if !whole || seg.next_offset >= upper {
                break;
            }
        }
        if read_committed {
            let last = batch::parse_header(&result.records).map(|_| offset);
            if last.is_some() {
                result.aborted = st
                    .aborted
                    .iter()
                    .filter(|a| a.last_offset >= offset && a.first_offset < upper)
                    .copied()
                    .collect();
            }
        }
        Ok(result)
    }

    /// ListOffsets by timestamp: the first offset whose record timestamp is
    /// ≥ `ts`, with that timestamp. The batch is located under the lock
    /// ([`Partition::locate_timestamp`]) and scanned without it.
    pub fn offset_for_timestamp(&self, ts: i64) -> io::Result<Option<(i64, i64)>> {
        match self.locate_timestamp(ts)? {
            Some(probe) => probe.scan(ts).map(Some),
            None => Ok(None),
        }
    }

    /// The first batch whose max timestamp is ≥ `ts`, found from the time
    /// index under the partition lock (headers only). Scanning its records
    /// ([`TimestampProbe::scan`], up to [`batch::MAX_SCAN_BYTES`] of
    /// decompression) needs no lock, so appends go on meanwhile.
    pub fn locate_timestamp(&self, ts: i64) -> io::Result<Option<TimestampProbe>> {
        let hw = self.high_watermark();
        let st = self.lock();
        self.check_offsets(&st, hw, hw);
        for seg in st.segments.values() {
            if seg.max_timestamp < ts {
                continue;
            }
            if let Some((pos, h)) = seg.position_for_timestamp(ts)? {
                if h.base_offset >= hw {
                    return Ok(None);
                }
                return Ok(Some(TimestampProbe {
                    file: seg.data_file()?,
                    pos,
                    header: h,
                }));
            }
        }
        Ok(None)
    }

    /// The largest timestamp and its offset (ListOffsets -3).
    ///
    /// As Kafka 3.7: the last offset of the first batch holding the largest
    /// timestamp (not the log's last offset, nor the record's own offset,
    /// which Kafka 4 answers).
    pub fn max_timestamp(&self) -> io::Result<(i64, i64)> {
        let st = self.lock();
        // The first segment holding the maximum.
        let mut best: Option<&crate::log::segment::Segment> = None;
        for s in st.segments.values().filter(|s| s.max_timestamp >= 0) {
            if best.is_none_or(|b| s.max_timestamp > b.max_timestamp) {
                best = Some(s);
            }
        }
        let Some(seg) = best else {
            return Ok((-1, -1));
        };
        Ok(match seg.position_for_timestamp(seg.max_timestamp)? {
            Some((_, h)) => (seg.max_timestamp, h.last_offset()),
            None => (seg.max_timestamp, seg.next_offset - 1),
        })
    }
}
