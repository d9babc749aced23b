//! The shared write-ahead log: one file that makes small appends to every
//! partition durable with one fdatasync.
//!
//! Why: with `--fsync always` each partition's active segment is its own
//! file, and a group-commit round pays one device flush per file it
//! touches, so eight producers on eight partitions paid eight flushes a
//! round where eight on one partition paid one. A small append (a batch of
//! at most [`MAX_FRAMED_BATCH`] bytes) is therefore also written here,
//! framed with its topic id and partition, and the round syncs only this
//! file. The segment's own copy reaches the disk later: a checkpoint
//! ([`super::LogManager::checkpoint_wal`]) rotates to a new file,
//! fdatasyncs every segment written since, then frees the old files
//! (recycled, see below).
//!
//! File: `__wal/<seq>.wal`, a header `KAASWAL\x03 | seq u64` and then
//! frames `len u32 | crc32c u32 | topic id [16] | partition i32 |
//! generation u64 | batch`, big-endian, `len` counting the bytes after the
//! CRC; `generation` is the partition directory's generation the writer
//! led (`partition::seal`, cluster mode; 0 otherwise). Files of the
//! previous format (`KAASWAL\x02`, no generation) are read as generation 0. The CRC covers the
//! file's seq and those bytes. Reading a file stops at a zero length (the
//! zero-filled tail, [`super::zero_tail`]), and at a short frame or a bad
//! CRC (a torn write, never acknowledged: its fdatasync had not returned).
//!
//! Files are recycled: a checkpoint renames a file it no longer needs to
//! `free-<seq>.wal` instead of deleting it, and the next rotation rewrites
//! its header and takes it as the new file. Appends then overwrite space the
//! file already has, so its flushes write no inode and no chunk of zeros
//! (BENCHMARKS.md, "Transactions": 8–13 % more 100-record transactions
//! with 8 producers). The frames of the file's earlier life stay behind the
//! new ones, but their CRCs were salted with another seq, so reading stops
//! at the first of them. The header is made durable before the rename, so a
//! file named for its seq always carries that seq. Files written before the
//! header existed (no magic; their first byte is a length's zero) are read
//! with the unsalted CRC they were written with.
//!
//! Three rules keep every partition's replay free of gaps:
//! 1. a partition writes its frames under its own lock, so they are in its
//!    offset order;
//! 2. [`Wal::rotate`] fdatasyncs the old file before any frame goes to the
//!    new one, so a durable frame's predecessors are durable too;
//! 3. a partition whose append bypassed this log (a large batch, synced in
//!    its segment) stays off it until the next checkpoint has synced its
//!    segment (`Partition`'s `direct` flag).
//!
//! In cluster mode each broker process writes its own directory
//! (`__wal/<node>-<incarnation>/`; [`Wal::create`] and [`recover`] take any
//! directory), and a broker taking over a partition reads the dead one's
//! with [`frames_for`], which changes nothing there.
//!
//! Touches only the files in its directory.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::sync::sync_dir;
use super::zero_tail::{self, ZeroTail};

/// Batches larger than this are made durable by syncing their segment:
/// writing them twice would cost bulk producers disk bandwidth, and their
/// flush is dominated by their data anyway.
pub const MAX_FRAMED_BATCH: usize = zero_tail::SMALL_APPEND as usize;

/// The directory, under the data directory.
pub const DIR: &str = "__wal";

const HEAD: usize = 8;
/// Topic id and partition (format 2).
const ADDRESS_V2: usize = 20;
/// Topic id, partition and generation (format 3, written now).
const ADDRESS: usize = 28;

/// The first bytes of every file written now, then its seq.
const MAGIC: &[u8; 8] = b"KAASWAL\x03";
/// The first bytes of a file of format 2 (frames without a generation).
const MAGIC_V2: &[u8; 8] = b"KAASWAL\x02";
const HEADER: u64 = 16;

/// Files kept for recycling after a checkpoint (each about the size of what
/// a checkpoint interval writes).
const KEEP_FREE: usize = 1;
const FREE_PREFIX: &str = "free-";

