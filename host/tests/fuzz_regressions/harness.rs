//! The fuzz properties, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`,
//! which include this file by path) and by the regression test
//! (`tests/fuzz_regressions.rs`), so a saved input is replayed through exactly
//! what found it. Every function panics when its property fails.
#![allow(dead_code)]

use bytes::Bytes;
use kaas::log::batch::{self, BatchHeader};
use kaas::log::producer::{ProducerTable, Verdict};
use kaas::txn::record::StateRecord;

/// The `max.message.bytes` the batch target validates against.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// `request_decode`: any frame decodes to a request or an error, never a
/// panic (decode's own catch_unwind would hide one; libFuzzer aborts on it)
/// and never an unbounded allocation.
pub fn request_decode(data: &[u8]) {
    match kaas::wire::decode(Bytes::copy_from_slice(data)) {
        Ok(req) => {
            let (lo, hi) = kaas::wire::range(req.api_key).expect("only advertised APIs decode");
            let too_new = req.body.is_none();
            assert!(
                (lo..=hi).contains(&req.version)
                    || (too_new && req.api_key == kafka_protocol::messages::ApiKey::ApiVersions),
                "{:?} v{} decoded outside its range",
                req.api_key,
                req.version
            );
        }
        Err(kaas::wire::FrameError::Malformed { reason, .. }) => {
            assert!(
                !reason.contains("panicked"),
                "the codec panicked; decode caught it"
            );
        }
        Err(_) => {}
    }
}

/// `batch_validate`: the raw input, and the same input with its length
/// field and CRC made consistent (so mutations reach the checks behind the
/// CRC), go through what the broker does with a client's batch.
pub fn batch_validate(data: &[u8]) {
    client_batch(data);
    if data.len() >= batch::HEADER_LEN {
        let mut fixed = data.to_vec();
        let len = (fixed.len() - batch::LOG_OVERHEAD) as i32;
        fixed[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&fixed[21..]);
        fixed[17..21].copy_from_slice(&crc.to_be_bytes());
        client_batch(&fixed);
    }
}

fn client_batch(data: &[u8]) {
    let Ok(h) = batch::validate_client_batch(data, MAX_MESSAGE_BYTES) else {
        return;
    };
    // What validation promises about an accepted batch.
    assert_eq!(batch::parse_header(data), Some(h));
    assert!(batch::crc_ok(data, &h));
    assert_eq!(h.size, data.len());
    assert!(h.size <= MAX_MESSAGE_BYTES);
    assert!(h.record_count > 0 && h.last_offset_delta == h.record_count - 1);
    assert!(!h.is_control() && h.compression() <= 4);
    assert!(!h.has_producer_id() || h.base_sequence >= 0);

    // Producer-state checks, as Partition::append runs them.
    let table = ProducerTable::default();
    assert_eq!(table.check(&h), Ok(Verdict::Append));
    let mut stored = data.to_vec();
    batch::assign_offset(&mut stored, 0, 0);
    let stored_h = BatchHeader {
        base_offset: 0,
        ..h
    };
    let mut table = ProducerTable::default();
    table.record(&stored_h);
    if h.has_producer_id() {
        // The same batch again is a retry inside the dedupe window.
        assert!(matches!(table.check(&h), Ok(Verdict::Duplicate(m)) if m.base_offset == 0));
    }
    assert_eq!(ProducerTable::decode(&table.encode()), Some(table.clone()));

    // The stored batch, as ListOffsets by timestamp reads it back
    // (batch::first_record_at_or_after streams it, decompressing with a
    // bound, and allocates nothing from a count).
    let stored_h = batch::parse_header(&stored).expect("stored header");
    let probes = [i64::MIN, 0, h.base_timestamp, h.max_timestamp, i64::MAX];
    let found: Vec<_> = probes
        .iter()
        .map(|&ts| batch::first_record_at_or_after(&stored, &stored_h, ts))
        .collect();
    // An uncompressed batch also goes through kafka-protocol's decoder
    // (patched, vendor/kafka-protocol), which must agree with the scan. The
    // broker no longer hands compressed batches to that crate: its
    // decompressors have no output bound.
    if h.compression() == 0 {
        let mut buf = Bytes::from(stored);
        if let Ok(set) = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf) {
            assert_eq!(set.records.len(), h.record_count as usize);
            if h.attributes & 0x08 == 0 {
                // (Only where the scan found a record: on over-long varints
                // the two differ, kafka-protocol truncating, the scan refusing.)
                for (&ts, got) in probes.iter().zip(&found).filter(|(_, g)| g.is_some()) {
                    let want = set
                        .records
                        .iter()
                        .find(|r| r.timestamp >= ts)
                        .map(|r| (r.offset, r.timestamp));
                    assert_eq!(*got, want, "first record at or after {ts}");
                }
            }
        }
    }
}

/// `compressed_batch_validate`: the first byte picks the codec (low 3 bits,
/// mod 5) and whether the rest after the 4-byte record count is the
/// batch's (compressed) body as is (0x80 set: garbage, bombs) or plain
/// records the harness compresses with that codec. Validation never panics
/// and allocates nothing from a count (the regression test bounds every
/// allocation); for a compressed body made here it agrees with the
/// uncompressed batch of the same records; whatever it accepts walks
/// exactly `record_count` records, and the timestamp scan of the stored
/// batch agrees with the uncompressed one.
pub fn compressed_batch_validate(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((count, body)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let count = i32::from_be_bytes(*count);
    let codec = i16::from(mode & 0x07) % 5;
    let raw = mode & 0x80 != 0;
    let compressed = if raw {
        body.to_vec()
    } else {
        match batch::compress(codec, body) {
            Ok(c) => c,
            Err(_) => return,
        }
    };
    let b = batch::framed_batch(codec, &compressed, count, 1000);
    let verdict = batch::validate_client_batch(&b, usize::MAX);
    if let Ok(h) = &verdict {
        let mut n = 0;
        batch::walk_records(&b, h, |r| {
            assert_eq!(r.index, n);
            n += 1;
            std::ops::ControlFlow::Continue(())
        })
        .expect("an accepted batch walks");
        assert_eq!(n, h.record_count);
    }
    if raw || codec == 0 {
        return;
    }
    let plain = batch::framed_batch(0, body, count, 1000);
    let plain_verdict = batch::validate_client_batch(&plain, usize::MAX);
    assert_eq!(
        verdict.is_ok(),
        plain_verdict.is_ok(),
        "codec {codec}: {verdict:?} but uncompressed {plain_verdict:?}"
    );
    if let (Ok(h), Ok(ph)) = (verdict, plain_verdict) {
        for ts in [i64::MIN, 999, 1000, 1001, 1_000_000, i64::MAX] {
            assert_eq!(
                batch::first_record_at_or_after(&b, &h, ts),
                batch::first_record_at_or_after(&plain, &ph, ts),
                "codec {codec}, timestamp {ts}"
            );
        }
    }
}

/// `state_record`: whatever decodes re-encodes to something that decodes
/// to the same value.
pub fn state_record(data: &[u8]) {
    if let Ok(rec) = StateRecord::decode(data) {
        let again = StateRecord::decode(&rec.encode()).expect("re-encoded record decodes");
        assert_eq!(again, rec);
    }
}

/// `producer_snapshot`: same round trip for producer-state snapshots.
pub fn producer_snapshot(data: &[u8]) {
    if let Some(table) = ProducerTable::decode(data) {
        let again = ProducerTable::decode(&table.encode()).expect("re-encoded snapshot decodes");
        assert_eq!(again, table);
    }
}
