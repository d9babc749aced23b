//! The classic group protocol for one group, sans I/O: Kafka 3.7's
//! `GroupCoordinator`/`GroupMetadata` rules for JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, offset-commit validation, session expiry,
//! rebalance and pending-sync timeouts, and static membership (KIP-345).
//!
//! Time is passed in ([`Now`]); long polls are `oneshot` senders kept on
//! the member and completed here; nothing here blocks, sleeps or touches a
//! file. The caller (the coordinator) holds the lock, persists what changed,
//! and asks [`Group::next_deadline`] when to call [`Group::tick`] again.
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::codes;
use super::config::GroupConfig;
use super::member::Member;
use super::outcome::{
    GroupOverview, GroupSummary, JoinOutcome, JoinedMember, MemberSummary, Reply, SyncOutcome,
};
use super::record::GroupMeta;
use super::subscription;

/// How long a new member's first JoinGroup may wait before it is dropped
/// (Kafka's `NewMemberJoinTimeoutMs`): sockets of waiting joins are muted,
/// so a disconnect cannot be seen, and a retry gets a new member id.
pub const NEW_MEMBER_JOIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The time, monotonic for deadlines and wall-clock for what is stored.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub at: Instant,
    pub wall_ms: i64,
}

impl Now {
    pub fn current() -> Now {
        Now {
            at: Instant::now(),
            wall_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        }
    }
}

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
#[derive(Debug)]
pub struct Group {
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
}

impl Group {
    /// A new, Empty group.
    pub fn new(id: &str, cfg: &GroupConfig, now: Now) -> Group {
        Group {
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
        }
    }

    /// An Empty group as the journal last described it.
    pub fn restore(id: &str, meta: &GroupMeta, cfg: &GroupConfig, now: Now) -> Group {
        let mut g = Group::new(id, cfg, now);
        g.generation = meta.generation;
        g.protocol_type = (!meta.protocol_type.is_empty()).then(|| meta.protocol_type.clone());
        g.state_ms = meta.state_ms;
        g
    }

