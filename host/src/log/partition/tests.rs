use super::open::shorthand::*;
use super::*;
use crate::log::batch::data_batch;

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    }
}

fn fill(p: &Partition, n: usize, ts0: i64) {
    for i in 0..n {
        let v = format!("value-{i:04}-{}", "x".repeat(40));
        p.append(data_batch(
            &[(None, v.as_bytes())],
            ts0 + i as i64,
            None,
            false,
        ))
        .expect("append");
    }
}

fn values(p: &Partition, from: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let r = p.read(offset, 1 << 20, false).expect("read");
        if r.records.is_empty() {
            return out;
        }
        let mut rest = &r.records[..];
        while let Some(h) = batch::parse_header(rest) {
            out.push(h.base_offset);
            offset = h.last_offset() + 1;
            rest = &rest[h.size..];
        }
    }
}

#[test]
fn appends_roll_segments_and_reads_cross_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
    fill(&p, 100, 1000);
    assert!(p.lock().segments.len() > 3, "small segments roll");
    assert_eq!(values(&p, 0), (0..100).collect::<Vec<_>>());
    assert_eq!(values(&p, 57).first(), Some(&57));
    assert_eq!(p.offset_for_timestamp(1050).expect("ts"), Some((50, 1050)));
    assert_eq!(p.offset_for_timestamp(5000).expect("ts"), None);
}

#[test]
fn a_torn_tail_is_truncated_on_recovery_and_the_rest_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    let good = {
        let p = create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
        fill(&p, 10, 1000);
        p.size_bytes() as usize
        // no close(): a crash
    };
    let seg = dir
        .path()
        .join("t-0")
        .join(format!("{}.log", super::super::segment::stem(0)));
    let mut bytes = std::fs::read(&seg).expect("read segment");
    assert!(bytes.len() > good, "zeros follow the data");
    let half_header = bytes[..40].to_owned();
    bytes[good..good + 40].copy_from_slice(&half_header); // a torn write
    std::fs::write(&seg, &bytes).expect("write");
    let p = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
    assert_eq!(p.log_end_offset(), 10);
    assert_eq!(std::fs::metadata(&seg).expect("meta").len() as usize, good);
    fill(&p, 1, 2000);
    assert_eq!(values(&p, 0), (0..11).collect::<Vec<_>>());
}

#[test]
fn the_zero_filled_tail_is_cut_at_recovery_and_at_a_clean_close() {
    let dir = tempfile::tempdir().expect("tmp");
    let seg = dir
        .path()
        .join("t-0")
        .join(format!("{}.log", super::super::segment::stem(0)));
    let len = || std::fs::metadata(&seg).expect("meta").len();
    let data = {
        let p = create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
        fill(&p, 10, 1000);
        let data = p.size_bytes();
        assert!(len() > data, "zeros follow the data");
        data
        // no close(): a crash with the zeros in place
    };
    let p = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
    assert_eq!(p.log_end_offset(), 10);
    assert_eq!(len(), data, "recovery cut the zeros, kept every batch");
    fill(&p, 1, 2000);
    assert!(len() > p.size_bytes(), "appending zero-fills again");
    p.close().expect("close");
    assert_eq!(len(), p.size_bytes(), "a clean close leaves no zeros");
    drop(p);
    let p = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("reopen");
    assert_eq!(values(&p, 0), (0..11).collect::<Vec<_>>());
}

#[test]
fn a_corrupt_batch_ends_the_recovered_log_there() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let p = create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
        fill(&p, 10, 1000);
    }
    let seg = dir
        .path()
        .join("t-0")
        .join(format!("{}.log", super::super::segment::stem(0)));
    let mut bytes = std::fs::read(&seg).expect("read");
    let h = batch::parse_header(&bytes).expect("first");
    let at = 7 * h.size + 70; // inside the 8th batch's records
    bytes[at] ^= 0xff;
    std::fs::write(&seg, &bytes).expect("write");
    let p = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
    assert_eq!(
        p.log_end_offset(),
        7,
        "batches after the corrupt one are dropped"
    );
}

