//! Record batches (magic 2) as they travel: header parsing, validation of a
//! client's batch before anything is stored, offset assignment, and the
//! COMMIT/ABORT control batches the coordinator writes.
//!
//! Batches are stored exactly as received except for the base offset and the
//! partition leader epoch, which the CRC does not cover. Validation never
//! decodes compressed data and never trusts a count or length before checking
//! it against the bytes actually present.

use thiserror::Error;

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
    // key and value lengths, header count), so the count is bounded by the
    // bytes present before anything is decoded. Compressed batches are
    // bounded later by whoever decompresses them (not the broker).
    if h.compression() == 0 {
        let body = &bytes[HEADER_LEN..];
        if h.record_count as usize > body.len() / 7 + 1 {
            return Err(BatchError::Corrupt(format!(
                "{} records cannot fit in {} bytes",
                h.record_count,
                body.len()
            )));
        }
        let n = count_records(body)
            .ok_or_else(|| BatchError::Corrupt("record lengths do not add up".into()))?;
        if n != h.record_count as usize {
            return Err(BatchError::Corrupt(format!(
                "header says {} records, body holds {n}",
                h.record_count
            )));
        }
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

/// Walks uncompressed records (each a zigzag-varint length and a body) and
/// counts them; None if the lengths do not exactly cover `body`.
fn count_records(mut body: &[u8]) -> Option<usize> {
    let mut n = 0;
    while !body.is_empty() {
        let (len, used) = read_varint(body)?;
        if len < 0 {
            return None;
        }
        let len = len as usize;
        body = body.get(used..)?;
        if body.len() < len {
            return None;
        }
        body = &body[len..];
        n += 1;
    }
    Some(n)
}

/// A zigzag varint (at most 5 bytes for an i32).
fn read_varint(b: &[u8]) -> Option<(i64, usize)> {
    let mut value: u64 = 0;
    for (i, byte) in b.iter().take(5).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let v = ((value >> 1) as i64) ^ -((value & 1) as i64);
            return Some((v, i + 1));
        }
    }
    None
}

/// The control type of a control batch's first record: 0 ABORT, 1 COMMIT.
pub fn control_type(batch: &[u8]) -> Option<i16> {
    let mut b = batch.get(HEADER_LEN..)?;
    let (_, n) = read_varint(b)?; // record length
    b = b.get(n + 1..)?; // and the attributes byte
    let (_, n) = read_varint(b)?; // timestamp delta
    b = b.get(n..)?;
    let (_, n) = read_varint(b)?; // offset delta
    b = b.get(n..)?;
    let (key_len, n) = read_varint(b)?;
    b = b.get(n..)?;
    if key_len < 4 {
        return None;
    }
    Some(i16::from_be_bytes([*b.get(2)?, *b.get(3)?]))
}

/// Most decompressed bytes [`first_record_at_or_after`] reads from one
/// batch: a compressed batch is at most `max.message.bytes` on disk, but a
/// decompression bomb can expand it a thousandfold or more.
pub const MAX_SCAN_BYTES: u64 = 64 << 20;

/// Attribute bit: record timestamps are the batch's (LogAppendTime).
const ATTR_LOG_APPEND_TIME: i16 = 0x08;

