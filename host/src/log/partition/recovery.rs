//! Opening a partition directory after a stop or a crash: which segments
//! are valid (per the seal history), the torn tail cut off, producer state
//! rebuilt from the snapshot and the batches after it, and the snapshot
//! written at a clean close or a roll. Blocking file work only.

use super::state_files::{read_checkpoint, read_snapshot};
use super::*;

/// Recovers a partition directory's valid segments (per `history`: a
/// zombie's files are skipped, sealed segments read to their seal), its
/// log start and its producer state. `clean`: the current generation shut
/// down cleanly, so indexes are trusted; otherwise the last segment is
/// verified batch by batch. Creates no file.
pub(super) fn recover_dir(
    files: &Arc<OpenFiles>,
    dir: &Path,
    config: &LogConfig,
    history: &History,
    clean: bool,
) -> io::Result<State> {
    let generation = history.generation();
    let epochs = LeaderEpochs::load(dir)?;
    let log_start = fs::read_to_string(dir.join(seal::log_start_name(generation)))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .or_else(|| history.latest().map(|s| s.log_start))
        .unwrap_or(0);
    let mut found: Vec<(i64, u64)> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(crate::log::segment::parse_name)
        })
        .filter(|&(base, g)| history.segment_valid(base, g))
        .collect();
    found.sort_unstable();

    let snapshot = read_snapshot(dir, generation);
    let snap_offset = snapshot.as_ref().map(|(o, _, _)| *o);
    let (mut producers, snapshot_aborted) = snapshot.map(|(_, t, a)| (t, a)).unwrap_or_default();
    let replay_from = snap_offset.unwrap_or(i64::MIN);
    let mut segments: BTreeMap<i64, Segment> = BTreeMap::new();
    let last = found.last().copied();
    for &(base, g) in &found {
        let limit = history.segment_limit(base, g);
        let seg = if clean && limit.is_none() {
            match Segment::open_clean(files, dir, base, g, chunk(config)) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), base, error = %e, "index unusable; rescanning the segment");
                    Segment::open(files, dir, base, g, true, chunk(config), None)?
                }
            }
        } else {
            let verify = Some((base, g)) == last && limit.is_none();
            Segment::open(files, dir, base, g, verify, chunk(config), limit)?
        };
        // An empty segment sealed at the base its successor starts at
        // gives way to it.
        if segments.get(&base).is_some_and(|s| s.size > 0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: two segments start at offset {base}", dir.display()),
            ));
        }
        segments.insert(base, seg);
    }
    let mut state = State {
        segments,
        log_start,
        producers: ProducerTable::default(),
        aborted: Vec::new(),
        wal_dirty: false,
        direct: false,
        appends: 0,
        written_out: (0, 0),
        epochs,
        clean_upto: read_checkpoint(dir).unwrap_or(log_start),
        marked_clean: false,
        producers_changed: false,
    };
    let end = state.log_end();
    // Producer state: the snapshot if it is not ahead of the log, then
    // the batch headers after it.
    let from = if snap_offset.is_some_and(|o| o <= end) {
        replay_from
    } else {
        producers = ProducerTable::default();
        i64::MIN
    };
    let mut aborted = if from == i64::MIN {
        Vec::new()
    } else {
        snapshot_aborted
    };
    for seg in state.segments.values() {
        if seg.next_offset > from {
            replay_segment(seg, from, &mut producers, &mut aborted)?;
        }
    }
    state.aborted = aborted;
    state.forget_aborted_below_log_start();
    state.producers = producers;
    Ok(state)
}

/// The batches of a dead leader's write-ahead log a takeover appends: each
/// frame whole, below its generation's bound (a frame written after the
/// takeover that ended its generation never comes back), in offset order,
/// continuing the log end `end` exactly; replay stops at a gap.
pub(super) fn replayable(
    history: &History,
    frames: &[wal::Frame],
    mut end: i64,
    topic: &str,
    id: i32,
) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut candidates: Vec<(BatchHeader, &[u8])> = frames
        .iter()
        .filter_map(|f| {
            let h = batch::parse_header(&f.batch).filter(|h| h.size == f.batch.len());
            if h.is_none() {
                tracing::error!(
                    topic,
                    partition = id,
                    "a write-ahead log frame holds no whole batch; skipped"
                );
            }
            let h = h?;
            (h.last_offset() < history.frame_bound(f.generation)).then_some((h, &f.batch[..]))
        })
        .collect();
    candidates.sort_by_key(|(h, _)| h.base_offset);
    let mut out = Vec::new();
    for (h, bytes) in candidates {
        if h.last_offset() < end {
            continue;
        }
        if h.base_offset != end {
            tracing::error!(
                topic,
                partition = id,
                log_end = end,
                batch_offset = h.base_offset,
                "the write-ahead log does not continue the log; its later batches are not replayed"
            );
            break;
        }
        end = h.last_offset() + 1;
        out.push((h, bytes.to_vec()));
    }
    out
}

