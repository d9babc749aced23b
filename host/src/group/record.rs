//! The offsets journal's record format (v1): what one entry of
//! `__groups/offsets.log` says and its exact bytes.
//!
//! The file starts with the 8-byte magic [`MAGIC`] (`KAASGRP` + format
//! version 1). Then frames: `u32 body length | u32 crc32c(body) | body`,
//! big-endian. A body is `u8 kind` followed by the kind's fields; a string
//! is `u16 length | UTF-8 bytes`:
//!
//! | kind | record        | fields                                                                 |
//! |------|---------------|------------------------------------------------------------------------|
//! | 1    | Commit        | group, topic, i32 partition, i64 offset, i32 leader epoch, metadata, i64 commit ms, i64 expire ms (-1 none) |
//! | 2    | DeleteOffset  | group, topic, i32 partition                                            |
//! | 3    | GroupMeta     | group, i32 generation, protocol type, protocol name, i64 state ms      |
//! | 4    | DeleteGroup   | group                                                                  |
//! | 5    | DeleteTopic   | topic                                                                  |
//! | 6    | TxnCommit     | group, i64 producer id, i16 producer epoch, then a Commit's fields from topic on |
//! | 7    | TxnEnd        | group, i64 producer id, u8 commit (1) or abort (0)                     |
//!
//! A TxnCommit is a transactional offset (TxnOffsetCommit): pending until
//! the TxnEnd of its producer id and group makes it committed (commit) or
//! drops it (abort).
//!
//! Decoding checks every length against what remains: a short or corrupt
//! frame is [`FrameError::Torn`] (the journal truncates there), a frame with
//! a good checksum but an unknown kind is [`FrameError::Unknown`] (written by
//! a newer kaas: refused, never truncated).

/// File magic: `KAASGRP` and the format version.
pub const MAGIC: &[u8; 8] = b"KAASGRP\x01";

/// Bytes of a frame's header (length and checksum).
pub const FRAME_HEADER: usize = 8;

/// Largest body accepted when reading (a record is a few hundred bytes; the
/// metadata string is bounded by `offset.metadata.max.bytes`).
const MAX_BODY: usize = 1 << 20;

/// One committed offset as stored and served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    /// -1 when the client sent none.
    pub leader_epoch: i32,
    pub metadata: String,
    /// Wall-clock time of the commit (ms since the epoch).
    pub commit_ms: i64,
    /// OffsetCommit v2–v4 retention: expire at this time (ms); None otherwise.
    pub expire_ms: Option<i64>,
}

/// What the journal remembers of a group besides offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMeta {
    pub generation: i32,
    /// "" when unknown (a group that only stores offsets).
    pub protocol_type: String,
    /// "" when the group has no members.
    pub protocol: String,
    /// Wall-clock time of the group's last state change (ms).
    pub state_ms: i64,
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Commit {
        group: String,
        topic: String,
        partition: i32,
        committed: Committed,
    },
    DeleteOffset {
        group: String,
        topic: String,
        partition: i32,
    },
    GroupMeta {
        group: String,
        meta: GroupMeta,
    },
    DeleteGroup {
        group: String,
    },
    DeleteTopic {
        topic: String,
    },
    /// A transactional offset, pending until its producer's TxnEnd.
    TxnCommit {
        group: String,
        producer_id: i64,
        producer_epoch: i16,
        topic: String,
        partition: i32,
        committed: Committed,
    },
    /// The COMMIT or ABORT marker of `producer_id`'s transaction reached
    /// this group's offsets partition.
    TxnEnd {
        group: String,
        producer_id: i64,
        commit: bool,
    },
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Short, oversized or failing its checksum: a torn write or corruption.
    #[error("torn or corrupt frame: {0}")]
    Torn(String),
    /// A valid frame of a kind this version does not know.
    #[error("record kind {0} is unknown (written by a newer kaas?)")]
    Unknown(u8),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Callers bound every string below 64 KiB (group ids and topics come
    // from i16-length wire strings; metadata is bounded by config).
    let b = s.as_bytes();
    let n = b.len().min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&b[..n]);
}

/// A Commit's offset fields (offset to expire ms), as `Reader::committed` reads them.
fn put_committed(out: &mut Vec<u8>, c: &Committed) {
    out.extend_from_slice(&c.offset.to_be_bytes());
    out.extend_from_slice(&c.leader_epoch.to_be_bytes());
    put_str(out, &c.metadata);
    out.extend_from_slice(&c.commit_ms.to_be_bytes());
    out.extend_from_slice(&c.expire_ms.unwrap_or(-1).to_be_bytes());
}