#[test]
fn retention_by_size_and_time_drops_old_segments_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = LogConfig {
        retention_bytes: 2048,
        ..small_segments()
    };
    let p = create(dir.path(), "t", 0, cfg, true).expect("create");
    fill(&p, 100, 1000);
    let before = p.lock().segments.len();
    assert!(p.apply_retention(2000).expect("retention") > 0);
    let after = p.lock().segments.len();
    assert!(after < before && p.size_bytes() <= 2048 + 1024);
    let start = p.log_start_offset();
    assert!(start > 0);
    assert!(matches!(
        p.read(0, 100, false),
        Err(ReadError::OutOfRange { .. })
    ));
    assert_eq!(values(&p, start).last(), Some(&99));

    let cfg = LogConfig {
        retention_ms: 10,
        ..small_segments()
    };
    let q = create(dir.path(), "u", 0, cfg, true).expect("create");
    fill(&q, 50, 1000);
    q.apply_retention(1000 + 49 + 10 + 1).expect("retention");
    assert_eq!(
        q.lock().segments.len(),
        1,
        "everything but the active segment expired"
    );
}

#[test]
fn delete_records_moves_the_log_start_and_survives_reopen() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
        fill(&p, 40, 1000);
        assert_eq!(p.delete_records_before(25).expect("delete"), 25);
        assert!(matches!(
            p.delete_records_before(41),
            Err(ReadError::OutOfRange { .. })
        ));
        p.close().expect("close");
    }
    let p = reopen(dir.path(), "t", 0, small_segments(), true).expect("open");
    assert_eq!(p.log_start_offset(), 25);
    assert_eq!(values(&p, 25).first(), Some(&25));
}

/// (base offset, partition leader epoch) of every batch from `from`.
fn epochs_of(p: &Partition, from: i64) -> Vec<(i64, i32)> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let r = p.read(offset, 1 << 20, false).expect("read");
        if r.records.is_empty() {
            return out;
        }
        let mut rest = &r.records[..];
        while let Some(h) = batch::parse_header(rest) {
            out.push((
                h.base_offset,
                batch::partition_leader_epoch(rest).expect("epoch"),
            ));
            offset = h.last_offset() + 1;
            rest = &rest[h.size..];
        }
    }
}

#[test]
fn data_and_marker_batches_carry_the_current_leader_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
    fill(&p, 1, 1000);
    p.become_leader(3).expect("become leader");
    p.append(data_batch(&[(None, b"tx")], 1001, Some((7, 0, 0)), true))
        .expect("transactional append");
    p.append_marker(7, 0, true, 0, 1002).expect("marker");
    p.become_leader(2).expect("an older epoch is a no-op");
    fill(&p, 1, 1003);
    assert_eq!(p.leader_epoch(), 3);
    assert_eq!(epochs_of(&p, 0), vec![(0, 0), (1, 3), (2, 3), (3, 3)]);
}

#[test]
fn the_epoch_history_survives_reopen_and_answers_end_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
        fill(&p, 5, 1000);
        p.become_leader(2).expect("become leader");
        fill(&p, 3, 2000);
        p.close().expect("close");
    }
    let p = reopen(dir.path(), "t", 0, small_segments(), true).expect("open");
    assert_eq!(p.leader_epoch(), 2);
    assert_eq!(p.end_offset_for_epoch(0), (0, 5));
    assert_eq!(p.end_offset_for_epoch(1), (0, 5));
    assert_eq!(p.end_offset_for_epoch(2), (2, 8));
    assert_eq!(p.end_offset_for_epoch(3), (-1, -1));
    assert_eq!((p.epoch_at(4), p.epoch_at(5), p.epoch_at(8)), (0, 2, 2));
    assert_eq!(p.epoch_at(-1), -1);
    fill(&p, 1, 3000);
    assert_eq!(epochs_of(&p, 7), vec![(7, 2), (8, 2)]);
}

