//! The group coordinator's committed offsets (Kafka's GroupMetadataManager
//! side): OffsetCommit, OffsetFetch, TxnOffsetCommit and the transaction's
//! completion, OffsetDelete, and what a deleted topic takes with it. Each
//! write is journaled; its answer waits for the returned [`Durable`].

use super::*;

impl GroupCoordinator {
    pub(super) fn durable(
        &self,
        file: Option<Arc<File>>,
        visible: Vec<(String, OffsetKey, u64)>,
    ) -> Durable {
        Durable {
            inner: self.inner.clone(),
            file,
            visible,
        }
    }

    /// OffsetCommit (at request `version`) of already checked partitions
    /// (known topic, metadata within bounds): the write to wait for, or the
    /// code for every partition.
    pub fn commit(
        &self,
        version: i16,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        entries: Vec<(String, i32, Committed)>,
    ) -> Result<Durable, i16> {
        self.start_ticker();
        if !valid_group_id(group_id, true) {
            return Err(codes::INVALID_GROUP_ID);
        }
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        if let Some(c) = st.consumer(group_id) {
            c.validate_offset_commit(member_id, generation, version)?;
        } else if st.classic(group_id).is_none() {
            if generation >= 0 {
                // A commit from an older generation of a group that is gone.
                return Err(codes::ILLEGAL_GENERATION);
            }
            // A group that uses Kafka only to store offsets.
            st.groups.insert(
                group_id.to_string(),
                Group::Classic(ClassicGroup::new(group_id, &self.inner.config, now)),
            );
        }
        if let Some(g) = st.classic_mut(group_id) {
            g.validate_commit(generation, member_id, instance_id, now)?;
        }
        if entries.is_empty() {
            return Ok(self.durable(None, Vec::new()));
        }
        let records: Vec<Record> = entries
            .iter()
            .map(|(topic, partition, c)| Record::Commit {
                group: group_id.to_string(),
                topic: topic.clone(),
                partition: *partition,
                committed: c.clone(),
            })
            .collect();
        match self.inner.append(st, &records) {
            Ok((file, seqs)) => {
                let visible = entries
                    .into_iter()
                    .zip(seqs)
                    .map(|((t, p, _), seq)| (group_id.to_string(), (t, p), seq))
                    .collect();
                Ok(self.durable(Some(file), visible))
            }
            Err(e) => {
                tracing::error!(group = %group_id, error = %e, "offsets journal append failed");
                Err(codes::NOT_COORDINATOR)
            }
        }
    }

