//! A stored batch taken apart into its records and put back together with
//! some of them left out: what the log cleaner rewrites batches with.
//!
//! A rewritten batch keeps everything a reader or the producer state relies
//! on: its base offset, last offset delta, base sequence, producer id and
//! epoch, attributes, partition leader epoch and max timestamp, and each kept
//! record's own bytes (so its offset delta, key, value and headers). Only the
//! record count, the CRC and, when a delete horizon is set (KIP-534), the
//! base timestamp change. Compressed batches are decompressed whole, within
//! [`MAX_SCAN_BYTES`] (the bound validation already held them to), and
//! recompressed with the same codec.

use std::io::{self, Read};
use std::ops::Range;

use super::{BatchHeader, CRC_START, HEADER_LEN, MAX_SCAN_BYTES, put_varint, read_varint};

/// Attribute bit: the batch's base timestamp holds its delete horizon
/// (KIP-534): the time after which the cleaner may remove its tombstones
/// and, for a control batch, the marker itself.
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

/// One record of a decoded batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Offset delta from the batch's base offset.
    pub offset_delta: i32,
    /// Timestamp delta from the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Where the key lies in [`Decoded::data`] (None: a null key).
    pub key: Option<Range<usize>>,
    /// Whether the value is null (a tombstone).
    pub tombstone: bool,
    /// Where the value lies in [`Decoded::data`] (None: null).
    value: Option<Range<usize>>,
    /// The record's attributes byte.
    attributes: u8,
    /// The record's bytes after its timestamp delta (offset delta, key,
    /// value, headers), in [`Decoded::data`].
    rest: Range<usize>,
}

/// A batch's records, decompressed.
#[derive(Debug)]
pub struct Decoded {
    pub header: BatchHeader,
    /// The partition leader epoch the batch was written under.
    pub leader_epoch: i32,
    /// The decompressed records section.
    pub data: Vec<u8>,
    pub records: Vec<Record>,
}

impl Decoded {
    /// The key bytes of `r` (None for a null key).
    pub fn key(&self, r: &Record) -> Option<&[u8]> {
        r.key.clone().and_then(|k| self.data.get(k))
    }

    /// The value bytes of `r` (None for a tombstone).
    pub fn value(&self, r: &Record) -> Option<&[u8]> {
        r.value.clone().and_then(|v| self.data.get(v))
    }

    /// The delete horizon the batch carries, if one was set.
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.header.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.header.base_timestamp)
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("batch records: {what}"))
}