#[test]
fn batches_taken_back_from_the_wal_keep_the_epoch_they_were_written_with() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = create(dir.path(), "a", 0, LogConfig::default(), true).expect("create");
    a.become_leader(1).expect("become leader");
    fill(&a, 2, 1000);
    let r = a.read(0, 1 << 20, false).expect("read");
    let mut frames = Vec::new();
    let mut rest = &r.records[..];
    while let Some(h) = batch::parse_header(rest) {
        frames.push(rest[..h.size].to_vec());
        rest = &rest[h.size..];
    }
    let b = create(dir.path(), "b", 0, LogConfig::default(), true).expect("create");
    b.become_leader(4).expect("become leader");
    assert_eq!(b.recover_from_wal(&frames).expect("recover"), 2);
    assert_eq!(epochs_of(&b, 0), vec![(0, 1), (1, 1)]);
}

#[test]
fn moving_the_log_start_leaves_the_epochs_alone() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
    fill(&p, 20, 1000);
    p.become_leader(1).expect("become leader");
    fill(&p, 20, 2000);
    p.delete_records_before(30).expect("delete");
    assert_eq!(p.end_offset_for_epoch(0), (0, 20));
    assert_eq!(p.end_offset_for_epoch(1), (1, 40));
    assert_eq!(p.leader_epoch(), 1);
}

#[test]
fn an_epoch_whose_start_a_crash_lost_restarts_at_the_first_new_batch() {
    let dir = tempfile::tempdir().expect("tmp");
    let seg = dir
        .path()
        .join("t-0")
        .join(format!("{}.log", super::super::segment::stem(0)));
    let kept = {
        let p = create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
        fill(&p, 3, 1000);
        let kept = p.size_bytes();
        fill(&p, 2, 1100);
        p.become_leader(2).expect("become leader");
        fill(&p, 3, 2000);
        kept
        // no close(): a crash that loses everything after offset 3
    };
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .expect("segment")
        .set_len(kept)
        .expect("truncate");
    let p = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("recover");
    assert_eq!(p.log_end_offset(), 3);
    assert_eq!(p.leader_epoch(), 2, "the epoch never goes down");
    assert_eq!(p.end_offset_for_epoch(0), (0, 3));
    fill(&p, 4, 3000);
    assert_eq!(p.end_offset_for_epoch(0), (0, 3), "epoch 2 begins at 3 now");
    assert_eq!(p.end_offset_for_epoch(2), (2, 7));
    assert_eq!(
        epochs_of(&p, 2),
        vec![(2, 0), (3, 2), (4, 2), (5, 2), (6, 2)]
    );
}

#[test]
fn the_high_watermark_waits_for_durability_when_fsync_is_always() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, LogConfig::default(), false).expect("create");
    let a = p
        .append(data_batch(&[(None, b"v")], 1, None, false))
        .expect("append");
    assert_eq!((p.high_watermark(), a.end_offset), (0, 1));
    assert!(
        p.read(0, 1000, false).expect("read").records.is_empty(),
        "not readable before durable"
    );
    p.advance_high_watermark(a.end_offset);
    assert!(!p.read(0, 1000, false).expect("read").records.is_empty());
}

/// Makes the active segment look `ms` older by the wall clock.
fn age_active_segment(p: &Partition, ms: i64) {
    let mut st = p.lock();
    let active = st.active().expect("active");
    active.created_ms -= ms;
}

#[test]
fn the_active_segment_rolls_once_a_batch_is_segment_ms_past_its_first() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let p = create(dir.path(), "t", 0, cfg.clone(), true).expect("create");
    let at = |ts: i64| data_batch(&[(None, b"v".as_slice())], ts, None, false);
    p.append(at(10_000)).expect("first");
    age_active_segment(&p, 5_000);
    p.append(at(10_900)).expect("within segment.ms");
    assert_eq!(p.lock().segments.len(), 1);
    p.append(at(11_001)).expect("past segment.ms");
    assert_eq!(
        p.lock().segments.len(),
        2,
        "rolled at 1001 ms past the first batch"
    );
    // The new segment is young by the wall clock: timestamps alone do not
    // roll it, however far they jump.
    p.append(at(50_000)).expect("a far timestamp");
    p.append(at(90_000)).expect("a farther one");
    assert_eq!(
        p.lock().segments.len(),
        2,
        "no roll per batch from timestamps"
    );
    // After a clean reopen the segment still counts from its first batch.
    p.close().expect("close");
    drop(p);
    let p = reopen(dir.path(), "t", 0, cfg, true).expect("open");
    age_active_segment(&p, 5_000);
    p.append(at(11_700))
        .expect("within segment.ms of the reopened segment's first");
    assert_eq!(p.lock().segments.len(), 2);
    p.append(at(12_002))
        .expect("past segment.ms of the reopened segment's first");
    assert_eq!(p.lock().segments.len(), 3);
}