    /// OffsetFetch: the committed offset of each requested partition, or of
    /// every partition the group has (`None`), by topic. With
    /// `require_stable`, a partition a transaction holds a pending offset for
    /// answers UNSTABLE_OFFSET_COMMIT (the client retries).
    pub fn fetch(
        &self,
        group_id: &str,
        partitions: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> Result<Vec<FetchedTopic>, i16> {
        if !valid_group_id(group_id, true) {
            return Err(codes::INVALID_GROUP_ID);
        }
        let st = self.inner.lock();
        let exists = st.classic(group_id).is_some() || st.consumer(group_id).is_some();
        let live = st.journal.live().groups.get(group_id);
        let answer = |topic: &str, p: i32| -> (i32, Option<Committed>, i16) {
            let key = (topic.to_string(), p);
            let c = exists
                .then(|| st.offsets.get(group_id, topic, p).cloned())
                .flatten();
            // Unstable: a transaction holds an offset for it, or a newer
            // commit (plain, or one a COMMIT marker just made) is journaled
            // but not yet durable, so `c` is about to change.
            let unpublished = live
                .and_then(|g| g.offsets.get(&key))
                .is_some_and(|(_, newest)| c.as_ref() != Some(newest));
            if require_stable && (unpublished || live.is_some_and(|g| g.has_pending(&key))) {
                return (p, None, codes::UNSTABLE_OFFSET_COMMIT);
            }
            (p, c, codes::NONE)
        };
        Ok(match partitions {
            Some(topics) => topics
                .into_iter()
                .map(|(topic, parts)| {
                    let answers = parts.into_iter().map(|p| answer(&topic, p)).collect();
                    (topic, answers)
                })
                .collect(),
            None => {
                let mut keys: Vec<OffsetKey> = Vec::new();
                if exists && let Some(o) = st.offsets.group(group_id) {
                    keys.extend(o.keys().cloned());
                }
                if require_stable && let Some(g) = live {
                    keys.extend(g.pending.values().flat_map(|p| p.keys().cloned()));
                }
                keys.sort();
                keys.dedup();
                let mut by_topic: BTreeMap<String, Vec<(i32, Option<Committed>, i16)>> =
                    BTreeMap::new();
                for (t, p) in keys {
                    let a = answer(&t, p);
                    by_topic.entry(t).or_default().push(a);
                }
                by_topic.into_iter().collect()
            }
        })
    }

    /// TxnOffsetCommit of already checked partitions, after the transaction
    /// coordinator verified that `producer_id` added this group's offsets
    /// partition: the offsets are journaled as pending (invisible to
    /// OffsetFetch) until [`Self::complete_txn`].
    #[allow(clippy::too_many_arguments)]
    pub fn txn_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        producer_id: i64,
        producer_epoch: i16,
        entries: Vec<(String, i32, Committed)>,
    ) -> Result<Durable, i16> {
        self.start_ticker();
        if !valid_group_id(group_id, false) {
            return Err(codes::INVALID_GROUP_ID);
        }
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        if let Some(c) = st.consumer(group_id) {
            c.validate_txn_commit(member_id, instance_id, generation)?;
        } else {
            if st.classic(group_id).is_none() {
                let g = ClassicGroup::new(group_id, &self.inner.config, now);
                st.groups.insert(group_id.to_string(), Group::Classic(g));
            }
            if let Some(g) = st.classic_mut(group_id) {
                g.validate_txn_commit(generation, member_id, instance_id, now)?;
            }
        }
        if entries.is_empty() {
            return Ok(self.durable(None, Vec::new()));
        }
        let records: Vec<Record> = entries
            .into_iter()
            .map(|(topic, partition, committed)| Record::TxnCommit {
                group: group_id.to_string(),
                producer_id,
                producer_epoch,
                topic,
                partition,
                committed,
            })
            .collect();
        match self.inner.append(st, &records) {
            Ok((file, _)) => Ok(self.durable(Some(file), Vec::new())),
            Err(e) => {
                tracing::error!(group = %group_id, error = %e, "offsets journal append failed");
                Err(codes::NOT_COORDINATOR)
            }
        }
    }

    /// A COMMIT (or ABORT) marker of `producer_id` reached offsets
    /// partition `offsets_partition`: every group mapped there with
    /// pending offsets of that producer gets a TxnEnd, which commits
    /// (or drops) them. The write to wait for (it publishes the committed
    /// offsets), or None when nothing was pending.
    pub fn complete_txn(
        &self,
        producer_id: i64,
        offsets_partition: i32,
        commit: bool,
    ) -> io::Result<Option<Durable>> {
        let mut st = self.inner.lock();
        let st = &mut *st;
        let groups: Vec<String> = st
            .journal
            .live()
            .groups
            .iter()
            .filter(|(name, g)| {
                g.pending.contains_key(&producer_id)
                    && crate::group::offsets_topic::offsets_partition(name) == offsets_partition
            })
            .map(|(name, _)| name.clone())
            .collect();
        if groups.is_empty() {
            return Ok(None);
        }
        let keys: Vec<(String, OffsetKey)> = groups
            .iter()
            .flat_map(|name| {
                st.journal.live().groups[name].pending[&producer_id]
                    .keys()
                    .map(|k| (name.clone(), k.clone()))
            })
            .collect();
        let records: Vec<Record> = groups
            .iter()
            .map(|g| Record::TxnEnd {
                group: g.clone(),
                producer_id,
                commit,
            })
            .collect();
        let (file, seqs) = self.inner.append(st, &records)?;
        let visible = if commit {
            keys.into_iter()
                .filter_map(|(group, key)| {
                    let i = groups.iter().position(|g| *g == group)?;
                    Some((group, key, seqs[i]))
                })
                .collect()
        } else {
            Vec::new()
        };
        tracing::debug!(producer_id, commit, groups = ?groups, "transactional offsets completed");
        Ok(Some(self.durable(Some(file), visible)))
    }

