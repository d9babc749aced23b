//! A partition's leader-epoch history (KIP-101): which leader epoch began
//! at which offset, so OffsetForLeaderEpoch can say where an epoch ended
//! and a consumer or a new leader can tell whether the log it saw was
//! truncated. The epoch is also the partition's fencing token: the current
//! (last) epoch is stamped into every batch the partition writes.
//!
//! Kept in the partition directory as `leader-epoch-checkpoint`, replaced
//! whole ([`super::atomic_file::write_atomically`]) before any batch of a new
//! epoch is written. Epochs only grow; start offsets never go down. A
//! directory without the file (every data directory older than cluster
//! mode) has epoch 0 from offset 0. This module touches that one file and
//! nothing else; the partition decides when to call it, under its lock.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::atomic_file::write_atomically;

/// The file's name in the partition directory.
pub const FILE: &str = "leader-epoch-checkpoint";

/// The first line of the file (format version 1).
const HEADER: &str = "kaas leader-epoch history v1";

/// OffsetForLeaderEpoch's "no answer": (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
pub const UNDEFINED: (i32, i64) = (-1, -1);

/// One epoch and the offset of its first batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The history: never empty, epochs strictly increasing, start offsets
/// strictly increasing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEpochs {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

const FIRST: EpochEntry = EpochEntry {
    epoch: 0,
    start_offset: 0,
};

impl LeaderEpochs {
    /// Reads the history of the partition in `dir`; epoch 0 from offset 0
    /// when there is no file. A file that cannot be parsed is an error (a
    /// guessed history could lower the epoch and unfence a zombie).
    pub fn load(dir: &Path) -> io::Result<Self> {
        let path = dir.join(FILE);
        let entries = match fs::read_to_string(&path) {
            Ok(text) => decode(&text).map_err(|why| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {why}", path.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => vec![FIRST],
            Err(e) => {
                return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
            }
        };
        Ok(LeaderEpochs { path, entries })
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The current (latest) epoch.
    pub fn current(&self) -> i32 {
        self.entries.last().map_or(FIRST.epoch, |e| e.epoch)
    }

    /// Starts `epoch` at `log_end`, durably, if it is newer than the
    /// current one; returns whether it did. Entries starting at or past
    /// `log_end` had no batch that is still in the log (a crash lost them),
    /// so they give way to the new epoch.
    pub fn begin(&mut self, epoch: i32, log_end: i64) -> io::Result<bool> {
        if epoch <= self.current() {
            return Ok(false);
        }
        let mut next: Vec<EpochEntry> = self
            .entries
            .iter()
            .copied()
            .filter(|e| e.start_offset < log_end)
            .collect();
        next.push(EpochEntry {
            epoch,
            start_offset: log_end,
        });
        self.replace(next)?;
        Ok(true)
    }

    /// Before the partition writes a batch at `base` under the current
    /// epoch: if the current epoch is recorded as starting past `base` (the
    /// log lost its tail after the epoch began), the history is cut back
    /// durably so that the current epoch starts at `base`.
    pub fn settle(&mut self, base: i64) -> io::Result<()> {
        if self.entries.last().is_none_or(|e| e.start_offset <= base) {
            return Ok(());
        }
        let next = effective(&self.entries, base);
        self.replace(next)
    }

    /// KIP-101's answer for `requested`, given the log's end offset: the
    /// largest epoch at or below it and the start offset of the next higher
    /// epoch; the log end for the current epoch; for an epoch older than
    /// every entry, that epoch and the first entry's start; [`UNDEFINED`]
    /// for a negative (unknown) epoch or one newer than the current.
    /// Entries a lost tail left past `log_end` count as starting there.
    pub fn end_offset_for(&self, requested: i32, log_end: i64) -> (i32, i64) {
        let entries = effective(&self.entries, log_end);
        let Some(last) = entries.last() else {
            return UNDEFINED;
        };
        if requested < 0 || requested > last.epoch {
            return UNDEFINED;
        }
        if requested == last.epoch {
            return (requested, log_end);
        }
        let Some(higher) = entries.iter().find(|e| e.epoch > requested) else {
            return UNDEFINED;
        };
        match entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested, higher.start_offset),
        }
    }

