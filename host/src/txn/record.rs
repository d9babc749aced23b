//! The state-record codec: how one coordinator entry is persisted in the
//! transaction state log.
//!
//! Every record carries every field the retry rules need (producer id,
//! epoch, previous producer id, last epoch, state, partitions, timeout, both
//! timestamps), from the first format on: the failover bug KAFKA-20357 came
//! from a log schema that dropped two of them. The layout is versioned and
//! forward-compatible: fixed fields, then tagged fields that an older reader
//! keeps (and writes back) without understanding them.
//!
//! Layout (big-endian, as Kafka's own encodings):
//! ```text
//! u16 format (1) | u8 kind (0 upsert, 1 tombstone) | str16 transactional_id
//! upsert only:
//!   i64 producer_id | i16 producer_epoch | i64 last_producer_id
//!   i16 last_producer_epoch | i8 state | i32 timeout_ms
//!   i64 start_timestamp_ms | i64 last_update_timestamp_ms
//!   u32 partition_count { str16 topic | i32 partition }
//!   u16 tag_count { u16 tag | u32 len | bytes }   (tags ascending)
//! ```
//! Known tags: 0 = identity of the policy that wrote the record (UTF-8);
//! 1 = markers appended but perhaps not yet durable ([`UnsyncedMarkers`]):
//! `i64 producer_id | i16 producer_epoch | u8 commit | u32 count { str16
//! topic | i32 partition | i64 marker_offset }`; 2 = the next producer id
//! (`i64`, transaction version 2's rotation at the end of a transaction;
//! absent means -1); 3 = the client's transaction version (`i16`; absent
//! means 0). Tags 2 and 3 are written only when they differ from their
//! absent value, so a transaction-version-0 entry's record is the same
//! bytes as before they existed.
//! Decoding never panics: every length is checked against what remains.

use thiserror::Error;

use crate::policy::{Entry, TopicPartition, TxnState};

/// The format this build writes.
pub const FORMAT_VERSION: u16 = 1;
/// Tag of the writer's policy identity.
pub const TAG_WRITTEN_BY: u16 = 0;
/// Tag of the markers not known to be durable when the record was written.
pub const TAG_UNSYNCED_MARKERS: u16 = 1;
/// Tag of the entry's next producer id.
pub const TAG_NEXT_PRODUCER_ID: u16 = 2;
/// Tag of the entry's client transaction version.
pub const TAG_CLIENT_TRANSACTION_VERSION: u16 = 3;

/// A finished transaction's markers, appended to their partitions but not
/// known to be durable yet. Every record of the entry carries them until
/// their fdatasync completes, so the completion (and the next transaction)
/// need not wait for it: after a crash that lost a marker, the partition's
/// log ends at or before the marker's offset, and the marker is appended
/// again at load (`txn::coordinator`, "markers off the critical path").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsyncedMarkers {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// Each partition with the offset its marker was appended at.
    pub markers: Vec<(TopicPartition, i64)>,
}

impl UnsyncedMarkers {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.markers.len() * 24);
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.push(u8::from(self.commit));
        out.extend_from_slice(&(self.markers.len() as u32).to_be_bytes());
        for (tp, offset) in &self.markers {
            put_str(&mut out, &tp.topic);
            out.extend_from_slice(&tp.partition.to_be_bytes());
            out.extend_from_slice(&offset.to_be_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader { buf: bytes, at: 0 };
        let producer_id = i64::from_be_bytes(r.array()?);
        let producer_epoch = i16::from_be_bytes(r.array()?);
        let commit = r.array::<1>()?[0] != 0;
        let count = u32::from_be_bytes(r.array()?);
        // Each marker takes at least 14 bytes: bound the count by what remains.
        if count as usize > MAX_PARTITIONS || count as usize > r.remaining() / 14 {
            return Err(DecodeError::TooManyPartitions(count));
        }
        let mut markers = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let topic = r.string()?;
            let partition = i32::from_be_bytes(r.array()?);
            let offset = i64::from_be_bytes(r.array()?);
            markers.push((TopicPartition { topic, partition }, offset));
        }
        if r.remaining() != 0 {
            return Err(DecodeError::Trailing(r.remaining()));
        }
        Ok(UnsyncedMarkers {
            producer_id,
            producer_epoch,
            commit,
            markers,
        })
    }
}

