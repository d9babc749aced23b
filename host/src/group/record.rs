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
//! | 8    | ConsumerEpochs | group, i32 group epoch, i32 assignment epoch (a KIP-848 group)        |
//! | 9    | ConsumerMember | group, member id, instance id?, rack id?, client id, client host, u32 n + n topic names, regex?, assignor?, i32 rebalance timeout ms, i32 epoch, i32 previous epoch, u8 state, assigned, pending revocation |
//! | 10   | ConsumerTarget | group, member id, assignment                                          |
//! | 11   | ConsumerRemoved | group, member id                                                     |
//! | 12   | ConsumerDropped | group (no longer a consumer group; its offsets stay)                 |
//! | 13   | ConsumerMetadata | group, u32 n, then n × (topic, 16-byte id, i32 partitions): the subscribed topics as last seen |
//!
//! `x?` is `u8 present (0/1)` then `x` when present. An assignment is
//! `u32 topics`, then per topic its 16-byte id, `u32 n` and `n` i32
//! partitions. Kinds 8–11 hold a consumer-protocol group's membership and
//! target assignment (`super::consumer`); a DeleteGroup removes them too.
//!
//! A TxnCommit is a transactional offset (TxnOffsetCommit): pending until
//! the TxnEnd of its producer id and group makes it committed (commit) or
//! drops it (abort).
//!
//! Decoding checks every length against what remains: a short or corrupt
//! frame is [`FrameError::Torn`] (the journal truncates there), a frame with
//! a good checksum but an unknown kind is [`FrameError::Unknown`] (written by
//! a newer kaas: refused, never truncated).

use super::consumer::assignor::{Assignment, TopicId};
use super::consumer::member::{Member, MemberState, Progress, Subscription};

/// File magic: `KAASGRP` and the format version.
pub const MAGIC: &[u8; 8] = b"KAASGRP\x01";

/// Bytes of a frame's header (length and checksum).
pub const FRAME_HEADER: usize = 8;

/// Largest body accepted when reading (a record is a few hundred bytes; the
/// metadata string is bounded by `offset.metadata.max.bytes`).
const MAX_BODY: usize = 1 << 20;

/// Largest consumer-member record the coordinator writes (it refuses a
/// heartbeat whose member would not fit).
pub const MAX_MEMBER_RECORD: usize = MAX_BODY - 64;

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
    /// A consumer-protocol group's change (kinds 8–11).
    Consumer {
        group: String,
        change: ConsumerRecord,
    },
}

/// A consumer-protocol group's part of a record (kinds 8–11): the group
/// model's own change type.
pub use super::consumer::model::ConsumerRecord;

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

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
        None => out.push(0),
    }
}

