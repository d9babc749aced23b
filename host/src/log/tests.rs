use super::*;
use crate::log::batch::{self, data_batch};

fn open(dir: &Path) -> LogManager {
    LogManager::open(
        dir,
        LogConfig::default(),
        GroupCommit::new(FsyncMode::Always),
    )
    .expect("open")
}

fn segment(dir: &Path, topic: &str, p: i32) -> PathBuf {
    dir.join(Partition::dir_name(topic, p))
        .join(format!("{:020}.log", 0))
}

/// A power cut's effect on a segment whose pages were never written
/// back: it ends where its last fdatasync left it.
fn lose_segment_pages_after(path: &Path, kept: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open segment")
        .set_len(kept)
        .expect("truncate");
}

fn small(value: &[u8], producer: Option<(i64, i16, i32)>, txn: bool) -> Vec<u8> {
    data_batch(&[(None, value)], 1, producer, txn)
}

fn durable_file(p: &Partition, bytes: Vec<u8>) -> Arc<fs::File> {
    p.append(bytes)
        .expect("append")
        .file
        .expect("a file to sync")
}

/// Write-ahead log files in use (free files kept for recycling are
/// not counted: nothing reads them).
fn wal_files(dir: &Path) -> usize {
    let wal_dir = dir.join(wal::DIR);
    let all = fs::read_dir(&wal_dir).expect("wal dir").count();
    all - wal::free_files(&wal_dir).expect("free files").len()
}

/// Cluster mode: a log with one topic `t` of 2 partitions, both led
/// here at epoch 0, appending through write-ahead log `wal`.
fn clustered(dir: &Path, wal: &str) -> LogManager {
    let logs = LogManager::open_clustered(
        dir,
        LogConfig::default(),
        GroupCommit::new(FsyncMode::Always),
    )
    .expect("open");
    logs.use_wal_dir(wal).expect("wal");
    let meta = TopicMeta::new("t", 2, hex::encode([7u8; 16]), BTreeMap::new());
    logs.sync_topics(&BTreeMap::from([("t".to_string(), meta)]));
    for p in 0..2 {
        logs.take_over("t", p, 0, &[], Arc::new(|| true))
            .expect("take over");
    }
    logs
}

#[test]
fn a_batch_refused_while_the_partition_was_not_held_holds_back_its_producer_after_the_takeover() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = clustered(dir.path(), "1-a");
    let batch = |seq| small(format!("v{seq}").as_bytes(), Some((9, 0, seq)), false);
    durable_file(&logs.partition("t", 0).expect("p0"), batch(0))
        .sync_data()
        .expect("sync");
    logs.abandon("t", 0);
    // The lease was lost: a pipelined batch finds the partition gone,
    // NOT_LEADER (not written) ...
    logs.refused_unheld("t", 0, &batch(1));
    // ... and the one behind it arrives once the partition is back.
    let p = logs
        .take_over("t", 0, 1, &["1-a".to_string()], Arc::new(|| true))
        .expect("take over again");
    assert_eq!(p.log_end_offset(), 1);
    let behind = p.append(batch(2));
    assert!(
        matches!(behind, Err(partition::AppendError::NotLeader)),
        "the batch behind the refused one: NOT_LEADER, got {behind:?}"
    );
    p.append(batch(1)).expect("the refused batch again");
    p.append(batch(2)).expect("then the one behind it");
    assert_eq!(p.log_end_offset(), 3);
}

#[test]
fn an_abandoned_partitions_frames_outlive_the_next_checkpoint() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = clustered(dir.path(), "1-a");
    let p0 = logs.partition("t", 0).expect("p0");
    let p1 = logs.partition("t", 1).expect("p1");
    durable_file(&p0, small(b"only-in-the-wal", None, false))
        .sync_data()
        .expect("sync");
    durable_file(&p1, small(b"other", None, false));
    drop(p0);
    logs.abandon("t", 0);
    assert!(logs.partition("t", 0).is_none(), "abandoned: not open here");
    assert!(logs.checkpoint_wal().expect("checkpoint"));
    assert!(logs.checkpoint_wal().expect("checkpoint"));
    let frames = wal::frames_for(&logs.cluster_wal_dir("1-a"), ([7u8; 16], 0)).expect("frames");
    assert_eq!(
        frames.len(),
        1,
        "the next leader of t-0 can still replay what only the write-ahead log held"
    );
}

