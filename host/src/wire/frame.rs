//! A response frame as the list of byte strings the connection writes in
//! turn: the encoded header and fields, and, in a Fetch response, each
//! partition's record batches as the very `Bytes` the log read returned
//! (not copied into the frame: a Fetch answers up to `fetch.max.bytes`,
//! 55 MiB by default, and that copy cost as much as the read).

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::protocol::buf::ByteBufMut;

/// Records shorter than this are copied into the frame like any field:
/// below it a separate write costs more than the copy.
pub const SPLICE_MIN: usize = 32 << 10;

/// An encoded response: its parts, written in order, are the frame (size
/// prefix included).
#[derive(Debug, Default)]
pub struct Frame {
    parts: Vec<Bytes>,
}

impl Frame {
    /// The parts, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// Bytes in the frame.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Bytes::is_empty)
    }

    /// The frame in one buffer (tests).
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    /// Writes the parts in order.
    pub async fn write_to<W: tokio::io::AsyncWrite + Unpin>(
        &self,
        wr: &mut W,
    ) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        for p in &self.parts {
            wr.write_all(p).await?;
        }
        Ok(())
    }
}

impl From<BytesMut> for Frame {
    fn from(b: BytesMut) -> Self {
        Frame {
            parts: vec![b.freeze()],
        }
    }
}

/// The encoder's buffer: appends like a `BytesMut`, except that a slice
/// which is the next of `splice` (the same bytes at the same address, so
/// the encoder is writing that very `Bytes`) becomes a part of its own.
/// Whatever else is written, or a splice that does not come in the
/// expected order, is copied as usual, so the bytes are always exactly
/// what `BytesMut` would hold.
struct Splicing {
    parts: Vec<Bytes>,
    /// Bytes in `parts`.
    before: usize,
    cur: BytesMut,
    splice: std::collections::VecDeque<Bytes>,
}

impl Splicing {
    fn finish(mut self) -> Vec<Bytes> {
        if !self.cur.is_empty() {
            self.parts.push(self.cur.freeze());
        }
        self.parts
    }
}

// SAFETY: every method forwards to `cur`, a `BytesMut`, whose own
// implementation upholds the trait's contract; `put_slice` only adds
// whole parts before `cur`, which the `chunk_mut`/`advance_mut` pair
// never sees.
#[allow(unsafe_code)]
unsafe impl BufMut for Splicing {
    fn remaining_mut(&self) -> usize {
        self.cur.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's promise (`cnt` bytes of `chunk_mut`, which
        // is `cur`'s, were initialised) is the one `cur` needs.
        unsafe { self.cur.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.cur.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        let next = self
            .splice
            .front()
            .is_some_and(|b| b.as_ptr() == src.as_ptr() && b.len() == src.len());
        match self.splice.pop_front() {
            Some(b) if next => {
                if !self.cur.is_empty() {
                    self.before += self.cur.len();
                    self.parts.push(self.cur.split().freeze());
                }
                self.before += b.len();
                self.parts.push(b);
            }
            other => {
                if let Some(b) = other {
                    self.splice.push_front(b);
                }
                self.cur.extend_from_slice(src);
            }
        }
    }
}

// Offsets count every byte so far; `seek` and `range` (the encoder's gaps,
// which no message encoding uses, only record batch building) reach into
// the current part only.
impl ByteBufMut for Splicing {
    fn offset(&self) -> usize {
        self.before + self.cur.len()
    }

