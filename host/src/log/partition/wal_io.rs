//! A partition's side of the shared write-ahead log: attaching it, taking
//! back at recovery what the segments lost, the durable file a small
//! append's caller syncs, checkpoints and the write-out between them.

use super::*;

impl Partition {
    /// Makes small appends durable through `wal`, where this partition's
    /// topic has id `topic_id`.
    pub fn with_wal(mut self, wal: Arc<Wal>, topic_id: [u8; 16]) -> Self {
        self.wal = Some((wal, (topic_id, self.id)));
        self
    }

    /// After a crash: appends the batches of the write-ahead log that the
    /// segments lost (those at or past the recovered log end, in order),
    /// rebuilding producer state and the aborted-transaction index as the
    /// original appends did, and syncs them. Returns how many it appended.
    pub fn recover_from_wal(&self, batches: &[Vec<u8>]) -> io::Result<usize> {
        let mut st = self.lock();
        self.check_gate()?;
        let mut n = 0;
        for bytes in batches {
            let Some(h) = batch::parse_header(bytes).filter(|h| h.size == bytes.len()) else {
                tracing::error!(topic = %self.topic, partition = self.id, "a write-ahead log frame holds no whole batch; skipped");
                continue;
            };
            let end = st.log_end();
            if h.last_offset() < end {
                continue; // the segment kept it
            }
            if h.base_offset != end {
                tracing::error!(topic = %self.topic, partition = self.id, log_end = end, batch_offset = h.base_offset, "the write-ahead log does not continue the segment; its later batches are not replayed");
                break;
            }
            self.unmark_clean(&mut st)?;
            self.maybe_roll(&mut st, bytes.len() as u64, h.max_timestamp)?;
            st.active()?.append(bytes, &h)?;
            let State {
                producers, aborted, ..
            } = &mut *st;
            replay_batch(&h, || Ok(bytes.clone()), producers, aborted)?;
            n += 1;
        }
        if n > 0 {
            st.active()?.sync()?;
            self.advance_high_watermark(st.log_end());
            tracing::info!(topic = %self.topic, partition = self.id, batches = n, log_end = st.log_end(), "batches taken back from the write-ahead log");
        }
        Ok(n)
    }

    /// The file whose fdatasync makes a batch just written to the active
    /// segment durable: the write-ahead log's when the batch was framed
    /// there, else the segment's.
    pub(super) fn durable_file(&self, st: &mut State, bytes: &[u8]) -> io::Result<Arc<fs::File>> {
        st.appends += 1;
        if let Some((log, key)) = &self.wal {
            if !st.direct && bytes.len() <= wal::MAX_FRAMED_BATCH {
                match log.append_as(*key, self.generation, bytes) {
                    Ok(f) => {
                        st.wal_dirty = true;
                        return Ok(f);
                    }
                    Err(e) => {
                        tracing::warn!(topic = %self.topic, partition = self.id, error = %e, "writing to the write-ahead log failed; syncing the segment instead");
                    }
                }
            }
            st.direct = true;
        }
        st.active()?.data_file()
    }

    /// A checkpoint's step (after the write-ahead log rotated): syncs the
    /// active segment if anything since the last checkpoint relied on the
    /// old files, and lets appends use the new file again.
    ///
    /// A partition in direct mode is synced under its lock (its appends'
    /// own fdatasyncs keep that cheap), so no direct append slips between
    /// the sync and leaving direct mode. Otherwise the sync runs without the
    /// lock, so appends go on meanwhile, and the segment counts as synced
    /// only if none came: one that did relies on the new file (or is
    /// direct), and the next checkpoint syncs it.
    pub fn checkpoint(&self) -> io::Result<()> {
        let (file, appends) = {
            let mut st = self.lock();
            if st.direct {
                st.active()?.sync()?;
                st.direct = false;
                st.wal_dirty = false;
                return Ok(());
            }
            if !st.wal_dirty {
                return Ok(());
            }
            (st.active()?.file.clone(), st.appends)
        };
        // Syncs only if written since its last sync (an eviction from the
        // open-file cache syncs too), reopening it if the cache closed it.
        file.sync()?;
        let mut st = self.lock();
        if st.appends == appends {
            st.wal_dirty = false;
        }
        Ok(())
    }

    /// Starts writing out the active segment's bytes that only the
    /// write-ahead log has made durable, once at least `min` of them are
    /// waiting ([`crate::log::writeback`]); returns how many bytes it started.
    pub fn start_writeback(&self, min: u64) -> io::Result<u64> {
        let (file, from, to) = {
            let mut st = self.lock();
            if !st.wal_dirty {
                return Ok(0);
            }
            let seg = st.active()?;
            // A file the cache closed was synced when it was closed.
            let Some(file) = seg.file.if_open() else {
                return Ok(0);
            };
            let (base, to) = (seg.base_offset, seg.size);
            let from = match st.written_out {
                (b, pos) if b == base && pos <= to => pos,
                _ => 0,
            };
            if to - from < min {
                return Ok(0);
            }
            st.written_out = (base, to);
            (file, from, to)
        };
        crate::log::writeback::start(&file, from, to - from)?;
        Ok(to - from)
    }
}