/// Upper bound on partitions in one record, so a corrupt count cannot make
/// the decoder allocate without bound.
const MAX_PARTITIONS: usize = 1 << 20;

/// One record of the state log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    /// The entry's new value.
    Upsert {
        /// Every persisted field (the in-memory flag is written as false).
        entry: Entry,
        /// Identity of the policy that made the transition, if known.
        written_by: Option<String>,
        /// The previous transaction's markers, while not known durable.
        unsynced_markers: Option<UnsyncedMarkers>,
        /// Tags this build does not understand, kept for re-encoding.
        unknown_tags: Vec<(u16, Vec<u8>)>,
    },
    /// The transactional.id expired and was removed.
    Tombstone {
        /// The removed id.
        transactional_id: String,
    },
}

/// Why bytes are not a state record.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("state record truncated: needed {needed} more bytes at offset {at}")]
    Truncated { at: usize, needed: usize },
    #[error("state record format {0} is newer than this build understands ({FORMAT_VERSION})")]
    UnknownFormat(u16),
    #[error("state record kind {0} is unknown")]
    UnknownKind(u8),
    #[error("state id {0} is unknown")]
    UnknownState(i8),
    #[error("string is not UTF-8 at offset {0}")]
    BadUtf8(usize),
    #[error("partition count {0} is out of range")]
    TooManyPartitions(u32),
    #[error("{0} trailing bytes after the record")]
    Trailing(usize),
    #[error("tags are not in ascending order")]
    TagOrder,
    #[error("the tag at offset {at} holds {got} bytes, not {want}")]
    TagLength { at: usize, want: usize, got: usize },
}

/// Kafka's persisted state id (docs/txn-semantics.md §0.4).
pub fn state_id(s: TxnState) -> i8 {
    match s {
        TxnState::Empty => 0,
        TxnState::Ongoing => 1,
        TxnState::PrepareCommit => 2,
        TxnState::PrepareAbort => 3,
        TxnState::CompleteCommit => 4,
        TxnState::CompleteAbort => 5,
        TxnState::Dead => 6,
    }
}

fn state_from_id(id: i8) -> Result<TxnState, DecodeError> {
    Ok(match id {
        0 => TxnState::Empty,
        1 => TxnState::Ongoing,
        2 => TxnState::PrepareCommit,
        3 => TxnState::PrepareAbort,
        4 => TxnState::CompleteCommit,
        5 => TxnState::CompleteAbort,
        6 => TxnState::Dead,
        other => return Err(DecodeError::UnknownState(other)),
    })
}

impl StateRecord {
    /// An upsert of `entry` written by `written_by`.
    pub fn upsert(entry: &Entry, written_by: Option<&str>) -> Self {
        StateRecord::Upsert {
            entry: Entry {
                has_failed_epoch_fence: false,
                ..entry.clone()
            },
            written_by: written_by.map(str::to_owned),
            unsynced_markers: None,
            unknown_tags: Vec::new(),
        }
    }

    /// The same upsert carrying `markers` (see [`UnsyncedMarkers`]).
    pub fn with_unsynced_markers(mut self, markers: Option<UnsyncedMarkers>) -> Self {
        if let StateRecord::Upsert {
            unsynced_markers, ..
        } = &mut self
        {
            *unsynced_markers = markers;
        }
        self
    }