    /// OffsetDelete of partitions of known topics: each partition's code
    /// and the write to wait for, or a group-level error.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<(Vec<i16>, Durable), i16> {
        if !valid_group_id(group_id, false) {
            return Err(codes::INVALID_GROUP_ID);
        }
        let mut st = self.inner.lock();
        let st = &mut *st;
        if let Some(c) = st.consumer(group_id) {
            // A consumer group keeps the offsets of the topics its members
            // subscribe to.
            let subscribed: std::collections::BTreeSet<String> = if c.member_count() > 0 {
                c.subscribed_topics().cloned().collect()
            } else {
                Default::default()
            };
            return self.delete_offsets_of(st, group_id, partitions, &|t| subscribed.contains(t));
        }
        let Some(g) = st.classic(group_id) else {
            return Err(codes::GROUP_ID_NOT_FOUND);
        };
        let subscribed = |topic: &str| match g.state() {
            GroupState::Empty => false,
            _ => g.is_subscribed(topic),
        };
        match g.state() {
            GroupState::Dead => return Err(codes::GROUP_ID_NOT_FOUND),
            GroupState::Empty => {}
            _ if g.protocol_type() == Some("consumer") => {}
            _ => return Err(codes::NON_EMPTY_GROUP),
        }
        let subscribed: std::collections::BTreeSet<String> = partitions
            .iter()
            .filter(|(t, _)| subscribed(t))
            .map(|(t, _)| t.clone())
            .collect();
        self.delete_offsets_of(st, group_id, partitions, &|t| subscribed.contains(t))
    }

    /// OffsetDelete's writes once the group allowed it: topics `subscribed`
    /// answers GROUP_SUBSCRIBED_TO_TOPIC.
    fn delete_offsets_of(
        &self,
        st: &mut State,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: &dyn Fn(&str) -> bool,
    ) -> Result<(Vec<i16>, Durable), i16> {
        let mut records = Vec::new();
        let codes: Vec<i16> = partitions
            .iter()
            .map(|(topic, p)| {
                if subscribed(topic) {
                    return codes::GROUP_SUBSCRIBED_TO_TOPIC;
                }
                let key = (topic.clone(), *p);
                st.offsets.remove(group_id, &key);
                if st.journal.live().seq_of(group_id, &key).is_some() {
                    records.push(Record::DeleteOffset {
                        group: group_id.to_string(),
                        topic: topic.clone(),
                        partition: *p,
                    });
                }
                codes::NONE
            })
            .collect();
        let mut durable = self.durable(None, Vec::new());
        if !records.is_empty() {
            match self.inner.append(st, &records) {
                Ok((file, _)) => durable.file = Some(file),
                Err(e) => {
                    tracing::error!(group = %group_id, error = %e, "offsets journal append failed");
                    return Err(codes::NOT_COORDINATOR);
                }
            }
        }
        Ok((codes, durable))
    }

    /// DeleteTopics hook: drops every group's offsets of `topic`, durably
    /// before returning (a topic recreated under the same name must not
    /// inherit them, even across a crash).
    pub fn topic_deleted(&self, topic: &str) {
        let file = {
            let mut st = self.inner.lock();
            let st = &mut *st;
            st.offsets.remove_topic(topic);
            let journaled = st.journal.live().groups.values().any(|g| {
                g.offsets
                    .keys()
                    .chain(g.pending.values().flat_map(|p| p.keys()))
                    .any(|(t, _)| t == topic)
            });
            if !journaled {
                return;
            }
            match st.journal.append(&[Record::DeleteTopic {
                topic: topic.to_string(),
            }]) {
                Ok((file, _)) => file,
                Err(e) => {
                    // Opening the journal drops offsets of missing topics too.
                    tracing::error!(topic, error = %e, "journaling a topic deletion failed");
                    return;
                }
            }
        };
        if self.inner.group_commit.mode() != FsyncMode::Never
            && let Err(e) = file.sync_data()
        {
            tracing::error!(topic, error = %e, "offsets journal fsync failed");
        }
        tracing::info!(topic, "dropped committed offsets of a deleted topic");
    }
}