/// A partition as frames name it: the topic's id (a topic deleted and
/// created again under its name is another topic) and the partition index.
pub type PartitionKey = ([u8; 16], i32);

/// One frame of a partition, as [`frames_for`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The partition directory's generation its writer led.
    pub generation: u64,
    /// The batch, offsets assigned.
    pub batch: Vec<u8>,
}

/// A frame read from a file: its partition, generation and batch.
type Read<'a> = (PartitionKey, u64, &'a [u8]);

/// What the files found at open hold.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Each partition's batches, in the order they were appended.
    pub batches: HashMap<PartitionKey, Vec<Vec<u8>>>,
    /// The files read (deleted once every partition has taken its batches).
    pub files: Vec<PathBuf>,
    /// The sequence number after the highest file found.
    pub next_seq: u64,
}

#[derive(Debug)]
struct Active {
    file: Arc<File>,
    /// Where the next frame goes (frames start after the header).
    size: u64,
    tail: ZeroTail,
    /// When the first frame since the last rotation was written.
    first_write: Option<Instant>,
}

/// The write-ahead log of a data directory.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    active: Mutex<Active>,
    /// The active file's seq. Changed only with `active` locked, so an
    /// append can salt its frame's CRC before taking the lock and check the
    /// seq under it.
    seq: AtomicU64,
    /// Files rotated away whose partitions' segments are not yet known to
    /// be synced; deleted by a checkpoint that synced them.
    retired: Mutex<Vec<PathBuf>>,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
    /// Checkpoints completed (for /metrics).
    checkpoints: AtomicU64,
    /// Checkpoints that failed (for /metrics).
    failed_checkpoints: AtomicU64,
    /// Files no longer needed, kept to become the next file of a rotation.
    free: Mutex<Vec<PathBuf>>,
}

fn file_name(seq: u64) -> String {
    format!("{seq:020}.wal")
}

/// Reads every file in `dir` (creating nothing). Frames after a torn one in
/// the same file are not trusted.
pub fn recover(dir: &Path) -> io::Result<Recovered> {
    let files = numbered(dir, "")?;
    let mut out = Recovered {
        next_seq: files.last().map_or(1, |(s, _)| s + 1),
        ..Recovered::default()
    };
    for (seq, path) in files {
        let bytes = fs::read(&path)?;
        let (frames, end) = read_file(&bytes, seq);
        // A recycled file always has its earlier life's bytes after its
        // frames; only an old-format file's leftovers mean a torn write.
        if !bytes.starts_with(MAGIC)
            && !bytes.starts_with(MAGIC_V2)
            && end < bytes.len()
            && !bytes[end..].iter().all(|&b| b == 0)
        {
            tracing::warn!(file = %path.display(), kept = end, dropped = bytes.len() - end, "a torn frame ends the write-ahead log file");
        }
        for (key, _, batch) in frames {
            out.batches.entry(key).or_default().push(batch.to_vec());
        }
        out.files.push(path);
    }
    Ok(out)
}

/// The frames of file `seq`, and where they end: after the header, CRCs
/// salted with `seq`; in a file without the header (written before files
/// were recycled), from the start with plain CRCs. A header naming another
/// seq holds no frames of this file.
fn read_file(bytes: &[u8], seq: u64) -> (Vec<Read<'_>>, usize) {
    let address = if bytes.starts_with(MAGIC) {
        ADDRESS
    } else if bytes.starts_with(MAGIC_V2) {
        ADDRESS_V2
    } else {
        return read_frames(bytes, 0, None, ADDRESS_V2);
    };
    let named = bytes
        .get(MAGIC.len()..HEADER as usize)
        .map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])));
    if named != Some(seq) {
        return (Vec::new(), 0);
    }
    read_frames(bytes, HEADER as usize, Some(seq), address)
}