    /// The transactional.id the record is about.
    pub fn transactional_id(&self) -> &str {
        match self {
            StateRecord::Upsert { entry, .. } => &entry.transactional_id,
            StateRecord::Tombstone { transactional_id } => transactional_id,
        }
    }

    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        match self {
            StateRecord::Tombstone { transactional_id } => {
                out.push(1);
                put_str(&mut out, transactional_id);
            }
            StateRecord::Upsert {
                entry,
                written_by,
                unsynced_markers,
                unknown_tags,
            } => {
                out.push(0);
                put_str(&mut out, &entry.transactional_id);
                out.extend_from_slice(&entry.producer_id.to_be_bytes());
                out.extend_from_slice(&entry.producer_epoch.to_be_bytes());
                out.extend_from_slice(&entry.last_producer_id.to_be_bytes());
                out.extend_from_slice(&entry.last_producer_epoch.to_be_bytes());
                out.push(state_id(entry.state) as u8);
                out.extend_from_slice(&entry.timeout_ms.to_be_bytes());
                out.extend_from_slice(&entry.start_timestamp_ms.to_be_bytes());
                out.extend_from_slice(&entry.last_update_timestamp_ms.to_be_bytes());
                out.extend_from_slice(&(entry.partitions.len() as u32).to_be_bytes());
                for p in &entry.partitions {
                    put_str(&mut out, &p.topic);
                    out.extend_from_slice(&p.partition.to_be_bytes());
                }
                let mut tags: Vec<(u16, &[u8])> = unknown_tags
                    .iter()
                    .map(|(t, b)| (*t, b.as_slice()))
                    .collect();
                if let Some(w) = written_by {
                    tags.push((TAG_WRITTEN_BY, w.as_bytes()));
                }
                let markers = unsynced_markers.as_ref().map(UnsyncedMarkers::encode);
                if let Some(m) = &markers {
                    tags.push((TAG_UNSYNCED_MARKERS, m.as_slice()));
                }
                let next_pid = entry.next_producer_id.to_be_bytes();
                if entry.next_producer_id != -1 {
                    tags.push((TAG_NEXT_PRODUCER_ID, &next_pid));
                }
                let client_tv = entry.client_transaction_version.to_be_bytes();
                if entry.client_transaction_version != 0 {
                    tags.push((TAG_CLIENT_TRANSACTION_VERSION, &client_tv));
                }
                tags.sort_by_key(|(t, _)| *t);
                out.extend_from_slice(&(tags.len() as u16).to_be_bytes());
                for (tag, bytes) in tags {
                    out.extend_from_slice(&tag.to_be_bytes());
                    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                    out.extend_from_slice(bytes);
                }
            }
        }
        out
    }

    /// Decodes one record; the whole slice must be the record.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader { buf: bytes, at: 0 };
        let format = u16::from_be_bytes(r.array()?);
        if format != FORMAT_VERSION {
            return Err(DecodeError::UnknownFormat(format));
        }
        let kind = r.array::<1>()?[0];
        let transactional_id = r.string()?;
        let record = match kind {
            1 => StateRecord::Tombstone { transactional_id },
            0 => {
                let producer_id = i64::from_be_bytes(r.array()?);
                let producer_epoch = i16::from_be_bytes(r.array()?);
                let last_producer_id = i64::from_be_bytes(r.array()?);
                let last_producer_epoch = i16::from_be_bytes(r.array()?);
                let state = state_from_id(r.array::<1>()?[0] as i8)?;
                let timeout_ms = i32::from_be_bytes(r.array()?);
                let start_timestamp_ms = i64::from_be_bytes(r.array()?);
                let last_update_timestamp_ms = i64::from_be_bytes(r.array()?);
                let count = u32::from_be_bytes(r.array()?);
                // Each partition takes at least 6 bytes: bound the count by what remains.
                if count as usize > MAX_PARTITIONS || count as usize > r.remaining() / 6 {
                    return Err(DecodeError::TooManyPartitions(count));
                }
                let mut partitions = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let topic = r.string()?;
                    let partition = i32::from_be_bytes(r.array()?);
                    partitions.push(TopicPartition { topic, partition });
                }
                let tag_count = u16::from_be_bytes(r.array()?);
                let mut written_by = None;
                let mut unsynced_markers = None;
                let mut next_producer_id = -1;
                let mut client_transaction_version = 0;
                let mut unknown_tags = Vec::new();
                let mut last_tag = None;
                for _ in 0..tag_count {
                    let tag = u16::from_be_bytes(r.array()?);
                    if last_tag.is_some_and(|t| t >= tag) {
                        return Err(DecodeError::TagOrder);
                    }
                    last_tag = Some(tag);
                    let len = u32::from_be_bytes(r.array()?) as usize;
                    let at = r.at;
                    let bytes = r.take(len)?;
                    if tag == TAG_WRITTEN_BY {
                        written_by = Some(
                            String::from_utf8(bytes.to_vec())
                                .map_err(|_| DecodeError::BadUtf8(at))?,
                        );
                    } else if tag == TAG_UNSYNCED_MARKERS {
                        unsynced_markers = Some(UnsyncedMarkers::decode(bytes)?);
                    } else if tag == TAG_NEXT_PRODUCER_ID {
                        next_producer_id = i64::from_be_bytes(fixed(bytes, at)?);
                    } else if tag == TAG_CLIENT_TRANSACTION_VERSION {
                        client_transaction_version = i16::from_be_bytes(fixed(bytes, at)?);
                    } else {
                        unknown_tags.push((tag, bytes.to_vec()));
                    }
                }
                let entry = Entry {
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    last_producer_id,
                    last_producer_epoch,
                    next_producer_id,
                    client_transaction_version,
                    state,
                    partitions,
                    timeout_ms,
                    start_timestamp_ms,
                    last_update_timestamp_ms,
                    has_failed_epoch_fence: false,
                };
                StateRecord::Upsert {
                    entry,
                    written_by,
                    unsynced_markers,
                    unknown_tags,
                }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        };
        if r.remaining() != 0 {
            return Err(DecodeError::Trailing(r.remaining()));
        }
        Ok(record)
    }
}

