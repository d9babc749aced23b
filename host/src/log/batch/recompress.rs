//! A client's batch re-encoded with the topic's codec (`compression.type`
//! other than `producer`), as Kafka's LogValidator rebuilds a batch whose
//! codec differs from the topic's.
//!
//! The records section is streamed from the producer's codec into the
//! topic's: the record bytes themselves (offset and timestamp deltas, keys,
//! values, headers) are kept as they are, and so is every header field but
//! the length, the codec bits of the attributes and the CRC (base offset,
//! partition leader epoch, last offset delta, base and max timestamp,
//! producer id, epoch and base sequence, the transactional bit and the
//! timestamp type). Decompression reads at most [`MAX_SCAN_BYTES`], the
//! bound validation already held the batch to, and the new batch is built
//! in one buffer that may not grow past `max.message.bytes`: a batch that
//! would (a compressed batch stored `uncompressed`, say) is refused as
//! Kafka refuses it after recompressing (MESSAGE_TOO_LARGE).
//!
//! The encoders write what Kafka's own clients read: gzip at the default
//! level, snappy in xerial framing with 32 KiB blocks, lz4 as a frame of
//! independent 64 KiB blocks (Java's reader decompresses each block on its
//! own), zstd at level 3.

use std::cell::Cell;
use std::io::{self, Read, Write};

use super::{
    ATTR_COMPRESSION_MASK, BatchError, BatchHeader, CODEC_GZIP, CODEC_LZ4, CODEC_NONE,
    CODEC_SNAPPY, CODEC_ZSTD, CRC_START, HEADER_LEN, LOG_OVERHEAD, MAX_SCAN_BYTES,
};

/// Kafka's codec number for a `compression.type` value; None for
/// `producer` (or anything else: validation admits only these).
pub fn codec_of(compression_type: &str) -> Option<i16> {
    match compression_type {
        "uncompressed" => Some(CODEC_NONE),
        "gzip" => Some(CODEC_GZIP),
        "snappy" => Some(CODEC_SNAPPY),
        "lz4" => Some(CODEC_LZ4),
        "zstd" => Some(CODEC_ZSTD),
        _ => None,
    }
}

/// The `compression.type` value of Kafka codec `codec` (`producer` for None).
pub fn compression_type_name(codec: Option<i16>) -> &'static str {
    match codec {
        Some(CODEC_NONE) => "uncompressed",
        Some(CODEC_GZIP) => "gzip",
        Some(CODEC_SNAPPY) => "snappy",
        Some(CODEC_LZ4) => "lz4",
        Some(CODEC_ZSTD) => "zstd",
        _ => "producer",
    }
}

/// Re-encodes the validated client batch `batch` (header `h`) with Kafka
/// codec `codec`; None when there is nothing to do (the batch already uses
/// it, or it is a control batch, which is never recompressed). The new
/// batch is at most `max_bytes` long or refused ([`BatchError::TooLarge`],
/// its size then the bytes written when it went past).
pub fn recompress(
    batch: &[u8],
    h: &BatchHeader,
    codec: i16,
    max_bytes: usize,
) -> Result<Option<Vec<u8>>, BatchError> {
    if h.is_control() || h.compression() == codec {
        return Ok(None);
    }
    let records = batch
        .get(HEADER_LEN..h.size)
        .ok_or_else(|| BatchError::Corrupt("the batch is shorter than its length field".into()))?;
    let header = batch
        .get(..HEADER_LEN)
        .ok_or_else(|| BatchError::Corrupt("the batch is shorter than its header".into()))?;
    let mut out = Vec::with_capacity(h.size.min(max_bytes).max(HEADER_LEN));
    out.extend_from_slice(header);
    let over = Cell::new(false);
    let read = Cell::new(0u64);
    let result = (|| {
        let decoder = super::walk::decoder(h.compression(), records)?;
        let mut src = Counted {
            inner: decoder.take(MAX_SCAN_BYTES + 1),
            read: &read,
        };
        let mut dst = Capped {
            out: &mut out,
            max: max_bytes,
            over: &over,
        };
        encode(codec, &mut src, &mut dst)
    })();
    if over.get() {
        return Err(BatchError::TooLarge {
            size: out.len().max(max_bytes + 1),
            max: max_bytes,
        });
    }
    if read.get() > MAX_SCAN_BYTES {
        return Err(BatchError::Corrupt(format!(
            "records decompress to more than {MAX_SCAN_BYTES} bytes"
        )));
    }
    result.map_err(|e| BatchError::Corrupt(format!("records do not re-encode: {e}")))?;
    let length = i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| BatchError::TooLarge {
        size: out.len(),
        max: max_bytes,
    })?;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = (h.attributes & !ATTR_COMPRESSION_MASK) | codec;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(Some(out))
}

