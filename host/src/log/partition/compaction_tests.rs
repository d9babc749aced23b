use std::collections::BTreeMap;

use super::compaction::Cleaned;
use super::open::shorthand::*;
use super::*;
use crate::log::batch::{kv_batch, records};
use crate::log::offset_map::{OffsetMap, Throttle};

const DAY: i64 = 24 * 3600 * 1000;

fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

fn put(p: &Partition, key: &str, value: Option<&str>, ts: i64) -> i64 {
    p.append(kv_batch(
        &[(Some(key.as_bytes()), value.map(str::as_bytes))],
        ts,
        None,
        false,
    ))
    .expect("append")
    .base_offset
}

/// Every record readable from the log start: (offset, key, value), with
/// read_committed as asked (aborted records left out by the aborted index).
fn records_of(p: &Partition, committed: bool) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = p.log_start_offset();
    loop {
        let r = p.read(offset, 1 << 20, committed).expect("read");
        if r.records.is_empty() {
            return out;
        }
        let mut rest = &r.records[..];
        while let Some(h) = batch::parse_header(rest) {
            let aborted = committed
                && h.is_transactional()
                && r.aborted.iter().any(|a| {
                    a.producer_id == h.producer_id
                        && a.first_offset <= h.base_offset
                        && h.base_offset <= a.last_offset
                });
            if !h.is_control() && !aborted {
                let d = records::decode(&rest[..h.size], &h).expect("decode");
                for r in &d.records {
                    out.push((
                        h.base_offset + i64::from(r.offset_delta),
                        String::from_utf8_lossy(d.key(r).unwrap_or_default()).into_owned(),
                        d.value(r).map(|v| String::from_utf8_lossy(v).into_owned()),
                    ));
                }
            }
            offset = h.last_offset() + 1;
            rest = &rest[h.size..];
        }
    }
}

fn clean(p: &Partition, now: i64) -> Option<Cleaned> {
    let mut map = OffsetMap::new(1 << 20);
    p.clean(&mut map, &mut Throttle::new(None), now)
        .expect("clean")
}

/// The last value of each key among `records`.
fn last_values(records: &[(i64, String, Option<String>)]) -> BTreeMap<String, Option<String>> {
    records
        .iter()
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn the_last_record_of_each_key_survives_with_its_offset() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    for i in 0..300 {
        put(
            &p,
            &format!("k{}", i % 10),
            Some(&format!("v{i}")),
            1000 + i,
        );
    }
    let before = records_of(&p, false);
    let size_before = p.size_bytes();
    let c = clean(&p, 10_000).expect("something to clean");
    assert!(c.segments > 0 && c.records_removed > 0, "{c:?}");
    let after = records_of(&p, false);
    // The same last value per key, every kept record unchanged at its own
    // offset, offsets ascending, far fewer records and bytes.
    assert_eq!(last_values(&after), last_values(&before));
    for r in &after {
        assert!(before.contains(r), "{r:?} was not in the log");
    }
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(
        after.len() < before.len() / 3,
        "{} of {}",
        after.len(),
        before.len()
    );
    assert!(p.size_bytes() < size_before / 2);
    // In the cleaned part each key appears once.
    let cleaned: Vec<_> = after.iter().filter(|r| r.0 < c.clean_upto).collect();
    let keys: std::collections::BTreeSet<_> = cleaned.iter().map(|r| &r.1).collect();
    assert_eq!(keys.len(), cleaned.len());
    // Nothing is dirty now, so a second pass has nothing to do.
    assert_eq!(p.dirtiness(10_000).dirty_bytes, 0);
    // A fetch at an offset cleaned away reads on from the next record.
    let gap = (p.log_start_offset()..c.clean_upto)
        .find(|o| !after.iter().any(|r| r.0 == *o))
        .expect("a cleaned-away offset");
    let r = p.read(gap, 1 << 20, false).expect("read at a gap");
    let h = batch::parse_header(&r.records).expect("a batch after the gap");
    assert!(h.last_offset() >= gap);
}

#[test]
fn a_cleaned_log_reopens_the_same_after_a_crash_and_after_a_clean_close() {
    let dir = tempfile::tempdir().expect("tmp");
    let after = {
        let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
        for i in 0..200 {
            put(&p, &format!("k{}", i % 7), Some(&format!("v{i}")), 1000 + i);
        }
        clean(&p, 10_000).expect("cleaned");
        records_of(&p, false)
        // no close(): a crash
    };
    // A pass stopped mid-write leaves a .cleaned file: never read.
    fs::write(dir.path().join("t-0/00000000000000000000.cleaned"), b"torn").expect("leftover");
    let p = reopen(dir.path(), "t", 0, compacted(), true).expect("reopen");
    assert_eq!(records_of(&p, false), after);
    put(&p, "k1", Some("late"), 5000);
    p.close().expect("close");
    let q = reopen(dir.path(), "t", 0, compacted(), true).expect("clean reopen");
    let mut expected = after.clone();
    expected.push((q.log_end_offset() - 1, "k1".into(), Some("late".into())));
    assert_eq!(records_of(&q, false), expected);
    assert!(clean(&q, 10_000).is_some());
    let names: Vec<String> = fs::read_dir(dir.path().join("t-0"))
        .expect("ls")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with(".cleaned")),
        "the next pass removes a leftover: {names:?}"
    );
}