    /// The epoch of the batch holding `offset` (an offset below the log
    /// end); -1 for an offset before the first entry.
    pub fn epoch_at(&self, offset: i64) -> i32 {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map_or(-1, |e| e.epoch)
    }

    fn replace(&mut self, next: Vec<EpochEntry>) -> io::Result<()> {
        write_atomically(&self.path, encode(&next).as_bytes()).map_err(|e| {
            io::Error::new(e.kind(), format!("writing {}: {e}", self.path.display()))
        })?;
        self.entries = next;
        Ok(())
    }
}

/// The history as it holds for a log ending at `log_end`: entries starting
/// at or past it keep only the newest, which starts at `log_end`.
fn effective(entries: &[EpochEntry], log_end: i64) -> Vec<EpochEntry> {
    let mut out: Vec<EpochEntry> = entries
        .iter()
        .copied()
        .filter(|e| e.start_offset < log_end)
        .collect();
    if let Some(last) = entries.last().filter(|e| e.start_offset >= log_end) {
        out.push(EpochEntry {
            epoch: last.epoch,
            start_offset: log_end,
        });
    }
    out
}

fn encode(entries: &[EpochEntry]) -> String {
    let mut s = format!("{HEADER}\n{}\n", entries.len());
    for e in entries {
        s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    s
}

fn decode(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("the first line is not {HEADER:?}"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("the second line is not an entry count")?;
    let mut entries: Vec<EpochEntry> = Vec::new();
    for (i, line) in lines.enumerate() {
        let mut fields = line.split_whitespace();
        let (Some(epoch), Some(start), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(format!("entry {i} is not `epoch start_offset`"));
        };
        let entry = EpochEntry {
            epoch: epoch
                .parse()
                .map_err(|_| format!("entry {i}: epoch {epoch:?}"))?,
            start_offset: start
                .parse()
                .map_err(|_| format!("entry {i}: start offset {start:?}"))?,
        };
        if entry.epoch < 0 || entry.start_offset < 0 {
            return Err(format!("entry {i} is negative"));
        }
        if let Some(prev) = entries.last()
            && (entry.epoch <= prev.epoch || entry.start_offset <= prev.start_offset)
        {
            return Err(format!("entry {i} does not grow"));
        }
        entries.push(entry);
    }
    if entries.len() != count || entries.is_empty() {
        return Err(format!(
            "{} entries where the count says {count}",
            entries.len()
        ));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn a_directory_without_the_file_has_epoch_0_from_offset_0() {
        let dir = tempfile::tempdir().expect("tmp");
        let h = LeaderEpochs::load(dir.path()).expect("load");
        assert_eq!(h.entries(), &[e(0, 0)]);
        assert_eq!(h.current(), 0);
        assert!(!dir.path().join(FILE).exists(), "loading writes nothing");
    }

    #[test]
    fn the_history_round_trips_through_its_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        assert!(h.begin(2, 10).expect("begin"));
        assert!(h.begin(5, 17).expect("begin"));
        let again = LeaderEpochs::load(dir.path()).expect("reload");
        assert_eq!(again.entries(), &[e(0, 0), e(2, 10), e(5, 17)]);
        assert_eq!(again, h);
    }

    #[test]
    fn the_history_only_grows() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        assert!(h.begin(3, 4).expect("begin"));
        assert!(
            !h.begin(3, 9).expect("same epoch"),
            "an equal epoch is a no-op"
        );
        assert!(
            !h.begin(1, 9).expect("older epoch"),
            "a lower epoch is a no-op"
        );
        assert_eq!(h.entries(), &[e(0, 0), e(3, 4)]);
        assert_eq!(
            LeaderEpochs::load(dir.path()).expect("reload").entries(),
            &[e(0, 0), e(3, 4)]
        );
    }

    #[test]
    fn an_epoch_beginning_where_the_last_one_began_replaces_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        assert!(h.begin(1, 0).expect("begin"));
        assert_eq!(h.entries(), &[e(1, 0)], "epoch 0 wrote no batch");
        assert!(h.begin(4, 7).expect("begin"));
        assert!(h.begin(6, 7).expect("begin"));
        assert_eq!(h.entries(), &[e(1, 0), e(6, 7)]);
    }

    #[test]
    fn end_offset_for_epoch_follows_kip_101() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        h.begin(2, 10).expect("begin");
        h.begin(5, 17).expect("begin");
        let end = 30;
        assert_eq!(h.end_offset_for(0, end), (0, 10));
        assert_eq!(
            h.end_offset_for(1, end),
            (0, 10),
            "the floor epoch, the next start"
        );
        assert_eq!(h.end_offset_for(2, end), (2, 17));
        assert_eq!(h.end_offset_for(4, end), (2, 17));
        assert_eq!(
            h.end_offset_for(5, end),
            (5, 30),
            "the current epoch ends at the log end"
        );
        assert_eq!(h.end_offset_for(6, end), UNDEFINED);
        assert_eq!(h.end_offset_for(-1, end), UNDEFINED);
    }

    #[test]
    fn an_epoch_older_than_the_history_ends_where_the_first_entry_starts() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        h.begin(3, 0).expect("begin");
        h.begin(4, 8).expect("begin");
        assert_eq!(h.entries(), &[e(3, 0), e(4, 8)]);
        assert_eq!(h.end_offset_for(1, 20), (1, 0));
        assert_eq!(h.end_offset_for(3, 20), (3, 8));
    }

    #[test]
    fn entries_past_a_lost_tail_count_as_starting_at_the_log_end() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        h.begin(2, 10).expect("begin");
        h.begin(3, 12).expect("begin");
        // The log lost everything from offset 8 on.
        assert_eq!(h.end_offset_for(0, 8), (0, 8));
        assert_eq!(h.end_offset_for(2, 8), (0, 8), "epoch 2 holds no batch now");
        assert_eq!(h.end_offset_for(3, 8), (3, 8));
        h.settle(8).expect("settle");
        assert_eq!(h.entries(), &[e(0, 0), e(3, 8)]);
        assert_eq!(h.current(), 3, "the epoch never goes down");
        assert_eq!(
            LeaderEpochs::load(dir.path()).expect("reload").entries(),
            &[e(0, 0), e(3, 8)]
        );
        h.settle(20).expect("a later batch changes nothing");
        assert_eq!(h.entries(), &[e(0, 0), e(3, 8)]);
    }

    #[test]
    fn the_epoch_at_an_offset_is_the_entry_covering_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = LeaderEpochs::load(dir.path()).expect("load");
        h.begin(1, 0).expect("begin");
        h.begin(2, 10).expect("begin");
        assert_eq!(h.epoch_at(0), 1);
        assert_eq!(h.epoch_at(9), 1);
        assert_eq!(h.epoch_at(10), 2);
        assert_eq!(h.epoch_at(-5), -1);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_guess() {
        for text in [
            "",
            "something else\n1\n0 0\n",
            &format!("{HEADER}\n2\n0 0\n"),
            &format!("{HEADER}\n2\n3 5\n2 9\n"),
            &format!("{HEADER}\n2\n1 5\n2 5\n"),
            &format!("{HEADER}\n1\n-1 0\n"),
            &format!("{HEADER}\n1\n1 x\n"),
            &format!("{HEADER}\n0\n"),
        ] {
            let dir = tempfile::tempdir().expect("tmp");
            std::fs::write(dir.path().join(FILE), text).expect("write");
            let err = LeaderEpochs::load(dir.path()).expect_err(text);
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{text:?}");
        }
    }
}