#[test]
fn a_taker_replays_what_another_lease_wrote_and_continues_the_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = clustered(dir.path(), "1-a");
    let pa = a.partition("t", 0).expect("p0");
    durable_file(&pa, small(b"acked-by-a", None, false))
        .sync_data()
        .expect("sync");
    let end = pa.log_end_offset();
    drop(pa);
    // A dies without a checkpoint; B takes t-0 over at epoch 1.
    std::mem::forget(a);
    let b = LogManager::open_clustered(
        dir.path(),
        LogConfig::default(),
        GroupCommit::new(FsyncMode::Always),
    )
    .expect("open");
    b.use_wal_dir("2-b").expect("wal");
    let meta = TopicMeta::new("t", 2, hex::encode([7u8; 16]), BTreeMap::new());
    b.sync_topics(&BTreeMap::from([("t".to_string(), meta)]));
    let pb = b
        .take_over("t", 0, 1, &["1-a".to_string()], Arc::new(|| true))
        .expect("take over");
    assert_eq!(
        pb.log_end_offset(),
        end,
        "nothing acknowledged by A is lost"
    );
    assert_eq!(pb.leader_epoch(), 1);
    let next = durable_file(&pb, small(b"by-b", None, false));
    next.sync_data().expect("sync");
    assert_eq!(pb.log_end_offset(), end + 1);
}

#[test]
fn small_appends_to_every_partition_share_one_file_to_sync() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = open(dir.path());
    let t = logs
        .create_topic("t", 3, BTreeMap::new(), false)
        .expect("create");
    let files: Vec<_> = t
        .open_partitions()
        .iter()
        .map(|p| durable_file(p, small(b"v", None, false)))
        .collect();
    assert!(files.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])));
}

#[test]
fn batches_a_crash_took_from_the_segments_come_back_from_the_write_ahead_log() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 2, BTreeMap::new(), false)
            .expect("create");
        for seq in 0..3 {
            durable_file(
                &t.partition(0).unwrap(),
                small(format!("v{seq}").as_bytes(), Some((7, 0, seq)), false),
            );
        }
        durable_file(
            &t.partition(1).unwrap(),
            small(b"aborted", Some((9, 0, 0)), true),
        );
        t.partition(1)
            .unwrap()
            .append_marker(9, 0, false, 0, 2)
            .expect("abort marker");
        // Dropped without a clean close: the process died.
    }
    for p in 0..2 {
        lose_segment_pages_after(&segment(dir.path(), "t", p), 0);
    }
    let logs = open(dir.path());
    let p0 = logs.partition("t", 0).expect("t-0");
    assert_eq!((p0.log_end_offset(), p0.high_watermark()), (3, 3));
    let retry = p0
        .append(small(b"v2", Some((7, 0, 2)), false))
        .expect("retry");
    assert!(
        retry.duplicate,
        "the producer's sequence state came back too"
    );
    let p1 = logs.partition("t", 1).expect("t-1");
    let r = p1.read(0, 1 << 20, true).expect("read_committed");
    assert_eq!(
        r.aborted,
        vec![partition::AbortedTxn {
            producer_id: 9,
            first_offset: 0,
            last_offset: 1
        }]
    );
    assert_eq!(r.last_stable_offset, 2, "the marker closed the transaction");
    assert_eq!(wal_files(dir.path()), 1, "the replayed file is done with");
}

#[test]
fn after_a_checkpoint_only_later_batches_are_replayed() {
    let dir = tempfile::tempdir().expect("tmp");
    let kept;
    {
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create");
        let p = &t.partition(0).unwrap();
        let before = durable_file(p, small(b"a", None, false));
        assert!(logs.checkpoint_wal().expect("checkpoint"));
        assert_eq!(wal_files(dir.path()), 1, "the old file is done with");
        kept = fs::metadata(segment(dir.path(), "t", 0))
            .expect("meta")
            .len();
        let after = durable_file(p, small(b"b", None, false));
        assert!(
            !Arc::ptr_eq(&before, &after),
            "a new file after the checkpoint"
        );
    }
    // The checkpoint synced "a" (and the zeros after it); "b" is lost
    // from the segment.
    let seg = segment(dir.path(), "t", 0);
    let bytes = fs::read(&seg).expect("read");
    let a_len = batch::parse_header(&bytes).expect("batch a").size as u64;
    assert!(a_len < kept);
    lose_segment_pages_after(&seg, a_len);
    let logs = open(dir.path());
    let p = logs.partition("t", 0).expect("t-0");
    assert_eq!(p.log_end_offset(), 2);
    let records = p.read(0, 1 << 20, false).expect("read").records;
    let first = batch::parse_header(&records).expect("first");
    let second = batch::parse_header(&records[first.size..]).expect("second");
    assert_eq!((first.base_offset, second.base_offset), (0, 1));
}

