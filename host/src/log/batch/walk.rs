//! The record walker: every record of a magic-2 batch parsed whole, with
//! compressed records decompressed as a stream within [`MAX_SCAN_BYTES`].
//! Validation ([`super::validate_client_batch`]) and the timestamp lookup
//! use it; it allocates nothing from a count or length in the batch.

use std::io;
use std::ops::ControlFlow;

use super::snappy::SnappyReader;
use super::{
    BatchError, BatchHeader, CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD,
    HEADER_LEN,
};

/// Most decompressed bytes one batch may hold: a compressed batch is at
/// most `max.message.bytes` on disk, but a decompression bomb can expand it
/// a thousandfold or more. Validation refuses a batch whose records take
/// more (CORRUPT_MESSAGE), so every stored batch can be walked within it;
/// the timestamp scan stops there too.
pub const MAX_SCAN_BYTES: u64 = 64 << 20;

/// Largest zstd window (log2) a batch may ask for: zstd allocates the
/// window a frame declares (up to 128 MiB by default) before decoding. Real
/// producers compress at most a few MiB with windows of 2^21 to 2^23.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

use super::ATTR_LOG_APPEND_TIME;

/// What the record walker reports of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMeta {
    /// The record's index in its batch (equal to its offset delta).
    pub index: i32,
    /// Timestamp delta from the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Whether the record's key is null.
    pub key_null: bool,
}

/// Walks every record of a magic-2 batch, decompressing as a stream within
/// [`MAX_SCAN_BYTES`], parses each record whole (length, attributes,
/// timestamp delta, offset delta, key, value, headers), and calls `visit`
/// after each; `visit` returning `Break` ends the walk early with `Ok`.
///
/// The checks (Kafka's LogValidator and record iterator): every record's
/// fields exactly fill its declared length; key and value lengths are -1 or
/// more, header counts and header key lengths 0 or more; the offset delta of
/// record `i` is `i`; exactly `record_count` records, then the end of the
/// (decompressed) data. A structural error is INVALID_RECORD
/// ([`BatchError::Invalid`]); data that does not decompress or decompresses
/// past the bound is CORRUPT_MESSAGE ([`BatchError::Corrupt`]). Nothing is
/// allocated from a count or length in the batch: skipped bytes are
/// streamed, and a snappy block is checked against its input size before
/// its buffer is made.
pub fn walk_records(
    batch: &[u8],
    h: &BatchHeader,
    visit: impl FnMut(RecordMeta) -> ControlFlow<()>,
) -> Result<(), BatchError> {
    let records = batch
        .get(HEADER_LEN..h.size)
        .ok_or_else(|| BatchError::Corrupt("the batch is shorter than its length field".into()))?;
    let stream = |e: io::Error| BatchError::Corrupt(format!("records do not decompress: {e}"));
    match h.compression() {
        CODEC_NONE => walk(&mut SliceSource(records), h, visit),
        c => walk(
            &mut Stream::new(decoder(c, records).map_err(stream)?),
            h,
            visit,
        ),
    }
}

/// A reader of a batch's records section decompressed with Kafka codec
/// `codec` (0 none, 1 gzip, 2 snappy in xerial framing or raw, 3 lz4 frame,
/// 4 zstd), with snappy blocks bounded by [`MAX_SCAN_BYTES`] and the zstd
/// window by [`ZSTD_WINDOW_LOG_MAX`]. The walker and the compaction rewrite
/// ([`super::records`]) read through it; neither allocates from the batch's
/// claims before reading.
pub(super) fn decoder(codec: i16, records: &[u8]) -> io::Result<Box<dyn io::Read + '_>> {
    Ok(match codec {
        CODEC_NONE => Box::new(records),
        CODEC_GZIP => Box::new(flate2::read::MultiGzDecoder::new(records)),
        CODEC_SNAPPY => Box::new(SnappyReader::new(records, MAX_SCAN_BYTES)),
        CODEC_LZ4 => Box::new(lz4::Decoder::new(records)?),
        CODEC_ZSTD => {
            let mut d = zstd::stream::read::Decoder::new(records)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(d)
        }
        c => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unknown compression codec {c}"),
            ));
        }
    })
}

