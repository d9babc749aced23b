//! Moving a partition's log start: DeleteRecords and time/size retention,
//! both dropping whole segments below the new start.

use super::*;

impl Partition {
    /// DeleteRecords: moves the log start offset (never past the HW) and
    /// drops whole segments below it.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, ReadError> {
        let hw = self.high_watermark();
        let mut st = self.lock();
        self.check_offsets(&st, hw, hw);
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(ReadError::OutOfRange {
                offset,
                start: st.log_start,
                end: hw,
            });
        }
        if target > st.log_start {
            self.check_gate()?;
            self.unmark_clean(&mut st)?;
            self.move_log_start(&mut st, target)?;
            self.drop_segments_below(&mut st, target)?;
        }
        Ok(st.log_start)
    }

    /// Moves the log start to `offset` (durably, in its file), and drops
    /// the aborted-transaction entries whose ABORT marker lies below it:
    /// their records can no longer be fetched. Kafka keeps those entries in
    /// the index file of the marker's segment, so its retention deletes
    /// them with the segment; without this the index grew by one entry per
    /// aborted transaction for the partition's life. The next snapshot is
    /// written without them; recovery prunes a snapshot written before.
    ///
    /// The log start only moves forward, and never past the high watermark
    /// (log start ≤ high watermark ≤ log end): what a consumer may not read
    /// yet is not deleted.
    fn move_log_start(&self, st: &mut State, offset: i64) -> io::Result<()> {
        let (hw, end) = (self.high_watermark(), st.log_end());
        invariant!(
            st.log_start <= offset && offset <= hw && hw <= end,
            "{}-{}: log start moves {} -> {offset}, breaking log start ≤ high watermark {hw} ≤ log end {end}",
            self.topic,
            self.id,
            st.log_start
        );
        write_atomically(
            &self.dir.join(seal::log_start_name(self.generation)),
            offset.to_string().as_bytes(),
        )?;
        st.log_start = offset;
        st.forget_aborted_below_log_start();
        Ok(())
    }

    fn drop_segments_below(&self, st: &mut State, offset: i64) -> io::Result<()> {
        let doomed: Vec<i64> = st
            .segments
            .iter()
            .filter(|(_, s)| s.next_offset <= offset)
            .map(|(b, _)| *b)
            .filter(|b| Some(b) != st.segments.keys().next_back())
            .collect();
        for b in doomed {
            self.check_gate()?;
            if let Some(s) = st.segments.remove(&b) {
                s.delete()?;
            }
        }
        Ok(())
    }

    /// Retention by time and size: deletes whole old segments, never the
    /// active one nor one that ends above the high watermark (Kafka's
    /// `deletableSegments` rule: with fsync=always a rolled segment may hold
    /// batches not yet durable, which a consumer has not been offered).
    /// Only for a cleanup.policy that includes `delete`.
    pub fn apply_retention(&self, now_ms: i64) -> io::Result<usize> {
        let config = self.config();
        if !config.deletes() {
            return Ok(0);
        }
        let hw = self.high_watermark();
        let mut st = self.lock();
        let mut removed = 0;
        loop {
            if st.segments.len() <= 1 {
                break;
            }
            let total: u64 = st.segments.values().map(|s| s.size).sum();
            let Some((&base, oldest)) = st.segments.iter().next() else {
                break;
            };
            let by_time = config.retention_ms >= 0
                && oldest.max_timestamp >= 0
                && oldest.max_timestamp < now_ms - config.retention_ms;
            let by_size =
                config.retention_bytes >= 0 && total - oldest.size >= config.retention_bytes as u64;
            if !(by_time || by_size) || oldest.next_offset > hw {
                break;
            }
            let next = oldest.next_offset;
            self.check_gate()?;
            self.unmark_clean(&mut st)?;
            if let Some(s) = st.segments.remove(&base) {
                s.delete()?;
            }
            if next > st.log_start {
                self.check_gate()?;
                self.move_log_start(&mut st, next)?;
            }
            removed += 1;
        }
        Ok(removed)
    }
}