/// A tag's value of exactly `N` bytes (found at offset `at`).
fn fixed<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N], DecodeError> {
    bytes.try_into().map_err(|_| DecodeError::TagLength {
        at,
        want: N,
        got: bytes.len(),
    })
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Transactional ids and topic names are far below 64 KiB; longer strings
    // are cut at a char boundary rather than written with a wrong length.
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// A bounds-checked cursor.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                at: self.at,
                needed: n - self.remaining(),
            });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let len = u16::from_be_bytes(self.array()?) as usize;
        let at = self.at;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::BadUtf8(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Entry {
        Entry {
            transactional_id: "orders-tx".into(),
            producer_id: 101,
            producer_epoch: 0,
            last_producer_id: 100,
            last_producer_epoch: 32766,
            next_producer_id: -1,
            client_transaction_version: 0,
            state: TxnState::Empty,
            partitions: vec![TopicPartition {
                topic: "t0".into(),
                partition: 3,
            }],
            timeout_ms: 60_000,
            start_timestamp_ms: -1,
            last_update_timestamp_ms: 1_700_000_000_000,
            has_failed_epoch_fence: true,
        }
    }

    #[test]
    fn next_producer_id_and_client_transaction_version_survive_a_round_trip() {
        // A transaction-version-2 Prepare of a rotation: every field Kafka
        // 4.0 lost on a failover (KAFKA-20310, KAFKA-20357) comes back.
        let prepare = Entry {
            producer_id: 100,
            producer_epoch: 32767,
            last_producer_id: 100,
            last_producer_epoch: 32766,
            next_producer_id: 101,
            client_transaction_version: 2,
            state: TxnState::PrepareCommit,
            ..sample()
        };
        let rec = StateRecord::upsert(&prepare, None);
        let StateRecord::Upsert { entry, .. } =
            StateRecord::decode(&rec.encode()).expect("decodes")
        else {
            panic!("not an upsert")
        };
        assert_eq!(
            (
                entry.next_producer_id,
                entry.client_transaction_version,
                entry.last_producer_epoch
            ),
            (101, 2, 32766)
        );
        // At their absent values the two tags are not written: the record
        // is the same bytes as a build before them wrote.
        let plain = StateRecord::upsert(&sample(), None).encode();
        let tags_at = plain.len() - 2;
        assert_eq!(&plain[tags_at..], &0u16.to_be_bytes());
    }

    #[test]
    fn a_tag_of_the_wrong_length_is_an_error() {
        let prepare = Entry {
            next_producer_id: 101,
            ..sample()
        };
        let mut bytes = StateRecord::upsert(&prepare, None).encode();
        // The last tag is the next producer id: 2 tag, 4 length, 8 value.
        let len_at = bytes.len() - 12;
        bytes[len_at..len_at + 4].copy_from_slice(&7u32.to_be_bytes());
        bytes.pop();
        assert!(matches!(
            StateRecord::decode(&bytes),
            Err(DecodeError::TagLength {
                want: 8,
                got: 7,
                ..
            })
        ));
    }

    #[test]
    fn every_field_survives_a_round_trip_including_previous_pid_and_last_epoch() {
        let rec = StateRecord::upsert(&sample(), Some("apache37@0.1.0"));
        let back = StateRecord::decode(&rec.encode()).expect("decodes");
        assert_eq!(back, rec);
        let StateRecord::Upsert {
            entry, written_by, ..
        } = back
        else {
            panic!("not an upsert")
        };
        assert_eq!(
            (entry.last_producer_id, entry.last_producer_epoch),
            (100, 32766)
        );
        assert_eq!(written_by.as_deref(), Some("apache37@0.1.0"));
        assert!(
            !entry.has_failed_epoch_fence,
            "the in-memory flag is never persisted"
        );
    }

    #[test]
    fn unknown_tags_from_a_newer_writer_are_kept_and_written_back() {
        let rec = StateRecord::Upsert {
            entry: sample(),
            written_by: None,
            unsynced_markers: None,
            unknown_tags: vec![(7, vec![1, 2, 3])],
        };
        let bytes = rec.encode();
        let back = StateRecord::decode(&bytes).expect("decodes");
        assert_eq!(back.encode(), bytes);
    }

    fn markers() -> UnsyncedMarkers {
        UnsyncedMarkers {
            producer_id: 101,
            producer_epoch: 4,
            commit: true,
            markers: vec![
                (
                    TopicPartition {
                        topic: "t0".into(),
                        partition: 3,
                    },
                    77,
                ),
                (
                    TopicPartition {
                        topic: "t1".into(),
                        partition: 0,
                    },
                    5,
                ),
            ],
        }
    }

    #[test]
    fn unsynced_markers_round_trip_beside_the_writer_and_unknown_tags() {
        let rec = StateRecord::Upsert {
            entry: Entry {
                has_failed_epoch_fence: false, // in memory only
                ..sample()
            },
            written_by: Some("apache37@2.0.0".into()),
            unsynced_markers: Some(markers()),
            unknown_tags: vec![(9, vec![4])],
        };
        let bytes = rec.encode();
        assert_eq!(StateRecord::decode(&bytes), Ok(rec));
        for cut in 0..bytes.len() {
            assert!(StateRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn tombstones_round_trip() {
        let rec = StateRecord::Tombstone {
            transactional_id: "gone".into(),
        };
        assert_eq!(StateRecord::decode(&rec.encode()), Ok(rec));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = StateRecord::upsert(&sample(), Some("x")).encode();
        for cut in 0..bytes.len() {
            assert!(
                StateRecord::decode(&bytes[..cut]).is_err(),
                "prefix of {cut} bytes decoded"
            );
        }
    }

    #[test]
    fn a_huge_partition_count_is_refused_without_allocating() {
        let mut bytes = StateRecord::upsert(
            &Entry {
                partitions: vec![],
                ..sample()
            },
            None,
        )
        .encode();
        // The partition count sits 2 bytes (tag count) before the end.
        let n = bytes.len();
        bytes[n - 6..n - 2].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            StateRecord::decode(&bytes),
            Err(DecodeError::TooManyPartitions(u32::MAX))
        );
    }

    #[test]
    fn a_newer_format_is_refused_with_its_number() {
        let mut bytes = StateRecord::upsert(&sample(), None).encode();
        bytes[..2].copy_from_slice(&9u16.to_be_bytes());
        assert_eq!(
            StateRecord::decode(&bytes),
            Err(DecodeError::UnknownFormat(9))
        );
    }
}
