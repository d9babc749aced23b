//! The one way to get a [`Partition`]: [`Partition::open`] with where it
//! lives ([`At`]) and how it comes to be ([`Opening`]): created empty,
//! reopened after a restart (recovering if it was not shut down cleanly),
//! or taken over from another broker on the shared volume (cluster mode).
//! The three differ only in how they arrive at the partition's state; the
//! partition is assembled from it in one place.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use super::recovery::{recover_dir, remove_strays, replay_batch, replayable};
use super::seal::{self, History};
use super::state_files::write_snapshot;
use super::{LogConfig, Partition, State, WriteState, chunk};
use crate::log::epochs::LeaderEpochs;
use crate::log::open_files::OpenFiles;
use crate::log::producer::ProducerTable;
use crate::log::segment::Segment;
use crate::log::wal;

/// Where a partition lives and how it is configured.
#[derive(Debug)]
pub struct At<'a> {
    /// The broker's open-file cache every segment file goes through.
    pub files: &'a Arc<OpenFiles>,
    /// The data directory; the partition's own is `<topic>-<id>` in it.
    pub root: &'a Path,
    pub topic: &'a str,
    pub id: i32,
    pub config: LogConfig,
    /// Whether appends advance the high watermark at once (fsync not
    /// `always`).
    pub immediate_hw: bool,
}

/// How the partition comes to be.
#[derive(Debug, Clone, Copy)]
pub enum Opening<'a> {
    /// A new, empty partition (its directory is created).
    Create,
    /// An existing directory after a restart: recovered after a crash
    /// unless this directory's current generation left a clean marker (a
    /// clean marker of an older generation, a zombie's, is not trusted).
    Reopen,
    /// A partition another broker led (cluster mode): its directory is
    /// opened as after a crash (never trusting a clean marker), the dead
    /// leader's write-ahead log frames that continue the log are replayed
    /// (from [`wal::frames_for`]; only those its generation may still
    /// contribute, [`History::frame_bound`]), and it is sealed: the next
    /// generation's seal is published, which bounds the old leader's
    /// active segment at its recovered length, then a new segment file of
    /// this broker's own starts at the log end, holding the replayed
    /// batches, synced. Whatever the old leader writes afterwards is never
    /// read. Fails with `AlreadyExists` if another taker sealed this
    /// generation first (this broker must not lead the partition).
    TakeOver(&'a [wal::Frame]),
}

impl Partition {
    /// Opens the partition at `at` as `how` says.
    pub fn open(at: At<'_>, how: Opening<'_>) -> io::Result<Self> {
        let dir = at.root.join(Self::dir_name(at.topic, at.id));
        match how {
            Opening::Create => create(at, dir),
            Opening::Reopen => reopen(at, dir),
            Opening::TakeOver(replay) => take_over(at, dir, replay),
        }
    }

    /// The partition over `state`, its high watermark at `high_watermark`.
    fn assemble(
        at: At<'_>,
        dir: PathBuf,
        state: State,
        generation: u64,
        high_watermark: i64,
    ) -> Self {
        Partition {
            topic: at.topic.into(),
            id: at.id,
            dir,
            config: std::sync::RwLock::new(Arc::new(at.config)),
            state: Mutex::new(state),
            high_watermark: AtomicI64::new(high_watermark),
            immediate_hw: at.immediate_hw,
            wal: None,
            generation,
            gate: WriteState::default(),
            files: at.files.clone(),
        }
    }
}

fn create(at: At<'_>, dir: PathBuf) -> io::Result<Partition> {
    fs::create_dir_all(&dir)?;
    let seg = Segment::create(at.files, &dir, 0, 0, chunk(&at.config))?;
    let epochs = LeaderEpochs::load(&dir)?;
    let mut segments = BTreeMap::new();
    segments.insert(0, seg);
    let state = State {
        segments,
        log_start: 0,
        producers: ProducerTable::default(),
        aborted: Vec::new(),
        wal_dirty: false,
        direct: false,
        appends: 0,
        written_out: (0, 0),
        epochs,
        clean_upto: 0,
        marked_clean: false,
        producers_changed: false,
    };
    Ok(Partition::assemble(at, dir, state, 0, 0))
}