/// Streams `src` into `dst` compressed with Kafka codec `codec` (0: as is).
pub(super) fn encode(codec: i16, src: &mut impl Read, dst: &mut impl Write) -> io::Result<()> {
    match codec {
        CODEC_NONE => {
            io::copy(src, dst)?;
        }
        CODEC_GZIP => {
            let mut e = flate2::write::GzEncoder::new(dst, flate2::Compression::default());
            io::copy(src, &mut e)?;
            e.try_finish()?;
        }
        CODEC_SNAPPY => {
            // xerial framing: magic, version 1, compatible version 1, then
            // (length, raw snappy block) per 32 KiB of input.
            dst.write_all(b"\x82SNAPPY\x00")?;
            dst.write_all(&1i32.to_be_bytes())?;
            dst.write_all(&1i32.to_be_bytes())?;
            const BLOCK: usize = 32 << 10;
            let mut plain = vec![0u8; BLOCK];
            let mut packed = vec![0u8; snap::raw::max_compress_len(BLOCK)];
            let mut enc = snap::raw::Encoder::new();
            loop {
                let n = fill(src, &mut plain)?;
                if n == 0 {
                    break;
                }
                let m = enc
                    .compress(&plain[..n], &mut packed)
                    .map_err(io::Error::other)?;
                let len = i32::try_from(m).map_err(io::Error::other)?;
                dst.write_all(&len.to_be_bytes())?;
                dst.write_all(&packed[..m])?;
                if n < BLOCK {
                    break;
                }
            }
        }
        CODEC_LZ4 => {
            let mut e = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(dst)?;
            io::copy(src, &mut e)?;
            let (_, done) = e.finish();
            done?;
        }
        CODEC_ZSTD => {
            let mut e = zstd::stream::write::Encoder::new(dst, 3)?;
            io::copy(src, &mut e)?;
            e.finish()?;
        }
        c => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown compression codec {c}"),
            ));
        }
    }
    Ok(())
}

/// Reads into `buf` until it is full or `src` ends; how many bytes came.
fn fill(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A reader that counts what it hands out.
struct Counted<'a, R> {
    inner: R,
    read: &'a Cell<u64>,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A buffer that refuses to grow past `max` bytes (and says so in `over`,
/// whatever an encoder makes of the error).
struct Capped<'a> {
    out: &'a mut Vec<u8>,
    max: usize,
    over: &'a Cell<bool>,
}

