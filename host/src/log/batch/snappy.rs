//! Kafka's snappy framing read as a stream (xerial or one raw block), one
//! block at a time: what the record walker decompresses snappy batches with.

use std::io;

/// Kafka's snappy as a stream: xerial framing (magic, version, compatible
/// version, then length-prefixed raw blocks) or, as Java accepts it, one
/// raw block. One block is decompressed at a time, its declared length
/// checked against its input size before the buffer is made.
pub(super) struct SnappyReader<'a> {
    /// Input not yet decompressed.
    rest: &'a [u8],
    framed: bool,
    block: Vec<u8>,
    pos: usize,
    failed: bool,
    /// Largest block it decompresses (the walker's bound).
    max_block: u64,
}

impl<'a> SnappyReader<'a> {
    const XERIAL: &'static [u8] = b"\x82SNAPPY\x00";

    /// A reader of `data` that refuses a block of more than `max_block` bytes.
    pub(super) fn new(data: &'a [u8], max_block: u64) -> Self {
        let (rest, framed) = match data.strip_prefix(Self::XERIAL) {
            // version and compatible version; a short header leaves no block
            // and the walk reports the missing records.
            Some(r) => (r.get(8..).unwrap_or_default(), true),
            None => (data, false),
        };
        SnappyReader {
            rest,
            framed,
            block: Vec::new(),
            pos: 0,
            max_block,
            failed: false,
        }
    }

    /// Decompresses the next block; false at the end.
    fn next_block(&mut self) -> io::Result<bool> {
        let bad =
            |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("snappy: {what}"));
        if self.rest.is_empty() {
            return Ok(false);
        }
        let raw = if self.framed {
            let len = self
                .rest
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(|b: [u8; 4]| u32::from_be_bytes(b) as usize)
                .ok_or_else(|| bad("truncated block length"))?;
            let raw = self
                .rest
                .get(4..4 + len)
                .ok_or_else(|| bad("truncated block"))?;
            self.rest = self.rest.get(4 + len..).unwrap_or_default();
            raw
        } else {
            std::mem::take(&mut self.rest)
        };
        // A snappy block expands at most ~21 times (a 3-byte copy of 64
        // bytes): a larger declared length is a lie, refused before the
        // zero-filled buffer is made.
        let len = snap::raw::decompress_len(raw).map_err(|e| bad(&e.to_string()))?;
        if len > raw.len().saturating_mul(22) || len as u64 > self.max_block {
            return Err(bad("declared block length too large"));
        }
        self.block.clear();
        self.block.resize(len, 0);
        let n = snap::raw::Decoder::new()
            .decompress(raw, &mut self.block)
            .map_err(|e| bad(&e.to_string()))?;
        self.block.truncate(n);
        self.pos = 0;
        Ok(true)
    }
}

impl io::Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = {
            let have = io::BufRead::fill_buf(self)?;
            let n = have.len().min(buf.len());
            if let (Some(to), Some(from)) = (buf.get_mut(..n), have.get(..n)) {
                to.copy_from_slice(from);
            }
            n
        };
        io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl io::BufRead for SnappyReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.block.len() {
            if self.failed {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "snappy: bad block",
                ));
            }
            match self.next_block() {
                Ok(true) => {}
                Ok(false) => return Ok(&[]),
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
        Ok(self.block.get(self.pos..).unwrap_or_default())
    }
    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.block.len());
    }
}