#[test]
fn batches_in_a_recycled_file_come_back_and_its_earlier_frames_do_not() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create");
        let p = &t.partition(0).unwrap();
        let first = durable_file(p, small(b"batch-a", None, false));
        assert!(logs.checkpoint_wal().expect("checkpoint"));
        durable_file(p, small(b"batch-b", None, false));
        assert!(logs.checkpoint_wal().expect("checkpoint"));
        // The second rotation took the first file back: "a"'s frame is
        // still in its bytes, behind where "c" goes.
        let third = durable_file(p, small(b"batch-c", None, false));
        use std::os::unix::fs::MetadataExt;
        let ino = |f: &std::fs::File| f.metadata().expect("meta").ino();
        assert_eq!(ino(&first), ino(&third), "the first file was recycled");
    }
    // The checkpoints synced "a" and "b"; "c" is lost from the segment.
    let seg = segment(dir.path(), "t", 0);
    let bytes = fs::read(&seg).expect("read");
    let a = batch::parse_header(&bytes).expect("batch a").size;
    let b = batch::parse_header(&bytes[a..]).expect("batch b").size;
    lose_segment_pages_after(&seg, (a + b) as u64);
    let logs = open(dir.path());
    let p = logs.partition("t", 0).expect("t-0");
    assert_eq!(
        p.log_end_offset(),
        3,
        "c came back, a was not replayed again"
    );
    let records = p.read(0, 1 << 20, false).expect("read").records;
    let mut at = 0;
    let mut batches = Vec::new();
    while at < records.len() {
        let h = batch::parse_header(&records[at..]).expect("batch");
        batches.push((h.base_offset, &records[at..at + h.size]));
        at += h.size;
    }
    let offsets: Vec<i64> = batches.iter().map(|b| b.0).collect();
    assert_eq!(offsets, vec![0, 1, 2]);
    let holds = |b: &[u8], v: &[u8]| b.windows(v.len()).any(|w| w == v);
    assert!(holds(batches[0].1, b"batch-a") && holds(batches[2].1, b"batch-c"));
}

#[test]
fn a_checkpoint_that_died_after_rotating_leaves_both_files_to_replay() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 2, BTreeMap::new(), false)
            .expect("create");
        for p in &t.open_partitions() {
            durable_file(p, small(b"before the rotation", None, false));
        }
        // The checkpoint rotated, then the process died before it synced
        // any segment or deleted the old file.
        logs.wal()
            .expect("a write-ahead log")
            .rotate()
            .expect("rotate");
        for p in &t.open_partitions() {
            durable_file(p, small(b"after the rotation", None, false));
        }
    }
    assert_eq!(wal_files(dir.path()), 2);
    for p in 0..2 {
        lose_segment_pages_after(&segment(dir.path(), "t", p), 0);
    }
    let logs = open(dir.path());
    for p in 0..2 {
        let part = logs.partition("t", p).expect("partition");
        assert_eq!(part.log_end_offset(), 2, "partition {p}");
        let records = part.read(0, 1 << 20, false).expect("read").records;
        let last = b"after the rotation";
        assert!(records.windows(last.len()).any(|w| w == last));
    }
    assert_eq!(
        wal_files(dir.path()),
        1,
        "both replayed files are done with"
    );
    let free = wal::free_files(&dir.path().join(wal::DIR)).expect("free");
    assert_eq!(
        free.len(),
        1,
        "one of them is kept for recycling, the other deleted"
    );
}

#[test]
fn a_large_append_keeps_its_partition_off_the_write_ahead_log_until_a_checkpoint() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = open(dir.path());
    let t = logs
        .create_topic("t", 2, BTreeMap::new(), false)
        .expect("create");
    let (p0, p1) = (&t.partition(0).unwrap(), &t.partition(1).unwrap());
    let wal_file = durable_file(p0, small(b"small", None, false));
    let big = vec![7u8; wal::MAX_FRAMED_BATCH + 1];
    let large = durable_file(p0, small(&big, None, false));
    assert!(
        !Arc::ptr_eq(&large, &wal_file),
        "a large batch syncs its segment"
    );
    let next = durable_file(p0, small(b"small again", None, false));
    assert!(Arc::ptr_eq(&next, &large), "so does everything after it");
    assert!(Arc::ptr_eq(
        &durable_file(p1, small(b"other", None, false)),
        &wal_file
    ));
    logs.checkpoint_wal().expect("checkpoint");
    let back = durable_file(p0, small(b"after the checkpoint", None, false));
    assert!(!Arc::ptr_eq(&back, &large));
    assert!(Arc::ptr_eq(
        &back,
        &durable_file(p1, small(b"other", None, false))
    ));
}