impl Write for Capped<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.out.len().saturating_add(buf.len()) > self.max {
            self.over.set(true);
            return Err(io::Error::other("the batch outgrows max.message.bytes"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::records::decode;
    use crate::log::batch::{
        self, ATTR_LOG_APPEND_TIME, control_batch, crc_ok, parse_header, validate_client_batch,
    };

    /// A client's batch: three records (keys, values, a header, timestamps
    /// 1000, 1010, 1020) from producer 7 (epoch 2, base sequence 40),
    /// compressed with `codec`, transactional when asked.
    fn client_batch(codec: i16, transactional: bool) -> Vec<u8> {
        use kafka_protocol::records::*;
        let records: Vec<Record> = (0..3i64)
            .map(|i| Record {
                transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
                producer_id: 7,
                producer_epoch: 2,
                sequence: 40 + i as i32,
                timestamp_type: TimestampType::Creation,
                offset: i,
                timestamp: 1000 + 10 * i,
                key: Some(bytes::Bytes::from(format!("key-{i}"))),
                value: Some(bytes::Bytes::from(vec![b'a' + i as u8; 300])),
                headers: [(
                    kafka_protocol::protocol::StrBytes::from_static_str("h"),
                    Some(bytes::Bytes::from(format!("header-{i}"))),
                )]
                .into_iter()
                .collect(),
            })
            .collect();
        let compression = match codec {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            _ => Compression::Zstd,
        };
        crate::log::batch::tests::encode_with(&records, compression)
    }

    /// What a consumer sees of a batch: header fields and every record.
    fn consumed(b: &[u8]) -> Vec<kafka_protocol::records::Record> {
        use kafka_protocol::records::RecordBatchDecoder;
        let mut buf = bytes::Bytes::copy_from_slice(b);
        RecordBatchDecoder::decode(&mut buf)
            .expect("a consumer decodes it")
            .records
    }

    #[test]
    fn every_codec_pair_recompresses_to_the_same_records() {
        for from in 0..=4 {
            let b = client_batch(from, false);
            let h = validate_client_batch(&b, 1 << 20).expect("valid");
            for to in 0..=4 {
                let out = recompress(&b, &h, to, 1 << 20).expect("recompresses");
                let Some(out) = out else {
                    assert_eq!(from, to, "only the same codec is left alone");
                    continue;
                };
                let oh = validate_client_batch(&out, 1 << 20)
                    .unwrap_or_else(|e| panic!("{from}->{to}: {e}"));
                assert_eq!(oh.compression(), to, "{from}->{to}");
                assert!(crc_ok(&out, &oh));
                assert_eq!(consumed(&out), consumed(&b), "{from}->{to}");
                // Decoded as the cleaner decodes stored batches, too.
                let d = decode(&out, &oh).expect("decodes");
                assert_eq!(d.records.len(), 3);
                assert_eq!(d.key(&d.records[2]), Some(&b"key-2"[..]));
            }
        }
    }

    #[test]
    fn recompression_keeps_every_header_field_but_length_codec_and_crc() {
        for (from, to) in [(0, 1), (3, 1), (1, 4), (4, 2), (2, 0)] {
            let mut b = client_batch(from, true);
            batch::assign_offset(&mut b, 500, 9);
            let h = parse_header(&b).expect("header");
            let out = recompress(&b, &h, to, 1 << 20)
                .expect("recompresses")
                .expect("a new batch");
            let oh = parse_header(&out).expect("header");
            assert_eq!(oh.size, out.len());
            assert!(crc_ok(&out, &oh));
            assert_eq!(oh.attributes, (h.attributes & !0x07) | to);
            assert!(oh.is_transactional());
            assert_eq!(
                (
                    oh.base_offset,
                    oh.last_offset_delta,
                    oh.base_timestamp,
                    oh.max_timestamp,
                    oh.record_count
                ),
                (500, 2, 1000, 1020, 3)
            );
            assert_eq!(
                (oh.producer_id, oh.producer_epoch, oh.base_sequence),
                (7, 2, 40),
                "{from}->{to}: the producer's fields"
            );
            assert_eq!(oh.last_sequence(), h.last_sequence());
            assert_eq!(batch::partition_leader_epoch(&out), Some(9));
        }
    }

    #[test]
    fn the_log_append_time_type_survives_recompression() {
        let mut b = client_batch(3, false);
        batch::stamp_log_append_time(&mut b, 77_000);
        let h = parse_header(&b).expect("header");
        let out = recompress(&b, &h, 1, 1 << 20).expect("ok").expect("new");
        let oh = parse_header(&out).expect("header");
        assert_ne!(oh.attributes & ATTR_LOG_APPEND_TIME, 0);
        assert_eq!(oh.max_timestamp, 77_000);
        assert!(crc_ok(&out, &oh));
    }

    #[test]
    fn a_control_batch_is_never_recompressed() {
        let b = control_batch(7, 0, true, 3, 1000);
        let h = parse_header(&b).expect("header");
        for codec in 1..=4 {
            assert_eq!(recompress(&b, &h, codec, 1 << 20), Ok(None));
        }
    }

    #[test]
    fn a_batch_that_outgrows_max_message_bytes_when_recompressed_is_too_large() {
        let b = client_batch(4, false);
        let h = validate_client_batch(&b, 1 << 20).expect("valid");
        let plain = recompress(&b, &h, 0, 1 << 20)
            .expect("ok")
            .expect("new")
            .len();
        assert!(plain > b.len(), "zstd made it smaller");
        assert!(matches!(
            recompress(&b, &h, 0, plain - 1),
            Err(BatchError::TooLarge { max, size }) if max == plain - 1 && size > max
        ));
        assert!(recompress(&b, &h, 0, plain).expect("fits").is_some());
    }

    #[test]
    fn compression_type_names_map_to_kafka_codecs() {
        for (name, codec) in [
            ("uncompressed", Some(0)),
            ("gzip", Some(1)),
            ("snappy", Some(2)),
            ("lz4", Some(3)),
            ("zstd", Some(4)),
            ("producer", None),
        ] {
            assert_eq!(codec_of(name), codec);
            assert_eq!(compression_type_name(codec), name);
        }
    }
}