    pub fn id(&self) -> &str {
        &self.id
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

    /// Handles a JoinGroup. `new_id` makes a member id from the client id
    /// (or the instance id of a static member).
    pub fn join(
        &mut self,
        req: JoinRequest,
        now: Now,
        new_id: &mut dyn FnMut(&str) -> String,
    ) -> Reply<JoinOutcome> {
        let reply = if !self.accepts_joining(&req.member_id) {
            if self.members.contains_key(&req.member_id) {
                self.remove_member_and_update(&req.member_id, now);
            }
            Reply::Now(JoinOutcome::error("", codes::GROUP_MAX_SIZE_REACHED))
        } else if req.member_id.is_empty() {
            self.join_new(req, now, new_id)
        } else {
            self.join_existing(req, now)
        };
        if self.state == GroupState::PreparingRebalance {
            self.try_complete_join(now);
        }
        reply
    }

    fn accepts_joining(&self, member_id: &str) -> bool {
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                self.members
                    .get(member_id)
                    .is_some_and(Member::awaiting_join)
                    || self.awaiting_join_count() < self.max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members.contains_key(member_id) || self.members.len() < self.max_size
            }
        }
    }

    fn join_new(
        &mut self,
        req: JoinRequest,
        now: Now,
        new_id: &mut dyn FnMut(&str) -> String,
    ) -> Reply<JoinOutcome> {
        if self.state == GroupState::Dead {
            return Reply::Now(JoinOutcome::error("", codes::COORDINATOR_NOT_AVAILABLE));
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinOutcome::error("", codes::INCONSISTENT_GROUP_PROTOCOL));
        }
        let member_id = new_id(req.instance_id.as_deref().unwrap_or(&req.client_id));
        match req.instance_id.clone() {
            Some(instance) => match self.static_members.get(&instance).cloned() {
                Some(old) => self.replace_static_member(&old, member_id, req, now),
                None => self.add_member_and_rebalance(member_id, req, now),
            },
            None if req.require_known_member_id => {
                self.pending_members
                    .insert(member_id.clone(), now.at + req.session_timeout);
                Reply::Now(JoinOutcome::error(&member_id, codes::MEMBER_ID_REQUIRED))
            }
            None => self.add_member_and_rebalance(member_id, req, now),
        }
    }

    fn join_existing(&mut self, req: JoinRequest, now: Now) -> Reply<JoinOutcome> {
        let id = req.member_id.clone();
        if self.state == GroupState::Dead {
            return Reply::Now(JoinOutcome::error(&id, codes::COORDINATOR_NOT_AVAILABLE));
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinOutcome::error(&id, codes::INCONSISTENT_GROUP_PROTOCOL));
        }
        if self.pending_members.contains_key(&id) {
            if req.instance_id.is_some() {
                // Kafka throws here (a pending id is never static); answer
                // as its IllegalStateException surfaces.
                return Reply::Now(JoinOutcome::error(&id, codes::UNKNOWN_SERVER_ERROR));
            }
            self.pending_members.remove(&id);
            return self.add_member_and_rebalance(id, req, now);
        }
        let instance_unknown = req
            .instance_id
            .as_ref()
            .is_some_and(|i| !self.static_members.contains_key(i));
        if self.static_member_fenced(req.instance_id.as_deref(), &id) {
            return Reply::Now(JoinOutcome::error(&id, codes::FENCED_INSTANCE_ID));
        }
        if !self.members.contains_key(&id) || instance_unknown {
            return Reply::Now(JoinOutcome::error(&id, codes::UNKNOWN_MEMBER_ID));
        }
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let matches = self
            .members
            .get(&id)
            .is_some_and(|m| m.matches(&req.protocols));
        match self.state {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(req, now),
            GroupState::CompletingRebalance => {
                if matches {
                    // It missed its JoinGroup answer: give it again.
                    Reply::Now(self.join_outcome_for(&id))
                } else {
                    self.update_member_and_rebalance(req, now)
                }
            }
            GroupState::Stable => {
                if is_leader || !matches {
                    // The leader rejoining forces a rebalance (it may have
                    // seen a change the metadata does not show).
                    self.update_member_and_rebalance(req, now)
                } else {
                    let mut o = self.join_outcome_for(&id);
                    o.members.clear();
                    Reply::Now(o)
                }
            }
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(JoinOutcome::error(&id, codes::UNKNOWN_MEMBER_ID))
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        req: JoinRequest,
        now: Now,
    ) -> Reply<JoinOutcome> {
        if self.state == GroupState::PreparingRebalance && self.generation == 0 {
            self.new_member_added = true;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member_id.clone());
        }
        let (tx, rx) = oneshot::channel();
        let order = self.next_order;
        self.next_order += 1;
        self.members.insert(
            member_id.clone(),
            Member {
                id: member_id,
                instance_id: req.instance_id,
                client_id: req.client_id,
                client_host: req.client_host,
                rebalance_timeout: req.rebalance_timeout,
                session_timeout: req.session_timeout,
                protocol_type: req.protocol_type,
                protocols: req.protocols,
                assignment: Bytes::new(),
                join_waiter: Some(tx),
                sync_waiter: None,
                is_new: true,
                deadline: now.at + NEW_MEMBER_JOIN_TIMEOUT,
                order,
            },
        );
        self.maybe_prepare_rebalance(now);
        Reply::Later(rx)
    }

    /// Records a rejoin's protocols and timeouts and parks its JoinGroup.
    fn update_member_and_rebalance(&mut self, req: JoinRequest, now: Now) -> Reply<JoinOutcome> {
        let rx = self.park_join(&req);
        self.maybe_prepare_rebalance(now);
        rx
    }

    fn park_join(&mut self, req: &JoinRequest) -> Reply<JoinOutcome> {
        let Some(m) = self.members.get_mut(&req.member_id) else {
            return Reply::Now(JoinOutcome::error(&req.member_id, codes::UNKNOWN_MEMBER_ID));
        };
        m.protocols = req.protocols.clone();
        m.rebalance_timeout = req.rebalance_timeout;
        m.session_timeout = req.session_timeout;
        let (tx, rx) = oneshot::channel();
        if let Some(old) = m.join_waiter.replace(tx) {
            let _ = old.send(JoinOutcome::error(&req.member_id, codes::UNKNOWN_MEMBER_ID));
        }
        Reply::Later(rx)
    }

    /// A known static member rejoined with a new member id: the old id is
    /// fenced and replaced. In a Stable group whose protocol would not
    /// change this needs no rebalance (KIP-345): the member gets the current
    /// generation and its old assignment at SyncGroup.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        req: JoinRequest,
        now: Now,
    ) -> Reply<JoinOutcome> {
        let current_leader = self.leader.clone().unwrap_or_default();
        let Some(mut m) = self.members.remove(old_id) else {
            return self.add_member_and_rebalance(new_id, req, now);
        };
        m.answer_join(JoinOutcome::error(old_id, codes::FENCED_INSTANCE_ID));
        m.answer_sync(SyncOutcome::error(codes::FENCED_INSTANCE_ID));
        m.id = new_id.clone();
        m.touch(now.at);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        if let Some(instance) = &req.instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.clone());
        }
        self.members.insert(new_id.clone(), m);
        let mut req = req;
        req.member_id = new_id.clone();
        let reply = self.park_join(&req);
        match self.state {
            GroupState::Stable => {
                if self.select_protocol() == self.protocol {
                    let outcome = JoinOutcome {
                        error: codes::NONE,
                        member_id: new_id.clone(),
                        generation: self.generation,
                        protocol_type: self.protocol_type.clone(),
                        protocol: self.protocol.clone(),
                        // The old leader id, so a replaced leader does not
                        // assign (a Stable group would not pass it on).
                        leader: current_leader,
                        members: Vec::new(),
                    };
                    if let Some(m) = self.members.get_mut(&new_id) {
                        m.answer_join(outcome);
                    }
                } else {
                    self.maybe_prepare_rebalance(now);
                }
            }
            GroupState::CompletingRebalance => self.prepare_rebalance(now),
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => self.maybe_prepare_rebalance(now),
        }
        reply
    }

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.state == GroupState::Empty {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols
                    .iter()
                    .any(|(name, _)| self.members.values().all(|m| m.supports(name)))
        }
    }

    fn static_member_fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        instance_id
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|current| current != member_id)
    }

    /// Kafka's `validateCurrentMember`: a given instance id must map to this
    /// member id (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID when
    /// unknown), and the member must exist.
    fn validate_current_member(&self, member_id: &str, instance_id: Option<&str>) -> Option<i16> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(current) if current != member_id => return Some(codes::FENCED_INSTANCE_ID),
                Some(_) => {}
                None => return Some(codes::UNKNOWN_MEMBER_ID),
            }
        }
        (!self.members.contains_key(member_id)).then_some(codes::UNKNOWN_MEMBER_ID)
    }

    fn awaiting_join_count(&self) -> usize {
        self.members.values().filter(|m| m.awaiting_join()).count()
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(Member::awaiting_join)
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    fn maybe_prepare_rebalance(&mut self, now: Now) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        ) {
            self.prepare_rebalance(now);
        }
    }

    /// Starts a join phase (Kafka's `prepareRebalance`).
    fn prepare_rebalance(&mut self, now: Now) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_and_propagate_assignment_error(codes::REBALANCE_IN_PROGRESS, now);
        }
        self.sync_deadline = None;
        let timeout = self.max_rebalance_timeout();
        self.join_timer = Some(if self.state == GroupState::Empty {
            let delay = self.initial_delay;
            JoinTimer {
                deadline: now.at + delay,
                initial: Some(InitialDelay {
                    delay,
                    remaining: timeout.saturating_sub(delay),
                }),
            }
        } else {
            JoinTimer {
                deadline: now.at + timeout,
                initial: None,
            }
        });
        self.transition(GroupState::PreparingRebalance, now);
        tracing::info!(
            group = %self.id,
            generation = self.generation,
            members = self.members.len(),
            "preparing to rebalance"
        );
        self.try_complete_join(now);
    }

    /// Completes the join phase early once every member rejoined (not
    /// during the initial delay, which always runs its course).
    fn try_complete_join(&mut self, now: Now) {
        let Some(timer) = self.join_timer else {
            return;
        };
        if self.state == GroupState::PreparingRebalance
            && timer.initial.is_none()
            && self.all_members_joined()
        {
            self.complete_join(now);
        }
    }

    /// The join phase ends (Kafka's `onCompleteJoin`).
    fn complete_join(&mut self, now: Now) {
        self.join_timer = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %self.id, member = %id, "removing a member that did not rejoin in time");
            self.remove(id);
        }
        if self.state == GroupState::Dead {
            return;
        }
        if !self.elect_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined remain: wait again
            // (their sessions will remove them if they never come back).
            self.join_timer = Some(JoinTimer {
                deadline: now.at + self.max_rebalance_timeout(),
                initial: None,
            });
            return;
        }
        self.init_next_generation(now);
        if self.state == GroupState::Empty {
            tracing::info!(group = %self.id, generation = self.generation, "group is now empty");
            return;
        }
        tracing::info!(
            group = %self.id,
            generation = self.generation,
            protocol = self.protocol.as_deref().unwrap_or(""),
            members = self.members.len(),
            "group stabilised its membership"
        );
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let outcome = self.join_outcome_for(&id);
            if let Some(m) = self.members.get_mut(&id) {
                m.answer_join(outcome);
                m.touch(now.at);
                m.is_new = false;
            }
            self.pending_sync.insert(id);
        }
        self.sync_deadline = Some(now.at + self.max_rebalance_timeout());
    }

    /// Keeps the leader if it rejoined, else picks the oldest member that
    /// did. False when no member rejoined.
    fn elect_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self.members.get(&leader).is_some_and(Member::awaiting_join) {
            return true;
        }
        match self
            .members
            .values()
            .filter(|m| m.awaiting_join())
            .min_by_key(|m| m.order)
        {
            Some(m) => {
                self.leader = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    fn init_next_generation(&mut self, now: Now) {
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.subscribed = self.compute_subscribed();
            self.transition(GroupState::Empty, now);
        } else {
            self.protocol = self.select_protocol();
            self.subscribed = self.compute_subscribed();
            self.transition(GroupState::CompletingRebalance, now);
        }
        self.pending_sync.clear();
    }

    /// The protocol every member supports that most members prefer (each
    /// votes for its most preferred candidate); ties go to the one the
    /// oldest member's vote met first.
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().min_by_key(|m| m.order)?;
        let candidates: HashSet<&str> = first
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut voters: Vec<&Member> = self.members.values().collect();
        voters.sort_by_key(|m| m.order);
        let mut tally: Vec<(&str, usize)> = Vec::new();
        for m in voters {
            if let Some(v) = m.vote(&candidates) {
                match tally.iter_mut().find(|(n, _)| *n == v) {
                    Some(t) => t.1 += 1,
                    None => tally.push((v, 1)),
                }
            }
        }
        let best = tally.iter().map(|(_, c)| *c).max()?;
        tally
            .into_iter()
            .find(|(_, c)| *c == best)
            .map(|(n, _)| n.to_string())
    }

    fn compute_subscribed(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol.as_deref()?;
        let mut all = BTreeSet::new();
        for m in self.members.values() {
            all.extend(subscription::topics(&m.metadata(protocol))?);
        }
        Some(all)
    }

    /// Whether a member may be consuming `topic` (true when unknown).
    pub fn is_subscribed(&self, topic: &str) -> bool {
        self.subscribed.as_ref().is_none_or(|s| s.contains(topic))
    }

    /// The subscribed topics, if known.
    pub fn subscribed(&self) -> Option<&BTreeSet<String>> {
        self.subscribed.as_ref()
    }

    fn join_outcome_for(&self, member_id: &str) -> JoinOutcome {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id {
            let protocol = self.protocol.clone().unwrap_or_default();
            let mut ms: Vec<&Member> = self.members.values().collect();
            ms.sort_by_key(|m| m.order);
            ms.into_iter()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinOutcome {
            error: codes::NONE,
            member_id: member_id.to_string(),
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader,
            members,
        }
    }

    // ---- SyncGroup ------------------------------------------------------

    /// Handles a SyncGroup.
    pub fn sync(&mut self, req: SyncRequest, now: Now) -> Reply<SyncOutcome> {
        let fail = |code| Reply::Now(SyncOutcome::error(code));
        if self.state == GroupState::Dead {
            return fail(codes::COORDINATOR_NOT_AVAILABLE);
        }
        if let Some(e) = self.validate_current_member(&req.member_id, req.instance_id.as_deref()) {
            return fail(e);
        }
        if req.generation != self.generation {
            return fail(codes::ILLEGAL_GENERATION);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|t| self.protocol_type.as_ref() != Some(t))
            || req
                .protocol
                .as_ref()
                .is_some_and(|p| self.protocol.as_ref() != Some(p))
        {
            return fail(codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        match self.state {
            GroupState::Empty => fail(codes::UNKNOWN_MEMBER_ID),
            GroupState::PreparingRebalance => fail(codes::REBALANCE_IN_PROGRESS),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(&req.member_id)
                    && let Some(old) = m.sync_waiter.replace(tx)
                {
                    let _ = old.send(SyncOutcome::error(codes::UNKNOWN_MEMBER_ID));
                }
                self.sync_received(&req.member_id);
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    tracing::info!(
                        group = %self.id,
                        generation = self.generation,
                        members = self.members.len(),
                        "assignment received from the leader"
                    );
                    let given: HashMap<String, Bytes> = req.assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.get(&m.id).cloned().unwrap_or_default();
                    }
                    self.propagate_assignment(codes::NONE, now);
                    self.transition(GroupState::Stable, now);
                }
                Reply::Later(rx)
            }
            GroupState::Stable => {
                self.sync_received(&req.member_id);
                let Some(m) = self.members.get_mut(&req.member_id) else {
                    return fail(codes::UNKNOWN_MEMBER_ID);
                };
                m.touch(now.at);
                Reply::Now(SyncOutcome {
                    error: codes::NONE,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    assignment: m.assignment.clone(),
                })
            }
            GroupState::Dead => fail(codes::COORDINATOR_NOT_AVAILABLE),
        }
    }

    fn sync_received(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
    }

    /// Answers every parked SyncGroup (with its assignment, or `error`).
    fn propagate_assignment(&mut self, error: i16, now: Now) {
        let (protocol_type, protocol) = if error == codes::NONE {
            (self.protocol_type.clone(), self.protocol.clone())
        } else {
            (None, None)
        };
        for m in self.members.values_mut() {
            let outcome = SyncOutcome {
                error,
                protocol_type: protocol_type.clone(),
                protocol: protocol.clone(),
                assignment: m.assignment.clone(),
            };
            if m.answer_sync(outcome) {
                m.touch(now.at);
            }
        }
    }

    fn reset_and_propagate_assignment_error(&mut self, error: i16, now: Now) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate_assignment(error, now);
    }

    // ---- Heartbeat, LeaveGroup, offset commits ------------------------------

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

    /// TxnOffsetCommit's member checks (spec §2.3 step 4): looser than a
    /// plain commit. No member information is accepted in any state; a
    /// member id or instance id given must be current, and a generation
    /// given (≥ 0) must match.
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
        if (!member_id.is_empty() || instance_id.is_some())
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

    /// The earliest time [`Group::tick`] has something to do.
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
            group_id: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            state: self.state.name(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(initial_ms: u64) -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay: Duration::from_millis(initial_ms),
            ..GroupConfig::default()
        }
    }

    fn at(base: Instant, ms: u64) -> Now {
        Now {
            at: base + Duration::from_millis(ms),
            wall_ms: ms as i64,
        }
    }

    fn req(member_id: &str, protocols: &[&str]) -> JoinRequest {
        JoinRequest {
            member_id: member_id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: String::new(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
                .collect(),
            require_known_member_id: false,
        }
    }

    fn ids() -> impl FnMut(&str) -> String {
        let mut n = 0;
        move |prefix: &str| {
            n += 1;
            format!("{prefix}-{n}")
        }
    }

    fn answered(r: Reply<JoinOutcome>) -> Option<JoinOutcome> {
        match r {
            Reply::Now(o) => Some(o),
            Reply::Later(mut rx) => rx.try_recv().ok(),
        }
    }

    #[test]
    fn the_protocol_most_members_prefer_among_those_all_support_is_chosen() {
        let t0 = Instant::now();
        let mut g = Group::new("g", &cfg(0), at(t0, 0));
        let mut new_id = ids();
        let a = g.join(
            req("", &["sticky", "range", "roundrobin"]),
            at(t0, 0),
            &mut new_id,
        );
        let b = g.join(req("", &["roundrobin", "range"]), at(t0, 0), &mut new_id);
        let c = g.join(req("", &["range", "roundrobin"]), at(t0, 0), &mut new_id);
        // With no initial delay, the phase still ends by its timer: one
        // (zero) extension for the members that arrived, then completion.
        g.tick(at(t0, 1));
        g.tick(at(t0, 1));
        let outcomes: Vec<JoinOutcome> = [a, b, c].into_iter().filter_map(answered).collect();
        assert_eq!(outcomes.len(), 3);
        // "sticky" is not supported by all; votes: a→range, b→roundrobin,
        // c→range.
        assert!(
            outcomes
                .iter()
                .all(|o| o.protocol.as_deref() == Some("range"))
        );
        let leader = outcomes
            .iter()
            .find(|o| !o.members.is_empty())
            .expect("a leader");
        assert_eq!(leader.member_id, "c-1", "the first member leads");
        assert_eq!(leader.members[1].metadata, Bytes::from("meta-range"));
    }

    #[test]
    fn the_initial_delay_is_extended_while_new_members_arrive() {
        let t0 = Instant::now();
        let mut g = Group::new("g", &cfg(100), at(t0, 0));
        let mut new_id = ids();
        let mut a = g.join(req("", &["range"]), at(t0, 0), &mut new_id);
        assert_eq!(g.state(), GroupState::PreparingRebalance);
        // A second member arrives during the delay: another delay follows.
        let _b = g.join(req("", &["range"]), at(t0, 50), &mut new_id);
        g.tick(at(t0, 100));
        assert_eq!(g.state(), GroupState::PreparingRebalance);
        assert_eq!(g.next_deadline(), Some(t0 + Duration::from_millis(200)));
        if let Reply::Later(rx) = &mut a {
            assert!(rx.try_recv().is_err(), "still waiting");
        }
        g.tick(at(t0, 200));
        assert_eq!(g.state(), GroupState::CompletingRebalance);
        assert_eq!((g.generation(), g.member_count()), (1, 2));
        assert!(answered(a).is_some_and(|o| o.error == codes::NONE));
    }

    #[test]
    fn a_join_while_completing_answers_parked_syncs_with_rebalance_in_progress() {
        let t0 = Instant::now();
        let mut g = Group::new("g", &cfg(0), at(t0, 0));
        let mut new_id = ids();
        let a = g.join(req("", &["range"]), at(t0, 0), &mut new_id);
        let b = g.join(req("", &["range"]), at(t0, 0), &mut new_id);
        g.tick(at(t0, 0));
        g.tick(at(t0, 0));
        let (a, b) = (answered(a).expect("a"), answered(b).expect("b"));
        assert_eq!(g.state(), GroupState::CompletingRebalance);
        let follower = if a.members.is_empty() { &a } else { &b };
        let parked = g.sync(
            SyncRequest {
                generation: follower.generation,
                member_id: follower.member_id.clone(),
                instance_id: None,
                protocol_type: None,
                protocol: None,
                assignments: Vec::new(),
            },
            at(t0, 1),
        );
        let Reply::Later(mut rx) = parked else {
            panic!("a follower's SyncGroup waits for the leader's");
        };
        assert!(rx.try_recv().is_err());
        let _c = g.join(req("", &["range"]), at(t0, 2), &mut new_id);
        assert_eq!(g.state(), GroupState::PreparingRebalance);
        assert_eq!(
            rx.try_recv().expect("answered").error,
            codes::REBALANCE_IN_PROGRESS
        );
        assert_eq!(
            g.heartbeat(&a.member_id, None, a.generation, at(t0, 3)),
            codes::REBALANCE_IN_PROGRESS
        );
    }
}
