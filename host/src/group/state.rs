//! The classic group protocol for one group, sans I/O: Kafka 3.7's
//! `GroupCoordinator`/`GroupMetadata` rules for JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, offset-commit validation, session expiry,
//! rebalance and pending-sync timeouts, and static membership (KIP-345).
//!
//! Time is passed in ([`Now`]); long polls are `oneshot` senders kept on
//! the member and completed here; nothing here blocks, sleeps or touches a
//! file. The caller (the coordinator) holds the lock, persists what changed,
//! and asks [`ClassicGroup::next_deadline`] when to call [`ClassicGroup::tick`] again.
//!
//! States: Empty → PreparingRebalance (a member joins; from Empty the join
//! phase waits `group.initial.rebalance.delay.ms`, extended while new members
//! keep arriving, up to the rebalance timeout) → CompletingRebalance (every
//! known member rejoined, or the rebalance timeout removed those that did
//! not; the generation is bumped, the protocol chosen and every JoinGroup
//! answered, the leader's with all members' metadata) → Stable (the leader's
//! SyncGroup delivered the assignments). A member leaving, expiring or
//! changing its metadata sends a Stable or CompletingRebalance group back to
//! PreparingRebalance. Dead: deleted.

mod join;
mod rebalance;
mod sync;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::config::GroupConfig;
use super::member::{Member, Outbox, Waiter};
use super::outcome::{
    GroupOverview, GroupSummary, JoinOutcome, JoinedMember, MemberSummary, Reply, SyncOutcome,
};
use super::record::GroupMeta;
use super::subscription;
use crate::codes;

/// How long a new member's first JoinGroup may wait before it is dropped
/// (Kafka's `NewMemberJoinTimeoutMs`): sockets of waiting joins are muted,
/// so a disconnect cannot be seen, and a retry gets a new member id.
pub const NEW_MEMBER_JOIN_TIMEOUT: Duration = Duration::from_secs(300);

pub use super::now::Now;

/// Kafka's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups use.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A JoinGroup as the group sees it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// "" for a member without an id yet.
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+ without an instance id: a new member first gets
    /// MEMBER_ID_REQUIRED with its id (KIP-394).
    pub require_known_member_id: bool,
}

/// A SyncGroup as the group sees it.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    /// The leader's assignments (empty from followers).
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, Copy)]
struct JoinTimer {
    deadline: Instant,
    /// Set while the initial delay of a group leaving Empty runs.
    initial: Option<InitialDelay>,
}

#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    delay: Duration,
    remaining: Duration,
}

/// One classic group.
#[derive(Debug, Clone)]
pub struct ClassicGroup {
    id: String,
    state: GroupState,
    /// Wall-clock ms of the last state change (offset retention of Empty groups).
    state_ms: i64,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// instance id → member id.
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until their deadline.
    pending_members: HashMap<String, Instant>,
    /// Members that have not sent SyncGroup since the join phase completed.
    pending_sync: HashSet<String>,
    join_timer: Option<JoinTimer>,
    sync_deadline: Option<Instant>,
    new_member_added: bool,
    next_order: u64,
    /// Union of the members' consumer subscriptions (None: unknown).
    subscribed: Option<BTreeSet<String>>,
    /// group.initial.rebalance.delay.ms
    initial_delay: Duration,
    /// group.max.size
    max_size: usize,
    /// Where its answers to parked requests go (shared with its members).
    outbox: Outbox,
}

impl ClassicGroup {
    /// A new, Empty group.
    pub fn new(id: &str, cfg: &GroupConfig, now: Now) -> ClassicGroup {
        ClassicGroup {
            id: id.to_string(),
            state: GroupState::Empty,
            state_ms: now.wall_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            join_timer: None,
            sync_deadline: None,
            new_member_added: false,
            next_order: 0,
            subscribed: None,
            initial_delay: cfg.initial_rebalance_delay,
            max_size: cfg.max_size,
            outbox: Outbox::default(),
        }
    }