/// Runs blocking batch work (validating compressed batches, timestamp
/// scans) on tokio's blocking pool, never on a runtime worker, at most one
/// task per core at a time so a flood of it cannot starve the workers of
/// CPU or hold one decompressor per blocking thread. None if the task
/// panicked.
pub async fn offload<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    static SLOTS: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        tokio::sync::Semaphore::new(n.max(2))
    });
    let _slot = SLOTS.acquire().await.ok()?;
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(error = %e, "a blocking batch task failed");
            None
        }
    }
}

/// ListOffsets by timestamp inside one stored batch: the offset and
/// timestamp of its first record whose timestamp is at least `ts`. None when
/// no record qualifies or the records cannot be walked (the caller then
/// answers with the batch itself). Uses [`walk_records`], so it reads at most
/// [`MAX_SCAN_BYTES`] and allocates nothing from a count or length.
pub fn first_record_at_or_after(batch: &[u8], h: &BatchHeader, ts: i64) -> Option<(i64, i64)> {
    if h.attributes & ATTR_LOG_APPEND_TIME != 0 {
        return (h.max_timestamp >= ts).then_some((h.base_offset, h.max_timestamp));
    }
    let mut found = None;
    walk_records(batch, h, |r| {
        let timestamp = h.base_timestamp.wrapping_add(r.timestamp_delta);
        if timestamp >= ts {
            found = Some((h.base_offset.saturating_add(i64::from(r.index)), timestamp));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })
    .ok()?;
    found
}

/// Why the walk stopped: a byte-sized code on the hot path (returned in a
/// register), turned into a [`BatchError`] with its text once, at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WalkErr {
    PrematureEnd,
    PastRecordEnd,
    VarintTooLong,
    VarintRange,
    NegativeLength,
    NegativeHeaderCount,
    NegativeHeaderKey,
    OffsetDelta(i32),
    LengthNotFilled(i32),
    Remaining,
    Decompress,
    TooBig,
}

impl WalkErr {
    #[cold]
    fn into_batch_error(self, index: i32, detail: Option<&io::Error>) -> BatchError {
        use WalkErr::*;
        let at = format!("record {index}");
        match self {
            PrematureEnd => BatchError::Invalid(
                "incorrect declared batch size, premature end of records".into(),
            ),
            PastRecordEnd => {
                BatchError::Invalid(format!("{at}: fields run past its declared length"))
            }
            VarintTooLong => BatchError::Invalid(format!("{at}: varint too long")),
            VarintRange => BatchError::Invalid(format!("{at}: varint out of range")),
            NegativeLength => BatchError::Invalid(format!(
                "{at}: negative record, key, value or header value length"
            )),
            NegativeHeaderCount => BatchError::Invalid(format!("{at}: negative header count")),
            NegativeHeaderKey => BatchError::Invalid(format!("{at}: negative header key length")),
            OffsetDelta(d) => BatchError::Invalid(format!(
                "{at} has offset delta {d}: inner offsets must be sequential"
            )),
            LengthNotFilled(len) => {
                BatchError::Invalid(format!("{at} declares {len} bytes its fields do not fill"))
            }
            Remaining => {
                BatchError::Invalid("incorrect declared batch size, records still remaining".into())
            }
            Decompress => BatchError::Corrupt(match detail {
                Some(e) => format!("records do not decompress: {e}"),
                None => "records do not decompress".into(),
            }),
            TooBig => BatchError::Corrupt(format!(
                "records decompress to more than {MAX_SCAN_BYTES} bytes"
            )),
        }
    }
}

