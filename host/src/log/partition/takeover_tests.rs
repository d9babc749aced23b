//! Two (or three) `Partition`s on one directory play the old leader (a
//! zombie after the takeover) and its takers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::open::shorthand::*;
use super::*;
use crate::log::batch::data_batch;

const TOPIC_ID: [u8; 16] = [7; 16];

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    }
}

fn value(tag: &str, i: usize) -> Vec<u8> {
    format!("{tag}-{i:04}-{}", "x".repeat(40)).into_bytes()
}

fn append(p: &Partition, tag: &str, i: usize) -> Result<Appended, AppendError> {
    p.append(data_batch(
        &[(None, &value(tag, i))],
        1000 + i as i64,
        None,
        false,
    ))
}

fn idempotent(seq: i32) -> Vec<u8> {
    data_batch(
        &[(None, &value("acked", seq as usize))],
        1000 + i64::from(seq),
        Some((42, 0, seq)),
        false,
    )
}

/// Every byte the partition serves from offset 0 to its high watermark,
/// and the base offsets of its batches.
fn contents(p: &Partition) -> (Vec<u8>, Vec<i64>) {
    let mut bytes = Vec::new();
    let mut bases = Vec::new();
    let mut offset = p.log_start_offset();
    loop {
        let r = p.read(offset, 1 << 20, false).expect("read");
        if r.records.is_empty() {
            return (bytes, bases);
        }
        let mut rest = &r.records[..];
        while let Some(h) = batch::parse_header(rest) {
            bases.push(h.base_offset);
            offset = h.last_offset() + 1;
            rest = &rest[h.size..];
        }
        bytes.extend_from_slice(&r.records);
    }
}

fn holds(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn take_over(root: &Path, cfg: LogConfig, replay: &[wal::Frame]) -> Partition {
    super::open::shorthand::take_over(root, "t", 0, cfg, true, replay).expect("take over")
}

#[test]
fn a_zombie_append_after_takeover_is_never_visible() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = create(dir.path(), "t", 0, LogConfig::default(), true).expect("create");
    for i in 0..5 {
        append(&a, "a", i).expect("append");
    }
    let b = take_over(dir.path(), LogConfig::default(), &[]);
    assert_eq!(b.log_end_offset(), 5);
    // A wakes with writes in flight: no gate stops it here, only the seal.
    for i in 0..3 {
        append(&a, "zombie", i).expect("the zombie's append reaches its file");
    }
    a.close().expect("the zombie even shuts down cleanly");
    for i in 0..2 {
        assert_eq!(
            append(&b, "b", i).expect("append").base_offset,
            5 + i as i64
        );
    }
    let check = |p: &Partition, who: &str| {
        let (bytes, bases) = contents(p);
        assert_eq!(bases, (0..7).collect::<Vec<_>>(), "{who}");
        assert!(!holds(&bytes, b"zombie"), "{who} sees the zombie's bytes");
        assert!(
            holds(&bytes, &value("b", 0)) && holds(&bytes, &value("b", 1)),
            "{who}"
        );
        assert!(holds(&bytes, &value("a", 4)), "{who}");
    };
    check(&b, "the taker");
    drop(b); // a crash of the taker
    let c = take_over(dir.path(), LogConfig::default(), &[]);
    check(&c, "a later taker");
    c.close().expect("close");
    drop(c);
    let d = reopen(dir.path(), "t", 0, LogConfig::default(), true).expect("open");
    check(&d, "a clean reopen");
}