#[test]
fn a_tombstone_stays_for_delete_retention_then_goes() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    put(&p, "gone", Some("old"), 1000);
    put(&p, "gone", None, 1001);
    for i in 0..100 {
        put(&p, &format!("k{}", i % 5), Some(&format!("v{i}")), 1002 + i);
    }
    let now = 50_000;
    clean(&p, now);
    let after = records_of(&p, false);
    let gone: Vec<_> = after.iter().filter(|r| r.1 == "gone").collect();
    assert_eq!(
        gone.len(),
        1,
        "the old value goes, the tombstone stays: {gone:?}"
    );
    assert_eq!(gone[0].2, None);
    // More writes make the log dirty again; before the horizon it stays.
    for i in 0..40 {
        put(&p, &format!("k{}", i % 5), Some(&format!("w{i}")), 2000 + i);
    }
    clean(&p, now + DAY - 1);
    assert!(records_of(&p, false).iter().any(|r| r.1 == "gone"));
    for i in 0..40 {
        put(&p, &format!("k{}", i % 5), Some(&format!("x{i}")), 3000 + i);
    }
    clean(&p, now + DAY);
    assert!(
        !records_of(&p, false).iter().any(|r| r.1 == "gone"),
        "removed once delete.retention.ms has passed since the first clean"
    );
}

#[test]
fn aborted_records_go_and_a_marker_goes_once_its_records_have() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    let (pid, epoch) = (7, 0);
    let mut seq = 0;
    let mut txn = |key: &str, value: &str, commit: bool, ts: i64| {
        p.append(kv_batch(
            &[(Some(key.as_bytes()), Some(value.as_bytes()))],
            ts,
            Some((pid, epoch, seq)),
            true,
        ))
        .expect("transactional append");
        seq += 1;
        p.append_marker(pid, epoch, commit, 0, ts).expect("marker");
    };
    txn("a", "committed", true, 1000);
    txn("b", "aborted", false, 1001);
    txn("a", "superseding", true, 1002);
    for i in 0..60 {
        put(&p, &format!("k{}", i % 3), Some(&format!("v{i}")), 1003 + i);
    }
    let committed = records_of(&p, true);
    assert!(records_of(&p, false).iter().any(|r| r.1 == "b"));
    let now = 10_000;
    clean(&p, now);
    let after = records_of(&p, false);
    assert!(
        !after.iter().any(|r| r.1 == "b"),
        "aborted records are removed"
    );
    assert_eq!(last_values(&records_of(&p, true)), last_values(&committed));
    let markers = |p: &Partition| {
        let r = p.read(0, 1 << 20, false).expect("read");
        let mut n = 0;
        let mut rest = &r.records[..];
        while let Some(h) = batch::parse_header(rest) {
            n += usize::from(h.is_control());
            rest = &rest[h.size..];
        }
        n
    };
    // The first two transactions have no records left, the third has one.
    assert_eq!(markers(&p), 3, "markers stay until their horizon");
    for i in 0..60 {
        put(&p, &format!("k{}", i % 3), Some(&format!("w{i}")), 2000 + i);
    }
    clean(&p, now + DAY);
    assert_eq!(
        markers(&p),
        1,
        "only the marker of the transaction with a record left"
    );
    assert!(
        records_of(&p, false)
            .iter()
            .any(|r| r.2.as_deref() == Some("superseding"))
    );
    // The ABORT marker gone, so is its aborted-transaction entry: a
    // read_committed client told of it would skip every later batch of
    // the producer, looking for the marker. After a crash too.
    let told = |p: &Partition| p.read(0, 1 << 20, true).expect("read").aborted;
    assert_eq!(
        told(&p),
        vec![],
        "no aborted transaction without its marker"
    );
    drop(p);
    let q = reopen(dir.path(), "t", 0, compacted(), true).expect("reopen");
    assert_eq!(told(&q), vec![], "nor after a crash");
}