/// Bytes of records, from a slice or a decompressing stream.
trait Source {
    /// The next byte; an error at the end of the data.
    fn byte(&mut self) -> Result<u8, WalkErr>;
    /// Skips `n` bytes.
    fn skip(&mut self, n: u64) -> Result<(), WalkErr>;
    /// Whether the data has ended.
    fn at_end(&mut self) -> Result<bool, WalkErr>;
    /// A zigzag varint of at most `max` bytes, and how many it took.
    #[inline]
    fn zigzag(&mut self, max: u32) -> Result<(i64, u64), WalkErr> {
        let mut value: u64 = 0;
        for i in 0..max {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((unzigzag(value), u64::from(i) + 1));
            }
        }
        Err(WalkErr::VarintTooLong)
    }
    /// The decompressor's error behind a [`WalkErr::Decompress`].
    fn detail(&self) -> Option<&io::Error> {
        None
    }
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Uncompressed records: the batch's own bytes (no copy, no thread hop).
struct SliceSource<'a>(&'a [u8]);

impl Source for SliceSource<'_> {
    #[inline]
    fn byte(&mut self) -> Result<u8, WalkErr> {
        let (&b, rest) = self.0.split_first().ok_or(WalkErr::PrematureEnd)?;
        self.0 = rest;
        Ok(b)
    }
    #[inline]
    fn skip(&mut self, n: u64) -> Result<(), WalkErr> {
        let n = usize::try_from(n).map_err(|_| WalkErr::PrematureEnd)?;
        self.0 = self.0.get(n..).ok_or(WalkErr::PrematureEnd)?;
        Ok(())
    }
    fn at_end(&mut self) -> Result<bool, WalkErr> {
        Ok(self.0.is_empty())
    }
    #[inline]
    fn zigzag(&mut self, max: u32) -> Result<(i64, u64), WalkErr> {
        let mut value: u64 = 0;
        for (i, &b) in self.0.iter().take(max as usize).enumerate() {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.0 = self.0.get(i + 1..).unwrap_or_default();
                return Ok((unzigzag(value), i as u64 + 1));
            }
        }
        if self.0.len() < max as usize {
            return Err(WalkErr::PrematureEnd);
        }
        Err(WalkErr::VarintTooLong)
    }
}

/// Decompressed records, read through a buffer and counted against
/// [`MAX_SCAN_BYTES`].
struct Stream<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Decompressed bytes read so far.
    read: u64,
    /// The decompressor's error, once it failed.
    error: Option<io::Error>,
}

/// Bytes of decompressed records buffered at a time.
const STREAM_BUFFER: usize = 64 << 10;

impl<R: io::Read> Stream<R> {
    fn new(inner: R) -> Self {
        Stream {
            inner,
            buf: vec![0u8; STREAM_BUFFER].into_boxed_slice(),
            pos: 0,
            len: 0,
            read: 0,
            error: None,
        }
    }
    /// Refills the empty buffer; false at the end of the data.
    #[cold]
    fn refill(&mut self) -> Result<bool, WalkErr> {
        let n = loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(e);
                    return Err(WalkErr::Decompress);
                }
            }
        };
        self.read += n as u64;
        if self.read > MAX_SCAN_BYTES {
            return Err(WalkErr::TooBig);
        }
        self.pos = 0;
        self.len = n;
        Ok(n > 0)
    }
}

impl<R: io::Read> Source for Stream<R> {
    #[inline]
    fn byte(&mut self) -> Result<u8, WalkErr> {
        if self.pos >= self.len && !self.refill()? {
            return Err(WalkErr::PrematureEnd);
        }
        let b = self
            .buf
            .get(self.pos)
            .copied()
            .ok_or(WalkErr::PrematureEnd)?;
        self.pos += 1;
        Ok(b)
    }
    fn skip(&mut self, mut n: u64) -> Result<(), WalkErr> {
        while n > 0 {
            if self.pos >= self.len && !self.refill()? {
                return Err(WalkErr::PrematureEnd);
            }
            let step = ((self.len - self.pos) as u64).min(n);
            self.pos += step as usize;
            n -= step;
        }
        Ok(())
    }
    fn at_end(&mut self) -> Result<bool, WalkErr> {
        Ok(self.pos >= self.len && !self.refill()?)
    }
    fn detail(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }
}