impl Record {
    /// Appends this record's frame to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0u8; FRAME_HEADER]);
        match self {
            Record::Commit {
                group,
                topic,
                partition,
                committed: c,
            } => {
                out.push(1);
                put_str(out, group);
                put_str(out, topic);
                out.extend_from_slice(&partition.to_be_bytes());
                put_committed(out, c);
            }
            Record::DeleteOffset {
                group,
                topic,
                partition,
            } => {
                out.push(2);
                put_str(out, group);
                put_str(out, topic);
                out.extend_from_slice(&partition.to_be_bytes());
            }
            Record::GroupMeta { group, meta } => {
                out.push(3);
                put_str(out, group);
                out.extend_from_slice(&meta.generation.to_be_bytes());
                put_str(out, &meta.protocol_type);
                put_str(out, &meta.protocol);
                out.extend_from_slice(&meta.state_ms.to_be_bytes());
            }
            Record::DeleteGroup { group } => {
                out.push(4);
                put_str(out, group);
            }
            Record::DeleteTopic { topic } => {
                out.push(5);
                put_str(out, topic);
            }
            Record::TxnCommit {
                group,
                producer_id,
                producer_epoch,
                topic,
                partition,
                committed: c,
            } => {
                out.push(6);
                put_str(out, group);
                out.extend_from_slice(&producer_id.to_be_bytes());
                out.extend_from_slice(&producer_epoch.to_be_bytes());
                put_str(out, topic);
                out.extend_from_slice(&partition.to_be_bytes());
                put_committed(out, c);
            }
            Record::TxnEnd {
                group,
                producer_id,
                commit,
            } => {
                out.push(7);
                put_str(out, group);
                out.extend_from_slice(&producer_id.to_be_bytes());
                out.push(u8::from(*commit));
            }
        }
        let body_len = (out.len() - start - FRAME_HEADER) as u32;
        let crc = crc32c::crc32c(&out[start + FRAME_HEADER..]);
        out[start..start + 4].copy_from_slice(&body_len.to_be_bytes());
        out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    }

    /// This record's frame.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(&mut out);
        out
    }

    /// Bytes of a Commit frame, without building it (for size accounting).
    pub fn commit_frame_len(group: &str, topic: &str, c: &Committed) -> u64 {
        (FRAME_HEADER
            + 1
            + 2
            + group.len()
            + 2
            + topic.len()
            + 4
            + 8
            + 4
            + 2
            + c.metadata.len()
            + 16) as u64
    }

    /// Bytes of a TxnCommit frame, without building it.
    pub fn txn_commit_frame_len(group: &str, topic: &str, c: &Committed) -> u64 {
        Self::commit_frame_len(group, topic, c) + 8 + 2
    }

    /// Decodes the frame at the start of `b`: the record and the frame's
    /// length.
    pub fn decode(b: &[u8]) -> Result<(Record, usize), FrameError> {
        if b.len() < FRAME_HEADER {
            return Err(FrameError::Torn(format!("{} header bytes", b.len())));
        }
        let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let crc = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        if len == 0 || len > MAX_BODY {
            return Err(FrameError::Torn(format!("body length {len}")));
        }
        let Some(body) = b.get(FRAME_HEADER..FRAME_HEADER + len) else {
            return Err(FrameError::Torn(format!(
                "body of {len} bytes, {} present",
                b.len() - FRAME_HEADER
            )));
        };
        if crc32c::crc32c(body) != crc {
            return Err(FrameError::Torn("checksum mismatch".into()));
        }
        let mut r = Reader { b: &body[1..] };
        let torn = |e: String| FrameError::Torn(e);
        let rec = match body[0] {
            1 => Record::Commit {
                group: r.string().map_err(torn)?,
                topic: r.string().map_err(torn)?,
                partition: r.i32().map_err(torn)?,
                committed: r.committed().map_err(torn)?,
            },
            2 => Record::DeleteOffset {
                group: r.string().map_err(torn)?,
                topic: r.string().map_err(torn)?,
                partition: r.i32().map_err(torn)?,
            },
            3 => Record::GroupMeta {
                group: r.string().map_err(torn)?,
                meta: GroupMeta {
                    generation: r.i32().map_err(torn)?,
                    protocol_type: r.string().map_err(torn)?,
                    protocol: r.string().map_err(torn)?,
                    state_ms: r.i64().map_err(torn)?,
                },
            },
            4 => Record::DeleteGroup {
                group: r.string().map_err(torn)?,
            },
            5 => Record::DeleteTopic {
                topic: r.string().map_err(torn)?,
            },
            6 => Record::TxnCommit {
                group: r.string().map_err(torn)?,
                producer_id: r.i64().map_err(torn)?,
                producer_epoch: r.i16().map_err(torn)?,
                topic: r.string().map_err(torn)?,
                partition: r.i32().map_err(torn)?,
                committed: r.committed().map_err(torn)?,
            },
            7 => Record::TxnEnd {
                group: r.string().map_err(torn)?,
                producer_id: r.i64().map_err(torn)?,
                commit: match r.take(1).map_err(torn)?[0] {
                    0 => false,
                    1 => true,
                    b => return Err(FrameError::Torn(format!("commit flag {b}"))),
                },
            },
            k => return Err(FrameError::Unknown(k)),
        };
        if !r.b.is_empty() {
            return Err(FrameError::Torn(format!(
                "{} bytes after the record",
                r.b.len()
            )));
        }
        Ok((rec, FRAME_HEADER + len))
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err(format!("needs {n} bytes, {} left", self.b.len()));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, String> {
        let s = self.take(2)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }

    /// A Commit's offset fields (offset to expire ms).
    fn committed(&mut self) -> Result<Committed, String> {
        Ok(Committed {
            offset: self.i64()?,
            leader_epoch: self.i32()?,
            metadata: self.string()?,
            commit_ms: self.i64()?,
            expire_ms: match self.i64()? {
                -1 => None,
                ms => Some(ms),
            },
        })
    }

    fn i32(&mut self) -> Result<i32, String> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn i64(&mut self) -> Result<i64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.take(2)?;
        let n = u16::from_be_bytes([n[0], n[1]]) as usize;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| "string is not UTF-8".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Record> {
        vec![
            Record::Commit {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                committed: Committed {
                    offset: 42,
                    leader_epoch: 0,
                    metadata: "meta data".into(),
                    commit_ms: 1_700_000_000_000,
                    expire_ms: None,
                },
            },
            Record::Commit {
                group: "".into(),
                topic: "topic.x".into(),
                partition: 0,
                committed: Committed {
                    offset: -1,
                    leader_epoch: -1,
                    metadata: "".into(),
                    commit_ms: 5,
                    expire_ms: Some(9),
                },
            },
            Record::DeleteOffset {
                group: "g".into(),
                topic: "t".into(),
                partition: 1,
            },
            Record::GroupMeta {
                group: "g".into(),
                meta: GroupMeta {
                    generation: 7,
                    protocol_type: "consumer".into(),
                    protocol: "range".into(),
                    state_ms: 11,
                },
            },
            Record::DeleteGroup { group: "g".into() },
            Record::DeleteTopic { topic: "t".into() },
            Record::TxnCommit {
                group: "g".into(),
                producer_id: 4000,
                producer_epoch: 3,
                topic: "t".into(),
                partition: 2,
                committed: Committed {
                    offset: 17,
                    leader_epoch: -1,
                    metadata: "tx".into(),
                    commit_ms: 12,
                    expire_ms: None,
                },
            },
            Record::TxnEnd {
                group: "g".into(),
                producer_id: 4000,
                commit: true,
            },
            Record::TxnEnd {
                group: "g".into(),
                producer_id: 4001,
                commit: false,
            },
        ]
    }

    #[test]
    fn every_kind_round_trips() {
        for rec in samples() {
            let bytes = rec.encode();
            let (back, n) = Record::decode(&bytes).expect("decodes");
            assert_eq!(back, rec);
            assert_eq!(n, bytes.len());
            if let Record::Commit {
                group,
                topic,
                committed,
                ..
            } = &rec
            {
                assert_eq!(
                    Record::commit_frame_len(group, topic, committed),
                    bytes.len() as u64
                );
            }
            if let Record::TxnCommit {
                group,
                topic,
                committed,
                ..
            } = &rec
            {
                assert_eq!(
                    Record::txn_commit_frame_len(group, topic, committed),
                    bytes.len() as u64
                );
            }
        }
    }

    #[test]
    fn every_truncation_and_every_flipped_bit_is_torn_not_a_panic() {
        for rec in samples() {
            let bytes = rec.encode();
            for cut in 0..bytes.len() {
                assert!(matches!(
                    Record::decode(&bytes[..cut]),
                    Err(FrameError::Torn(_))
                ));
            }
            for i in 0..bytes.len() {
                for bit in 0..8 {
                    let mut b = bytes.clone();
                    b[i] ^= 1 << bit;
                    // A flipped length may still frame a valid prefix only if
                    // the checksum matches, which a single flip cannot do.
                    assert!(Record::decode(&b).is_err(), "byte {i} bit {bit}");
                }
            }
        }
    }

    #[test]
    fn an_unknown_kind_with_a_good_checksum_is_refused_as_unknown() {
        let body = [9u8, 0, 1, b'g'];
        let mut frame = Vec::new();
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        frame.extend_from_slice(&body);
        assert_eq!(Record::decode(&frame), Err(FrameError::Unknown(9)));
    }
}
