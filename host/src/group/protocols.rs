//! A group of either protocol: the one type the coordinator's one map of
//! groups holds ([`super::coordinator`]), so what every group has — a next
//! deadline, members, an overview, offsets that may expire, a moment when
//! nothing is left of it — is asked of one value, and the tick and the
//! retention sweep are each one loop over one map.

use std::collections::BTreeMap;
use std::time::Instant;

use super::consumer::ConsumerGroup;
use super::journal::OffsetKey;
use super::outcome::GroupOverview;
use super::record::Committed;
use super::retention;
use super::state::{ClassicGroup, GroupState};

/// A classic group (JoinGroup/SyncGroup) or a consumer-protocol group
/// (KIP-848). A group id names one or the other.
#[derive(Debug)]
pub enum Group {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
}

impl Group {
    pub fn classic(&self) -> Option<&ClassicGroup> {
        match self {
            Group::Classic(g) => Some(g),
            Group::Consumer(_) => None,
        }
    }

    pub fn classic_mut(&mut self) -> Option<&mut ClassicGroup> {
        match self {
            Group::Classic(g) => Some(g),
            Group::Consumer(_) => None,
        }
    }

    pub fn consumer(&self) -> Option<&ConsumerGroup> {
        match self {
            Group::Consumer(g) => Some(g),
            Group::Classic(_) => None,
        }
    }

    pub fn consumer_mut(&mut self) -> Option<&mut ConsumerGroup> {
        match self {
            Group::Consumer(g) => Some(g),
            Group::Classic(_) => None,
        }
    }

    /// When the group next has something to do (a session, a rebalance, a
    /// revocation deadline).
    pub fn next_deadline(&self) -> Option<Instant> {
        match self {
            Group::Classic(g) => g.next_deadline(),
            Group::Consumer(g) => g.next_deadline(),
        }
    }

    pub fn member_count(&self) -> usize {
        match self {
            Group::Classic(g) => g.member_count(),
            Group::Consumer(g) => g.member_count(),
        }
    }

    /// Empty: no members, and (classic) no rebalance under way.
    pub fn is_empty(&self) -> bool {
        match self {
            Group::Classic(g) => g.state() == GroupState::Empty && g.member_count() == 0,
            Group::Consumer(g) => g.member_count() == 0,
        }
    }

    /// ListGroups' line for it.
    pub fn overview(&self) -> GroupOverview {
        match self {
            Group::Classic(g) => g.overview(),
            Group::Consumer(g) => GroupOverview {
                group_id: g.id().to_string(),
                protocol_type: "consumer".to_string(),
                state: g.state().name(),
                group_type: "consumer",
            },
        }
    }

    /// Which of its committed offsets have expired (Kafka's rules for its
    /// protocol).
    pub fn expired_offsets(
        &self,
        offsets: &BTreeMap<OffsetKey, Committed>,
        now_ms: i64,
        retention_ms: i64,
    ) -> Vec<OffsetKey> {
        match self {
            Group::Classic(g) => retention::expired(g, offsets, now_ms, retention_ms),
            Group::Consumer(g) => retention::expired_consumer(g, offsets, now_ms, retention_ms),
        }
    }
}