/// `key`'s batches in every file of `dir` (a dead broker's write-ahead
/// log, in cluster mode), in file and frame order, with the generation
/// each was written by. Read-only: nothing in `dir` is changed, recycled
/// or deleted (another taker may read it for its own partitions, and a
/// paused owner may still be writing it: a frame it has not finished ends
/// its file's frames, as after a crash).
pub fn frames_for(dir: &Path, key: PartitionKey) -> io::Result<Vec<Frame>> {
    let mut out = Vec::new();
    for (seq, path) in numbered(dir, "")? {
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            // Retired and deleted by its owner meanwhile: its frames were
            // in synced segments.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let (frames, _) = read_file(&bytes, seq);
        out.extend(frames.into_iter().filter(|(k, _, _)| *k == key).map(
            |(_, generation, batch)| Frame {
                generation,
                batch: batch.to_vec(),
            },
        ));
    }
    Ok(out)
}

/// The CRC a frame of file `seq` (None: an old-format file) carries.
fn frame_crc(seq: Option<u64>, body: &[u8]) -> u32 {
    match seq {
        Some(seq) => crc32c::crc32c_append(crc32c::crc32c(&seq.to_be_bytes()), body),
        None => crc32c::crc32c(body),
    }
}

/// The whole frames from `pos` on, and where they end.
fn read_frames(
    bytes: &[u8],
    mut pos: usize,
    seq: Option<u64>,
    address: usize,
) -> (Vec<Read<'_>>, usize) {
    let mut frames = Vec::new();
    while let Some(head) = bytes.get(pos..pos + HEAD) {
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if len <= address {
            break;
        }
        let Some(body) = bytes.get(pos + HEAD..pos + HEAD + len) else {
            break;
        };
        if frame_crc(seq, body) != crc {
            break;
        }
        let mut topic = [0u8; 16];
        topic.copy_from_slice(&body[..16]);
        let partition = i32::from_be_bytes([body[16], body[17], body[18], body[19]]);
        let generation = match body.get(20..28) {
            Some(g) if address == ADDRESS => u64::from_be_bytes(g.try_into().unwrap_or([0; 8])),
            _ => 0,
        };
        frames.push(((topic, partition), generation, &body[address..]));
        pos += HEAD + len;
    }
    (frames, pos)
}

fn frame(seq: u64, key: PartitionKey, generation: u64, batch: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(HEAD + ADDRESS + batch.len());
    f.extend_from_slice(&((ADDRESS + batch.len()) as u32).to_be_bytes());
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(&key.0);
    f.extend_from_slice(&key.1.to_be_bytes());
    f.extend_from_slice(&generation.to_be_bytes());
    f.extend_from_slice(batch);
    let crc = frame_crc(Some(seq), &f[HEAD..]);
    f[4..HEAD].copy_from_slice(&crc.to_be_bytes());
    f
}

fn header(seq: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..MAGIC.len()].copy_from_slice(MAGIC);
    h[MAGIC.len()..].copy_from_slice(&seq.to_be_bytes());
    h
}

/// Creates file `seq`, zero-filled ahead, durable with its directory entry.
fn create_file(dir: &Path, seq: u64) -> io::Result<Active> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join(file_name(seq)))?;
    file.write_all_at(&header(seq), 0)?;
    let mut tail = ZeroTail::new(HEADER, zero_tail::CHUNK);
    tail.after_write(&file, HEADER, HEADER)?;
    file.sync_all()?;
    sync_dir(dir)?;
    Ok(Active {
        file: Arc::new(file),
        size: HEADER,
        tail,
        first_write: None,
    })
}

/// Makes the free file `free` file `seq`: its header first (durable), then
/// its name (durable with the directory).
fn recycle_file(dir: &Path, free: &Path, seq: u64) -> io::Result<Active> {
    let file = OpenOptions::new().read(true).write(true).open(free)?;
    file.write_all_at(&header(seq), 0)?;
    file.sync_data()?;
    fs::rename(free, dir.join(file_name(seq)))?;
    sync_dir(dir)?;
    let len = file.metadata()?.len().max(HEADER);
    Ok(Active {
        file: Arc::new(file),
        size: HEADER,
        tail: ZeroTail::new(len, zero_tail::CHUNK),
        first_write: None,
    })
}