/// ListOffsets by timestamp inside one stored batch: the offset and
/// timestamp of its first record whose timestamp is at least `ts`. None when
/// no record qualifies or the records cannot be read within
/// [`MAX_SCAN_BYTES`] (the caller then answers with the batch itself).
///
/// Records are read as a stream, decompressing on the fly, and only their
/// length, timestamp delta and offset delta are parsed: nothing is allocated
/// from a count or length in the batch. (kafka-protocol's batch decoder,
/// used here before, reserved capacity from the record count of a
/// compressed batch and from each record's header count, and decompressed
/// without bound; a batch our validation accepts could abort the process.)
pub fn first_record_at_or_after(batch: &[u8], h: &BatchHeader, ts: i64) -> Option<(i64, i64)> {
    use std::io::Read;
    let records = batch.get(HEADER_LEN..h.size)?;
    if h.attributes & ATTR_LOG_APPEND_TIME != 0 {
        return (h.max_timestamp >= ts).then_some((h.base_offset, h.max_timestamp));
    }
    let limit = MAX_SCAN_BYTES;
    match h.compression() {
        0 => scan_records(records, h, ts),
        1 => scan_records(
            flate2::read::MultiGzDecoder::new(records).take(limit),
            h,
            ts,
        ),
        2 => scan_records(&snappy_decompress(records, limit)?[..], h, ts),
        3 => scan_records(lz4::Decoder::new(records).ok()?.take(limit), h, ts),
        4 => scan_records(
            zstd::stream::read::Decoder::new(records).ok()?.take(limit),
            h,
            ts,
        ),
        _ => None,
    }
}

/// Walks records from `r` (each a varint length, attributes, varlong
/// timestamp delta, varint offset delta, then the rest, skipped).
fn scan_records(r: impl std::io::Read, h: &BatchHeader, ts: i64) -> Option<(i64, i64)> {
    use std::io::Read;
    let mut r = std::io::BufReader::new(r);
    for _ in 0..h.record_count {
        let len = read_varlong_io(&mut r)?;
        let mut rec = (&mut r).take(u64::try_from(len).ok()?);
        let mut attributes = [0u8; 1];
        rec.read_exact(&mut attributes).ok()?;
        let timestamp = h.base_timestamp.wrapping_add(read_varlong_io(&mut rec)?);
        let offset = h
            .base_offset
            .saturating_add(i64::from(i32::try_from(read_varlong_io(&mut rec)?).ok()?));
        if timestamp >= ts {
            return Some((offset, timestamp));
        }
        std::io::copy(&mut rec, &mut std::io::sink()).ok()?;
        if rec.limit() != 0 {
            return None; // truncated
        }
    }
    None
}

/// A zigzag varlong (at most 10 bytes) from a reader.
fn read_varlong_io(r: &mut impl std::io::Read) -> Option<i64> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let mut b = [0u8; 1];
        r.read_exact(&mut b).ok()?;
        value |= u64::from(b[0] & 0x7f) << (7 * i);
        if b[0] & 0x80 == 0 {
            return Some(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    None
}

/// Kafka's snappy: xerial framing (magic, version, compatible version, then
/// length-prefixed raw blocks) or, as Java accepts it, one raw block. Every
/// block's declared length is checked against `limit` before allocating.
fn snappy_decompress(data: &[u8], limit: u64) -> Option<Vec<u8>> {
    const XERIAL: &[u8] = b"\x82SNAPPY\x00";
    let mut out = Vec::new();
    let block = |raw: &[u8], out: &mut Vec<u8>| -> Option<()> {
        // A snappy block expands at most ~21 times (a 3-byte copy of 64
        // bytes): a larger declared length is a lie, refused before the
        // zero-filled buffer is made.
        let len = snap::raw::decompress_len(raw).ok()?;
        if len > raw.len().saturating_mul(22) || (out.len() + len) as u64 > limit {
            return None;
        }
        let start = out.len();
        out.resize(start + len, 0);
        let n = snap::raw::Decoder::new()
            .decompress(raw, &mut out[start..])
            .ok()?;
        out.truncate(start + n);
        Some(())
    };
    match data.strip_prefix(XERIAL) {
        None => block(data, &mut out)?,
        Some(rest) => {
            let mut rest = rest.get(8..)?; // version, compatible version
            while !rest.is_empty() {
                let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
                let raw = rest.get(4..4 + len)?;
                block(raw, &mut out)?;
                rest = &rest[4 + len..];
            }
        }
    }
    Some(out)
}

/// Writes the assigned base offset (and leader epoch 0) into a batch; neither
/// field is covered by the CRC.
pub fn assign_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&0i32.to_be_bytes());
}

/// Builds a COMMIT or ABORT control batch (spec §2.9): transactional and
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