/// Decompresses a batch's records section, within [`MAX_SCAN_BYTES`].
fn decompress(codec: i16, body: &[u8]) -> io::Result<Vec<u8>> {
    if codec == 0 {
        return Ok(body.to_vec());
    }
    let mut out = Vec::new();
    super::walk::decoder(codec, body)?
        .take(MAX_SCAN_BYTES + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > MAX_SCAN_BYTES {
        return Err(invalid("records decompress past the scan bound"));
    }
    Ok(out)
}

/// Compresses a records section with Kafka codec `codec` as Kafka's own
/// clients read it (snappy in xerial framing, lz4 as a frame of
/// independent blocks): the encoders recompression uses.
fn compress(codec: i16, plain: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(plain.len() / 2 + 64);
    super::recompress::encode(codec, &mut &plain[..], &mut out)?;
    Ok(out)
}

/// Decodes every record of the stored batch `bytes` (a whole batch, header
/// `h`). Control batches decode like any other (one record).
pub fn decode(bytes: &[u8], h: &BatchHeader) -> io::Result<Decoded> {
    let body = bytes
        .get(HEADER_LEN..h.size)
        .ok_or_else(|| invalid("shorter than its length field"))?;
    let data = decompress(h.compression(), body)?;
    let mut records = Vec::with_capacity(h.record_count.clamp(0, 1 << 16) as usize);
    let mut pos = 0usize;
    for _ in 0..h.record_count.max(0) {
        let (len, n) = data
            .get(pos..)
            .and_then(read_varint)
            .ok_or_else(|| invalid("record length"))?;
        pos += n;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= data.len())
            .ok_or_else(|| invalid("record length past the records"))?;
        let attributes = *data.get(pos).ok_or_else(|| invalid("attributes"))?;
        let mut p = pos + 1;
        let (timestamp_delta, n) = data[..end]
            .get(p..)
            .and_then(read_varint)
            .ok_or_else(|| invalid("timestamp delta"))?;
        p += n;
        let rest_start = p;
        let (offset_delta, n) = data[..end]
            .get(p..)
            .and_then(read_varint)
            .ok_or_else(|| invalid("offset delta"))?;
        p += n;
        let (key_len, n) = data[..end]
            .get(p..)
            .and_then(read_varint)
            .ok_or_else(|| invalid("key length"))?;
        p += n;
        let key = match key_len {
            -1 => None,
            l if l >= 0 && p + l as usize <= end => {
                let k = p..p + l as usize;
                p += l as usize;
                Some(k)
            }
            _ => return Err(invalid("key length")),
        };
        let (value_len, n) = data[..end]
            .get(p..)
            .and_then(read_varint)
            .ok_or_else(|| invalid("value length"))?;
        p += n;
        let value = match value_len {
            -1 => None,
            l if l >= 0 && p + l as usize <= end => Some(p..p + l as usize),
            _ => return Err(invalid("value length")),
        };
        records.push(Record {
            offset_delta: i32::try_from(offset_delta).map_err(|_| invalid("offset delta"))?,
            timestamp_delta,
            key,
            tombstone: value.is_none(),
            value,
            attributes,
            rest: rest_start..end,
        });
        pos = end;
    }
    Ok(Decoded {
        header: *h,
        leader_epoch: super::partition_leader_epoch(bytes).unwrap_or(-1),
        data,
        records,
    })
}

