//! Batch builders for tests, benchmarks and fuzz harnesses: uncompressed
//! data batches, record encoding, compression and framing. The broker
//! itself builds only control batches ([`super::control_batch`]).

use std::io;

use super::{
    ATTR_TRANSACTIONAL, CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD, CRC_START, HEADER_LEN,
    LOG_OVERHEAD, put_varint,
};

/// Builds an uncompressed data batch (tests and benchmarks).
pub fn data_batch(
    records: &[(Option<&[u8]>, &[u8])],
    timestamp: i64,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Vec<u8> {
    let kv: Vec<KeyValue<'_>> = records.iter().map(|&(k, v)| (k, Some(v))).collect();
    kv_batch(&kv, timestamp, producer, transactional)
}

/// A record's key and value, either of them null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Builds an uncompressed data batch whose values may be null
/// (tombstones): tests and benchmarks of the log cleaner.
pub fn kv_batch(
    records: &[KeyValue<'_>],
    timestamp: i64,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Vec<u8> {
    let body = encode_kv(records);
    let attrs: i16 = if transactional { ATTR_TRANSACTIONAL } else { 0 };
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let mut b = framed_batch(attrs, &body, records.len() as i32, timestamp);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Encodes records (timestamp delta 0, offset delta = index, no headers)
/// as a batch body (tests, benchmarks and fuzz seeds).
pub fn encode_records(records: &[(Option<&[u8]>, &[u8])]) -> Vec<u8> {
    let kv: Vec<KeyValue<'_>> = records.iter().map(|&(k, v)| (k, Some(v))).collect();
    encode_kv(&kv)
}

/// [`encode_records`] with values that may be null (tombstones).
fn encode_kv(records: &[KeyValue<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut r = vec![0u8];
        put_varint(&mut r, 0);
        put_varint(&mut r, i as i64);
        for field in [key, value] {
            match field {
                Some(f) => {
                    put_varint(&mut r, f.len() as i64);
                    r.extend_from_slice(f);
                }
                None => put_varint(&mut r, -1),
            }
        }
        put_varint(&mut r, 0);
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    body
}

/// Compresses a batch body with Kafka codec `codec` (1 gzip, 2 snappy as
/// one raw block, 3 lz4 frame, 4 zstd; anything else unchanged): tests,
/// benchmarks and fuzz seeds.
pub fn compress(codec: i16, plain: &[u8]) -> io::Result<Vec<u8>> {
    use std::io::Write;
    match codec {
        CODEC_GZIP => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(plain)?;
            e.finish()
        }
        CODEC_SNAPPY => snap::raw::Encoder::new()
            .compress_vec(plain)
            .map_err(io::Error::other),
        CODEC_LZ4 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new())?;
            e.write_all(plain)?;
            let (out, done) = e.finish();
            done.map(|()| out)
        }
        CODEC_ZSTD => zstd::stream::encode_all(plain, 3),
        _ => Ok(plain.to_vec()),
    }
}

/// Frames `body` (already compressed as `attributes` says) as a batch with
/// `record_count` records, no producer, and a valid length and CRC (tests,
/// benchmarks and fuzz seeds).
pub fn framed_batch(attributes: i16, body: &[u8], record_count: i32, timestamp: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_LEN + body.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(record_count.wrapping_sub(1)).to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&record_count.to_be_bytes());
    b.extend_from_slice(body);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}