#[test]
fn a_zombie_roll_cannot_write_into_the_new_leaders_segment() {
    let dir = tempfile::tempdir().expect("tmp");
    let part = dir.path().join("t-0");
    let a = create(dir.path(), "t", 0, small_segments(), true).expect("create");
    for i in 0..12 {
        append(&a, "a", i).expect("append");
    }
    let old_files = |part: &Path| {
        let mut v: Vec<String> = fs::read_dir(part)
            .expect("list")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| super::super::segment::parse_name(n).is_some_and(|(_, g)| g == 0))
            .collect();
        v.sort();
        v
    };
    let b = take_over(dir.path(), small_segments(), &[]);
    let before_zombie = old_files(&part);
    let end = b.log_end_offset();
    let ours = part.join(format!("{}.log", super::super::segment::stem_of(end, 1)));
    assert!(ours.exists(), "the taker starts a file of its own");
    // The zombie fills its sealed segment and rolls, more than once.
    for i in 0..30 {
        append(&a, "zombie", i).expect("the zombie's roll creates files of its own");
    }
    assert!(
        !holds(&fs::read(&ours).expect("read"), b"zombie"),
        "nothing of the zombie is in the taker's file"
    );
    for i in 0..30 {
        append(&b, "b", i).expect("append");
    }
    // A file that exists is never adopted: segment files are created new.
    let again = Segment::create(
        &crate::log::open_files::OpenFiles::unbounded(),
        &part,
        end,
        1,
        1024,
    )
    .expect_err("exists");
    assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
    let (bytes, bases) = contents(&b);
    assert_eq!(bases, (0..end + 30).collect::<Vec<_>>());
    assert!(!holds(&bytes, b"zombie"));
    drop(b);
    let c = take_over(dir.path(), small_segments(), &[]);
    let (bytes, bases) = contents(&c);
    assert_eq!(bases, (0..end + 30).collect::<Vec<_>>());
    assert!(
        !holds(&bytes, b"zombie"),
        "a later taker ignores the zombie's rolls"
    );
    assert_eq!(
        old_files(&part),
        before_zombie,
        "the zombie's rolled files were removed"
    );
}

#[test]
fn takeover_replays_the_dead_leaders_write_ahead_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let wal_dir = dir.path().join(wal::DIR).join("1-first");
    let key = (TOPIC_ID, 0);
    {
        let log = Wal::create(&wal_dir, 1, Vec::new()).expect("wal");
        let a = create(dir.path(), "t", 0, LogConfig::default(), true)
            .expect("create")
            .with_wal(log.clone(), TOPIC_ID);
        for seq in 0..6 {
            let done = a.append(idempotent(seq)).expect("append");
            done.file
                .expect("file")
                .sync_data()
                .expect("durable: acknowledged");
        }
        // Killed: no checkpoint, no close.
    }
    // What a power cut leaves of the segment: its pages were never synced.
    let seg = dir
        .path()
        .join("t-0")
        .join(format!("{}.log", super::super::segment::stem(0)));
    fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .expect("open")
        .set_len(0)
        .expect("truncate");
    let frames = wal::frames_for(&wal_dir, key).expect("frames");
    assert_eq!(frames.len(), 6);
    let b = take_over(dir.path(), LogConfig::default(), &frames);
    let (bytes, bases) = contents(&b);
    assert_eq!(
        bases,
        (0..6).collect::<Vec<_>>(),
        "every acknowledged batch"
    );
    for seq in 0..6 {
        assert!(holds(&bytes, &value("acked", seq)));
    }
    let retry = b.append(idempotent(5)).expect("a retry of the last batch");
    assert!(retry.duplicate, "a duplicate, not OUT_OF_ORDER_SEQUENCE");
    assert_eq!(retry.base_offset, 5);
    let next = b.append(idempotent(6)).expect("the next batch");
    assert_eq!((next.duplicate, next.base_offset), (false, 6));
    assert_eq!(
        wal::frames_for(&wal_dir, key).expect("frames again"),
        frames,
        "reading changed nothing"
    );
}

