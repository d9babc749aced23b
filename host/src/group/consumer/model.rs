//! A consumer-protocol group's durable state and the one way it changes:
//! [`ConsumerModel::apply`] of a [`ConsumerRecord`], the record the offsets
//! journal stores. Loading a group replays its records through it, the
//! journal's live view follows every append through it, and the
//! coordinator's running group takes a heartbeat's or a tick's records
//! through it only after the journal accepted them — so memory never holds
//! what no record says. A leaf: the group's types, no journal, no clock.

use std::collections::BTreeMap;

use super::assignor::{Assignment, TopicId};
use super::member::Member;

/// A consumer-protocol group's change, as computed by its rules
/// ([`super::ConsumerGroup`]) and as the journal stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// The group's epoch and the epoch of its target assignment.
    Epochs { epoch: i32, assignment_epoch: i32 },
    /// A member as it is now.
    Member(Box<Member>),
    /// A member's target assignment.
    Target {
        member: String,
        assignment: Assignment,
    },
    /// A member was removed (its target with it).
    Removed { member: String },
    /// The subscribed topics that exist: name → (id, partitions) (the
    /// group epoch moved because they changed).
    Metadata(BTreeMap<String, (TopicId, i32)>),
    /// The group is no longer a consumer group (an empty one converted to
    /// classic); its offsets stay.
    Dropped,
}

/// What a consumer group's records say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerModel {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    pub targets: BTreeMap<String, Assignment>,
    /// The subscribed topics that exist: name → (id, partitions).
    pub subscribed: BTreeMap<String, (TopicId, i32)>,
}

/// What one record replaced, for those who keep something derived from it
/// (the journal's byte count, the running group's partition owners).
#[derive(Debug, Default)]
pub struct Displaced {
    pub member: Option<Member>,
    pub target: Option<Assignment>,
    pub subscribed: Option<BTreeMap<String, (TopicId, i32)>>,
}

impl ConsumerModel {
    /// Applies one record.
    pub fn apply(&mut self, rec: &ConsumerRecord) -> Displaced {
        let mut out = Displaced::default();
        match rec {
            ConsumerRecord::Epochs {
                epoch,
                assignment_epoch,
            } => {
                self.epoch = *epoch;
                self.assignment_epoch = *assignment_epoch;
            }
            ConsumerRecord::Member(m) => {
                out.member = self.members.insert(m.id.clone(), (**m).clone());
            }
            ConsumerRecord::Target { member, assignment } => {
                out.target = self.targets.insert(member.clone(), assignment.clone());
            }
            ConsumerRecord::Removed { member } => {
                out.member = self.members.remove(member);
                out.target = self.targets.remove(member);
            }
            ConsumerRecord::Metadata(m) => {
                out.subscribed = Some(std::mem::replace(&mut self.subscribed, m.clone()));
            }
            ConsumerRecord::Dropped => {}
        }
        out
    }

    /// A member whose epoch is above the group's, or a target assignment
    /// epoch above it, if any (id and epoch; the group itself for the
    /// target). Neither may happen: a member reconciles towards the target
    /// assignment, whose epoch the group epoch bounds.
    pub fn epoch_above_group(&self) -> Option<(&str, i32)> {
        if self.assignment_epoch > self.epoch {
            return Some(("(target assignment)", self.assignment_epoch));
        }
        self.members
            .values()
            .find(|m| m.epoch() > self.epoch)
            .map(|m| (m.id.as_str(), m.epoch()))
    }

    /// The records that rebuild it from nothing (a compaction's snapshot).
    pub fn records(&self) -> Vec<ConsumerRecord> {
        let mut out = vec![ConsumerRecord::Epochs {
            epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
        }];
        if !self.subscribed.is_empty() {
            out.push(ConsumerRecord::Metadata(self.subscribed.clone()));
        }
        out.extend(
            self.members
                .values()
                .map(|m| ConsumerRecord::Member(Box::new(m.clone()))),
        );
        out.extend(
            self.targets
                .iter()
                .map(|(member, assignment)| ConsumerRecord::Target {
                    member: member.clone(),
                    assignment: assignment.clone(),
                }),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::member::{Progress, Subscription};
    use super::*;

    fn member(id: &str, epoch: i32) -> ConsumerRecord {
        ConsumerRecord::Member(Box::new(Member {
            id: id.to_string(),
            sub: Subscription::default(),
            progress: Progress {
                epoch,
                ..Progress::joining()
            },
        }))
    }

    #[test]
    fn a_member_epoch_above_the_group_epoch_is_found() {
        let mut m = ConsumerModel::default();
        for r in [
            ConsumerRecord::Epochs {
                epoch: 4,
                assignment_epoch: 4,
            },
            member("a", 4),
            member("b", 3),
        ] {
            m.apply(&r);
        }
        assert_eq!(m.epoch_above_group(), None);
        m.apply(&member("b", 5));
        assert_eq!(m.epoch_above_group(), Some(("b", 5)));
        m.apply(&ConsumerRecord::Epochs {
            epoch: 5,
            assignment_epoch: 6,
        });
        assert_eq!(m.epoch_above_group(), Some(("(target assignment)", 6)));
    }
}
