//! One segment of a partition log: a file of batches (as received, offsets
//! assigned) named by its base offset, with a sparse offset index and a time
//! index kept in memory and written beside it (`.index`, `.timeindex`) when
//! the segment is rolled or the broker shuts down cleanly.
//!
//! Recovery: a segment opened after a crash is scanned batch by batch; the
//! first batch whose header, length or CRC does not hold marks the torn tail,
//! and the file is truncated there. Touches only its own three files.
//!
//! Files are named by base offset and, for a generation of a partition
//! taken over in cluster mode, that generation (`<base>.g<g>.log`; see
//! `partition::seal`). A segment file is only ever created new (O_EXCL),
//! so no two writers share one; a sealed segment is opened with a limit and
//! bytes past it are never read.
//!
//! The data file carries a zero-filled tail ahead of its end while it is
//! active ([`super::zero_tail`]), so most appends do not change its size;
//! recovery reads the zeros as the end of the log, and a roll or a clean
//! shutdown trims them ([`Segment::trim`]).

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{self, BatchHeader, HEADER_LEN};
use super::open_files::{CachedFile, OpenFiles};
use super::zero_tail::{self, ZeroTail};
use crate::invariant::invariant;

/// Bytes of log between two sparse index entries.
pub const INDEX_INTERVAL: u64 = 4096;

/// A segment file and its indexes.
#[derive(Debug)]
pub struct Segment {
    /// Offset of the first batch this segment may hold.
    pub base_offset: i64,
    /// The data file, open while the broker's open-file cache holds it
    /// ([`super::open_files`]); a descriptor handed out (to the
    /// group-commit flusher, a read) stays valid after an eviction.
    pub file: Arc<CachedFile>,
    /// Bytes written.
    pub size: u64,
    /// Offset one past the last record (base_offset when empty).
    pub next_offset: i64,
    /// Largest batch max-timestamp seen (-1 when empty).
    pub max_timestamp: i64,
    /// The first batch's max timestamp (-1 when empty or without one): what
    /// segment.ms counts from.
    pub first_max_timestamp: i64,
    /// When this process created or opened the segment (wall clock, ms).
    pub created_ms: i64,
    /// Sparse (offset, position) entries, ascending.
    index: Vec<(i64, u64)>,
    /// Sparse (timestamp, offset) entries with ascending timestamps.
    time_index: Vec<(i64, i64)>,
    /// Position of the last index entry.
    last_indexed: Option<u64>,
    /// Zeros kept ahead of `size` in the data file.
    tail: ZeroTail,
    /// The size up to which the `.index`/`.timeindex` files on disk match
    /// the in-memory indexes (None: not written, or stale): a clean close
    /// rewrites only segments that changed.
    indexed: Option<u64>,
    dir: PathBuf,
    /// The generation whose leader created the file (0 outside cluster mode).
    pub generation: u64,
}

/// The file name stem for a base offset.
pub fn stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

/// The file name stem of segment `base_offset` created by `generation`.
pub fn stem_of(base_offset: i64, generation: u64) -> String {
    match generation {
        0 => stem(base_offset),
        g => format!("{}.g{g}", stem(base_offset)),
    }
}

/// The (base offset, generation) of a segment data file's name.
pub fn parse_name(name: &str) -> Option<(i64, u64)> {
    let stem = name.strip_suffix(".log")?;
    match stem.split_once(".g") {
        None => Some((stem.parse().ok()?, 0)),
        Some((base, g)) => {
            let g: u64 = g.parse().ok()?;
            (g > 0).then_some(())?;
            Some((base.parse().ok()?, g))
        }
    }
}

