//! A partition's two small state files, read by recovery and written by
//! the parts that change them; they touch nothing but their files and
//! import nothing of the partition (which re-exports [`AbortedTxn`]):
//! - the producer-state snapshot: the producer table and the
//!   aborted-transaction index as of a log end, CRC-checked, so recovery
//!   replays only the batches after it (written at a roll and a clean
//!   shutdown, rewritten by compaction when it drops aborted transactions);
//! - the cleaner checkpoint: how far compaction has cleaned (advisory: a
//!   lower value only makes the next pass map more).

use std::fs;
use std::io;
use std::path::Path;

use super::seal;
use crate::log::atomic_file::write_atomically;
use crate::log::producer::ProducerTable;

/// An aborted transaction as Fetch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// A snapshot: the log end it was taken at, the producer table there, and
/// the aborted transactions still in the log.
pub(super) type Snapshot = (i64, ProducerTable, Vec<AbortedTxn>);

/// The snapshot of `generation` in `dir`; None when absent, short or its
/// CRC does not match (recovery then replays from the log start).
pub(super) fn read_snapshot(dir: &Path, generation: u64) -> Option<Snapshot> {
    let b = fs::read(dir.join(seal::snapshot_name(generation))).ok()?;
    if b.len() < 16 {
        return None;
    }
    let mut o = [0u8; 8];
    o.copy_from_slice(&b[..8]);
    let crc = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    if crc32c::crc32c(&b[12..]) != crc {
        return None;
    }
    let table_len = u32::from_be_bytes([b[12], b[13], b[14], b[15]]) as usize;
    let table = ProducerTable::decode(b.get(16..16 + table_len)?)?;
    let rest = b.get(16 + table_len..)?;
    if rest.len() % 24 != 0 {
        return None;
    }
    let aborted = rest
        .chunks_exact(24)
        .map(|c| {
            let n = |i: usize| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&c[i..i + 8]);
                i64::from_be_bytes(a)
            };
            AbortedTxn {
                producer_id: n(0),
                first_offset: n(8),
                last_offset: n(16),
            }
        })
        .collect();
    Some((i64::from_be_bytes(o), table, aborted))
}

/// Writes the snapshot of `generation` atomically (temporary file, fsync,
/// rename): the log end `offset`, `table` and `aborted`.
pub(super) fn write_snapshot(
    dir: &Path,
    generation: u64,
    offset: i64,
    table: &ProducerTable,
    aborted: &[AbortedTxn],
) -> io::Result<()> {
    let t = table.encode();
    let mut body = Vec::with_capacity(4 + t.len() + aborted.len() * 24);
    body.extend_from_slice(&(t.len() as u32).to_be_bytes());
    body.extend_from_slice(&t);
    for a in aborted {
        body.extend_from_slice(&a.producer_id.to_be_bytes());
        body.extend_from_slice(&a.first_offset.to_be_bytes());
        body.extend_from_slice(&a.last_offset.to_be_bytes());
    }
    let mut b = Vec::with_capacity(12 + body.len());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    b.extend_from_slice(&body);
    write_atomically(&dir.join(seal::snapshot_name(generation)), &b)
}

/// The cleaner checkpoint file's name in the partition directory.
pub(super) const CHECKPOINT: &str = "cleaner-checkpoint";

/// The cleaner checkpoint; None when absent or unreadable.
pub(super) fn read_checkpoint(dir: &Path) -> Option<i64> {
    fs::read_to_string(dir.join(CHECKPOINT))
        .ok()?
        .trim()
        .parse()
        .ok()
}