/// Builds an uncompressed data batch (tests and benchmarks).
pub fn data_batch(
    records: &[(Option<&[u8]>, &[u8])],
    timestamp: i64,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut r = vec![0u8];
        put_varint(&mut r, 0);
        put_varint(&mut r, i as i64);
        match key {
            Some(k) => {
                put_varint(&mut r, k.len() as i64);
                r.extend_from_slice(k);
            }
            None => put_varint(&mut r, -1),
        }
        put_varint(&mut r, value.len() as i64);
        r.extend_from_slice(value);
        put_varint(&mut r, 0);
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let attrs: i16 = if transactional { ATTR_TRANSACTIONAL } else { 0 };
    let mut b = Vec::with_capacity(HEADER_LEN + body.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&attrs.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&pid.to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(&body);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
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
    fn control_batches_carry_their_type() {
        assert_eq!(control_type(&control_batch(1, 0, true, 0, 1)), Some(1));
        assert_eq!(control_type(&control_batch(1, 0, false, 0, 1)), Some(0));
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
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
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
            assign_offset(&mut b, 100);
            let h = parse_header(&b).expect("header");
            let find = |ts| first_record_at_or_after(&b, &h, ts);
            assert_eq!(find(i64::MIN), Some((100, 1000)), "{codec:?}");
            assert_eq!(find(1015), Some((102, 1020)), "{codec:?}");
            assert_eq!(find(1040), Some((104, 1040)), "{codec:?}");
            assert_eq!(find(1041), Option::None, "{codec:?}");
        }
    }

    #[test]
    fn a_lying_count_or_header_count_allocates_nothing() {
        // Uncompressed, one record whose header count says 2^31-1: the
        // scanner never reads past the timestamp and offset deltas.
        let mut record = vec![0u8];
        put_varint(&mut record, 0);
        put_varint(&mut record, 0);
        put_varint(&mut record, -1);
        put_varint(&mut record, 1);
        record.push(b'v');
        put_varint(&mut record, i64::from(i32::MAX));
        let mut b = data_batch(&[(None, b"v")], 7, None, false);
        b.truncate(HEADER_LEN);
        put_varint(&mut b, record.len() as i64);
        b.extend_from_slice(&record);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let h = validate_client_batch(&b, 1 << 20).expect("validation looks at lengths only");
        assert_eq!(first_record_at_or_after(&b, &h, 0), Some((0, 7)));

        // Compressed with a record count of 2^31-1 and one real record.
        let mut b = encoded(kafka_protocol::records::Compression::Gzip, 1);
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let h = validate_client_batch(&b, 1 << 20).expect("compressed counts are not checked");
        assert_eq!(first_record_at_or_after(&b, &h, 1000), Some((0, 1000)));
        assert_eq!(first_record_at_or_after(&b, &h, 2000), Option::None);
    }

    #[test]
    fn a_decompression_bomb_stops_at_the_scan_limit() {
        // 100 MiB of 7-byte records (timestamp delta 0) gzip to ~100 KiB; the
        // one record that matches lies past MAX_SCAN_BYTES, so it is not
        // found: the scan stopped reading.
        let filler = [0x0c, 0, 0, 0, 1, 1, 0];
        let mut plain = filler.repeat((100 << 20) / filler.len());
        plain.extend_from_slice(&[0x0c, 0, 0x0a, 0, 1, 1, 0]); // delta 5
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut gz, &plain).expect("gzip");
        let body = gz.finish().expect("gzip");
        let mut b = data_batch(&[(None, b"v")], 1, None, false);
        b.truncate(HEADER_LEN);
        b.extend_from_slice(&body);
        b[21..23].copy_from_slice(&1i16.to_be_bytes());
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let len = (b.len() - LOG_OVERHEAD) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let h = parse_header(&b).expect("header");
        assert!(b.len() < 1 << 20, "the bomb fits in max.message.bytes");
        assert_eq!(first_record_at_or_after(&b, &h, 1), Some((0, 1)));
        assert_eq!(first_record_at_or_after(&b, &h, 5), None);
    }
}