/// Reads `file`'s bytes from `pos + buf.len()` on into `buf`'s spare
/// capacity until `buf` holds `len` bytes (`buf` then holds the file's bytes
/// `pos..pos + len`), without zero-filling that capacity first.
/// A file that ends sooner is `UnexpectedEof`, as `read_exact_at`.
fn read_to_len_at(file: &fs::File, buf: &mut Vec<u8>, len: usize, pos: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.reserve(len.saturating_sub(buf.len()));
    while buf.len() < len {
        let at = pos
            .checked_add(buf.len() as u64)
            .and_then(|a| libc::off_t::try_from(a).ok())
            .ok_or_else(|| io::Error::other("read position past off_t"))?;
        let missing = len - buf.len();
        let spare = &mut buf.spare_capacity_mut()[..missing];
        // SAFETY: pread writes at most `spare.len()` bytes to `spare`, which
        // is this Vec's own allocated, writable capacity; the descriptor
        // is owned by `file`, open for the whole call.
        #[allow(unsafe_code)]
        let n =
            unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), at) };
        match n {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ));
            }
            n if n > 0 => {
                let filled = buf.len() + n as usize;
                // SAFETY: pread initialised the first `n` bytes of the spare
                // capacity (`n <= spare.len()`), so `filled <= len <= capacity`.
                #[allow(unsafe_code)]
                unsafe {
                    buf.set_len(filled)
                };
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

impl Segment {
    fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!(
            "{}.{ext}",
            stem_of(self.base_offset, self.generation)
        ))
    }

    /// Creates an empty segment of `generation` whose file grows `chunk`
    /// bytes of zeros at a time. The file must not exist yet (O_EXCL):
    /// a writer never adopts a file another may hold open.
    pub fn create(
        files: &Arc<OpenFiles>,
        dir: &Path,
        base_offset: i64,
        generation: u64,
        chunk: u64,
    ) -> io::Result<Self> {
        let path = dir.join(format!("{}.log", stem_of(base_offset, generation)));
        let file = files.create_new(&path)?;
        Ok(Segment {
            base_offset,
            file,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            first_max_timestamp: -1,
            created_ms: crate::clock::now_ms(),
            index: Vec::new(),
            time_index: Vec::new(),
            last_indexed: None,
            tail: ZeroTail::new(0, chunk),
            indexed: None,
            dir: dir.to_path_buf(),
            generation,
        })
    }

    /// Opens an existing segment. When `verify` is set every batch's CRC is
    /// checked and a torn or corrupt tail is truncated; otherwise headers
    /// are trusted. A zero-filled tail is cut off quietly; anything else
    /// after the last whole batch is reported.
    ///
    /// With a `limit` (a sealed segment) only the first `limit` bytes are
    /// read and the file is left as it is: what lies past it was written
    /// after a takeover and never belongs to the log.
    pub fn open(
        files: &Arc<OpenFiles>,
        dir: &Path,
        base_offset: i64,
        generation: u64,
        verify: bool,
        chunk: u64,
        limit: Option<u64>,
    ) -> io::Result<Self> {
        let path = dir.join(format!("{}.log", stem_of(base_offset, generation)));
        let handle = files.open_existing(&path)?;
        let file = handle.get()?;
        let file_len = file.metadata()?.len();
        let len = limit.map_or(file_len, |l| l.min(file_len));
        let mut seg = Segment {
            base_offset,
            file: handle,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            first_max_timestamp: -1,
            created_ms: crate::clock::now_ms(),
            index: Vec::new(),
            time_index: Vec::new(),
            last_indexed: None,
            tail: ZeroTail::new(file_len, chunk),
            indexed: None,
            dir: dir.to_path_buf(),
            generation,
        };
        let mut pos = 0u64;
        let mut head = [0u8; HEADER_LEN];
        let mut body = Vec::new();
        while pos + HEADER_LEN as u64 <= len {
            if file.read_exact_at(&mut head, pos).is_err() {
                break;
            }
            let Some(h) = batch::parse_header(&head) else {
                break;
            };
            if h.magic != 2 || pos + h.size as u64 > len || h.base_offset < seg.next_offset {
                break;
            }
            if verify {
                body.resize(h.size, 0);
                if file.read_exact_at(&mut body, pos).is_err() || !batch::crc_ok(&body, &h) {
                    break;
                }
            }
            seg.note_batch(&h, pos);
            pos += h.size as u64;
        }
        if pos < len && limit.is_none() {
            if zero_tail::is_zero(&file, pos, len)? {
                tracing::debug!(file = %path.display(), kept = pos, "cutting the zero-filled tail");
            } else {
                tracing::warn!(file = %path.display(), kept = pos, dropped = len - pos, "truncating a torn or corrupt segment tail");
            }
            seg.tail.trim(&file, pos)?;
            file.sync_data()?;
        }
        seg.size = pos;
        Ok(seg)
    }

    /// Updates in-memory bookkeeping for a batch written at `pos`.
    fn note_batch(&mut self, h: &BatchHeader, pos: u64) {
        if pos == 0 {
            self.first_max_timestamp = h.max_timestamp;
        }
        let due = self
            .last_indexed
            .is_none_or(|last| pos - last >= INDEX_INTERVAL);
        if due {
            self.index.push((h.base_offset, pos));
            self.last_indexed = Some(pos);
        }
        if h.max_timestamp > self.max_timestamp {
            if due || self.time_index.is_empty() {
                self.time_index.push((h.max_timestamp, h.base_offset));
            }
            self.max_timestamp = h.max_timestamp;
        }
        self.next_offset = h.last_offset() + 1;
    }

    /// Appends a batch whose offsets are already assigned: it continues
    /// the segment exactly (its base offset is the segment's next offset,
    /// the log end of the active segment) and ends at or after its base, so
    /// offsets strictly increase through the partition.
    pub fn append(&mut self, bytes: &[u8], h: &BatchHeader) -> io::Result<()> {
        invariant!(
            h.base_offset == self.next_offset && h.last_offset() >= h.base_offset,
            "segment {} of {}: batch [{}, {}] appended at log end {}: offsets must continue the log and increase",
            self.base_offset,
            self.dir.display(),
            h.base_offset,
            h.last_offset(),
            self.next_offset
        );
        let file = self.file.get()?;
        self.indexed = None;
        let written = file.write_all_at(bytes, self.size);
        // Even a failed write may have changed the file.
        self.file.mark_dirty();
        written?;
        let pos = self.size;
        self.size += bytes.len() as u64;
        self.note_batch(h, pos);
        // A failure here leaves the batch written and the file merely
        // without zeros ahead; the append stands.
        if let Err(e) = self.tail.after_write(&file, self.size, bytes.len() as u64) {
            tracing::warn!(error = %e, "zero-filling ahead of a segment's end failed");
        }
        self.file.mark_dirty();
        Ok(())
    }

    /// Cuts the zero-filled tail off (before a roll or a clean shutdown; the
    /// caller's fdatasync makes it durable). Opens no file when there are
    /// no zeros to cut.
    pub fn trim(&mut self) -> io::Result<()> {
        if !self.tail.ahead_of(self.size) {
            return Ok(());
        }
        let file = self.file.get()?;
        let trimmed = self.tail.trim(&file, self.size);
        self.file.mark_dirty();
        trimmed
    }

    /// Makes the data file durable if it was written since it was last
    /// synced through its handle (a roll, a checkpoint, a clean close).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync()
    }

    /// The open data file (reopened if the cache closed it).
    pub fn data_file(&self) -> io::Result<Arc<fs::File>> {
        self.file.get()
    }

    /// Position of the batch containing `offset`, or of the first batch
    /// after it; None past the end.
    pub fn position_of(&self, offset: i64) -> io::Result<Option<u64>> {
        let start = match self.index.partition_point(|&(o, _)| o <= offset) {
            0 => 0,
            i => self.index[i - 1].1,
        };
        let mut pos = start;
        let mut head = [0u8; HEADER_LEN];
        if pos + HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let file = self.file.get()?;
        while pos + HEADER_LEN as u64 <= self.size {
            file.read_exact_at(&mut head, pos)?;
            let Some(h) = batch::parse_header(&head) else {
                return Ok(None);
            };
            if h.last_offset() >= offset {
                return Ok(Some(pos));
            }
            pos += h.size as u64;
        }
        Ok(None)
    }

    /// Position of the first batch with max timestamp ≥ `ts`.
    pub fn position_for_timestamp(&self, ts: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        let from_offset = match self.time_index.partition_point(|&(t, _)| t < ts) {
            0 => self.base_offset,
            i => self.time_index[i - 1].1,
        };
        let Some(mut pos) = self.position_of(from_offset)? else {
            return Ok(None);
        };
        let mut head = [0u8; HEADER_LEN];
        let file = self.file.get()?;
        while pos + HEADER_LEN as u64 <= self.size {
            file.read_exact_at(&mut head, pos)?;
            let Some(h) = batch::parse_header(&head) else {
                return Ok(None);
            };
            if h.max_timestamp >= ts {
                return Ok(Some((pos, h)));
            }
            pos += h.size as u64;
        }
        Ok(None)
    }

    /// Reads whole batches from `pos` while under `max_bytes`, stopping
    /// before any batch at or past `below_offset`. With `min_one` the first
    /// batch is read whole even if it alone exceeds `max_bytes`.
    pub fn read(
        &self,
        pos: u64,
        max_bytes: usize,
        min_one: bool,
        below_offset: i64,
    ) -> io::Result<Vec<u8>> {
        let avail = self.size.saturating_sub(pos) as usize;
        let want = avail.min(max_bytes.max(HEADER_LEN));
        // Read into fresh capacity: a Fetch reads megabytes here, and
        // zero-filling them first cost as much as copying them.
        let mut buf = Vec::with_capacity(want);
        let file = self.file.get()?;
        read_to_len_at(&file, &mut buf, want, pos)?;
        // Make sure the first batch is whole even if it exceeds max_bytes.
        if min_one
            && let Some(h) = batch::parse_header(&buf)
            && h.size > want
            && h.base_offset < below_offset
        {
            read_to_len_at(&file, &mut buf, h.size.min(avail), pos)?;
        }
        // Whole batches within the buffer (which min_one sized to hold the
        // first batch) and, without min_one, within max_bytes.
        let limit = if min_one {
            buf.len()
        } else {
            buf.len().min(max_bytes)
        };
        let mut end = 0;
        while let Some(h) = batch::parse_header(&buf[end..]) {
            if h.base_offset >= below_offset || end + h.size > limit {
                break;
            }
            end += h.size;
        }
        buf.truncate(end);
        Ok(buf)
    }

    /// Reads the batch at `pos` in full.
    pub fn read_batch(&self, pos: u64, h: &BatchHeader) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; h.size];
        self.file.get()?.read_exact_at(&mut buf, pos)?;
        Ok(buf)
    }

    /// Writes the index files (at roll and clean shutdown) unless those on
    /// disk already match.
    pub fn write_indexes(&mut self) -> io::Result<()> {
        if self.indexed == Some(self.size) {
            return Ok(());
        }
        self.write_index_files()?;
        self.indexed = Some(self.size);
        Ok(())
    }

    fn write_index_files(&self) -> io::Result<()> {
        let mut idx = Vec::with_capacity(self.index.len() * 16);
        for (o, p) in &self.index {
            idx.extend_from_slice(&o.to_be_bytes());
            idx.extend_from_slice(&p.to_be_bytes());
        }
        fs::write(self.path("index"), idx)?;
        let mut tidx = Vec::with_capacity(self.time_index.len() * 16);
        for (t, o) in &self.time_index {
            tidx.extend_from_slice(&t.to_be_bytes());
            tidx.extend_from_slice(&o.to_be_bytes());
        }
        fs::write(self.path("timeindex"), tidx)
    }

    /// Opens a segment after a clean shutdown: indexes from their files,
    /// the tail after the last index entry walked to find the next offset.
    pub fn open_clean(
        files: &Arc<OpenFiles>,
        dir: &Path,
        base_offset: i64,
        generation: u64,
        chunk: u64,
    ) -> io::Result<Self> {
        let name = stem_of(base_offset, generation);
        let path = dir.join(format!("{name}.log"));
        let handle = files.open_existing(&path)?;
        let file = handle.get()?;
        let size = file.metadata()?.len();
        let read_pairs = |ext: &str| -> io::Result<Vec<(i64, i64)>> {
            let b = fs::read(dir.join(format!("{name}.{ext}")))?;
            if b.len() % 16 != 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "index length"));
            }
            Ok(b.chunks_exact(16)
                .map(|c| {
                    let mut a = [0u8; 8];
                    let mut z = [0u8; 8];
                    a.copy_from_slice(&c[..8]);
                    z.copy_from_slice(&c[8..]);
                    (i64::from_be_bytes(a), i64::from_be_bytes(z))
                })
                .collect())
        };
        let index: Vec<(i64, u64)> = read_pairs("index")?
            .into_iter()
            .map(|(o, p)| (o, p as u64))
            .collect();
        let time_index = read_pairs("timeindex")?;
        if index.iter().any(|&(_, p)| p > size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "index points past the segment",
            ));
        }
        let mut seg = Segment {
            base_offset,
            file: handle,
            size,
            next_offset: base_offset,
            max_timestamp: time_index.last().map_or(-1, |t| t.0),
            first_max_timestamp: -1,
            created_ms: crate::clock::now_ms(),
            last_indexed: index.last().map(|e| e.1),
            index,
            time_index,
            tail: ZeroTail::new(size, chunk),
            indexed: None,
            dir: dir.to_path_buf(),
            generation,
        };
        // What segment.ms counts from: the first batch's max timestamp.
        let mut first = [0u8; HEADER_LEN];
        if size >= HEADER_LEN as u64
            && file.read_exact_at(&mut first, 0).is_ok()
            && let Some(h) = batch::parse_header(&first)
        {
            seg.first_max_timestamp = h.max_timestamp;
        }
        let mut pos = seg.last_indexed.unwrap_or(0);
        let mut head = [0u8; HEADER_LEN];
        while pos + HEADER_LEN as u64 <= size {
            file.read_exact_at(&mut head, pos)?;
            let h = batch::parse_header(&head)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad header"))?;
            seg.max_timestamp = seg.max_timestamp.max(h.max_timestamp);
            seg.next_offset = h.last_offset() + 1;
            pos += h.size as u64;
        }
        if pos != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "segment does not end on a batch boundary",
            ));
        }
        // The in-memory indexes are the files': a clean close need not
        // write them again unless something is appended.
        seg.indexed = Some(size);
        Ok(seg)
    }

    /// Walks every batch header (producer-state replay after a snapshot).
    pub fn for_each_header(
        &self,
        from_offset: i64,
        mut f: impl FnMut(u64, &BatchHeader),
    ) -> io::Result<()> {
        let Some(mut pos) = self.position_of(from_offset)? else {
            return Ok(());
        };
        let mut head = [0u8; HEADER_LEN];
        let file = self.file.get()?;
        while pos + HEADER_LEN as u64 <= self.size {
            file.read_exact_at(&mut head, pos)?;
            let Some(h) = batch::parse_header(&head) else {
                break;
            };
            f(pos, &h);
            pos += h.size as u64;
        }
        Ok(())
    }

    /// Deletes the segment's files.
    pub fn delete(self) -> io::Result<()> {
        for ext in ["log", "index", "timeindex"] {
            match fs::remove_file(self.path(ext)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod read_tests {
    use super::*;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, fs::File) {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        fs::write(&path, bytes).expect("write");
        let f = fs::File::open(&path).expect("open");
        (dir, f)
    }

    #[test]
    fn reads_into_spare_capacity_what_read_exact_at_reads() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let (_dir, f) = file_of(&bytes);
        for (pos, len) in [
            (0u64, 0usize),
            (0, 1),
            (5, 4096),
            (1234, 200_000),
            (0, 300_000),
        ] {
            let mut want = vec![0u8; len];
            f.read_exact_at(&mut want, pos).expect("read_exact_at");
            let mut got = Vec::new();
            read_to_len_at(&f, &mut got, len, pos).expect("read");
            assert_eq!(got, want, "pos {pos} len {len}");
        }
    }

    #[test]
    fn extends_a_partial_read_from_where_it_stopped() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, f) = file_of(&bytes);
        let mut got = Vec::new();
        read_to_len_at(&f, &mut got, 100, 50).expect("first");
        read_to_len_at(&f, &mut got, 9_000, 50).expect("more");
        assert_eq!(got, bytes[50..9_050]);
        // Already long enough: nothing read, nothing cut.
        read_to_len_at(&f, &mut got, 10, 50).expect("none");
        assert_eq!(got.len(), 9_000);
    }

    #[test]
    fn a_file_ending_sooner_is_unexpected_eof() {
        let (_dir, f) = file_of(&[1u8; 100]);
        let mut got = Vec::new();
        let e = read_to_len_at(&f, &mut got, 101, 0).expect_err("past the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let mut got = Vec::new();
        let e = read_to_len_at(&f, &mut got, 1, 100).expect_err("at the end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}

#[cfg(test)]
mod append_tests {
    use super::*;
    use crate::log::batch::data_batch;

    fn batch_at(offset: i64, records: usize) -> (Vec<u8>, BatchHeader) {
        let recs: Vec<(Option<&[u8]>, &[u8])> = (0..records).map(|_| (None, &b"v"[..])).collect();
        let mut bytes = data_batch(&recs, 1, None, false);
        batch::assign_offset(&mut bytes, offset, 0);
        let h = batch::parse_header(&bytes).expect("header");
        (bytes, h)
    }

    #[test]
    fn appends_continue_the_segment() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut seg =
            Segment::create(&OpenFiles::unbounded(), dir.path(), 10, 0, 4096).expect("create");
        for (at, n) in [(10, 3), (13, 1), (14, 2)] {
            let (bytes, h) = batch_at(at, n);
            seg.append(&bytes, &h).expect("append");
        }
        assert_eq!(seg.next_offset, 16);
    }

    #[test]
    #[cfg_attr(
        not(any(debug_assertions, feature = "fault-injection")),
        ignore = "unchecked build"
    )]
    #[should_panic(expected = "batch [11, 11] appended at log end 13")]
    fn a_batch_behind_the_log_end_breaks_the_offset_invariant() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut seg =
            Segment::create(&OpenFiles::unbounded(), dir.path(), 10, 0, 4096).expect("create");
        let (bytes, h) = batch_at(10, 3);
        seg.append(&bytes, &h).expect("append");
        let (bytes, h) = batch_at(11, 1);
        let _ = seg.append(&bytes, &h);
    }
}