fn put_assignment(out: &mut Vec<u8>, a: &Assignment) {
    out.extend_from_slice(&(a.len() as u32).to_be_bytes());
    for (t, ps) in a {
        out.extend_from_slice(t);
        out.extend_from_slice(&(ps.len() as u32).to_be_bytes());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
}

fn put_member(out: &mut Vec<u8>, m: &Member) {
    put_str(out, &m.id);
    put_opt_str(out, m.sub.instance_id.as_deref());
    put_opt_str(out, m.sub.rack_id.as_deref());
    put_str(out, &m.sub.client_id);
    put_str(out, &m.sub.client_host);
    out.extend_from_slice(&(m.sub.topic_names.len() as u32).to_be_bytes());
    for t in &m.sub.topic_names {
        put_str(out, t);
    }
    put_opt_str(out, m.sub.topic_regex.as_deref());
    put_opt_str(out, m.sub.server_assignor.as_deref());
    out.extend_from_slice(&m.sub.rebalance_timeout_ms.to_be_bytes());
    out.extend_from_slice(&m.progress.epoch.to_be_bytes());
    out.extend_from_slice(&m.progress.previous_epoch.to_be_bytes());
    out.push(m.progress.state as u8);
    put_assignment(out, &m.progress.assigned);
    put_assignment(out, &m.progress.pending_revocation);
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
            Record::Consumer { group, change } => match change {
                ConsumerRecord::Epochs {
                    epoch,
                    assignment_epoch,
                } => {
                    out.push(8);
                    put_str(out, group);
                    out.extend_from_slice(&epoch.to_be_bytes());
                    out.extend_from_slice(&assignment_epoch.to_be_bytes());
                }
                ConsumerRecord::Member(m) => {
                    out.push(9);
                    put_str(out, group);
                    put_member(out, m);
                }
                ConsumerRecord::Target { member, assignment } => {
                    out.push(10);
                    put_str(out, group);
                    put_str(out, member);
                    put_assignment(out, assignment);
                }
                ConsumerRecord::Removed { member } => {
                    out.push(11);
                    put_str(out, group);
                    put_str(out, member);
                }
                ConsumerRecord::Dropped => {
                    out.push(12);
                    put_str(out, group);
                }
                ConsumerRecord::Metadata(m) => {
                    out.push(13);
                    put_str(out, group);
                    out.extend_from_slice(&(m.len() as u32).to_be_bytes());
                    for (name, (id, partitions)) in m {
                        put_str(out, name);
                        out.extend_from_slice(id);
                        out.extend_from_slice(&partitions.to_be_bytes());
                    }
                }
            },
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
            8 => Record::Consumer {
                group: r.string().map_err(torn)?,
                change: ConsumerRecord::Epochs {
                    epoch: r.i32().map_err(torn)?,
                    assignment_epoch: r.i32().map_err(torn)?,
                },
            },
            9 => Record::Consumer {
                group: r.string().map_err(torn)?,
                change: ConsumerRecord::Member(Box::new(r.member().map_err(torn)?)),
            },
            10 => Record::Consumer {
                group: r.string().map_err(torn)?,
                change: ConsumerRecord::Target {
                    member: r.string().map_err(torn)?,
                    assignment: r.assignment().map_err(torn)?,
                },
            },
            11 => Record::Consumer {
                group: r.string().map_err(torn)?,
                change: ConsumerRecord::Removed {
                    member: r.string().map_err(torn)?,
                },
            },
            12 => Record::Consumer {
                group: r.string().map_err(torn)?,
                change: ConsumerRecord::Dropped,
            },
            13 => Record::Consumer {
                group: r.string().map_err(torn)?,
                change: ConsumerRecord::Metadata(r.metadata().map_err(torn)?),
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

    fn opt_string(&mut self) -> Result<Option<String>, String> {
        match self.take(1)?[0] {
            0 => Ok(None),
            1 => self.string().map(Some),
            b => Err(format!("presence flag {b}")),
        }
    }

    fn count(&mut self, each: usize) -> Result<usize, String> {
        let n = self.i32()? as u32 as usize;
        // Every element takes at least `each` bytes: a count beyond what is
        // left is corrupt (and must not size an allocation).
        if n.saturating_mul(each) > self.b.len() {
            return Err(format!("count {n} exceeds the {} bytes left", self.b.len()));
        }
        Ok(n)
    }

    fn assignment(&mut self) -> Result<Assignment, String> {
        let mut a = Assignment::new();
        for _ in 0..self.count(20)? {
            let mut id = [0u8; 16];
            id.copy_from_slice(self.take(16)?);
            let mut ps = std::collections::BTreeSet::new();
            for _ in 0..self.count(4)? {
                ps.insert(self.i32()?);
            }
            a.insert(id, ps);
        }
        Ok(a)
    }

    fn metadata(&mut self) -> Result<std::collections::BTreeMap<String, (TopicId, i32)>, String> {
        let mut m = std::collections::BTreeMap::new();
        for _ in 0..self.count(22)? {
            let name = self.string()?;
            let mut id = [0u8; 16];
            id.copy_from_slice(self.take(16)?);
            m.insert(name, (id, self.i32()?));
        }
        Ok(m)
    }

    fn member(&mut self) -> Result<Member, String> {
        let id = self.string()?;
        let instance_id = self.opt_string()?;
        let rack_id = self.opt_string()?;
        let client_id = self.string()?;
        let client_host = self.string()?;
        let mut topic_names = std::collections::BTreeSet::new();
        for _ in 0..self.count(2)? {
            topic_names.insert(self.string()?);
        }
        let sub = Subscription {
            instance_id,
            rack_id,
            client_id,
            client_host,
            topic_names,
            topic_regex: self.opt_string()?,
            server_assignor: self.opt_string()?,
            rebalance_timeout_ms: self.i32()?,
        };
        let epoch = self.i32()?;
        let previous_epoch = self.i32()?;
        let state = self.take(1)?[0];
        let state = MemberState::from_code(state).ok_or(format!("member state {state}"))?;
        Ok(Member {
            id,
            sub,
            progress: Progress {
                epoch,
                previous_epoch,
                state,
                assigned: self.assignment()?,
                pending_revocation: self.assignment()?,
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
            Record::Consumer {
                group: "c".into(),
                change: ConsumerRecord::Epochs {
                    epoch: 7,
                    assignment_epoch: 6,
                },
            },
            Record::Consumer {
                group: "c".into(),
                change: ConsumerRecord::Member(Box::new(Member {
                    id: "m-1".into(),
                    sub: Subscription {
                        instance_id: Some("i".into()),
                        rack_id: None,
                        client_id: "rdkafka".into(),
                        client_host: "/10.0.0.1".into(),
                        topic_names: ["a".to_string(), "b".to_string()].into(),
                        topic_regex: Some("orders-.*".into()),
                        server_assignor: None,
                        rebalance_timeout_ms: 300_000,
                    },
                    progress: Progress {
                        epoch: 6,
                        previous_epoch: 5,
                        state: MemberState::UnrevokedPartitions,
                        assigned: Assignment::from([([1; 16], [0, 2].into())]),
                        pending_revocation: Assignment::from([([2; 16], [1].into())]),
                    },
                })),
            },
            Record::Consumer {
                group: "c".into(),
                change: ConsumerRecord::Target {
                    member: "m-1".into(),
                    assignment: Assignment::from([([1; 16], [0, 2, 3].into())]),
                },
            },
            Record::Consumer {
                group: "c".into(),
                change: ConsumerRecord::Removed {
                    member: "m-1".into(),
                },
            },
            Record::Consumer {
                group: "c".into(),
                change: ConsumerRecord::Dropped,
            },
            Record::Consumer {
                group: "c".into(),
                change: ConsumerRecord::Metadata(
                    [
                        ("t".to_string(), ([3; 16], 12)),
                        ("u".to_string(), ([4; 16], 1)),
                    ]
                    .into(),
                ),
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
        let body = [200u8, 0, 1, b'g'];
        let mut frame = Vec::new();
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        frame.extend_from_slice(&body);
        assert_eq!(Record::decode(&frame), Err(FrameError::Unknown(200)));
    }
}
