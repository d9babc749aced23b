//! Record batches (magic 2) as they travel: header parsing, validation of a
//! client's batch before anything is stored, offset assignment, and the
//! COMMIT/ABORT control batches the coordinator writes.
//!
//! Batches are stored exactly as received except for the base offset and the
//! partition leader epoch, which the CRC does not cover. Validation walks
//! every record ([`walk_records`]; compressed batches decompressed as a
//! stream within [`MAX_SCAN_BYTES`]) and never trusts a count or length
//! before checking it against the bytes actually present.

use std::ops::ControlFlow;

use thiserror::Error;

mod build;
pub mod recompress;
pub mod records;
mod snappy;
mod walk;

pub use build::{compress, data_batch, encode_records, framed_batch, kv_batch};
pub use walk::{MAX_SCAN_BYTES, RecordMeta, first_record_at_or_after, offload, walk_records};

/// Size of the fixed batch header.
pub const HEADER_LEN: usize = 61;
/// Bytes before the `batchLength` field's coverage starts (offset + length).
pub const LOG_OVERHEAD: usize = 12;
/// Where the CRC-covered region starts.
const CRC_START: usize = 21;

/// Attribute bits.
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
/// Compression codec ids, the attribute field `attributes &
/// ATTR_COMPRESSION_MASK` (Kafka's `CompressionType.id`), named once for
/// every match on a codec (the walker, the encoders, `compression.type`).
pub const CODEC_NONE: i16 = 0x00;
pub const CODEC_GZIP: i16 = 0x01;
pub const CODEC_SNAPPY: i16 = 0x02;
pub const CODEC_LZ4: i16 = 0x03;
/// zstd, which Produce below v7 and Fetch below v10 may not carry.
pub const CODEC_ZSTD: i16 = 0x04;

/// The fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Length of the whole batch in bytes (LOG_OVERHEAD + batchLength).
    pub size: usize,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Offset of the batch's last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn compression(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }
    /// Whether the batch carries a producer id (idempotent or transactional).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// Sequence of the last record, wrapping at i32::MAX as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        (last % (i64::from(i32::MAX) + 1)) as i32
    }
}

/// Why a batch is refused (mapped to Kafka error codes by the wire layer).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    /// CORRUPT_MESSAGE(2): lengths or CRC do not hold.
    #[error("corrupt batch: {0}")]
    Corrupt(String),
    /// INVALID_RECORD(87): well-formed but not acceptable from a client.
    #[error("invalid record: {0}")]
    Invalid(String),
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT(43): magic below 2.
    #[error("unsupported message format (magic {0})")]
    OldMagic(i8),
    /// MESSAGE_TOO_LARGE(10).
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge { size: usize, max: usize },
    /// INVALID_RECORD(87) per record: a compacted topic takes only records
    /// with a key. The indexes of the keyless records in the batch.
    #[error("Compacted topic cannot accept message without key")]
    KeylessOnCompacted(Vec<i32>),
    /// INVALID_TIMESTAMP(32) per record: record timestamps outside
    /// message.timestamp.before.max.ms / after.max.ms of now (CreateTime
    /// topics). Kafka's message for the first such record, and the
    /// indexes of all of them in the batch.
    #[error("{0}")]
    TimestampOutOfRange(String, Vec<i32>),
}

/// What a topic's configs require of a client's batch beyond its form
/// (Kafka's LogValidator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicRules {
    /// max.message.bytes
    pub max_message_bytes: usize,
    /// cleanup.policy includes compact: every record needs a key.
    pub compacted: bool,
    /// CreateTime topics with bounded timestamps: the range [lo, hi] every
    /// record's timestamp must fall in; None when unbounded.
    pub timestamps: Option<(i64, i64)>,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Parses the header at the start of `b`; `b` must hold at least the