/// The files in `dir` named `<prefix><seq>.wal`, by seq (none if there is
/// no `dir`).
fn numbered(dir: &Path, prefix: &str) -> io::Result<Vec<(u64, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let seq = e
                .file_name()
                .to_str()?
                .strip_prefix(prefix)?
                .strip_suffix(".wal")?
                .parse()
                .ok()?;
            Some((seq, e.path()))
        })
        .collect();
    files.sort_unstable();
    Ok(files)
}

/// The free files in `dir`, oldest first (none if there is no `dir`).
pub fn free_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(numbered(dir, FREE_PREFIX)?
        .into_iter()
        .map(|(_, p)| p)
        .collect())
}

/// File `seq`: a free file recycled if there is one, else a new file. A
/// free file that cannot be recycled stays free (its rewritten header names
/// no file) and a new file is created instead.
fn next_file(dir: &Path, free: &mut Vec<PathBuf>, seq: u64) -> io::Result<Active> {
    if let Some(f) = free.pop() {
        match recycle_file(dir, &f, seq) {
            Ok(next) => return Ok(next),
            Err(e) => {
                tracing::warn!(file = %f.display(), error = %e, "recycling a write-ahead log file failed; creating one");
                if f.exists() {
                    free.push(f);
                }
            }
        }
    }
    create_file(dir, seq)
}

impl Wal {
    /// Starts file `seq` in `dir` (recycling a free file a previous run
    /// left, if any); `retired` are older files still to be freed by the
    /// next checkpoint.
    pub fn create(dir: &Path, seq: u64, retired: Vec<PathBuf>) -> io::Result<Arc<Wal>> {
        fs::create_dir_all(dir)?;
        let mut free = free_files(dir)?;
        let active = next_file(dir, &mut free, seq)?;
        Ok(Arc::new(Wal {
            dir: dir.to_path_buf(),
            active: Mutex::new(active),
            seq: AtomicU64::new(seq),
            retired: Mutex::new(retired),
            checkpointing: Mutex::new(()),
            checkpoints: AtomicU64::new(0),
            failed_checkpoints: AtomicU64::new(0),
            free: Mutex::new(free),
        }))
    }