#[test]
fn a_log_append_time_topic_stamps_each_batch_with_the_brokers_clock() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = LogConfig {
        log_append_time: true,
        ..LogConfig::default()
    };
    let p = create(dir.path(), "t", 0, config, true).expect("create");
    let before = crate::clock::now_ms();
    let a = p
        .append(batch::kv_batch(
            &[(Some(b"k"), Some(b"v"))],
            1000,
            None,
            false,
        ))
        .expect("append");
    assert!(a.log_append_time >= before, "{}", a.log_append_time);
    let r = p.read(a.base_offset, 1 << 20, false).expect("read");
    let h = batch::parse_header(&r.records).expect("batch");
    assert_ne!(h.attributes & batch::ATTR_LOG_APPEND_TIME, 0);
    assert_eq!(h.max_timestamp, a.log_append_time);
    assert!(
        batch::crc_ok(&r.records, &h),
        "the stamp keeps the CRC right"
    );
    drop(p);
    let q = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("reopen");
    assert_eq!(q.log_end_offset(), 1, "the stamped batch survives a crash");
}

#[test]
fn records_outside_the_timestamp_bounds_are_refused_one_by_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = LogConfig {
        timestamp_before_max_ms: 3_600_000,
        timestamp_after_max_ms: 60_000,
        ..LogConfig::default()
    };
    let p = create(dir.path(), "t", 0, config, true).expect("create");
    let now = crate::clock::now_ms();
    assert!(
        p.append(batch::kv_batch(
            &[(Some(b"k"), Some(b"v"))],
            now - 1000,
            None,
            false
        ))
        .is_ok()
    );
    let e = p
        .append(batch::kv_batch(
            &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"2"))],
            now - 7_200_000,
            None,
            false,
        ))
        .unwrap_err();
    match e {
        AppendError::Batch(batch::BatchError::TimestampOutOfRange(msg, indexes)) => {
            assert_eq!(indexes, vec![0, 1]);
            assert!(msg.contains("is out of range"), "{msg}");
        }
        other => panic!("expected a timestamp refusal, got {other:?}"),
    }
    let e = p
        .append(batch::kv_batch(
            &[(Some(b"k"), Some(b"v"))],
            now + 600_000,
            None,
            false,
        ))
        .unwrap_err();
    assert!(matches!(
        e,
        AppendError::Batch(batch::BatchError::TimestampOutOfRange(..))
    ));
    assert_eq!(p.log_end_offset(), 1, "nothing refused was written");
}

