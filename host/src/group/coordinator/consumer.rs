//! The group coordinator's consumer-protocol groups (KIP-848):
//! ConsumerGroupHeartbeat and ConsumerGroupDescribe, the journaling of
//! their changes, and the rules between the two protocols (a group id is a
//! classic group or a consumer group; a non-empty one of either kind refuses
//! the other protocol, an empty one is converted, its offsets kept).

use super::*;
use crate::group::consumer::{
    self, ConsumerGroup, ConsumerRecord, ConsumerState, Heartbeat, Member, Topics,
};
use crate::group::record::MAX_MEMBER_RECORD;

/// A consumer group in ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerDescription {
    pub state: &'static str,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    /// Each member, with its target assignment.
    pub members: Vec<(Member, consumer::Assignment)>,
}

fn record(group: &str, change: ConsumerRecord) -> Record {
    Record::Consumer {
        group: group.to_string(),
        change,
    }
}

impl Inner {
    /// A consumer group's tick (fencing members whose session or
    /// revocation deadline passed), records first: run on a copy, the
    /// records written, then applied to the group. A failed write leaves
    /// the group as it was (the next tick tries again).
    pub(super) fn tick_consumer(&self, st: &mut State, group: &str, now: Now) {
        let Some(g) = st.consumer(group) else {
            return;
        };
        let mut scratch = g.clone();
        let changes = scratch.tick(now);
        if !changes.is_empty() {
            let records: Vec<Record> = changes.iter().cloned().map(|c| record(group, c)).collect();
            if !self.append_in_background(st, &records) {
                return;
            }
        }
        if let Some(g) = st.consumer_mut(group) {
            commit_scratch(g, &changes, scratch);
        }
    }
}

/// After `changes` were written: applies them to the group and takes the
/// scratch copy's unjournaled parts. In every test build, checks that the
/// applied records reproduce the copy they were computed on, and that no
/// member's epoch (nor the target's) is above the group epoch.
fn commit_scratch(g: &mut ConsumerGroup, changes: &[ConsumerRecord], scratch: ConsumerGroup) {
    for c in changes {
        g.apply(c);
    }
    crate::invariant::invariant!(
        g.same_state(&scratch),
        "group {}: applying its records did not reproduce the state they were computed on",
        g.id()
    );
    crate::invariant::invariant!(
        g.model().epoch_above_group().is_none(),
        "group {} at epoch {}: {:?} is above the group epoch",
        g.id(),
        g.model().epoch,
        g.model().epoch_above_group()
    );
    g.adopt_unjournaled(scratch);
}