/// One record's bytes left to parse, checked after every read (a varint
/// read past the record's end is an error all the same).
struct Rec<'s, S: Source> {
    src: &'s mut S,
    left: u64,
}

impl<S: Source> Rec<'_, S> {
    #[inline]
    fn byte(&mut self) -> Result<u8, WalkErr> {
        if self.left == 0 {
            return Err(WalkErr::PastRecordEnd);
        }
        self.left -= 1;
        self.src.byte()
    }
    #[inline]
    fn skip(&mut self, n: u64) -> Result<(), WalkErr> {
        if n > self.left {
            return Err(WalkErr::PastRecordEnd);
        }
        self.left -= n;
        self.src.skip(n)
    }
    #[inline]
    fn zigzag(&mut self, max: u32) -> Result<i64, WalkErr> {
        let (v, used) = self.src.zigzag(max)?;
        if used > self.left {
            return Err(WalkErr::PastRecordEnd);
        }
        self.left -= used;
        Ok(v)
    }
    #[inline]
    fn varint(&mut self) -> Result<i32, WalkErr> {
        i32::try_from(self.zigzag(5)?).map_err(|_| WalkErr::VarintRange)
    }
    /// A key, value or header value: length -1 (null) or that many bytes;
    /// whether it was null.
    #[inline]
    fn nullable_bytes(&mut self) -> Result<bool, WalkErr> {
        match self.varint()? {
            -1 => Ok(true),
            n if n >= 0 => self.skip(n as u64).map(|()| false),
            _ => Err(WalkErr::NegativeLength),
        }
    }
}

fn walk<S: Source>(
    src: &mut S,
    h: &BatchHeader,
    visit: impl FnMut(RecordMeta) -> ControlFlow<()>,
) -> Result<(), BatchError> {
    let mut index = 0;
    walk_inner(src, h, visit, &mut index).map_err(|e| e.into_batch_error(index, src.detail()))
}

fn walk_inner<S: Source>(
    src: &mut S,
    h: &BatchHeader,
    mut visit: impl FnMut(RecordMeta) -> ControlFlow<()>,
    index: &mut i32,
) -> Result<(), WalkErr> {
    for i in 0..h.record_count.max(0) {
        *index = i;
        let (len, _) = src.zigzag(5)?;
        let Ok(left) = u64::try_from(len) else {
            return Err(WalkErr::NegativeLength);
        };
        if len > i64::from(i32::MAX) {
            return Err(WalkErr::VarintRange);
        }
        let mut rec = Rec {
            src: &mut *src,
            left,
        };
        rec.byte()?; // attributes (unused in magic 2)
        let timestamp_delta = rec.zigzag(10)?;
        let offset_delta = rec.varint()?;
        if offset_delta != i {
            return Err(WalkErr::OffsetDelta(offset_delta));
        }
        let key_null = rec.nullable_bytes()?;
        rec.nullable_bytes()?; // value
        let headers = rec.varint()?;
        if headers < 0 {
            return Err(WalkErr::NegativeHeaderCount);
        }
        // Each header takes at least two bytes of the record, so this loop
        // ends within the record's length whatever the count says.
        for _ in 0..headers {
            match rec.varint()? {
                n if n >= 0 => rec.skip(n as u64)?,
                _ => return Err(WalkErr::NegativeHeaderKey),
            }
            rec.nullable_bytes()?;
        }
        if rec.left != 0 {
            return Err(WalkErr::LengthNotFilled(len as i32));
        }
        if visit(RecordMeta {
            index: i,
            timestamp_delta,
            key_null,
        })
        .is_break()
        {
            return Ok(());
        }
    }
    *index = h.record_count;
    if !src.at_end()? {
        return Err(WalkErr::Remaining);
    }
    Ok(())
}