/// After a seal: removes the segment files `history` no longer counts
/// (a zombie's rolls) and the older generations' snapshots, log-start
/// files and clean markers. Best effort: a file left behind is ignored by
/// every later open anyway; one a zombie creates later is removed by the
/// next takeover.
pub(super) fn remove_strays(dir: &Path, history: &History) {
    let generation = history.generation();
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let stray = match crate::log::segment::parse_name(name) {
            Some((base, g)) => !history.segment_valid(base, g),
            None => seal::aux_generation(name).is_some_and(|g| g < generation),
        };
        if !stray {
            continue;
        }
        let stem = name.strip_suffix(".log");
        let paths: Vec<PathBuf> = match stem {
            Some(stem) => ["log", "index", "timeindex"]
                .iter()
                .map(|ext| dir.join(format!("{stem}.{ext}")))
                .collect(),
            None => vec![e.path()],
        };
        for p in paths {
            match fs::remove_file(&p) {
                Ok(()) => {
                    tracing::info!(file = %p.display(), "removed a file of an older generation")
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    tracing::warn!(file = %p.display(), error = %err, "removing a file of an older generation failed")
                }
            }
        }
    }
}

/// The epoch to stamp into a batch about to be written at `base`, after
/// making sure the history has the current epoch start no later than
/// `base` (it may start past a tail a crash lost).
pub(super) fn stamp_epoch(st: &mut State, base: i64) -> io::Result<i32> {
    st.epochs.settle(base)?;
    Ok(st.epochs.current())
}

/// The first record of an (optionally compressed) batch with timestamp ≥ ts;
/// the batch itself when none is found or its records cannot be read.
pub(super) fn first_record_at_or_after(bytes: &[u8], h: &BatchHeader, ts: i64) -> (i64, i64) {
    batch::first_record_at_or_after(bytes, h, ts).unwrap_or((h.base_offset, h.max_timestamp))
}

/// Replays one segment's batches from `from`, in log order: data batches
/// into the producer table, control batches as completed transactions.
pub(super) fn replay_segment(
    seg: &Segment,
    from: i64,
    producers: &mut ProducerTable,
    aborted: &mut Vec<AbortedTxn>,
) -> io::Result<()> {
    let mut failure = None;
    seg.for_each_header(from.max(seg.base_offset), |pos, h| {
        if h.base_offset < from || failure.is_some() {
            return;
        }
        if let Err(e) = replay_batch(h, || seg.read_batch(pos, h), producers, aborted) {
            failure = Some(e);
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// Replays one batch found in the log: a data batch into the producer
/// table, a control batch as a completed transaction (`read` fetches its
/// bytes; data batches need only the header).
pub(super) fn replay_batch(
    h: &BatchHeader,
    read: impl FnOnce() -> io::Result<Vec<u8>>,
    producers: &mut ProducerTable,
    aborted: &mut Vec<AbortedTxn>,
) -> io::Result<()> {
    if !h.is_control() {
        producers.replay(h);
        return Ok(());
    }
    let bytes = read()?;
    let commit = batch::control_type(&bytes) == Some(1);
    // The coordinator epoch fences older coordinators' markers: it comes
    // back from the marker itself.
    let coordinator_epoch = batch::control_coordinator_epoch(&bytes).unwrap_or(-1);
    if let Some(done) = producers.record_marker(
        h.producer_id,
        h.producer_epoch,
        coordinator_epoch,
        h.base_offset,
        !commit,
        h.max_timestamp,
    ) && done.aborted
    {
        aborted.push(AbortedTxn {
            producer_id: done.producer_id,
            first_offset: done.first_offset,
            last_offset: done.marker_offset,
        });
    }
    Ok(())
}