#[test]
fn nothing_of_an_open_transaction_or_past_it_is_cleaned() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    for i in 0..30 {
        put(&p, "k", Some(&format!("v{i}")), 1000 + i);
    }
    let open_at = p
        .append(kv_batch(
            &[(Some(b"k"), Some(b"open"))],
            2000,
            Some((9, 0, 0)),
            true,
        ))
        .expect("open transaction")
        .base_offset;
    for i in 0..60 {
        put(&p, "k", Some(&format!("w{i}")), 3000 + i);
    }
    let d = p.dirtiness(10_000);
    assert!(d.uncleanable <= open_at, "{d:?} vs {open_at}");
    clean(&p, 10_000);
    let after = records_of(&p, false);
    assert!(after.iter().any(|r| r.2.as_deref() == Some("open")));
    assert!(
        after.iter().filter(|r| r.0 > open_at).count() == 60,
        "everything past the open transaction is untouched"
    );
}

/// One idempotent record of "k" (producer 5) with `value`, then 60 plain
/// records of "k" and a clean: the producer's batch is left with nothing.
fn idempotent_then_superseded(p: &Partition, value: &[u8]) -> i64 {
    let at = p
        .append(kv_batch(
            &[(Some(b"k"), Some(value))],
            1000,
            Some((5, 0, 0)),
            false,
        ))
        .expect("idempotent append")
        .base_offset;
    for i in 0..60 {
        put(p, "k", Some(&format!("v{i}")), 1001 + i);
    }
    clean(p, 10_000);
    at
}

#[test]
fn a_producers_last_batch_stays_as_an_empty_batch() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    let at = idempotent_then_superseded(&p, b"idem");
    let r = p.read(at, 1 << 20, false).expect("read");
    let h = batch::parse_header(&r.records).expect("a batch");
    assert_eq!((h.base_offset, h.producer_id, h.record_count), (at, 5, 0));
    // The producer's state is rebuilt from it after a crash.
    drop(p);
    let _ = fs::remove_file(dir.path().join(seal::snapshot_name(0)));
    let q = reopen(dir.path(), "t", 0, compacted(), true).expect("reopen");
    let dup = q
        .append(kv_batch(
            &[(Some(b"k"), Some(b"idem"))],
            1000,
            Some((5, 0, 0)),
            false,
        ))
        .expect("retry");
    assert!(dup.duplicate, "the retried batch is still known");
    // Five later batches of the producer: the empty one is no longer
    // needed, and the next pass removes it.
    for seq in 1..=5 {
        q.append(kv_batch(
            &[(Some(b"k"), Some(b"later"))],
            2000,
            Some((5, 0, seq)),
            false,
        ))
        .expect("later idempotent append");
    }
    for i in 0..60 {
        put(&q, "k", Some(&format!("w{i}")), 3000 + i);
    }
    clean(&q, 20_000);
    let r = q.read(at, 1 << 20, false).expect("read");
    let h = batch::parse_header(&r.records).expect("a batch");
    assert!(h.base_offset > at, "the emptied batch is gone");
}

#[test]
fn a_full_offset_map_cleans_what_it_covers_and_the_next_pass_the_rest() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    for round in 0..3 {
        for k in 0..100 {
            put(&p, &format!("k{k}"), Some(&format!("r{round}")), 1000 + k);
        }
    }
    let before = last_values(&records_of(&p, false));
    // Room for 90 keys (24 bytes each, at the load factor 0.9).
    let mut map = OffsetMap::new(100 * 24);
    let first = p
        .clean(&mut map, &mut Throttle::new(None), 10_000)
        .expect("clean")
        .expect("cleaned");
    assert!(first.clean_upto < p.dirtiness(10_000).uncleanable);
    assert!(p.dirtiness(10_000).dirty_bytes > 0);
    while p.dirtiness(10_000).dirty_bytes > 0 {
        p.clean(&mut map, &mut Throttle::new(None), 10_000)
            .expect("clean");
    }
    assert_eq!(last_values(&records_of(&p, false)), before);
}

#[test]
fn a_fetch_reads_on_past_a_segment_left_with_only_an_empty_batch() {
    // librdkafka cannot move past a fetch answer that holds nothing but an
    // empty batch: it doubles its fetch size until it gives up
    // (MSG_SIZE_TOO_LARGE), so the read goes on into the next segment.
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, compacted(), true).expect("create");
    let at = idempotent_then_superseded(&p, &[b'i'; 1000]);
    let first = dir.path().join("t-0/00000000000000000000.log");
    assert_eq!(
        fs::metadata(&first).expect("first segment").len(),
        batch::HEADER_LEN as u64,
        "the idempotent batch, alone in its segment, is left empty"
    );
    let r = p.read(at, 1 << 20, false).expect("read");
    let mut batches = Vec::new();
    let mut rest = &r.records[..];
    while let Some(h) = batch::parse_header(rest) {
        batches.push((h.base_offset, h.record_count));
        rest = &rest[h.size..];
    }
    assert_eq!(batches[0], (at, 0), "the empty batch first");
    assert!(
        batches.iter().skip(1).any(|&(_, n)| n > 0),
        "and records after it: {batches:?}"
    );
}