    fn free(&self) -> MutexGuard<'_, Vec<PathBuf>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn active(&self) -> MutexGuard<'_, Active> {
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one batch of `key`'s partition (generation 0); returns the
    /// file whose fdatasync makes it durable.
    pub fn append(&self, key: PartitionKey, batch: &[u8]) -> io::Result<Arc<File>> {
        self.append_as(key, 0, batch)
    }

    /// Writes one batch of `key`'s partition, written by a leader of the
    /// directory's `generation`; returns the file whose fdatasync makes it
    /// durable.
    pub fn append_as(
        &self,
        key: PartitionKey,
        generation: u64,
        batch: &[u8],
    ) -> io::Result<Arc<File>> {
        // Framed (copied and checksummed) outside the lock every partition
        // shares; again only if a rotation came in between.
        let seq = self.seq();
        let mut f = frame(seq, key, generation, batch);
        let mut a = self.active();
        let now = self.seq();
        if now != seq {
            f = frame(now, key, generation, batch);
        }
        a.file.write_all_at(&f, a.size)?;
        a.size += f.len() as u64;
        let Active {
            file, size, tail, ..
        } = &mut *a;
        // Without zeros ahead the frame stands; its flush just costs more.
        if let Err(e) = tail.after_write(file, *size, f.len() as u64) {
            tracing::warn!(error = %e, "zero-filling ahead of the write-ahead log's end failed");
        }
        a.first_write.get_or_insert_with(Instant::now);
        Ok(a.file.clone())
    }

    /// Bytes written to the current file and how long ago the first of
    /// them was (None while it is empty).
    pub fn pending(&self) -> (u64, Option<std::time::Duration>) {
        let a = self.active();
        (a.size - HEADER, a.first_write.map(|t| t.elapsed()))
    }

    /// The current file's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Held by a checkpoint for its whole run.
    pub fn checkpoint_guard(&self) -> MutexGuard<'_, ()> {
        self.checkpointing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the current file durable and starts a new one (rule 2);
    /// returns every retired file, this one included.
    /// Callers hold [`Wal::checkpoint_guard`]; the new file is prepared
    /// before appends are held up for the old one's fdatasync.
    pub fn rotate(&self) -> io::Result<Vec<PathBuf>> {
        let seq = self.seq();
        let next = next_file(&self.dir, &mut self.free(), seq + 1)?;
        let mut a = self.active();
        a.file.sync_data()?;
        *a = next;
        self.seq.store(seq + 1, Ordering::Release);
        drop(a);
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired.push(self.dir.join(file_name(seq)));
        Ok(retired.clone())
    }

    /// Frees retired files whose partitions' segments are synced: up to
    /// [`KEEP_FREE`] are kept for recycling, the rest deleted.
    pub fn delete_retired(&self, files: &[PathBuf]) -> io::Result<()> {
        self.release(files)?;
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|f| !files.contains(f));
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Cluster mode: retired files a checkpoint must not free (a partition
    /// whose frames they hold was abandoned unsynced): they leave the
    /// retired list and stay on disk, as they are, for the partition's next
    /// leader to replay ([`frames_for`]).
    pub fn keep_retired(&self, files: &[PathBuf]) {
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|f| !files.contains(f));
    }

    /// Files nothing needs any more (retired ones after a checkpoint, or
    /// the ones recovery read once their batches are synced): renamed to
    /// free files while the pool has room, deleted otherwise; durable with
    /// the directory.
    pub fn release(&self, files: &[PathBuf]) -> io::Result<()> {
        let mut free = self.free();
        for f in files {
            let Some(name) = f.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let r = if free.len() < KEEP_FREE {
                let to = self.dir.join(format!("{FREE_PREFIX}{name}"));
                fs::rename(f, &to).map(|()| free.push(to))
            } else {
                fs::remove_file(f)
            };
            match r {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        sync_dir(&self.dir)
    }

    /// Checkpoints completed since the broker started.
    pub fn checkpoints(&self) -> u64 {
        self.checkpoints.load(Ordering::Relaxed)
    }

    /// Counts a checkpoint that failed (its caller retries later).
    pub fn note_failed_checkpoint(&self) {
        self.failed_checkpoints.fetch_add(1, Ordering::Relaxed);
    }

    /// Checkpoints that failed since the broker started.
    pub fn failed_checkpoints(&self) -> u64 {
        self.failed_checkpoints.load(Ordering::Relaxed)
    }

    /// Clean shutdown, after every segment is synced: nothing in any file
    /// is needed any more.
    pub fn close(&self) -> io::Result<()> {
        let _one = self.checkpoint_guard();
        let retired = self.rotate()?;
        self.delete_retired(&retired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: [u8; 16] = [1; 16];
    const T2: [u8; 16] = [2; 16];

    /// A frame of format 2 (no generation), as files written before it had one hold.
    fn frame_v2(seq: u64, key: PartitionKey, batch: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&((ADDRESS_V2 + batch.len()) as u32).to_be_bytes());
        f.extend_from_slice(&[0; 4]);
        f.extend_from_slice(&key.0);
        f.extend_from_slice(&key.1.to_be_bytes());
        f.extend_from_slice(batch);
        let crc = frame_crc(Some(seq), &f[HEAD..]);
        f[4..HEAD].copy_from_slice(&crc.to_be_bytes());
        f
    }

    #[test]
    fn files_of_format_2_are_read_as_generation_0() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut bytes = MAGIC_V2.to_vec();
        bytes.extend_from_slice(&3u64.to_be_bytes());
        bytes.extend(frame_v2(3, (T1, 0), b"old"));
        bytes.extend([0u8; 32]);
        fs::write(dir.path().join(file_name(3)), &bytes).expect("write");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(r.batches.get(&(T1, 0)), Some(&vec![b"old".to_vec()]));
        let f = frames_for(dir.path(), (T1, 0)).expect("frames");
        assert_eq!(
            f,
            vec![Frame {
                generation: 0,
                batch: b"old".to_vec()
            }]
        );
    }

    #[test]
    fn frames_for_reads_a_nested_directory_without_changing_it() {
        let root = tempfile::tempdir().expect("tmp");
        let dir = root.path().join(DIR).join("2-7f3a");
        let wal = Wal::create(&dir, 1, Vec::new()).expect("create");
        wal.append_as((T1, 0), 3, b"a").expect("append");
        wal.append_as((T2, 0), 3, b"other").expect("append");
        wal.rotate().expect("rotate");
        wal.append_as((T1, 0), 4, b"b").expect("append");
        let listing = |d: &Path| {
            let mut v: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(d)
                .expect("list")
                .map(|e| {
                    let p = e.expect("entry").path();
                    let b = fs::read(&p).expect("read");
                    (p, b)
                })
                .collect();
            v.sort();
            v
        };
        let before = listing(&dir);
        let got = frames_for(&dir, (T1, 0)).expect("frames");
        assert_eq!(
            got,
            vec![
                Frame {
                    generation: 3,
                    batch: b"a".to_vec()
                },
                Frame {
                    generation: 4,
                    batch: b"b".to_vec()
                }
            ]
        );
        assert_eq!(listing(&dir), before, "nothing in the directory changed");
        let r = recover(&dir).expect("recover");
        assert_eq!(r.batches.get(&(T2, 0)), Some(&vec![b"other".to_vec()]));
        assert!(
            recover(&root.path().join(DIR))
                .expect("parent")
                .batches
                .is_empty(),
            "the parent's own log ignores the per-broker directories"
        );
    }

    #[test]
    fn frames_come_back_per_partition_in_append_order() {
        let dir = tempfile::tempdir().expect("tmp");
        let wal = Wal::create(dir.path(), 1, Vec::new()).expect("create");
        let f1 = wal.append((T1, 0), b"a-first").expect("append");
        let f2 = wal.append((T2, 3), b"b").expect("append");
        wal.append((T1, 0), b"a-second").expect("append");
        assert!(Arc::ptr_eq(&f1, &f2), "one file for every partition");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(
            r.batches.get(&(T1, 0)),
            Some(&vec![b"a-first".to_vec(), b"a-second".to_vec()])
        );
        assert_eq!(r.batches.get(&(T2, 3)), Some(&vec![b"b".to_vec()]));
        assert_eq!(r.next_seq, 2);
        assert_eq!(r.files.len(), 1);
    }

    #[test]
    fn a_torn_frame_ends_its_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let wal = Wal::create(dir.path(), 1, Vec::new()).expect("create");
        wal.append((T1, 0), b"kept").expect("append");
        wal.append((T1, 0), b"torn-frame").expect("append");
        wal.append((T1, 0), b"after").expect("append");
        let path = dir.path().join(file_name(1));
        let mut bytes = fs::read(&path).expect("read");
        let second = HEADER as usize + HEAD + ADDRESS + 4;
        bytes[second + HEAD + ADDRESS + 2] ^= 0xff;
        fs::write(&path, &bytes).expect("write");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(r.batches.get(&(T1, 0)), Some(&vec![b"kept".to_vec()]));
    }

    #[test]
    fn rotation_starts_a_new_file_and_deleting_retired_files_keeps_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let wal = Wal::create(dir.path(), 7, Vec::new()).expect("create");
        let before = wal.append((T1, 0), b"x").expect("append");
        assert!(wal.pending().0 > 0);
        let retired = wal.rotate().expect("rotate");
        assert_eq!(retired, vec![dir.path().join(file_name(7))]);
        assert_eq!((wal.seq(), wal.pending().0), (8, 0));
        let after = wal.append((T1, 0), b"y").expect("append");
        assert!(!Arc::ptr_eq(&before, &after));
        wal.delete_retired(&retired).expect("delete");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(r.files, vec![dir.path().join(file_name(8))]);
        assert_eq!(r.batches.get(&(T1, 0)), Some(&vec![b"y".to_vec()]));
    }

    #[test]
    fn a_recycled_file_replays_only_the_frames_of_its_new_life() {
        let dir = tempfile::tempdir().expect("tmp");
        let wal = Wal::create(dir.path(), 1, Vec::new()).expect("create");
        for i in 0..50u8 {
            wal.append((T1, 0), &[i; 300]).expect("append");
        }
        let first = wal.rotate().expect("rotate");
        wal.delete_retired(&first).expect("free");
        let free = free_files(dir.path()).expect("list");
        assert_eq!(free.len(), 1, "the checkpointed file is kept, renamed");
        let old_len = fs::metadata(&free[0]).expect("meta").len();
        let second = wal.rotate().expect("rotate");
        assert_eq!(wal.seq(), 3);
        assert!(
            free_files(dir.path()).expect("list").is_empty(),
            "the rotation took it"
        );
        let path = dir.path().join(file_name(3));
        assert_eq!(
            fs::metadata(&path).expect("meta").len(),
            old_len,
            "the same file, not a new one"
        );
        // A frame the size of the old ones ends where the second old frame
        // starts, so reading goes on into it: only its CRC stops it.
        wal.append((T2, 1), &[9u8; 300]).expect("append");
        let r = recover(dir.path()).expect("recover");
        // The other 49 frames of file 1 are still in the bytes of file 3,
        // behind the new frame; none of them comes back.
        assert_eq!(r.batches.get(&(T2, 1)), Some(&vec![vec![9u8; 300]]));
        assert_eq!(r.batches.get(&(T1, 0)), None);
        assert_eq!(r.files, vec![second[0].clone(), path]);
    }

    #[test]
    fn a_file_whose_header_names_another_seq_holds_no_frames() {
        let dir = tempfile::tempdir().expect("tmp");
        // A free file whose header was rewritten for seq 5 while it still
        // carries seq 4's frames, renamed to 5 by a rotation: a crash
        // between header and frames leaves exactly this.
        let mut bytes = header(4).to_vec();
        bytes.extend(frame(4, (T1, 0), 0, b"of-file-4"));
        fs::write(dir.path().join(file_name(5)), &bytes).expect("write");
        let r = recover(dir.path()).expect("recover");
        assert!(r.batches.is_empty());
        assert_eq!(r.next_seq, 6);
        // The same bytes under their own seq are read.
        fs::write(dir.path().join(file_name(4)), &bytes).expect("write");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(r.batches.get(&(T1, 0)), Some(&vec![b"of-file-4".to_vec()]));
    }

    #[test]
    fn files_written_before_recycling_are_still_replayed() {
        let dir = tempfile::tempdir().expect("tmp");
        // The old format: no header, frames from the start, plain CRCs.
        let mut bytes = Vec::new();
        for batch in [&b"one"[..], b"two"] {
            let mut f = frame_v2(0, (T1, 2), batch);
            let crc = frame_crc(None, &f[HEAD..]);
            f[4..HEAD].copy_from_slice(&crc.to_be_bytes());
            bytes.extend(f);
        }
        bytes.extend([0u8; 64]);
        fs::write(dir.path().join(file_name(9)), &bytes).expect("write");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(
            r.batches.get(&(T1, 2)),
            Some(&vec![b"one".to_vec(), b"two".to_vec()])
        );
    }

    #[test]
    fn a_clean_close_leaves_a_free_file_that_the_next_start_recycles() {
        let dir = tempfile::tempdir().expect("tmp");
        let wal = Wal::create(dir.path(), 1, Vec::new()).expect("create");
        wal.append((T1, 0), b"x").expect("append");
        wal.close().expect("close");
        let free = free_files(dir.path()).expect("list");
        assert_eq!(free.len(), 1);
        let r = recover(dir.path()).expect("recover");
        assert!(
            r.batches.is_empty(),
            "nothing to replay after a clean close"
        );
        let next = Wal::create(dir.path(), r.next_seq, Vec::new()).expect("create");
        assert!(
            free_files(dir.path()).expect("list").is_empty(),
            "the start took the free file"
        );
        next.append((T2, 0), b"y").expect("append");
        let r = recover(dir.path()).expect("recover");
        assert_eq!(r.batches.get(&(T2, 0)), Some(&vec![b"y".to_vec()]));
    }
}