fn reopen(at: At<'_>, dir: PathBuf) -> io::Result<Partition> {
    let history = History::read(&dir)?;
    let generation = history.generation();
    let marker = dir.join(seal::clean_name(generation));
    let clean = marker.exists();
    // The marker stays until the first write (`unmark_clean`): a
    // partition nobody writes is closed again without touching a file.
    let mut state = recover_dir(at.files, &dir, &at.config, &history, clean)?;
    state.marked_clean = clean;
    // The active segment is this generation's own: a generation whose
    // taker died before creating its first file starts it now.
    let foreign = state
        .segments
        .values()
        .next_back()
        .is_none_or(|s| s.generation != generation);
    if foreign {
        if state.marked_clean {
            fs::remove_file(&marker)?;
            state.marked_clean = false;
        }
        let end = state.log_end();
        state.segments.insert(
            end,
            Segment::create(at.files, &dir, end, generation, chunk(&at.config))?,
        );
        crate::log::sync::sync_dir(&dir)?;
    }
    let end = state.log_end();
    Ok(Partition::assemble(at, dir, state, generation, end))
}

fn take_over(at: At<'_>, dir: PathBuf, replay: &[wal::Frame]) -> io::Result<Partition> {
    fs::create_dir_all(&dir)?;
    let mut history = History::read(&dir)?;
    let generation = history.generation() + 1;
    let mut state = recover_dir(at.files, &dir, &at.config, &history, false)?;
    let next_offset = state.log_end();
    let batches = replayable(&history, replay, next_offset, at.topic, at.id);
    let replay_end = batches
        .last()
        .map_or(next_offset, |(h, _)| h.last_offset() + 1);
    let sealed = state.segments.values().next_back().map(|s| seal::Sealed {
        base: s.base_offset,
        generation: s.generation,
        length: s.size,
    });
    let new_seal = seal::Seal {
        generation,
        sealed,
        next_offset,
        replay_end,
        log_start: state.log_start,
    };
    seal::publish(&dir, &new_seal)?;
    history.push(new_seal);
    remove_strays(&dir, &history);
    let first = Segment::create(at.files, &dir, next_offset, generation, chunk(&at.config))?;
    crate::log::sync::sync_dir(&dir)?;
    // An empty sealed segment at the same base gives way.
    state.segments.insert(next_offset, first);
    let part = Partition::assemble(at, dir, state, generation, next_offset);
    {
        let mut st = part.lock();
        for (h, bytes) in &batches {
            part.maybe_roll(&mut st, bytes.len() as u64, h.max_timestamp)?;
            st.active()?.append(bytes, h)?;
            let State {
                producers, aborted, ..
            } = &mut *st;
            replay_batch(h, || Ok(bytes.clone()), producers, aborted)?;
        }
        st.active()?.sync()?;
        let end = st.log_end();
        write_snapshot(&part.dir, generation, end, &st.producers, &st.aborted)?;
        part.advance_high_watermark(end);
        tracing::info!(
            topic = part.topic,
            partition = part.id,
            generation,
            sealed_at = next_offset,
            replayed = batches.len(),
            log_end = end,
            "partition taken over"
        );
    }
    Ok(part)
}

/// Test shorthands: a partition whose files go through a cache of its own
/// that never closes them.
#[cfg(test)]
pub(super) mod shorthand {
    use super::*;

    fn at<'a>(
        files: &'a Arc<OpenFiles>,
        root: &'a Path,
        topic: &'a str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> At<'a> {
        At {
            files,
            root,
            topic,
            id,
            config,
            immediate_hw,
        }
    }

    pub fn create(
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> io::Result<Partition> {
        create_in(
            &OpenFiles::unbounded(),
            root,
            topic,
            id,
            config,
            immediate_hw,
        )
    }

    pub fn create_in(
        files: &Arc<OpenFiles>,
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> io::Result<Partition> {
        let at = at(files, root, topic, id, config, immediate_hw);
        Partition::open(at, Opening::Create)
    }

    pub fn reopen(
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> io::Result<Partition> {
        reopen_in(
            &OpenFiles::unbounded(),
            root,
            topic,
            id,
            config,
            immediate_hw,
        )
    }

    pub fn reopen_in(
        files: &Arc<OpenFiles>,
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
    ) -> io::Result<Partition> {
        let at = at(files, root, topic, id, config, immediate_hw);
        Partition::open(at, Opening::Reopen)
    }

    pub fn take_over(
        root: &Path,
        topic: &str,
        id: i32,
        config: LogConfig,
        immediate_hw: bool,
        replay: &[wal::Frame],
    ) -> io::Result<Partition> {
        let files = OpenFiles::unbounded();
        let at = at(&files, root, topic, id, config, immediate_hw);
        Partition::open(at, Opening::TakeOver(replay))
    }
}