/// Many partitions through a cache of [`crate::log::open_files::MIN_MAX_OPEN`]
/// files: every append and read reopens what was closed, at the right
/// place; rolled segments and a clean close and reopen keep every batch.
#[test]
fn partitions_sharing_a_small_open_file_cache_keep_every_batch() {
    use crate::log::open_files::{MIN_MAX_OPEN, OpenFiles};
    let dir = tempfile::tempdir().expect("tmp");
    let files = OpenFiles::new(MIN_MAX_OPEN);
    let n = 5 * MIN_MAX_OPEN;
    let parts: Vec<Partition> = (0..n)
        .map(|i| {
            create_in(&files, dir.path(), "t", i as i32, small_segments(), true).expect("create")
        })
        .collect();
    for round in 0..30 {
        for p in &parts {
            fill(p, 1, 1000 + round);
        }
        assert!(files.open_count() <= MIN_MAX_OPEN);
    }
    for p in &parts {
        assert!(p.lock().segments.len() > 1, "small segments roll");
        assert_eq!(values(p, 0), (0..30).collect::<Vec<_>>());
        assert_eq!(p.offset_for_timestamp(1010).expect("ts"), Some((10, 1010)));
    }
    assert!(files.stats().evictions.load(Ordering::Relaxed) > 0);
    for p in &parts {
        p.close().expect("close");
    }
    assert!(
        parts
            .iter()
            .all(|p| p.lock().segments.values().all(|s| !s.file.is_dirty())),
        "a clean close leaves nothing unsynced"
    );
    drop(parts);
    assert_eq!(files.open_count(), 0);
    for i in 0..n {
        let p = reopen_in(&files, dir.path(), "t", i as i32, small_segments(), true).expect("open");
        assert_eq!(values(&p, 0), (0..30).collect::<Vec<_>>());
        fill(&p, 1, 2000);
        assert_eq!(p.log_end_offset(), 31);
    }
    assert!(files.open_count() <= MIN_MAX_OPEN);
}

/// A partition opened after a clean close and closed again without a
/// write syncs nothing, rewrites no index and opens no segment file.
#[test]
fn closing_an_untouched_partition_opens_and_syncs_nothing() {
    use crate::log::open_files::{MIN_MAX_OPEN, OpenFiles};
    let dir = tempfile::tempdir().expect("tmp");
    {
        let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
        fill(&p, 20, 1000);
        p.close().expect("close");
    }
    let files = OpenFiles::new(MIN_MAX_OPEN);
    let p = reopen_in(&files, dir.path(), "t", 0, small_segments(), true).expect("open");
    // Push every segment of the partition out of the cache.
    let _others: Vec<Partition> = (1..=2 * MIN_MAX_OPEN as i32)
        .map(|i| create_in(&files, dir.path(), "o", i, small_segments(), true).expect("create"))
        .collect();
    assert!(
        p.lock()
            .segments
            .values()
            .all(|s| s.file.if_open().is_none())
    );
    let opens = files.stats().opens.load(Ordering::Relaxed);
    p.close().expect("close");
    assert_eq!(
        files.stats().opens.load(Ordering::Relaxed),
        opens,
        "no file reopened"
    );
}

/// The clean marker outlives an open without writes (a clean close after
/// it writes nothing) and goes, durably, before the first write: a crash
/// after that write recovers by scanning, not by trusting old indexes.
#[test]
fn the_clean_marker_stays_until_the_first_write_after_open() {
    let dir = tempfile::tempdir().expect("tmp");
    let marker = dir.path().join("t-0").join(seal::clean_name(0));
    {
        let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
        fill(&p, 20, 1000);
        p.close().expect("close");
    }
    let snapshot = dir.path().join("t-0").join(seal::snapshot_name(0));
    let written = fs::metadata(&snapshot)
        .and_then(|m| m.modified())
        .expect("snapshot");
    {
        let p = reopen(dir.path(), "t", 0, small_segments(), true).expect("open");
        assert!(marker.exists(), "an open alone keeps the marker");
        assert_eq!(values(&p, 0), (0..20).collect::<Vec<_>>());
        p.close().expect("close");
    }
    assert!(marker.exists());
    assert_eq!(
        fs::metadata(&snapshot)
            .and_then(|m| m.modified())
            .expect("snapshot"),
        written,
        "closing an unwritten partition rewrites no snapshot"
    );
    {
        let p = reopen(dir.path(), "t", 0, small_segments(), true).expect("open");
        fill(&p, 1, 3000);
        assert!(!marker.exists(), "the first write removes the marker");
        // no close(): a crash
    }
    let p = reopen(dir.path(), "t", 0, small_segments(), true).expect("open");
    assert_eq!(values(&p, 0), (0..21).collect::<Vec<_>>());
    p.close().expect("close");
    assert!(marker.exists());
}