/// header. Does not check the CRC. Returns None when fewer than
/// HEADER_LEN bytes are present or the length field is impossible.
pub fn parse_header(b: &[u8]) -> Option<BatchHeader> {
    if b.len() < HEADER_LEN {
        return None;
    }
    let batch_length = be_i32(b, 8);
    if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
        return None;
    }
    Some(BatchHeader {
        base_offset: be_i64(b, 0),
        size: LOG_OVERHEAD + batch_length as usize,
        magic: b[16] as i8,
        crc: u32::from_be_bytes([b[17], b[18], b[19], b[20]]),
        attributes: be_i16(b, 21),
        last_offset_delta: be_i32(b, 23),
        base_timestamp: be_i64(b, 27),
        max_timestamp: be_i64(b, 35),
        producer_id: be_i64(b, 43),
        producer_epoch: be_i16(b, 51),
        base_sequence: be_i32(b, 53),
        record_count: be_i32(b, 57),
    })
}

/// Whether the CRC-32C of the batch matches its header.
pub fn crc_ok(batch: &[u8], header: &BatchHeader) -> bool {
    batch.len() >= header.size && crc32c::crc32c(&batch[CRC_START..header.size]) == header.crc
}

/// Validates the single batch a client sent for one partition (Produce v3+)
/// and returns its header.
pub fn validate_client_batch(
    bytes: &[u8],
    max_message_bytes: usize,
) -> Result<BatchHeader, BatchError> {
    validate_for_topic(
        bytes,
        TopicRules {
            max_message_bytes,
            compacted: false,
            timestamps: None,
        },
    )
}

/// [`validate_client_batch`] under a topic's `rules`: every record with a
/// key on a compacted topic, every record's timestamp within bounds, as
/// Kafka's LogValidator requires.
pub fn validate_for_topic(bytes: &[u8], rules: TopicRules) -> Result<BatchHeader, BatchError> {
    let TopicRules {
        max_message_bytes,
        compacted,
        timestamps,
    } = rules;
    if bytes.len() < 17 {
        return Err(BatchError::Corrupt(format!(
            "{} bytes is shorter than a batch header",
            bytes.len()
        )));
    }
    let magic = bytes[16] as i8;
    if magic < 2 {
        return Err(BatchError::OldMagic(magic));
    }
    if magic > 2 {
        return Err(BatchError::Corrupt(format!("unknown magic {magic}")));
    }
    let h = parse_header(bytes).ok_or_else(|| {
        BatchError::Corrupt(format!("{} bytes do not hold a batch header", bytes.len()))
    })?;
    if h.size != bytes.len() {
        return Err(BatchError::Invalid(format!(
            "a partition's records must be exactly one batch: length field says {} bytes, got {}",
            h.size,
            bytes.len()
        )));
    }
    if h.size > max_message_bytes {
        return Err(BatchError::TooLarge {
            size: h.size,
            max: max_message_bytes,
        });
    }
    if !crc_ok(bytes, &h) {
        return Err(BatchError::Corrupt("CRC-32C mismatch".into()));
    }
    if h.compression() > 4 {
        return Err(BatchError::Corrupt(format!(
            "unknown compression codec {}",
            h.compression()
        )));
    }
    if h.is_control() {
        return Err(BatchError::Invalid(
            "clients may not send control batches".into(),
        ));
    }
    if h.record_count <= 0 {
        return Err(BatchError::Invalid(format!(
            "record count {}",
            h.record_count
        )));
    }
    if h.last_offset_delta != h.record_count - 1 {
        return Err(BatchError::Invalid(format!(
            "lastOffsetDelta {} does not match {} records",
            h.last_offset_delta, h.record_count
        )));
    }
    // Every record takes at least 7 bytes (length, attributes, two deltas,
    // key and value lengths, header count), so an uncompressed batch's count
    // is bounded by the bytes present before anything is decoded.
    if h.compression() == 0 {
        let body = &bytes[HEADER_LEN..];
        if h.record_count as usize > body.len() / 7 + 1 {
            return Err(BatchError::Corrupt(format!(
                "{} records cannot fit in {} bytes",
                h.record_count,
                body.len()
            )));
        }
    }
    // Every record, decompressed as a stream within MAX_SCAN_BYTES (run off
    // the async runtime for compressed batches: see wire::api::produce).
    let mut keyless = Vec::new();
    let mut early_or_late = Vec::new();
    let mut first_bad = None;
    walk_records(bytes, &h, |r| {
        if compacted && r.key_null && keyless.len() < 1000 {
            keyless.push(r.index);
        }
        if let Some((lo, hi)) = timestamps {
            let ts = h.base_timestamp.wrapping_add(r.timestamp_delta);
            if ts >= 0 && (ts < lo || ts > hi) && early_or_late.len() < 1000 {
                first_bad.get_or_insert((ts, r.index));
                early_or_late.push(r.index);
            }
        }
        ControlFlow::Continue(())
    })?;
    if !keyless.is_empty() {
        return Err(BatchError::KeylessOnCompacted(keyless));
    }
    if let (Some((ts, index)), Some((lo, hi))) = (first_bad, timestamps) {
        return Err(BatchError::TimestampOutOfRange(
            format!(
                "Timestamp {ts} of message with offset {index} is out of range. \
                 The timestamp should be within [{lo}, {hi}]"
            ),
            early_or_late,
        ));
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(BatchError::Invalid(
            "a batch with a producer id needs a base sequence".into(),
        ));
    }
    if h.is_transactional() && !h.has_producer_id() {
        return Err(BatchError::Invalid(
            "a transactional batch needs a producer id".into(),
        ));
    }
    Ok(h)
}