impl GroupCoordinator {
    /// ConsumerGroupHeartbeat: the answer, and the write it waits for.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        req: Heartbeat,
        topics: &dyn Topics,
    ) -> (consumer::Reply, Durable) {
        self.start_ticker();
        let now = Now::current();
        let (asked_id, asked_epoch) = (req.member_id.clone(), req.member_epoch);
        let fail = |code: i16, msg: String| consumer::Reply {
            error: code,
            message: Some(msg),
            member_id: asked_id.clone(),
            member_epoch: asked_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if !valid_group_id(group_id, false) {
            return (
                fail(codes::INVALID_GROUP_ID, "GroupId can't be empty.".into()),
                self.durable(None, Vec::new()),
            );
        }
        let subscription_bytes: usize = req
            .topic_names
            .iter()
            .flatten()
            .map(|t| t.len() + 2)
            .sum::<usize>()
            + req.topic_regex.as_ref().map_or(0, String::len);
        if subscription_bytes > MAX_MEMBER_RECORD / 2 {
            return (
                fail(
                    codes::INVALID_REQUEST,
                    format!(
                        "The subscription takes {subscription_bytes} bytes; the most is {}.",
                        MAX_MEMBER_RECORD / 2
                    ),
                ),
                self.durable(None, Vec::new()),
            );
        }
        let cfg = &self.inner.config.consumer;
        let mut st = self.inner.lock();
        let st = &mut *st;
        if let Some(classic) = st.classic(group_id)
            && (classic.member_count() > 0 || classic.state() != GroupState::Empty)
        {
            return (
                fail(
                    codes::GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a consumer group."),
                ),
                self.durable(None, Vec::new()),
            );
        }
        // A group this heartbeat creates, and the empty classic group it
        // replaces: both undone when the heartbeat fails (Kafka's
        // uncommitted timeline).
        let mut created = None;
        if st.consumer(group_id).is_none() {
            if req.member_epoch != 0 {
                // Only a join (epoch 0) creates a group.
                return (
                    fail(
                        codes::GROUP_ID_NOT_FOUND,
                        format!("Group {group_id} not found."),
                    ),
                    self.durable(None, Vec::new()),
                );
            }
            // A new group, or an empty classic group converted (its
            // offsets stay where they are).
            created = Some(st.remove_classic(group_id));
            st.groups.insert(
                group_id.to_string(),
                Group::Consumer(ConsumerGroup::new(group_id, now)),
            );
        }
        let Some(g) = st.consumer(group_id) else {
            return (
                fail(codes::COORDINATOR_NOT_AVAILABLE, "group vanished".into()),
                self.durable(None, Vec::new()),
            );
        };
        // Records first: the heartbeat runs on a copy; the group itself
        // changes only by applying the records once they are written.
        let mut scratch = g.clone();
        let inner = &self.inner;
        let (reply, changes) = scratch.heartbeat(req, cfg, topics, now, &mut || {
            // Kafka's v0 member ids are UUIDs.
            inner
                .new_member_id("", group_id)
                .trim_start_matches('-')
                .to_string()
        });
        // Undoes the group this heartbeat created (and restores the empty
        // classic group it replaced) when the heartbeat fails.
        let undo = |st: &mut State, created: Option<Option<ClassicGroup>>| {
            if let Some(classic) = created {
                st.remove_consumer(group_id);
                if let Some(classic) = classic {
                    st.groups
                        .insert(group_id.to_string(), Group::Classic(classic));
                }
            }
        };
        if reply.error != codes::NONE {
            undo(st, created);
            return (reply, self.durable(None, Vec::new()));
        }
        let mut durable = self.durable(None, Vec::new());
        if !changes.is_empty() {
            let records: Vec<Record> = changes
                .iter()
                .cloned()
                .map(|c| record(group_id, c))
                .collect();
            match self.inner.append(st, &records) {
                Ok((file, _)) => durable.file = Some(file),
                Err(e) => {
                    tracing::error!(group = %group_id, error = %e, "offsets journal append failed");
                    undo(st, created);
                    return (
                        fail(
                            codes::NOT_COORDINATOR,
                            "the group's journal could not be written".into(),
                        ),
                        self.durable(None, Vec::new()),
                    );
                }
            }
        }
        if let Some(Some(_)) = created {
            tracing::info!(group = %group_id, "empty classic group converted to a consumer group");
        }
        let next = scratch.next_deadline();
        if let Some(g) = st.consumer_mut(group_id) {
            commit_scratch(g, &changes, scratch);
        }
        if let Some(d) = next
            && st.planned_wake.is_none_or(|w| d < w)
        {
            st.planned_wake = Some(d);
            self.inner.wake.notify_one();
        }
        (reply, durable)
    }

    /// ConsumerGroupDescribe of one group: GROUP_ID_NOT_FOUND when it is
    /// not a consumer group.
    pub fn consumer_describe(&self, group_id: &str) -> Result<ConsumerDescription, (i16, String)> {
        let st = self.inner.lock();
        let Some(g) = st.consumer(group_id) else {
            let msg = if st.classic(group_id).is_some() {
                format!("Group {group_id} is not a consumer group.")
            } else {
                format!("Group {group_id} not found.")
            };
            return Err((codes::GROUP_ID_NOT_FOUND, msg));
        };
        Ok(ConsumerDescription {
            state: g.state().name(),
            epoch: g.epoch(),
            assignment_epoch: g.assignment_epoch(),
            assignor: g.assignor(&self.inner.config.consumer).to_string(),
            members: g
                .members()
                .map(|m| (m.clone(), g.target(&m.id).cloned().unwrap_or_default()))
                .collect(),
        })
    }

    /// OffsetFetch v9 from a member of a consumer-protocol group: the member
    /// must be known and at its current epoch (a classic group's fetches
    /// are not checked).
    pub fn validate_consumer_fetch(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
    ) -> Result<(), i16> {
        let st = self.inner.lock();
        match st.consumer(group_id) {
            Some(g) => g.validate_fetch(Some((member_id, epoch))),
            None => Ok(()),
        }
    }

    /// The state of a consumer group (None: not one).
    pub fn consumer_state(&self, group_id: &str) -> Option<ConsumerState> {
        self.inner
            .lock()
            .consumer(group_id)
            .map(ConsumerGroup::state)
    }
}
