//! What replaying an offsets journal yields: per group, its metadata and
//! committed offsets (and a producer's pending transactional ones), kept
//! up to date on every append; the snapshot a compaction writes out.
//! Memory only: the file mechanics are [`super::journal`]'s.

use std::collections::{BTreeMap, HashMap};

use super::consumer::ConsumerModel;
use super::record::{Committed, ConsumerRecord, GroupMeta, MAGIC, Record};

/// A key of a committed offset within a group.
pub type OffsetKey = (String, i32);

/// One group as the journal holds it.
#[derive(Debug, Clone, Default)]
pub struct LiveGroup {
    pub meta: Option<GroupMeta>,
    /// (topic, partition) → (sequence number of the record, the offset).
    pub offsets: BTreeMap<OffsetKey, (u64, Committed)>,
    /// Transactional offsets awaiting their transaction's end: producer id
    /// → (topic, partition) → (sequence number, producer epoch, the offset).
    pub pending: BTreeMap<i64, BTreeMap<OffsetKey, (u64, i16, Committed)>>,
    /// A consumer-protocol group's membership (KIP-848), if it is one.
    pub consumer: Option<LiveConsumer>,
}

/// A consumer-protocol group as the journal holds it: its model, changed
/// by the same [`ConsumerModel::apply`] as the running group, and the bytes
/// its records take.
#[derive(Debug, Clone, Default)]
pub struct LiveConsumer {
    pub model: ConsumerModel,
    /// Bytes its records take when written out.
    pub bytes: u64,
    has_epochs: bool,
}

impl LiveConsumer {
    fn len_of(group: &str, change: ConsumerRecord) -> u64 {
        Record::Consumer {
            group: group.to_string(),
            change,
        }
        .encode()
        .len() as u64
    }

    /// Applies one change; returns the bytes before and after.
    fn apply(&mut self, group: &str, change: &ConsumerRecord) -> (u64, u64) {
        let before = self.bytes;
        let old = self.model.apply(change);
        let add = match change {
            ConsumerRecord::Epochs { .. } if self.has_epochs => 0,
            ConsumerRecord::Removed { .. } | ConsumerRecord::Dropped => 0,
            _ => Self::len_of(group, change.clone()),
        };
        if matches!(change, ConsumerRecord::Epochs { .. }) {
            self.has_epochs = true;
        }
        let mut sub = 0;
        if let Some(m) = old.member {
            sub += Self::len_of(group, ConsumerRecord::Member(Box::new(m)));
        }
        if let Some(assignment) = old.target {
            let member = match change {
                ConsumerRecord::Target { member, .. } | ConsumerRecord::Removed { member } => {
                    member.clone()
                }
                _ => String::new(),
            };
            sub += Self::len_of(group, ConsumerRecord::Target { member, assignment });
        }
        if let Some(m) = old.subscribed.filter(|m| !m.is_empty()) {
            sub += Self::len_of(group, ConsumerRecord::Metadata(m));
        }
        self.bytes = self.bytes.saturating_sub(sub) + add;
        (before, self.bytes)
    }

    /// The records that rebuild it.
    fn snapshot_into(&self, group: &str, out: &mut Vec<u8>) {
        for change in self.model.records() {
            Record::Consumer {
                group: group.to_string(),
                change,
            }
            .encode_into(out);
        }
    }
}

impl LiveGroup {
    /// Whether a transaction has an offset for `key` that is not yet
    /// committed or aborted.
    pub fn has_pending(&self, key: &OffsetKey) -> bool {
        self.pending.values().any(|p| p.contains_key(key))
    }
}

/// What replaying the journal yields.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub groups: HashMap<String, LiveGroup>,
    /// Bytes the live records take when written out.
    pub bytes: u64,
}