/// A zigzag varint of up to 10 bytes (an i64) at the start of `b`, and how
/// many bytes it took.
fn read_varint(b: &[u8]) -> Option<(i64, usize)> {
    let mut value: u64 = 0;
    for (i, byte) in b.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((((value >> 1) as i64) ^ -((value & 1) as i64), i + 1));
        }
    }
    None
}

/// The key of a control batch's first record and the bytes after it.
fn control_key(batch: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut b = batch.get(HEADER_LEN..)?;
    let (_, n) = read_varint(b)?; // record length
    b = b.get(n + 1..)?; // and the attributes byte
    let (_, n) = read_varint(b)?; // timestamp delta
    b = b.get(n..)?;
    let (_, n) = read_varint(b)?; // offset delta
    b = b.get(n..)?;
    let (key_len, n) = read_varint(b)?;
    b = b.get(n..)?;
    let key_len = usize::try_from(key_len).ok()?;
    Some((b.get(..key_len)?, b.get(key_len..)?))
}

/// The control type of a control batch's first record: 0 ABORT, 1 COMMIT.
pub fn control_type(batch: &[u8]) -> Option<i16> {
    let (key, _) = control_key(batch)?;
    Some(i16::from_be_bytes([*key.get(2)?, *key.get(3)?]))
}

/// The coordinator epoch a COMMIT/ABORT marker carries (its record value:
/// version, then the epoch).
pub fn control_coordinator_epoch(batch: &[u8]) -> Option<i32> {
    let (_, rest) = control_key(batch)?;
    let (value_len, n) = read_varint(rest)?;
    let value = rest.get(n..)?.get(..usize::try_from(value_len).ok()?)?;
    Some(i32::from_be_bytes(value.get(2..6)?.try_into().ok()?))
}