    fn seek(&mut self, offset: usize) {
        self.cur.resize(offset.saturating_sub(self.before), 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let len = self.cur.len();
        let start = r.start.saturating_sub(self.before).min(len);
        let end = r.end.saturating_sub(self.before).clamp(start, len);
        &mut self.cur[start..end]
    }
}

/// Encodes a response frame (size prefix included); a Fetch response's
/// records of at least [`SPLICE_MIN`] bytes are parts of their own.
pub fn encode(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> anyhow::Result<Frame> {
    let ResponseKind::Fetch(fetch) = body else {
        return super::encode(api_key, version, correlation_id, body).map(Frame::from);
    };
    let splice: std::collections::VecDeque<Bytes> = fetch
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .filter(|r| r.len() >= SPLICE_MIN)
        .collect();
    if splice.is_empty() {
        return super::encode(api_key, version, correlation_id, body).map(Frame::from);
    }
    let mut out = Splicing {
        parts: Vec::with_capacity(2 * splice.len() + 2),
        before: 0,
        cur: BytesMut::with_capacity(1024),
        splice,
    };
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, api_key.response_header_version(version))?;
    fetch.encode(&mut out, version)?;
    let size = i32::try_from(out.offset())
        .map_err(|_| anyhow::anyhow!("a response of {} bytes", out.offset()))?;
    let mut parts = out.finish();
    parts.insert(0, Bytes::copy_from_slice(&size.to_be_bytes()));
    Ok(Frame { parts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn records(n: usize, seed: u8) -> Bytes {
        Bytes::from(
            (0..n)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect::<Vec<u8>>(),
        )
    }

    /// A response with the fields `version` has (a session from v7, topic
    /// ids from v13, names before).
    fn fetch(sizes: &[&[usize]], version: i16) -> FetchResponse {
        let session = if version >= 7 { 7 } else { 0 };
        FetchResponse::default()
            .with_session_id(session)
            .with_responses(
                sizes
                    .iter()
                    .enumerate()
                    .map(|(t, parts)| {
                        let topic = FetchableTopicResponse::default();
                        let topic = if version >= 13 {
                            topic.with_topic_id(uuid::Uuid::from_u128(t as u128 + 1))
                        } else {
                            topic.with_topic(TopicName(StrBytes::from_string(format!("topic-{t}"))))
                        };
                        topic.with_partitions(
                            parts
                                .iter()
                                .enumerate()
                                .map(|(p, &n)| {
                                    PartitionData::default()
                                        .with_partition_index(p as i32)
                                        .with_high_watermark(1000 + p as i64)
                                        .with_records((n > 0).then(|| records(n, p as u8)))
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            )
    }

    /// Every Fetch version kaas answers: the parts are byte for byte the
    /// frame `wire::encode` builds in one buffer, and the large records are
    /// the read's own `Bytes`, not copies.
    #[test]
    fn a_spliced_fetch_frame_is_the_copied_one() {
        let shapes: [&[&[usize]]; 5] = [
            &[&[0, 10]],
            &[&[SPLICE_MIN - 1, 100]],
            &[&[SPLICE_MIN, 3 << 20, 0, 5], &[200_000]],
            &[&[70_000; 16]],
            &[&[], &[1 << 20]],
        ];
        for version in 4..=16 {
            for shape in shapes {
                let resp = fetch(shape, version);
                let body = ResponseKind::Fetch(resp.clone());
                let want = super::super::encode(ApiKey::Fetch, version, 42, &body).expect("copy");
                let got = encode(ApiKey::Fetch, version, 42, &body).expect("splice");
                assert_eq!(got.len(), want.len(), "v{version} {shape:?}");
                assert_eq!(got.to_vec(), want.to_vec(), "v{version} {shape:?}");
                let big: Vec<&Bytes> = resp
                    .responses
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .filter_map(|p| p.records.as_ref())
                    .filter(|r| r.len() >= SPLICE_MIN)
                    .collect();
                for r in &big {
                    assert!(
                        got.parts().iter().any(|p| p.as_ptr() == r.as_ptr()),
                        "v{version} {shape:?}: a {} byte record set was copied",
                        r.len()
                    );
                }
                assert!(got.parts().len() >= 2 * big.len(), "v{version} {shape:?}");
            }
        }
    }

    #[test]
    fn other_responses_are_one_part() {
        let body = ResponseKind::ApiVersions(Default::default());
        let want = super::super::encode(ApiKey::ApiVersions, 3, 1, &body).expect("copy");
        let got = encode(ApiKey::ApiVersions, 3, 1, &body).expect("frame");
        assert_eq!(got.parts().len(), 1);
        assert_eq!(got.to_vec(), want.to_vec());
    }

    #[test]
    fn a_slice_equal_but_elsewhere_is_copied() {
        let r = records(SPLICE_MIN, 1);
        let twin = Bytes::from(r.to_vec());
        let mut out = Splicing {
            parts: Vec::new(),
            before: 0,
            cur: BytesMut::new(),
            splice: [r.clone()].into(),
        };
        out.put_slice(b"abc");
        out.put_slice(&twin); // same bytes, another address: copied
        out.put_slice(&r); // the one expected: spliced
        out.put_slice(b"z");
        assert_eq!(out.offset(), 3 + 2 * r.len() + 1);
        let parts = out.finish();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1].as_ptr(), r.as_ptr());
        let all: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        let mut want = b"abc".to_vec();
        want.extend_from_slice(&r);
        want.extend_from_slice(&r);
        want.push(b'z');
        assert_eq!(all, want);
    }

    #[tokio::test]
    async fn written_in_order() {
        let body = ResponseKind::Fetch(fetch(&[&[SPLICE_MIN + 3, 7, 100_000]], 12));
        let frame = encode(ApiKey::Fetch, 12, 9, &body).expect("frame");
        let mut out = Vec::new();
        frame.write_to(&mut out).await.expect("write");
        assert_eq!(out, frame.to_vec());
        let size = i32::from_be_bytes([out[0], out[1], out[2], out[3]]);
        assert_eq!(size as usize, out.len() - 4);
    }
}
