//! Seals: the on-disk record of each takeover of a partition directory on
//! the shared volume (cluster mode), and the rules that make what
//! an old leader (a "zombie" whose lease ended) writes after a takeover
//! invisible to the new leader and to every later one.
//!
//! Each takeover starts a new *generation* `g` (1, 2, …; 0 is a directory no
//! one ever took over) and publishes `seal-<g>.json` exclusively (a hard link
//! of a synced temporary file, so two takers racing for one generation
//! cannot both win, and no reader sees a torn seal). A seal names the segment
//! file the previous leader was writing and the length it was recovered to,
//! the offset the new generation starts at, how far the dead leader's
//! write-ahead log was replayed, and the log start offset.
//!
//! Files a generation writes carry it in their names (segments
//! `<base>.g<g>.log`, `producer.g<g>.snapshot`, `log-start-offset.g<g>`,
//! `.kaas-clean.g<g>`; generation 0 keeps today's names), so a zombie of an
//! older generation never writes a file the current one reads. This module
//! only reads and publishes seals and answers the validity questions; it
//! touches no other file.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::log::sync::sync_dir;

/// The segment a takeover sealed: the file and the length it ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub base: i64,
    pub generation: u64,
    pub length: u64,
}

/// One takeover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// The generation this takeover started.
    pub generation: u64,
    /// The previous leader's active segment (None if it had none).
    pub sealed: Option<Sealed>,
    /// The log end at the seal: the new generation's first segment starts here.
    pub next_offset: i64,
    /// The log end after the dead leader's write-ahead log was replayed
    /// into the new generation's first segment: frames of the previous
    /// generation are replayed only below it, ever.
    pub replay_end: i64,
    /// The log start offset at the takeover.
    pub log_start: i64,
}

/// Every seal of a partition directory, by generation.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// `seals[i]` is generation `i + 1`.
    seals: Vec<Seal>,
}

const PREFIX: &str = "seal-";
const SUFFIX: &str = ".json";

fn seal_name(generation: u64) -> String {
    format!("{PREFIX}{generation}{SUFFIX}")
}

impl History {
    /// Reads the seals of `dir`. Seals are published whole, so one that
    /// cannot be read or parsed, or a missing generation, is an error: the
    /// directory's history is unknown and guessing could resurrect a
    /// zombie's bytes.
    pub fn read(dir: &Path) -> io::Result<History> {
        let mut found = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(g) = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|n| n.strip_suffix(SUFFIX))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let bytes = fs::read(e.path())?;
            let seal: Seal = serde_json::from_slice(&bytes).map_err(|err| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {err}", e.path().display()),
                )
            })?;
            if seal.generation != g {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} names generation {}",
                        e.path().display(),
                        seal.generation
                    ),
                ));
            }
            found.push(seal);
        }
        found.sort_by_key(|s| s.generation);
        for (i, s) in found.iter().enumerate() {
            if s.generation != i as u64 + 1 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: seal generation {} is missing",
                        dir.display(),
                        i as u64 + 1
                    ),
                ));
            }
        }
        Ok(History { seals: found })
    }

    /// The current generation (the latest seal's; 0 without seals).
    pub fn generation(&self) -> u64 {
        self.seals.len() as u64
    }

    fn seal(&self, generation: u64) -> Option<&Seal> {
        let i = usize::try_from(generation.checked_sub(1)?).ok()?;
        self.seals.get(i)
    }

    /// The latest seal.
    pub fn latest(&self) -> Option<&Seal> {
        self.seals.last()
    }

    /// Whether segment file (`base`, `generation`) belongs to the log:
    /// a generation's files start at its seal's offset, and one that was
    /// taken over keeps only the files up to the segment its successor
    /// sealed. Anything else is a zombie's (a roll after the takeover's
    /// scan, or a taker that lost its race) and never read.
    pub fn segment_valid(&self, base: i64, generation: u64) -> bool {
        if generation > self.generation() {
            return false;
        }
        if let Some(own) = self.seal(generation)
            && base < own.next_offset
        {
            return false;
        }
        if generation == self.generation() {
            return true;
        }
        self.seal(generation + 1)
            .and_then(|next| next.sealed)
            .is_some_and(|s| s.generation == generation && base <= s.base)
    }

    /// The length segment (`base`, `generation`) is read to, if a seal
    /// bounds it: bytes past it were written after a takeover.
    pub fn segment_limit(&self, base: i64, generation: u64) -> Option<u64> {
        self.seals
            .iter()
            .filter_map(|s| s.sealed)
            .filter(|s| s.base == base && s.generation == generation)
            .map(|s| s.length)
            .min()
    }

    /// The offset below which a write-ahead log frame written by
    /// `generation` may be replayed: the replay end of the takeover that
    /// ended that generation, no bound for the current one, nothing for a
    /// generation that does not exist yet.
    pub fn frame_bound(&self, generation: u64) -> i64 {
        if generation == self.generation() {
            return i64::MAX;
        }
        match self.seal(generation + 1) {
            Some(s) => s.replay_end,
            None => i64::MIN,
        }
    }

    /// Adds a seal just published.
    pub fn push(&mut self, seal: Seal) {
        self.seals.push(seal);
    }
}