/// Writes the assigned base offset and the partition leader epoch of the
/// leader writing it into a batch; neither field is covered by the CRC.
/// `batch` holds at least a header ([`parse_header`] accepted it).
pub fn assign_offset(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Attribute bit: the batch's timestamps are the broker's (LogAppendTime).
pub const ATTR_LOG_APPEND_TIME: i16 = 0x08;

/// Stamps a validated client batch with the broker's append time, as Kafka
/// does for message.timestamp.type=LogAppendTime: the timestamp-type bit
/// set and max timestamp `now_ms` (records keep their deltas, which readers
/// ignore under this type), the CRC computed again over the change.
pub fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = i16::from_be_bytes([batch[21], batch[22]]) | ATTR_LOG_APPEND_TIME;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The partition leader epoch a stored batch was written under; None when
/// fewer than a header's bytes are present.
pub fn partition_leader_epoch(batch: &[u8]) -> Option<i32> {
    (batch.len() >= HEADER_LEN).then(|| be_i32(batch, 12))
}

/// Builds a COMMIT or ABORT control batch (docs/txn-semantics.md §2.9): transactional and
/// control bits, one record whose key is (version 0, type) and whose value is
/// (version 0, coordinator epoch).
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(if commit { 1i16 } else { 0i16 }).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut record = Vec::new();
    record.push(0u8); // attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, key.len() as i64);
    record.extend_from_slice(&key);
    put_varint(&mut record, value.len() as i64);
    record.extend_from_slice(&value);
    put_varint(&mut record, 0); // headers
    let mut body = Vec::new();
    put_varint(&mut body, record.len() as i64);
    body.extend_from_slice(&record);

    let mut b = Vec::with_capacity(HEADER_LEN + body.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&(ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&producer_epoch.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&body);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_batch_validates_and_reports_its_header() {
        let b = data_batch(
            &[(Some(b"k"), b"v1"), (None, b"v2")],
            1000,
            Some((7, 0, 5)),
            false,
        );
        let h = validate_client_batch(&b, 1 << 20).expect("valid");
        assert_eq!(
            (
                h.record_count,
                h.last_offset_delta,
                h.producer_id,
                h.base_sequence
            ),
            (2, 1, 7, 5)
        );
        assert_eq!(h.last_sequence(), 6);
    }

    #[test]
    fn a_flipped_byte_is_a_crc_error() {
        let mut b = data_batch(&[(None, b"value")], 1, None, false);
        let n = b.len();
        b[n - 2] ^= 0x40;
        assert!(matches!(
            validate_client_batch(&b, 1 << 20),
            Err(BatchError::Corrupt(_))
        ));
    }

    #[test]
    fn a_record_count_larger_than_the_bytes_is_refused_before_decoding() {
        let mut b = data_batch(&[(None, b"v")], 1, None, false);
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate_client_batch(&b, 1 << 20),
            Err(BatchError::Corrupt(_))
        ));
    }

    #[test]
    fn control_batches_carry_their_type_and_coordinator_epoch() {
        assert_eq!(control_type(&control_batch(1, 0, true, 0, 1)), Some(1));
        assert_eq!(control_type(&control_batch(1, 0, false, 0, 1)), Some(0));
        assert_eq!(
            control_coordinator_epoch(&control_batch(1, 0, true, 77, 1)),
            Some(77)
        );
        let cut = control_batch(1, 0, true, 77, 1);
        assert_eq!(control_coordinator_epoch(&cut[..cut.len() - 2]), None);
    }

    #[test]
    fn clients_may_not_send_control_batches() {
        let b = control_batch(7, 0, true, 0, 1);
        assert!(matches!(
            validate_client_batch(&b, 1 << 20),
            Err(BatchError::Invalid(_))
        ));
        let h = parse_header(&b).expect("header");
        assert!(crc_ok(&b, &h) && h.is_control() && h.is_transactional());
    }

    #[test]
    fn old_magic_and_oversized_batches_are_refused() {
        let mut b = data_batch(&[(None, b"v")], 1, None, false);
        let size = b.len();
        assert_eq!(
            validate_client_batch(&b, size - 1),
            Err(BatchError::TooLarge {
                size,
                max: size - 1
            })
        );
        b[16] = 1;
        assert_eq!(
            validate_client_batch(&b, 1 << 20),
            Err(BatchError::OldMagic(1))
        );
    }

    #[test]
    fn truncated_input_is_an_error_at_every_length() {
        let b = data_batch(
            &[(Some(b"key"), b"value"), (None, b"x")],
            1,
            Some((1, 0, 0)),
            false,
        );
        for cut in 0..b.len() {
            assert!(
                validate_client_batch(&b[..cut], 1 << 20).is_err(),
                "prefix {cut} accepted"
            );
        }
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let b = data_batch(
            &[(None, b"a"), (None, b"b")],
            1,
            Some((1, 0, i32::MAX)),
            false,
        );
        assert_eq!(parse_header(&b).map(|h| h.last_sequence()), Some(0));
    }

    fn encoded(compression: kafka_protocol::records::Compression, n: i64) -> Vec<u8> {
        use kafka_protocol::records::*;
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
                producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                sequence: i as i32,
                timestamp_type: TimestampType::Creation,
                offset: i,
                timestamp: 1000 + 10 * i,
                key: Some(bytes::Bytes::from("k")),
                value: Some(bytes::Bytes::from(vec![b'v'; 100])),
                headers: [(
                    kafka_protocol::protocol::StrBytes::from_static_str("h"),
                    Some(bytes::Bytes::from("x")),
                )]
                .into_iter()
                .collect(),
            })
            .collect();
        encode_with(&records, compression)
    }

    /// `records` as one batch compressed with `compression` (the clients'
    /// encoder, kafka-protocol's).
    pub(in crate::log::batch) fn encode_with(
        records: &[kafka_protocol::records::Record],
        compression: kafka_protocol::records::Compression,
    ) -> Vec<u8> {
        use kafka_protocol::records::*;
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .expect("encodes");
        buf.to_vec()
    }

    #[test]
    fn the_first_record_at_or_after_a_timestamp_is_found_in_every_codec() {
        use kafka_protocol::records::Compression::*;
        for codec in [None, Gzip, Snappy, Lz4, Zstd] {
            let mut b = encoded(codec, 5);
            validate_client_batch(&b, 1 << 20).expect("a client would send this");
            assign_offset(&mut b, 100, 0);
            let h = parse_header(&b).expect("header");
            let find = |ts| first_record_at_or_after(&b, &h, ts);
            assert_eq!(find(i64::MIN), Some((100, 1000)), "{codec:?}");
            assert_eq!(find(1015), Some((102, 1020)), "{codec:?}");
            assert_eq!(find(1040), Some((104, 1040)), "{codec:?}");
            assert_eq!(find(1041), Option::None, "{codec:?}");
        }
    }

    #[test]
    fn a_lying_count_or_header_count_is_refused_and_allocates_nothing() {
        // Uncompressed, one record whose header count says 2^31-1: the
        // walker runs out of the record's length and refuses it.
        let mut record = vec![0u8];
        put_varint(&mut record, 0);
        put_varint(&mut record, 0);
        put_varint(&mut record, -1);
        put_varint(&mut record, 1);
        record.push(b'v');
        put_varint(&mut record, i64::from(i32::MAX));
        let mut body = Vec::new();
        put_varint(&mut body, record.len() as i64);
        body.extend_from_slice(&record);
        let b = framed_batch(0, &body, 1, 7);
        assert!(matches!(
            validate_client_batch(&b, 1 << 20),
            Err(BatchError::Invalid(_))
        ));
        let h = parse_header(&b).expect("header");
        assert_eq!(first_record_at_or_after(&b, &h, 0), None);

        // Compressed with a record count of 2^31-1 and one real record.
        let mut b = encoded(kafka_protocol::records::Compression::Gzip, 1);
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate_client_batch(&b, 1 << 20),
            Err(BatchError::Invalid(_))
        ));
        let h = parse_header(&b).expect("header");
        assert_eq!(first_record_at_or_after(&b, &h, 1000), Some((0, 1000)));
        assert_eq!(first_record_at_or_after(&b, &h, 2000), Option::None);
    }

    /// 70 records of 1 MiB of zeros each: 70 MiB of records, a few KiB
    /// compressed.
    fn bomb(codec: i16) -> Vec<u8> {
        let value = vec![0u8; 1 << 20];
        let records: Vec<(Option<&[u8]>, &[u8])> = (0..70).map(|_| (None, &value[..])).collect();
        let body = compress(codec, &encode_records(&records)).expect("compress");
        framed_batch(codec, &body, 70, 1)
    }

    #[test]
    fn a_decompression_bomb_is_refused_at_the_scan_limit() {
        for codec in [1, 3, 4] {
            let b = bomb(codec);
            assert!(b.len() < 1 << 20, "the bomb fits in max.message.bytes");
            let err = validate_client_batch(&b, 1 << 20).expect_err("a bomb");
            assert!(
                matches!(&err, BatchError::Corrupt(m) if m.contains("more than")),
                "codec {codec}: {err}"
            );
            // The scan finds what lies within the bound and stops there.
            let h = parse_header(&b).expect("header");
            assert_eq!(first_record_at_or_after(&b, &h, 1), Some((0, 1)));
            assert_eq!(first_record_at_or_after(&b, &h, 2), None);
        }
    }

    #[test]
    fn garbage_that_does_not_decompress_is_corrupt_in_every_codec() {
        let garbage: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for codec in [1, 2, 3, 4] {
            let b = framed_batch(codec, &garbage, 1, 1);
            let err = validate_client_batch(&b, 1 << 20).expect_err("garbage");
            assert!(
                matches!(err, BatchError::Corrupt(_)),
                "codec {codec}: {err}"
            );
        }
    }

    #[test]
    fn compressed_records_are_walked_like_uncompressed_ones() {
        let records: Vec<(Option<&[u8]>, &[u8])> =
            vec![(Some(b"k"), b"v1"), (None, b"v2"), (None, b"")];
        let good = encode_records(&records);
        // Offset deltas 0, 2, ... instead of 0, 1, ...
        let mut skewed = Vec::new();
        for (i, v) in [b"a", b"b"].iter().enumerate() {
            let mut r = vec![0u8];
            put_varint(&mut r, 0);
            put_varint(&mut r, 2 * i as i64);
            put_varint(&mut r, -1);
            put_varint(&mut r, 1);
            r.extend_from_slice(*v);
            put_varint(&mut r, 0);
            put_varint(&mut skewed, r.len() as i64);
            skewed.extend_from_slice(&r);
        }
        // A record whose length claims one byte more than its fields.
        let mut long = good.clone();
        long[0] += 2; // zigzag: +1
        long.push(0);
        for codec in [0, 1, 2, 3, 4] {
            let body = |plain: &[u8]| compress(codec, plain).expect("compress");
            let ok = framed_batch(codec, &body(&good), 3, 1);
            validate_client_batch(&ok, 1 << 20).unwrap_or_else(|e| panic!("codec {codec}: {e}"));
            let cases = [
                ("too few records", framed_batch(codec, &body(&good), 4, 1)),
                ("too many records", framed_batch(codec, &body(&good), 2, 1)),
                ("trailing bytes", {
                    let mut p = good.clone();
                    p.extend_from_slice(&[0, 0]);
                    framed_batch(codec, &body(&p), 3, 1)
                }),
                ("offset deltas", framed_batch(codec, &body(&skewed), 2, 1)),
                ("record length", framed_batch(codec, &body(&long), 3, 1)),
                (
                    "truncated record",
                    framed_batch(codec, &body(&good[..good.len() - 1]), 3, 1),
                ),
            ];
            for (what, b) in cases {
                let err = validate_client_batch(&b, 1 << 20).expect_err(what);
                assert!(
                    matches!(err, BatchError::Invalid(_) | BatchError::Corrupt(_)),
                    "codec {codec}, {what}: {err}"
                );
                if codec != 0 || what != "too few records" {
                    assert!(
                        matches!(err, BatchError::Invalid(_)),
                        "codec {codec}, {what}: {err}"
                    );
                }
            }
        }
    }
}