#[test]
fn frames_of_a_deleted_topic_are_not_replayed_into_its_successor() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let logs = open(dir.path());
        let old = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create");
        durable_file(&old.partition(0).unwrap(), small(b"old-0", None, false));
        durable_file(&old.partition(0).unwrap(), small(b"old-1", None, false));
        assert!(logs.delete_topic("t").expect("delete"));
        let new = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create again");
        durable_file(&new.partition(0).unwrap(), small(b"new-0", None, false));
    }
    lose_segment_pages_after(&segment(dir.path(), "t", 0), 0);
    let logs = open(dir.path());
    let p = logs.partition("t", 0).expect("t-0");
    assert_eq!(p.log_end_offset(), 1);
    let records = p.read(0, 1 << 20, false).expect("read").records;
    let needle = b"new-0";
    assert!(records.windows(needle.len()).any(|w| w == needle));
}

#[test]
fn segment_bytes_only_the_log_covers_are_written_out_once_until_a_checkpoint() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = open(dir.path());
    let t = logs
        .create_topic("t", 1, BTreeMap::new(), false)
        .expect("create");
    let p = &t.partition(0).unwrap();
    let value = vec![1u8; 1000];
    for _ in 0..40 {
        durable_file(p, small(&value, None, false));
    }
    assert_eq!(logs.start_writeback(64 << 10), 0, "under the minimum");
    let started = logs.start_writeback(1);
    assert!(started > 40_000, "{started}");
    assert_eq!(logs.start_writeback(1), 0, "already started");
    durable_file(p, small(&value, None, false));
    let more = logs.start_writeback(1);
    assert!((1000..2000).contains(&more), "only the new batch: {more}");
    durable_file(p, small(&value, None, false));
    logs.checkpoint_wal().expect("checkpoint");
    assert_eq!(logs.start_writeback(1), 0, "the checkpoint synced it all");
}

#[test]
fn a_topic_created_over_a_leftover_directory_starts_empty() {
    let dir = tempfile::tempdir().expect("tmp");
    // A creation a crash interrupted left t-0 with an old segment and
    // no topic metadata.
    let stale = dir.path().join(Partition::dir_name("t", 0));
    fs::create_dir_all(&stale).expect("mkdir");
    fs::write(stale.join(format!("{:020}.log", 100)), b"old bytes").expect("write");
    {
        let logs = open(dir.path());
        let t = logs
            .create_topic("t", 1, BTreeMap::new(), false)
            .expect("create");
        assert_eq!(t.partition(0).unwrap().log_end_offset(), 0);
        logs.close().expect("close");
    }
    assert!(!stale.join(format!("{:020}.log", 100)).exists());
    let logs = open(dir.path());
    assert_eq!(logs.partition("t", 0).expect("t-0").log_end_offset(), 0);
}

#[test]
fn a_topic_past_the_partition_limit_is_refused_and_validate_only_checks_it_too() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = open(dir.path()).with_limits(TopicLimits {
        max_partitions: 4,
        ..TopicLimits::default()
    });
    logs.create_topic("a", 3, BTreeMap::new(), false)
        .expect("fits");
    for validate_only in [true, false] {
        let e = logs
            .create_topic("b", 2, BTreeMap::new(), validate_only)
            .expect_err("past the limit");
        assert!(matches!(
            e,
            CreateError::PartitionLimit {
                requested: 2,
                existing: 3,
                max: 4
            }
        ));
    }
    assert!(!dir.path().join(Partition::dir_name("b", 0)).exists());
    assert_eq!(logs.partition_count(), 3);
}

#[test]
fn a_clean_close_leaves_nothing_to_replay() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = open(dir.path());
    let t = logs
        .create_topic("t", 1, BTreeMap::new(), false)
        .expect("create");
    durable_file(&t.partition(0).unwrap(), small(b"v", None, false));
    logs.close().expect("close");
    let r = wal::recover(&dir.path().join(wal::DIR)).expect("recover");
    assert!(r.batches.is_empty());
    assert_eq!(r.files.len(), 1, "only the fresh, empty file");
}