impl Live {
    /// Applies one record (with its sequence number).
    pub fn apply(&mut self, rec: &Record, seq: u64) {
        match rec {
            Record::Commit {
                group,
                topic,
                partition,
                committed,
            } => {
                let g = self.groups.entry(group.clone()).or_default();
                let add = Record::commit_frame_len(group, topic, committed);
                if let Some((_, old)) = g
                    .offsets
                    .insert((topic.clone(), *partition), (seq, committed.clone()))
                {
                    self.bytes = self
                        .bytes
                        .saturating_sub(Record::commit_frame_len(group, topic, &old));
                }
                self.bytes += add;
            }
            Record::DeleteOffset {
                group,
                topic,
                partition,
            } => {
                if let Some(g) = self.groups.get_mut(group)
                    && let Some((_, old)) = g.offsets.remove(&(topic.clone(), *partition))
                {
                    self.bytes = self
                        .bytes
                        .saturating_sub(Record::commit_frame_len(group, topic, &old));
                }
            }
            Record::GroupMeta { group, meta } => {
                let g = self.groups.entry(group.clone()).or_default();
                let rec_len = |m: &GroupMeta| meta_len(group, m);
                if let Some(old) = g.meta.replace(meta.clone()) {
                    self.bytes = self.bytes.saturating_sub(rec_len(&old));
                }
                self.bytes += rec_len(meta);
            }
            Record::DeleteGroup { group } => {
                if let Some(g) = self.groups.remove(group) {
                    self.bytes = self.bytes.saturating_sub(group_len(group, &g));
                }
            }
            Record::TxnCommit {
                group,
                producer_id,
                producer_epoch,
                topic,
                partition,
                committed,
            } => {
                let g = self.groups.entry(group.clone()).or_default();
                let add = Record::txn_commit_frame_len(group, topic, committed);
                if let Some((_, _, old)) = g.pending.entry(*producer_id).or_default().insert(
                    (topic.clone(), *partition),
                    (seq, *producer_epoch, committed.clone()),
                ) {
                    self.bytes = self
                        .bytes
                        .saturating_sub(Record::txn_commit_frame_len(group, topic, &old));
                }
                self.bytes += add;
            }
            Record::TxnEnd {
                group,
                producer_id,
                commit,
            } => {
                let Some(g) = self.groups.get_mut(group) else {
                    return;
                };
                let Some(pending) = g.pending.remove(producer_id) else {
                    return;
                };
                for ((topic, partition), (pseq, _, c)) in pending {
                    self.bytes = self
                        .bytes
                        .saturating_sub(Record::txn_commit_frame_len(group, &topic, &c));
                    // A plain commit written after the transactional one wins.
                    let newer = g
                        .offsets
                        .get(&(topic.clone(), partition))
                        .is_some_and(|(s, _)| *s > pseq);
                    if !*commit || newer {
                        continue;
                    }
                    self.bytes += Record::commit_frame_len(group, &topic, &c);
                    if let Some((_, old)) = g.offsets.insert((topic.clone(), partition), (seq, c)) {
                        self.bytes = self
                            .bytes
                            .saturating_sub(Record::commit_frame_len(group, &topic, &old));
                    }
                }
            }
            Record::Consumer {
                group,
                change: ConsumerRecord::Dropped,
            } => {
                if let Some(g) = self.groups.get_mut(group)
                    && let Some(c) = g.consumer.take()
                {
                    self.bytes = self.bytes.saturating_sub(c.bytes);
                }
            }
            Record::Consumer { group, change } => {
                let g = self.groups.entry(group.clone()).or_default();
                let (before, after) = g
                    .consumer
                    .get_or_insert_with(LiveConsumer::default)
                    .apply(group, change);
                self.bytes = self.bytes.saturating_sub(before) + after;
            }
            Record::DeleteTopic { topic } => {
                for (group, g) in self.groups.iter_mut() {
                    for pending in g.pending.values_mut() {
                        let gone: Vec<OffsetKey> = pending
                            .keys()
                            .filter(|(t, _)| t == topic)
                            .cloned()
                            .collect();
                        for k in gone {
                            if let Some((_, _, old)) = pending.remove(&k) {
                                self.bytes = self.bytes.saturating_sub(
                                    Record::txn_commit_frame_len(group, topic, &old),
                                );
                            }
                        }
                    }
                    g.pending.retain(|_, p| !p.is_empty());
                    let gone: Vec<OffsetKey> = g
                        .offsets
                        .keys()
                        .filter(|(t, _)| t == topic)
                        .cloned()
                        .collect();
                    for k in gone {
                        if let Some((_, old)) = g.offsets.remove(&k) {
                            self.bytes = self
                                .bytes
                                .saturating_sub(Record::commit_frame_len(group, topic, &old));
                        }
                    }
                }
            }
        }
    }

    /// The sequence number of the live record for an offset, if any.
    pub fn seq_of(&self, group: &str, key: &OffsetKey) -> Option<u64> {
        self.groups
            .get(group)
            .and_then(|g| g.offsets.get(key))
            .map(|(seq, _)| *seq)
    }

    /// The records that rebuild this state, as one buffer (magic included).
    pub(super) fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.bytes as usize);
        out.extend_from_slice(MAGIC);
        let mut names: Vec<&String> = self.groups.keys().collect();
        names.sort();
        for group in names {
            let g = &self.groups[group];
            if let Some(meta) = &g.meta {
                Record::GroupMeta {
                    group: group.clone(),
                    meta: meta.clone(),
                }
                .encode_into(&mut out);
            }
            // In sequence order: which of a plain and a transactional
            // commit of one partition came last decides the TxnEnd.
            let mut recs: Vec<(u64, Record)> = g
                .offsets
                .iter()
                .map(|((topic, partition), (seq, committed))| {
                    let rec = Record::Commit {
                        group: group.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                        committed: committed.clone(),
                    };
                    (*seq, rec)
                })
                .collect();
            for (pid, pending) in &g.pending {
                for ((topic, partition), (seq, epoch, committed)) in pending {
                    let rec = Record::TxnCommit {
                        group: group.clone(),
                        producer_id: *pid,
                        producer_epoch: *epoch,
                        topic: topic.clone(),
                        partition: *partition,
                        committed: committed.clone(),
                    };
                    recs.push((*seq, rec));
                }
            }
            recs.sort_by_key(|(seq, _)| *seq);
            for (_, rec) in recs {
                rec.encode_into(&mut out);
            }
            if let Some(c) = &g.consumer {
                c.snapshot_into(group, &mut out);
            }
        }
        out
    }
}

pub(super) fn meta_len(group: &str, m: &GroupMeta) -> u64 {
    (super::record::FRAME_HEADER
        + 1
        + 2
        + group.len()
        + 4
        + 2
        + m.protocol_type.len()
        + 2
        + m.protocol.len()
        + 8) as u64
}

pub(super) fn group_len(group: &str, g: &LiveGroup) -> u64 {
    g.consumer.as_ref().map_or(0, |c| c.bytes)
        + g.meta.as_ref().map_or(0, |m| meta_len(group, m))
        + g.offsets
            .iter()
            .map(|((t, _), (_, c))| Record::commit_frame_len(group, t, c))
            .sum::<u64>()
        + g.pending
            .values()
            .flat_map(|p| p.iter())
            .map(|((t, _), (_, _, c))| Record::txn_commit_frame_len(group, t, c))
            .sum::<u64>()
}