#[test]
fn the_write_gate_refuses_writes_once_closed() {
    let dir = tempfile::tempdir().expect("tmp");
    let lease = Arc::new(AtomicBool::new(true));
    let held = lease.clone();
    let cfg = LogConfig {
        retention_bytes: 0,
        ..small_segments()
    };
    let p = create(dir.path(), "t", 0, cfg, true)
        .expect("create")
        .with_gate(Arc::new(move || held.load(Ordering::SeqCst)));
    for i in 0..20 {
        append(&p, "a", i).expect("append while the lease holds");
    }
    assert!(p.may_acknowledge());
    let part = dir.path().join("t-0");
    let snapshot = |d: &Path| {
        let mut v: Vec<(String, u64)> = fs::read_dir(d)
            .expect("list")
            .filter_map(|e| {
                let e = e.ok()?;
                Some((e.file_name().into_string().ok()?, e.metadata().ok()?.len()))
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&part);
    lease.store(false, Ordering::SeqCst);
    assert!(!p.may_acknowledge());
    assert!(matches!(append(&p, "late", 0), Err(AppendError::NotLeader)));
    assert!(matches!(
        p.append_marker(42, 0, true, 0, 1),
        Err(AppendError::NotLeader)
    ));
    assert!(matches!(
        p.delete_records_before(3),
        Err(ReadError::Io(e)) if is_not_leader(&e)
    ));
    assert!(
        p.apply_retention(i64::MAX)
            .is_err_and(|e| is_not_leader(&e))
    );
    assert!(p.recover_from_wal(&[]).is_err_and(|e| is_not_leader(&e)));
    assert!(p.close().is_err_and(|e| is_not_leader(&e)));
    assert_eq!(
        snapshot(&part),
        before,
        "no file was written, trimmed or removed"
    );
    assert_eq!(p.log_end_offset(), 20);

    // Abandoned: refused even while the gate would say yes.
    lease.store(true, Ordering::SeqCst);
    assert!(p.may_acknowledge());
    p.abandon();
    assert!(!p.may_acknowledge());
    assert!(matches!(append(&p, "late", 1), Err(AppendError::NotLeader)));
    assert!(p.close().is_err_and(|e| is_not_leader(&e)));
    drop(p);
    assert_eq!(snapshot(&part), before, "abandoning writes nothing");
}

#[test]
fn frames_past_a_seal_never_come_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = (TOPIC_ID, 0);
    let a_dir = dir.path().join(wal::DIR).join("1-a");
    let b_dir = dir.path().join(wal::DIR).join("2-b");
    let a_log = Wal::create(&a_dir, 1, Vec::new()).expect("wal");
    let a = create(dir.path(), "t", 0, LogConfig::default(), true)
        .expect("create")
        .with_wal(a_log.clone(), TOPIC_ID);
    for i in 0..3 {
        append(&a, "a", i).expect("append");
    }
    let b_log = Wal::create(&b_dir, 1, Vec::new()).expect("wal");
    let b = take_over(
        dir.path(),
        LogConfig::default(),
        &wal::frames_for(&a_dir, key).expect("a"),
    )
    .with_wal(b_log.clone(), TOPIC_ID);
    assert_eq!(b.log_end_offset(), 3);
    // The zombie's late appends reach its write-ahead log at offsets 3, 4.
    for i in 0..2 {
        append(&a, "zombie", i).expect("zombie append");
    }
    assert_eq!(wal::frames_for(&a_dir, key).expect("a").len(), 5);
    // B acknowledges one batch (durable in its log only) and dies; its
    // segment loses the unsynced page.
    let done = append(&b, "b", 0).expect("append");
    assert_eq!(done.base_offset, 3);
    done.file.expect("file").sync_data().expect("sync");
    drop(b);
    let b_seg = dir
        .path()
        .join("t-0")
        .join(format!("{}.log", super::super::segment::stem_of(3, 1)));
    fs::OpenOptions::new()
        .write(true)
        .open(&b_seg)
        .expect("open")
        .set_len(0)
        .expect("truncate");
    // C is handed A's directory too, and first.
    let mut replay = wal::frames_for(&a_dir, key).expect("a");
    replay.extend(wal::frames_for(&b_dir, key).expect("b"));
    let c = take_over(dir.path(), LogConfig::default(), &replay);
    let check = |p: &Partition, who: &str| {
        let (bytes, bases) = contents(p);
        assert_eq!(bases, vec![0, 1, 2, 3], "{who}");
        assert!(
            !holds(&bytes, b"zombie"),
            "{who} replayed the zombie's frames"
        );
        assert!(
            holds(&bytes, &value("b", 0)),
            "{who} lost B's acknowledged batch"
        );
    };
    check(&c, "C");
    drop(c);
    // And again, with every directory, in the other order.
    let mut replay = wal::frames_for(&b_dir, key).expect("b");
    replay.extend(wal::frames_for(&a_dir, key).expect("a"));
    let d = take_over(dir.path(), LogConfig::default(), &replay);
    check(&d, "D");

    // Without B's batch: the zombie's frames at the log end still stay out.
    let dir2 = tempfile::tempdir().expect("tmp");
    let a2_dir = dir2.path().join(wal::DIR).join("1-a");
    let a2_log = Wal::create(&a2_dir, 1, Vec::new()).expect("wal");
    let a2 = create(dir2.path(), "t", 0, LogConfig::default(), true)
        .expect("create")
        .with_wal(a2_log, TOPIC_ID);
    append(&a2, "a", 0).expect("append");
    let b2 = take_over(dir2.path(), LogConfig::default(), &[]);
    append(&a2, "zombie", 0).expect("zombie");
    drop(b2);
    let c2 = take_over(
        dir2.path(),
        LogConfig::default(),
        &wal::frames_for(&a2_dir, key).expect("a"),
    );
    let (bytes, bases) = contents(&c2);
    assert_eq!(bases, vec![0]);
    assert!(!holds(&bytes, b"zombie"));
}