/// Publishes `seal` in `dir`: written to a temporary file of its own,
/// synced, then hard-linked to its name, which fails with `AlreadyExists`
/// if another taker published that generation first; durable with the
/// directory.
pub fn publish(dir: &Path, seal: &Seal) -> io::Result<()> {
    let bytes = serde_json::to_vec(seal).map_err(io::Error::other)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        seal_name(seal.generation),
        std::process::id()
    ));
    {
        let f = fs::File::create(&tmp)?;
        io::Write::write_all(&mut &f, &bytes)?;
        f.sync_all()?;
    }
    let linked = fs::hard_link(&tmp, dir.join(seal_name(seal.generation)));
    let _ = fs::remove_file(&tmp);
    linked?;
    sync_dir(dir)
}

/// The producer snapshot of `generation`.
pub fn snapshot_name(generation: u64) -> String {
    match generation {
        0 => "producer.snapshot".into(),
        g => format!("producer.g{g}.snapshot"),
    }
}

/// The log start offset file of `generation`.
pub fn log_start_name(generation: u64) -> String {
    match generation {
        0 => "log-start-offset".into(),
        g => format!("log-start-offset.g{g}"),
    }
}

/// The clean-shutdown marker of `generation`.
pub fn clean_name(generation: u64) -> String {
    match generation {
        0 => ".kaas-clean".into(),
        g => format!(".kaas-clean.g{g}"),
    }
}

/// The generation a snapshot, log-start or clean-marker file belongs to
/// (None for other files).
pub fn aux_generation(name: &str) -> Option<u64> {
    for zero in [snapshot_name(0), log_start_name(0), clean_name(0)] {
        if name == zero {
            return Some(0);
        }
    }
    let g = name
        .strip_prefix("producer.g")
        .and_then(|n| n.strip_suffix(".snapshot"))
        .or_else(|| name.strip_prefix("log-start-offset.g"))
        .or_else(|| name.strip_prefix(".kaas-clean.g"))?;
    g.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal(generation: u64, sealed: Option<(i64, u64, u64)>, next: i64, replay: i64) -> Seal {
        Seal {
            generation,
            sealed: sealed.map(|(base, generation, length)| Sealed {
                base,
                generation,
                length,
            }),
            next_offset: next,
            replay_end: replay,
            log_start: 0,
        }
    }

    #[test]
    fn a_generation_keeps_only_the_files_up_to_the_segment_its_successor_sealed() {
        let mut h = History::default();
        h.push(seal(1, Some((100, 0, 4096)), 140, 150));
        h.push(seal(2, Some((300, 1, 999)), 320, 320));
        assert!(h.segment_valid(0, 0) && h.segment_valid(100, 0));
        assert!(!h.segment_valid(140, 0), "a zombie's roll after the seal");
        assert!(!h.segment_valid(120, 1), "before the generation started");
        assert!(h.segment_valid(140, 1) && h.segment_valid(300, 1));
        assert!(!h.segment_valid(310, 1));
        assert!(h.segment_valid(320, 2) && h.segment_valid(9999, 2));
        assert!(!h.segment_valid(9999, 3));
        assert_eq!(h.segment_limit(100, 0), Some(4096));
        assert_eq!(h.segment_limit(140, 1), None);
        assert_eq!(
            (h.frame_bound(0), h.frame_bound(1), h.frame_bound(2)),
            (150, 320, i64::MAX)
        );
        assert_eq!(h.frame_bound(3), i64::MIN);
    }

    #[test]
    fn a_generation_can_be_published_once() {
        let dir = tempfile::tempdir().expect("tmp");
        publish(dir.path(), &seal(1, None, 0, 0)).expect("first");
        let again = publish(dir.path(), &seal(1, None, 5, 5)).expect_err("second");
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        let h = History::read(dir.path()).expect("read");
        assert_eq!(h.latest(), Some(&seal(1, None, 0, 0)));
    }
}