    /// An Empty group as the journal last described it.
    pub fn restore(id: &str, meta: &GroupMeta, cfg: &GroupConfig, now: Now) -> ClassicGroup {
        let mut g = ClassicGroup::new(id, cfg, now);
        g.generation = meta.generation;
        g.protocol_type = (!meta.protocol_type.is_empty()).then(|| meta.protocol_type.clone());
        g.state_ms = meta.state_ms;
        g
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its answers to parked requests ([`Outbox`]).
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn state_ms(&self) -> i64 {
        self.state_ms
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.get(id)
    }

    /// What the journal keeps of this group.
    pub fn meta(&self) -> GroupMeta {
        GroupMeta {
            generation: self.generation,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol: self.protocol.clone().unwrap_or_default(),
            state_ms: self.state_ms,
        }
    }

    fn transition(&mut self, to: GroupState, now: Now) {
        self.state = to;
        self.state_ms = now.wall_ms;
    }

    // ---- JoinGroup ------------------------------------------------------

    /// Handles a Heartbeat: the error code.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Now,
    ) -> i16 {
        if self.state == GroupState::Dead {
            return codes::COORDINATOR_NOT_AVAILABLE;
        }
        if let Some(e) = self.validate_current_member(member_id, instance_id) {
            return e;
        }
        if generation != self.generation {
            return codes::ILLEGAL_GENERATION;
        }
        let state = self.state;
        let Some(m) = self.members.get_mut(member_id) else {
            return codes::UNKNOWN_MEMBER_ID;
        };
        match state {
            GroupState::Empty | GroupState::Dead => codes::UNKNOWN_MEMBER_ID,
            GroupState::CompletingRebalance | GroupState::Stable => {
                m.touch(now.at);
                codes::NONE
            }
            GroupState::PreparingRebalance => {
                m.touch(now.at);
                codes::REBALANCE_IN_PROGRESS
            }
        }
    }

    /// One member of a LeaveGroup: its error code. An empty member id with
    /// an instance id removes that static member (administrative removal).
    pub fn leave(&mut self, member_id: &str, instance_id: Option<&str>, now: Now) -> i16 {
        if member_id.is_empty() {
            let current = instance_id.and_then(|i| self.static_members.get(i).cloned());
            return match current {
                Some(id) => {
                    tracing::info!(group = %self.id, member = %id, "static member removed by LeaveGroup");
                    self.remove_member_and_update(&id, now);
                    codes::NONE
                }
                None => codes::UNKNOWN_MEMBER_ID,
            };
        }
        if self.pending_members.remove(member_id).is_some() {
            if self.state == GroupState::PreparingRebalance {
                self.try_complete_join(now);
            }
            return codes::NONE;
        }
        if let Some(e) = self.validate_current_member(member_id, instance_id) {
            return e;
        }
        tracing::info!(group = %self.id, member = %member_id, "member left the group");
        self.remove_member_and_update(member_id, now);
        codes::NONE
    }

    /// Kafka's `validateOffsetCommit` plus its per-state rules: Ok means the
    /// commit may be written. A commit from a member counts as a heartbeat.
    pub fn validate_commit(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Now,
    ) -> Result<(), i16> {
        if self.state == GroupState::Dead {
            return Err(codes::COORDINATOR_NOT_AVAILABLE);
        }
        if generation < 0 && self.state == GroupState::Empty {
            // From outside group management (an admin client, a consumer
            // that assigns its partitions itself), whatever member id it
            // names: an empty group takes it, as Kafka's does.
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Some(e) = self.validate_current_member(member_id, instance_id) {
                return Err(e);
            }
            if generation != self.generation {
                return Err(codes::ILLEGAL_GENERATION);
            }
        } else if self.state != GroupState::Empty {
            // Only members may commit for a group with members.
            return Err(codes::UNKNOWN_MEMBER_ID);
        }
        match self.state {
            GroupState::Empty => Ok(()),
            GroupState::Stable | GroupState::PreparingRebalance => {
                if let Some(m) = self.members.get_mut(member_id) {
                    m.touch(now.at);
                }
                Ok(())
            }
            GroupState::CompletingRebalance => Err(codes::REBALANCE_IN_PROGRESS),
            GroupState::Dead => Err(codes::COORDINATOR_NOT_AVAILABLE),
        }
    }

    /// TxnOffsetCommit's member checks (docs/txn-semantics.md §2.3 step 4): looser than a
    /// plain commit. No member information is accepted in any state; with
    /// a member id, instance id or generation (≥ 0) given the member must
    /// be current, and a generation given must match.
    pub fn validate_txn_commit(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Now,
    ) -> Result<(), i16> {
        if self.state == GroupState::Dead {
            return Err(codes::COORDINATOR_NOT_AVAILABLE);
        }
        // A generation, member id or instance id given makes it a member's
        // commit: the member must be current (Kafka 3.7's order: an unknown
        // member before a wrong generation).
        if (generation >= 0 || !member_id.is_empty() || instance_id.is_some())
            && let Some(e) = self.validate_current_member(member_id, instance_id)
        {
            return Err(e);
        }
        if generation >= 0 && generation != self.generation {
            return Err(codes::ILLEGAL_GENERATION);
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.touch(now.at);
        }
        Ok(())
    }