/// Aborted transactions of `p`'s index, as (first, last) offsets.
fn aborted_index(p: &Partition) -> Vec<(i64, i64)> {
    p.lock()
        .aborted
        .iter()
        .map(|a| (a.first_offset, a.last_offset))
        .collect()
}

/// One aborted transaction (a data batch and its ABORT marker) per
/// producer id in `pids`, each followed by plain batches that roll
/// segments.
fn aborted_transactions(p: &Partition, pids: std::ops::Range<i64>) {
    for pid in pids {
        p.append(data_batch(&[(None, b"tx")], 1000, Some((pid, 0, 0)), true))
            .expect("transactional append");
        p.append_marker(pid, 0, false, 0, 1000)
            .expect("abort marker");
        fill(p, 20, 1000);
    }
}

/// Kafka keeps an aborted transaction's index entry with the segment of
/// its marker, so retention takes it away with the segment. Without that
/// the index grew by one entry per aborted transaction for the life of the
/// partition (the soak benchmark's slow RSS creep) and every snapshot
/// carried all of them.
#[test]
fn aborted_transactions_below_the_log_start_leave_the_index() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let p = create(dir.path(), "t", 0, small_segments(), true).expect("create");
        aborted_transactions(&p, 100..110);
        assert_eq!(aborted_index(&p).len(), 10);
        let start = p
            .delete_records_before(p.high_watermark() / 2)
            .expect("delete");
        let kept = aborted_index(&p);
        assert!(
            !kept.is_empty() && kept.len() < 10,
            "{kept:?} after moving the log start to {start}"
        );
        assert!(kept.iter().all(|&(_, last)| last >= start), "{kept:?}");
        p.close().expect("close");
    }
    let p = reopen(dir.path(), "t", 0, small_segments(), true).expect("open");
    let start = p.log_start_offset();
    let kept = aborted_index(&p);
    assert!(
        kept.iter().all(|&(_, last)| last >= start),
        "{kept:?} after reopen"
    );
    // A read_committed fetch from the log start still learns of the rest.
    let told = p.read(start, 1 << 20, true).expect("read").aborted.len();
    assert_eq!(told, kept.len());

    // Time retention drops the rest of the old segments, and their entries.
    aborted_transactions(&p, 200..202);
    p.apply_retention(i64::MAX / 2).expect("retention");
    let start = p.log_start_offset();
    let kept = aborted_index(&p);
    assert!(
        kept.iter().all(|&(_, last)| last >= start),
        "{kept:?} below {start}"
    );
    assert!(kept.len() <= 2, "{kept:?}");
}

#[test]
fn retention_never_moves_the_log_start_past_the_high_watermark() {
    // fsync=always: the high watermark waits for the produce path's sync,
    // so rolled segments may lie above it.
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = LogConfig {
        retention_bytes: 0,
        ..small_segments()
    };
    let p = create(dir.path(), "t", 0, cfg, false).expect("create");
    fill(&p, 100, 1000);
    let segments = p.lock().segments.len();
    assert!(segments > 3 && p.high_watermark() == 0);
    p.apply_retention(2000).expect("retention");
    assert_eq!(p.log_start_offset(), 0, "nothing lies below the HW");
    assert_eq!(p.lock().segments.len(), segments);
    p.advance_high_watermark(50);
    p.apply_retention(2000).expect("retention");
    let start = p.log_start_offset();
    assert!(start > 0 && start <= 50, "log start {start}");
    p.advance_high_watermark(p.log_end_offset());
    p.apply_retention(2000).expect("retention");
    assert_eq!(p.lock().segments.len(), 1, "all but the active segment go");
    assert!(p.log_start_offset() <= p.high_watermark());
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "fault-injection")),
    ignore = "unchecked build"
)]
#[should_panic(expected = "high watermark 11 ≤ log end 10 broken")]
fn a_high_watermark_past_the_log_end_breaks_an_invariant() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, LogConfig::default(), false).expect("create");
    fill(&p, 10, 1000);
    p.advance_high_watermark(11);
    let _ = p.read(0, 1 << 20, false);
}
