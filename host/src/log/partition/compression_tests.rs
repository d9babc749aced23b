//! compression.type on the append path: client batches stored in the
//! topic's codec, the producer's fields kept, a change in force for the
//! next batch, LogAppendTime on top, and max.message.bytes after
//! recompression.

use super::open::shorthand::*;
use super::*;
use crate::log::batch::records::decode;

/// Every stored batch from `from`: (codec, values of its records).
fn stored(p: &Partition, from: i64) -> Vec<(i16, Vec<Vec<u8>>)> {
    let r = p.read(from, 1 << 20, false).expect("read");
    let mut out = Vec::new();
    let mut rest = &r.records[..];
    while let Some(h) = batch::parse_header(rest) {
        let b = &rest[..h.size];
        assert!(
            batch::crc_ok(b, &h),
            "stored batch at {} CRC",
            h.base_offset
        );
        let d = decode(b, &h).expect("decodes");
        let values = d
            .records
            .iter()
            .map(|r| d.value(r).unwrap_or_default().to_vec())
            .collect();
        out.push((h.compression(), values));
        rest = &rest[h.size..];
    }
    out
}

/// A client batch of `values` compressed with `codec`.
fn client(codec: i16, values: &[&[u8]]) -> Vec<u8> {
    let records: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, *v)).collect();
    let body = batch::compress(codec, &batch::encode_records(&records)).expect("compress");
    batch::framed_batch(codec, &body, values.len() as i32, crate::clock::now_ms())
}

fn with(compression: Option<i16>) -> LogConfig {
    LogConfig {
        compression,
        ..LogConfig::default()
    }
}

#[test]
fn a_gzip_topic_stores_every_client_batch_gzip_with_its_records() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, with(Some(1)), true).expect("create");
    for codec in [0, 2, 3, 4, 1] {
        p.append(client(codec, &[b"one", b"two"])).expect("append");
    }
    let got = stored(&p, 0);
    assert_eq!(got.len(), 5);
    for (codec, values) in got {
        assert_eq!(codec, 1, "stored gzip");
        assert_eq!(values, vec![b"one".to_vec(), b"two".to_vec()]);
    }
    drop(p);
    let q = reopen(dir.path(), "t", 0, with(Some(1)), true).expect("reopen");
    assert_eq!(
        q.log_end_offset(),
        10,
        "recompressed batches survive a crash"
    );
}

#[test]
fn an_idempotent_batch_recompressed_keeps_its_producer_and_sequence() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, with(Some(4)), true).expect("create");
    let first = batch::data_batch(&[(None, b"a"), (None, b"b")], 1000, Some((7, 3, 0)), false);
    let a = p.append(first.clone()).expect("append");
    let r = p.read(0, 1 << 20, false).expect("read");
    let h = batch::parse_header(&r.records).expect("stored");
    assert_eq!(h.compression(), 4);
    assert_eq!(
        (
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.last_sequence()
        ),
        (7, 3, 0, 1)
    );
    // The producer's retry is the same batch, and the next sequence follows.
    let again = p.append(first).expect("retry");
    assert!(again.duplicate && again.base_offset == a.base_offset);
    let next = batch::data_batch(&[(None, b"c")], 1001, Some((7, 3, 2)), false);
    assert_eq!(p.append(next).expect("next").base_offset, 2);
    let gap = batch::data_batch(&[(None, b"d")], 1002, Some((7, 3, 9)), false);
    assert!(matches!(
        p.append(gap),
        Err(AppendError::Producer(ProducerError::OutOfOrder))
    ));
}

#[test]
fn a_compression_change_applies_from_the_next_batch() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = create(dir.path(), "t", 0, with(None), true).expect("create");
    p.append(client(3, &[b"x"])).expect("producer's lz4");
    p.set_config(with(Some(2)));
    p.append(client(3, &[b"y"])).expect("to snappy");
    p.set_config(with(Some(0)));
    p.append(client(3, &[b"z"])).expect("to uncompressed");
    p.set_config(with(None));
    p.append(client(1, &[b"w"])).expect("producer's gzip");
    let codecs: Vec<i16> = stored(&p, 0).into_iter().map(|(c, _)| c).collect();
    assert_eq!(codecs, vec![3, 2, 0, 1]);
}

#[test]
fn log_append_time_is_stamped_on_the_recompressed_batch() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = LogConfig {
        log_append_time: true,
        ..with(Some(1))
    };
    let p = create(dir.path(), "t", 0, config, true).expect("create");
    let a = p
        .append(batch::data_batch(&[(None, b"v")], 1000, None, false))
        .expect("append");
    let r = p.read(0, 1 << 20, false).expect("read");
    let h = batch::parse_header(&r.records).expect("stored");
    assert_eq!(h.compression(), 1);
    assert_ne!(h.attributes & batch::ATTR_LOG_APPEND_TIME, 0);
    assert_eq!(h.max_timestamp, a.log_append_time);
    assert!(batch::crc_ok(&r.records, &h));
}

#[test]
fn a_batch_too_large_once_decompressed_for_an_uncompressed_topic_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = LogConfig {
        max_message_bytes: 4096,
        ..with(Some(0))
    };
    let p = create(dir.path(), "t", 0, config, true).expect("create");
    let zeros = vec![0u8; 64 << 10];
    let b = client(4, &[&zeros]);
    assert!(b.len() < 4096, "it fits compressed");
    assert!(matches!(
        p.append(b),
        Err(AppendError::Batch(batch::BatchError::TooLarge {
            max: 4096,
            ..
        }))
    ));
    assert_eq!(p.log_end_offset(), 0, "nothing was written");
    p.append(client(4, &[b"small"])).expect("a small one fits");
    assert_eq!(stored(&p, 0)[0].0, 0);
}

#[test]
fn compression_type_configs_parse_to_the_codec_the_log_stores() {
    for (value, codec) in [
        ("producer", None),
        ("uncompressed", Some(0)),
        ("gzip", Some(1)),
        ("snappy", Some(2)),
        ("lz4", Some(3)),
        (" zstd ", Some(4)),
    ] {
        let overrides = [("compression.type".to_string(), value.to_string())].into();
        let c = crate::log::parse_configs(&LogConfig::default(), &overrides)
            .unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(c.compression, codec, "{value}");
    }
    let overrides = [("compression.type".to_string(), "brotli".to_string())].into();
    let e = crate::log::parse_configs(&LogConfig::default(), &overrides).unwrap_err();
    assert!(e.contains("String must be one of"), "{e}");
}
