//! Zero-filled space kept ahead of an append-only file's end.
//!
//! Why: an fdatasync after an append that grows the file must also write the
//! inode (the new size), a second device write the flush waits for; an
//! append into space the file already has only writes its data pages. On
//! this VM's ext4 that is 0.15 ms against 0.09 ms per flush (`BENCHMARKS.md`,
//! "Zero-filled tails"). fallocate does not help: writing into an
//! unwritten extent converts it, which is metadata again. So the file is
//! extended with real zeros a chunk at a time, and only the flush of the
//! append that crosses into a new chunk pays for the size change.
//!
//! The price is writing every byte twice (zeros, then data), so only small
//! appends zero-fill ahead: they are the latency-bound ones where the inode
//! write is half the flush. A large append (at least [`SMALL_APPEND`]
//! bytes) just grows the file: its flush is dominated by its data, and
//! bulk producers would otherwise pay double the disk bandwidth. The chunk
//! also bounds the space an idle active segment holds in zeros.
//!
//! Readers never see the zeros as data: every owner keeps its logical end
//! in memory, recovery stops at the first zero frame (a zero length is no
//! valid batch or record frame), and owners trim the tail (`trim`) before a
//! clean shutdown or a roll so a cleanly closed file ends at its data.
//! Touches only the file it is given.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Bytes of zeros added ahead of the end when a small append reaches it.
pub const CHUNK: u64 = 256 << 10;

/// Appends at least this big never zero-fill ahead.
pub const SMALL_APPEND: u64 = 64 << 10;

static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// How far a file is zero-filled.
#[derive(Debug, Clone, Copy)]
pub struct ZeroTail {
    /// The file's length: data up to the owner's end, zeros after it.
    allocated: u64,
    chunk: u64,
}

impl ZeroTail {
    /// A file whose length is `len` (its logical end, or beyond it with
    /// zeros), extended `chunk` bytes at a time.
    pub fn new(len: u64, chunk: u64) -> Self {
        ZeroTail {
            allocated: len,
            chunk: chunk.max(1),
        }
    }

    /// The file's length as far as this tail knows.
    #[cfg(test)]
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Called after writing `len` bytes of data that end at `end`: when a
    /// small write reached the end of the zeros, zero-fill the next chunk,
    /// so this round's flush pays the size change once and the next small
    /// appends do not.
    pub fn after_write(&mut self, file: &File, end: u64, len: u64) -> io::Result<()> {
        if end < self.allocated {
            return Ok(());
        }
        if len >= SMALL_APPEND {
            self.allocated = end;
            return Ok(());
        }
        let target = end + self.chunk;
        let mut at = end;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64) as usize;
            file.write_all_at(&ZEROS[..n], at)?;
            at += n as u64;
        }
        self.allocated = target;
        Ok(())
    }

    /// Whether the file is longer than `end` (a trim would cut something).
    pub fn ahead_of(&self, end: u64) -> bool {
        self.allocated != end
    }

    /// Cuts the zeros off: the file ends at `end` (durable with the file's
    /// next fdatasync).
    pub fn trim(&mut self, file: &File, end: u64) -> io::Result<()> {
        if self.allocated != end {
            file.set_len(end)?;
            self.allocated = end;
        }
        Ok(())
    }
}

/// Whether every byte of `file` from `from` to `to` is zero (a preallocated
/// tail rather than a torn write).
pub fn is_zero(file: &File, from: u64, to: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; ZEROS.len()];
    let mut at = from;
    while at < to {
        let n = (to - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(dir: &std::path::Path) -> File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("f"))
            .expect("open")
    }

    #[test]
    fn an_append_reaching_the_end_zero_fills_one_chunk_ahead() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = scratch(dir.path());
        let mut tail = ZeroTail::new(0, 4096);
        file.write_all_at(b"abc", 0).expect("write");
        tail.after_write(&file, 3, 3).expect("extend");
        assert_eq!(file.metadata().expect("meta").len(), 3 + 4096);
        assert!(is_zero(&file, 3, 3 + 4096).expect("read"));
        // Appends inside the zeros leave the length alone.
        file.write_all_at(b"def", 3).expect("write");
        tail.after_write(&file, 6, 3).expect("extend");
        assert_eq!(file.metadata().expect("meta").len(), 3 + 4096);
        assert!(!is_zero(&file, 0, 6).expect("read"));
        tail.trim(&file, 6).expect("trim");
        assert_eq!(file.metadata().expect("meta").len(), 6);
        assert_eq!(tail.allocated(), 6);
    }

    #[test]
    fn a_large_append_grows_the_file_without_zeros() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = scratch(dir.path());
        let mut tail = ZeroTail::new(0, 4096);
        let big = vec![1u8; SMALL_APPEND as usize];
        file.write_all_at(&big, 0).expect("write");
        tail.after_write(&file, SMALL_APPEND, SMALL_APPEND)
            .expect("extend");
        assert_eq!(file.metadata().expect("meta").len(), SMALL_APPEND);
        // A small one after it zero-fills again.
        file.write_all_at(b"x", SMALL_APPEND).expect("write");
        tail.after_write(&file, SMALL_APPEND + 1, 1)
            .expect("extend");
        assert_eq!(
            file.metadata().expect("meta").len(),
            SMALL_APPEND + 1 + 4096
        );
    }
}