/// Builds `d`'s batch again with only the records `keep` selects (by index
/// into `d.records`), and the delete horizon `horizon` when given: the base
/// timestamp then holds it and each record's timestamp delta is taken from
/// it, so every record keeps its timestamp.
pub fn rebuild(d: &Decoded, keep: &[usize], horizon: Option<i64>) -> io::Result<Vec<u8>> {
    let h = &d.header;
    let base_ts = horizon.unwrap_or(h.base_timestamp);
    let mut plain = Vec::new();
    let mut rec = Vec::new();
    for &i in keep {
        let r = d
            .records
            .get(i)
            .ok_or_else(|| invalid("kept record index"))?;
        let ts = h.base_timestamp.wrapping_add(r.timestamp_delta);
        rec.clear();
        rec.push(r.attributes);
        put_varint(&mut rec, ts.wrapping_sub(base_ts));
        rec.extend_from_slice(
            d.data
                .get(r.rest.clone())
                .ok_or_else(|| invalid("record"))?,
        );
        put_varint(&mut plain, rec.len() as i64);
        plain.extend_from_slice(&rec);
    }
    let mut attributes = h.attributes;
    let body = if keep.is_empty() {
        // Kafka's empty header: no records section, so no codec either.
        attributes &= !super::ATTR_COMPRESSION_MASK;
        Vec::new()
    } else {
        compress(h.compression(), &plain)?
    };
    if horizon.is_some() {
        attributes |= ATTR_DELETE_HORIZON;
    }
    let mut b = Vec::with_capacity(HEADER_LEN + body.len());
    b.extend_from_slice(&h.base_offset.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - super::LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&d.leader_epoch.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&h.max_timestamp.to_be_bytes());
    b.extend_from_slice(&h.producer_id.to_be_bytes());
    b.extend_from_slice(&h.producer_epoch.to_be_bytes());
    b.extend_from_slice(&h.base_sequence.to_be_bytes());
    b.extend_from_slice(&(keep.len() as i32).to_be_bytes());
    b.extend_from_slice(&body);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{self, kv_batch, parse_header, walk_records};
    use std::ops::ControlFlow;

    fn stored(records: &[(Option<&[u8]>, &[u8])], codec: i16) -> Vec<u8> {
        let plain = batch::encode_records(records);
        let body = batch::compress(codec, &plain).expect("compress");
        let mut b = batch::framed_batch(codec, &body, records.len() as i32, 5000);
        batch::assign_offset(&mut b, 100, 3);
        b
    }

    #[test]
    fn a_rebuilt_batch_keeps_offsets_and_timestamps_of_the_records_it_keeps() {
        for codec in 0..=4 {
            let b = stored(
                &[(Some(b"a"), b"1"), (Some(b"b"), b"2"), (Some(b"a"), b"3")],
                codec,
            );
            let h = parse_header(&b).expect("header");
            let d = decode(&b, &h).expect("decode");
            assert_eq!(d.records.len(), 3);
            assert_eq!(d.key(&d.records[1]), Some(&b"b"[..]));
            let out = rebuild(&d, &[1, 2], Some(9000)).expect("rebuild");
            let oh = parse_header(&out).expect("rebuilt header");
            assert!(batch::crc_ok(&out, &oh), "codec {codec}: CRC");
            assert_eq!(oh.base_offset, 100);
            assert_eq!(oh.last_offset_delta, 2);
            assert_eq!(oh.record_count, 2);
            assert_eq!(oh.base_timestamp, 9000);
            assert_eq!(oh.max_timestamp, h.max_timestamp);
            assert_eq!(batch::partition_leader_epoch(&out), Some(3));
            let again = decode(&out, &oh).expect("decode rebuilt");
            assert_eq!(again.delete_horizon(), Some(9000));
            let kept: Vec<(i32, i64, Option<&[u8]>)> = again
                .records
                .iter()
                .map(|r| {
                    (
                        r.offset_delta,
                        oh.base_timestamp + r.timestamp_delta,
                        again.key(r),
                    )
                })
                .collect();
            assert_eq!(
                kept,
                vec![(1, 5000, Some(&b"b"[..])), (2, 5000, Some(&b"a"[..]))]
            );
        }
    }

    #[test]
    fn tombstones_and_null_keys_are_told_apart() {
        let mut b = kv_batch(
            &[
                (Some(b"k"), Some(b"v")),
                (None, Some(b"x")),
                (Some(b"k"), None),
            ],
            1,
            None,
            false,
        );
        batch::assign_offset(&mut b, 0, 0);
        let h = parse_header(&b).expect("header");
        let d = decode(&b, &h).expect("decode");
        assert!(!d.records[0].tombstone && d.records[1].key.is_none());
        assert!(d.records[2].tombstone && d.key(&d.records[2]) == Some(&b"k"[..]));
        let rebuilt = rebuild(&d, &[], None).expect("empty");
        let eh = parse_header(&rebuilt).expect("empty header");
        assert_eq!((eh.record_count, eh.last_offset_delta), (0, 2));
        let mut n = 0;
        walk_records(&rebuilt, &eh, |_| {
            n += 1;
            ControlFlow::Continue(())
        })
        .expect("an empty batch walks");
        assert_eq!(n, 0);
    }

    #[test]
    fn a_batch_emptied_by_cleaning_is_written_uncompressed() {
        // As Kafka writes an empty header: a compressed records section of
        // nothing makes librdkafka's reader assert (rd_slice_init_full).
        for codec in 1..=4 {
            let b = stored(&[(Some(b"a"), b"1"), (Some(b"b"), b"2")], codec);
            let h = parse_header(&b).expect("header");
            let d = decode(&b, &h).expect("decode");
            let out = rebuild(&d, &[], None).expect("rebuild");
            let oh = parse_header(&out).expect("rebuilt header");
            assert_eq!(oh.compression(), 0, "codec {codec}");
            assert_eq!((oh.size, oh.record_count), (HEADER_LEN, 0));
            assert!(batch::crc_ok(&out, &oh));
            assert_eq!(oh.attributes & !0x07, h.attributes & !0x07);
        }
    }
}