    /// DeleteGroups: only an Empty group may go (it becomes Dead).
    pub fn mark_deleted(&mut self, now: Now) -> Result<(), i16> {
        match self.state {
            GroupState::Empty => {
                self.transition(GroupState::Dead, now);
                Ok(())
            }
            GroupState::Dead => Err(codes::GROUP_ID_NOT_FOUND),
            _ => Err(codes::NON_EMPTY_GROUP),
        }
    }

    /// Removes a member and rebalances (Kafka's `removeMemberAndUpdateGroup`).
    fn remove_member_and_update(&mut self, member_id: &str, now: Now) {
        self.remove(member_id);
        match self.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(now)
            }
            GroupState::PreparingRebalance => self.try_complete_join(now),
        }
    }

    /// Drops a member; a JoinGroup or SyncGroup it has parked is answered
    /// UNKNOWN_MEMBER_ID so its client starts over.
    fn remove(&mut self, member_id: &str) {
        if let Some(mut m) = self.members.remove(member_id) {
            m.answer_join(JoinOutcome::error("", codes::UNKNOWN_MEMBER_ID));
            m.answer_sync(SyncOutcome::error(codes::UNKNOWN_MEMBER_ID));
            if let Some(i) = &m.instance_id {
                self.static_members.remove(i);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.order)
                .map(|m| m.id.clone());
        }
        self.pending_members.remove(member_id);
        self.pending_sync.remove(member_id);
    }

    // ---- Timers ---------------------------------------------------------

    /// The earliest time [`ClassicGroup::tick`] has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let members = self.members.values().filter_map(Member::expiry);
        let pending = self.pending_members.values().copied();
        let join = self
            .join_timer
            .filter(|_| self.state == GroupState::PreparingRebalance)
            .map(|t| t.deadline);
        members
            .chain(pending)
            .chain(join)
            .chain(self.sync_deadline)
            .min()
    }

    /// Applies every deadline that has passed: expired pending members and
    /// sessions, the end of a join phase, members that never synced.
    pub fn tick(&mut self, now: Now) {
        let expired: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, d)| **d <= now.at)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.pending_members.remove(&id);
            if self.state == GroupState::PreparingRebalance {
                self.try_complete_join(now);
            }
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.expiry().is_some_and(|d| d <= now.at))
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "member session expired; removing it");
            self.remove_member_and_update(&id, now);
        }
        if let Some(timer) = self.join_timer
            && self.state == GroupState::PreparingRebalance
            && timer.deadline <= now.at
        {
            match timer.initial {
                Some(init) if self.new_member_added && !init.remaining.is_zero() => {
                    self.new_member_added = false;
                    let delay = init.delay.min(init.remaining);
                    self.join_timer = Some(JoinTimer {
                        deadline: now.at + delay,
                        initial: Some(InitialDelay {
                            delay: init.delay,
                            remaining: init.remaining - delay,
                        }),
                    });
                }
                _ => self.complete_join(now),
            }
        }
        if self.sync_deadline.is_some_and(|d| d <= now.at) {
            self.sync_deadline = None;
            if matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            ) && !self.pending_sync.is_empty()
            {
                let late: Vec<String> = self.pending_sync.drain().collect();
                for id in &late {
                    tracing::info!(group = %self.id, member = %id, "member did not sync in time; removing it");
                    self.remove(id);
                }
                self.prepare_rebalance(now);
            }
        }
    }

    // ---- Describe / list ------------------------------------------------

    pub fn summary(&self) -> GroupSummary {
        let stable = self.state == GroupState::Stable;
        let protocol = if stable {
            self.protocol.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let mut ms: Vec<&Member> = self.members.values().collect();
        ms.sort_by_key(|m| m.order);
        GroupSummary {
            state: self.state.name(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            members: ms
                .into_iter()
                .map(|m| MemberSummary {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
            protocol,
        }
    }

    pub fn overview(&self) -> GroupOverview {
        GroupOverview {
            group_type: "classic",
            group_id: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            state: self.state.name(),
        }
    }
}