#[test]
fn the_deprecated_timestamp_difference_bounds_both_sides_unless_they_are_set() {
    let defaults = LogConfig::default();
    let of = |pairs: &[(&str, &str)]| {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_configs(&defaults, &m).expect("valid")
    };
    let c = of(&[("message.timestamp.difference.max.ms", "5000")]);
    assert_eq!(
        (c.timestamp_before_max_ms, c.timestamp_after_max_ms),
        (5000, 5000)
    );
    let c = of(&[
        ("message.timestamp.difference.max.ms", "5000"),
        ("message.timestamp.after.max.ms", "100"),
    ]);
    assert_eq!(
        (c.timestamp_before_max_ms, c.timestamp_after_max_ms),
        (5000, 100)
    );
    assert!(of(&[("message.timestamp.type", "LogAppendTime")]).log_append_time);
    assert!(!of(&[]).log_append_time);
}

#[test]
fn a_dynamic_broker_default_reaches_topics_without_an_override_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let logs = open(dir.path());
        logs.create_topic("plain", 1, BTreeMap::new(), false)
            .unwrap();
        let own = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        logs.create_topic("own", 1, own, false).unwrap();
        let layer = BTreeMap::from([
            ("log.retention.ms".to_string(), "60000".to_string()),
            ("log.cleanup.policy".to_string(), "compact".to_string()),
        ]);
        logs.set_dynamic_defaults(layer).unwrap();
        let plain = logs.topic("plain").unwrap();
        assert_eq!(plain.config.retention_ms, 60_000);
        assert!(plain.config.compact && !plain.config.delete);
        assert_eq!(
            plain.partition(0).unwrap().config().retention_ms,
            60_000,
            "the open partition follows"
        );
        let own = logs.topic("own").unwrap();
        assert_eq!(own.config.retention_ms, 1000, "the topic's override wins");
        assert!(
            own.config.compact,
            "the default it does not override applies"
        );
        logs.close().unwrap();
    }
    let logs = open(dir.path());
    assert_eq!(logs.topic("plain").unwrap().config.retention_ms, 60_000);
    assert_eq!(
        logs.defaults().retention_ms,
        60_000,
        "a new topic starts from it"
    );
    assert_eq!(logs.dynamic_defaults().len(), 2);
}

#[test]
fn a_dynamic_default_that_is_not_dynamic_or_not_valid_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(dir.path());
    let e = logs
        .set_dynamic_defaults(BTreeMap::from([(
            "log.retention.hours".to_string(),
            "1".to_string(),
        )]))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Cannot update these configs dynamically"),
        "{e}"
    );
    let e = logs
        .set_dynamic_defaults(BTreeMap::from([(
            "log.cleanup.policy".to_string(),
            "shred".to_string(),
        )]))
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    let e = logs
        .set_dynamic_defaults(BTreeMap::from([(
            "num.io.threads".to_string(),
            "8".to_string(),
        )]))
        .unwrap_err();
    assert!(e.to_string().contains("Unknown broker config name"), "{e}");
    assert!(logs.dynamic_defaults().is_empty());
    assert_eq!(
        logs.defaults().retention_ms,
        LogConfig::default().retention_ms
    );
}

#[test]
fn a_topic_record_of_an_earlier_build_reads_as_replication_factor_one_and_encodes_back_unchanged() {
    // The etcd compare-and-swap compares encoded records: one written
    // before the replica fields must encode back byte for byte.
    let old = br#"{"name":"t","partitions":2,"id":"0707","configs":{"retention.ms":"1"}}"#;
    let meta: TopicMeta = serde_json::from_slice(old).unwrap();
    assert_eq!(meta.replication_factor, 1);
    assert!(meta.stored_replicas(1).is_empty());
    assert_eq!(serde_json::to_vec(&meta).unwrap(), old.to_vec());

    let mut replicated = meta.clone();
    replicated.replication_factor = 3;
    replicated.replicas = vec![vec![2, 3, 1], vec![3, 1, 2]];
    let back: TopicMeta =
        serde_json::from_slice(&serde_json::to_vec(&replicated).unwrap()).unwrap();
    assert_eq!(back, replicated);
    assert_eq!(back.stored_replicas(1), &[3, 1, 2]);
    assert!(
        back.stored_replicas(2).is_empty(),
        "past the stored sets: none"
    );
}

#[test]
fn min_insync_replicas_reaches_the_log_config() {
    let parsed = parse_configs(
        &LogConfig::default(),
        &[("min.insync.replicas".to_string(), "3".to_string())].into(),
    )
    .unwrap();
    assert_eq!(parsed.min_insync_replicas, 3);
    assert_eq!(LogConfig::default().min_insync_replicas, 1);
}
