//! One consumer-protocol group (KIP-848), sans I/O: Kafka 4.0's
//! ConsumerGroupHeartbeat rules. A heartbeat joins (member epoch 0), keeps
//! a member alive and reports what it owns, or leaves (-1; -2 for a static
//! member that will be back). A change of subscriptions, or of the
//! subscribed topics' metadata, bumps the group epoch; the group then
//! computes a new target assignment with its assignor
//! ([`super::assignor`]) and each member reconciles towards its own target
//! on its own heartbeats ([`super::member::reconcile`]): partitions are
//! revoked before they are given to anyone else, and a member joining or
//! leaving moves only the partitions that change hands. Members whose session
//! ends, or that do not revoke within their rebalance timeout, are fenced
//! (removed), which also bumps the epoch.
//!
//! Every change the coordinator must journal comes back as a
//! [`ConsumerRecord`]. The coordinator runs an operation on a copy of the
//! group, journals its records, and only then changes the group itself by
//! applying them ([`ConsumerGroup::apply`], the same [`ConsumerModel::apply`]
//! a load replays); a failed write leaves the group as it was.
//! [`ConsumerGroup::restore`] rebuilds a group from its model after a restart
//! or a shard takeover. Time is passed in; nothing here blocks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use super::assignor::{self, Assignment, AssignorMember, TopicId};
use super::member::{self, LEFT_STATIC_EPOCH, Member, MemberState, Progress, Subscription};
use super::model::{ConsumerModel, ConsumerRecord};
use crate::codes;
use crate::group::now::Now;

mod targets;

/// What the group needs to know about topics (the log manager in a broker).
pub trait Topics {
    /// A topic's id and partition count.
    fn lookup(&self, name: &str) -> Option<(TopicId, i32)>;
    /// Every topic name (for regular-expression subscriptions).
    fn names(&self) -> Vec<String>;
    /// Changes whenever a topic is created or deleted or gains partitions.
    fn version(&self) -> u64;
}

/// The consumer protocol's broker settings (Kafka's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// group.consumer.session.timeout.ms
    pub session_timeout: Duration,
    /// group.consumer.heartbeat.interval.ms
    pub heartbeat_interval: Duration,
    /// group.consumer.max.size
    pub max_size: usize,
    /// group.consumer.assignors (the first is the default)
    pub assignors: Vec<String>,
    /// The longest regular expression a member may subscribe with.
    pub max_regex_bytes: usize,
    /// How many distinct regular expressions one group may hold.
    pub max_regexes: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            max_size: i32::MAX as usize,
            assignors: vec![assignor::UNIFORM.into(), assignor::RANGE.into()],
            max_regex_bytes: 1024,
            max_regexes: 256,
        }
    }
}

/// A ConsumerGroupHeartbeat as the group sees it (None: unchanged).
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub topic_names: Option<Vec<String>>,
    pub topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub error: i16,
    pub message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when it changed or the request was full.
    pub assignment: Option<Assignment>,
}

/// Kafka's consumer group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerState::Empty => "Empty",
            ConsumerState::Assigning => "Assigning",
            ConsumerState::Reconciling => "Reconciling",
            ConsumerState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Deadlines {
    session: Instant,
    /// Set while the member is asked to revoke partitions.
    revocation: Option<Instant>,
}

/// A regular expression's matches, as of a topics version.
#[derive(Debug, Clone)]
struct Resolved {
    version: u64,
    topics: BTreeSet<String>,
}

/// The version of a regular expression not resolved yet (no topics
/// version equals it, so the next computation resolves it).
const UNRESOLVED: u64 = u64::MAX;

type Failure = (i16, String);

/// One consumer-protocol group.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    id: String,
    /// What its records say; changed only by [`Self::apply`].
    model: ConsumerModel,
    /// Derived from the members: instance id → member id.
    static_members: HashMap<String, String>,
    /// Derived from the members: who owns each partition now (assigned or
    /// pending revocation).
    owners: HashMap<(TopicId, i32), String>,
    /// Not journaled: the topics version `subscribed` was computed at (None:
    /// recompute).
    subscribed_at: Option<u64>,
    /// Not journaled: resolved regular expressions.
    regexes: HashMap<String, Resolved>,
    /// Not journaled: each member's session and revocation deadlines.
    deadlines: HashMap<String, Deadlines>,
    /// Not journaled: when the group last changed state (a load restarts it).
    state_ms: i64,
}

impl ConsumerGroup {
    /// A new, empty group.
    pub fn new(id: &str, now: Now) -> ConsumerGroup {
        ConsumerGroup {
            id: id.to_string(),
            model: ConsumerModel::default(),
            static_members: HashMap::new(),
            owners: HashMap::new(),
            subscribed_at: None,
            regexes: HashMap::new(),
            deadlines: HashMap::new(),
            state_ms: now.wall_ms,
        }
    }

    /// A group as its journaled records left it: the model's records
    /// replayed through [`Self::apply`], every member with a fresh session
    /// (as Kafka does when a coordinator loads a group).
    pub fn restore(
        id: &str,
        model: &ConsumerModel,
        cfg: &ConsumerConfig,
        now: Now,
    ) -> ConsumerGroup {
        let mut g = ConsumerGroup::new(id, now);
        for rec in model.records() {
            g.apply(&rec);
        }
        for m in g.model.members.values() {
            g.deadlines.insert(
                m.id.clone(),
                Deadlines {
                    session: now.at + cfg.session_timeout,
                    revocation: (m.progress.state == MemberState::UnrevokedPartitions)
                        .then(|| now.at + rebalance_timeout(m)),
                },
            );
        }
        g
    }

    /// Applies one of its records: the model, and what is derived from the
    /// members (static instance ids, partition owners). The one way the
    /// group's durable state changes.
    pub fn apply(&mut self, rec: &ConsumerRecord) {
        let old = self.model.apply(rec);
        match rec {
            ConsumerRecord::Member(m) => {
                let before = old.member.as_ref().map(|o| &o.progress);
                self.set_owners(&m.id, before, Some(&m.progress));
                if let Some(i) = &m.sub.instance_id {
                    self.static_members.insert(i.clone(), m.id.clone());
                }
            }
            ConsumerRecord::Removed { member } => {
                if let Some(old) = &old.member {
                    if let Some(i) = &old.sub.instance_id
                        && self.static_members.get(i).is_some_and(|x| x == member)
                    {
                        self.static_members.remove(i);
                    }
                    self.set_owners(member, Some(&old.progress), None);
                }
                self.deadlines.remove(member);
            }
            _ => {}
        }
    }

    /// After `scratch`'s records were applied here: takes what is not
    /// journaled from it (sessions and revocation deadlines, resolved
    /// expressions, when the state last changed).
    pub fn adopt_unjournaled(&mut self, scratch: ConsumerGroup) {
        self.subscribed_at = scratch.subscribed_at;
        self.regexes = scratch.regexes;
        self.deadlines = scratch.deadlines;
        self.state_ms = scratch.state_ms;
    }

    /// Whether `other` holds the same durable state and what derives from
    /// it (applying a scratch copy's records must reproduce the copy).
    pub fn same_state(&self, other: &ConsumerGroup) -> bool {
        self.model == other.model
            && self.owners == other.owners
            && self.static_members == other.static_members
    }

    /// What its records say.
    pub fn model(&self) -> &ConsumerModel {
        &self.model
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn epoch(&self) -> i32 {
        self.model.epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.model.assignment_epoch
    }

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.model.members.values()
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.model.members.get(id)
    }

    pub fn target(&self, member: &str) -> Option<&Assignment> {
        self.model.targets.get(member)
    }

    pub fn member_count(&self) -> usize {
        self.model.members.len()
    }

    /// Wall-clock ms of the last time the group became empty or was created.
    pub fn state_ms(&self) -> i64 {
        self.state_ms
    }

    pub fn state(&self) -> ConsumerState {
        if self.model.members.is_empty() {
            ConsumerState::Empty
        } else if self.model.epoch > self.model.assignment_epoch {
            ConsumerState::Assigning
        } else if self
            .model
            .members
            .values()
            .any(|m| !m.reconciled_to(self.model.assignment_epoch))
        {
            ConsumerState::Reconciling
        } else {
            ConsumerState::Stable
        }
    }

    /// The subscribed topic names (for offset retention and DeleteTopics).
    pub fn subscribed_topics(&self) -> impl Iterator<Item = &String> {
        self.model.subscribed.keys()
    }

    /// The assignor the group runs: the one most members ask for, else the
    /// configured default.
    pub fn assignor<'a>(&'a self, cfg: &'a ConsumerConfig) -> &'a str {
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.model.members.values() {
            if let Some(a) = m.sub.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        cfg.assignors
            .iter()
            .map(String::as_str)
            .max_by_key(|a| {
                let pos = cfg.assignors.iter().position(|x| x == a).unwrap_or(0);
                (votes.get(a).copied().unwrap_or(0), std::cmp::Reverse(pos))
            })
            .filter(|a| votes.contains_key(a))
            .or_else(|| cfg.assignors.first().map(String::as_str))
            .unwrap_or(assignor::UNIFORM)
    }

    /// Checks an offset commit (OffsetCommit v9+, TxnOffsetCommit) made with
    /// `member_id` and `epoch`: from outside the group (epoch < 0) only while
    /// it is empty, from a member only at its current epoch.
    pub fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), i16> {
        if epoch < 0 && self.model.members.is_empty() {
            return Ok(());
        }
        self.validate_member_epoch(member_id, epoch)
    }

    /// Checks an OffsetCommit at `version`: as [`Self::validate_commit`],
    /// and a member commits with v9+ only (Kafka's UNSUPPORTED_VERSION:
    /// the version carrying member epochs).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        epoch: i32,
        version: i16,
    ) -> Result<(), i16> {
        let outside = epoch < 0 && self.model.members.is_empty();
        if !outside && version < 9 && self.model.members.contains_key(member_id) {
            return Err(codes::UNSUPPORTED_VERSION);
        }
        self.validate_commit(member_id, epoch)
    }

    /// Checks a TxnOffsetCommit: as an offset commit, except that one
    /// naming no member at all (generation -1, member id "", no instance
    /// id: a producer that sends offsets with the group id alone) is taken,
    /// as Kafka takes it.
    pub fn validate_txn_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        epoch: i32,
    ) -> Result<(), i16> {
        if epoch == -1 && member_id.is_empty() && instance_id.is_none() {
            return Ok(());
        }
        self.validate_commit(member_id, epoch)
    }

    fn validate_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), i16> {
        let Some(m) = self.model.members.get(member_id) else {
            return Err(codes::UNKNOWN_MEMBER_ID);
        };
        if m.epoch() != epoch {
            return Err(codes::STALE_MEMBER_EPOCH);
        }
        Ok(())
    }

    /// Checks an OffsetFetch v9+ made by a member (`None`: from outside).
    pub fn validate_fetch(&self, member: Option<(&str, i32)>) -> Result<(), i16> {
        match member {
            None => Ok(()),
            Some((id, epoch)) => match self.model.members.get(id) {
                None => Err(codes::UNKNOWN_MEMBER_ID),
                Some(m) if m.epoch() != epoch => Err(codes::STALE_MEMBER_EPOCH),
                Some(_) => Ok(()),
            },
        }
    }

    /// When [`ConsumerGroup::tick`] must next run.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines
            .values()
            .flat_map(|d| [Some(d.session), d.revocation])
            .flatten()
            .min()
    }

    /// Fences members whose session ended or that did not revoke in time.
    pub fn tick(&mut self, now: Now) -> Vec<ConsumerRecord> {
        let due: Vec<(String, &'static str)> = self
            .deadlines
            .iter()
            .filter_map(|(id, d)| {
                if d.session <= now.at {
                    Some((id.clone(), "its session timed out"))
                } else if d.revocation.is_some_and(|r| r <= now.at) {
                    Some((
                        id.clone(),
                        "it did not revoke partitions within its rebalance timeout",
                    ))
                } else {
                    None
                }
            })
            .collect();
        let mut changes = Vec::new();
        for (id, why) in due {
            tracing::info!(group = %self.id, member = %id, "member fenced from the group because {why}");
            self.fence(&id, now, &mut changes);
        }
        changes
    }

    /// ConsumerGroupHeartbeat. `new_id` makes a member id for a v0 join
    /// without one.
    pub fn heartbeat(
        &mut self,
        req: Heartbeat,
        cfg: &ConsumerConfig,
        topics: &dyn Topics,
        now: Now,
        new_id: &mut dyn FnMut() -> String,
    ) -> (Reply, Vec<ConsumerRecord>) {
        let interval = cfg.heartbeat_interval.as_millis().min(i32::MAX as u128) as i32;
        let fail = |member_id: &str, epoch: i32, (code, msg): Failure| Reply {
            error: code,
            message: Some(msg),
            member_id: member_id.to_string(),
            member_epoch: epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if req.member_epoch == -1 || req.member_epoch == LEFT_STATIC_EPOCH {
            let mut changes = Vec::new();
            return match self.leave(&req, now, &mut changes) {
                Ok(epoch) => (
                    Reply {
                        error: codes::NONE,
                        message: None,
                        member_id: req.member_id.clone(),
                        member_epoch: epoch,
                        heartbeat_interval_ms: 0,
                        assignment: None,
                    },
                    changes,
                ),
                Err(f) => (fail(&req.member_id, req.member_epoch, f), Vec::new()),
            };
        }
        let mut changes = Vec::new();
        match self.join_or_beat(req, cfg, topics, now, new_id, &mut changes) {
            Ok((member_id, epoch, assignment)) => (
                Reply {
                    error: codes::NONE,
                    message: None,
                    member_id,
                    member_epoch: epoch,
                    heartbeat_interval_ms: interval,
                    assignment,
                },
                changes,
            ),
            Err((f, member_id, epoch)) => (fail(&member_id, epoch, f), Vec::new()),
        }
    }

    #[allow(clippy::type_complexity)]
    fn join_or_beat(
        &mut self,
        req: Heartbeat,
        cfg: &ConsumerConfig,
        topics: &dyn Topics,
        now: Now,
        new_id: &mut dyn FnMut() -> String,
        changes: &mut Vec<ConsumerRecord>,
    ) -> Result<(String, i32, Option<Assignment>), (Failure, String, i32)> {
        let joining = req.member_epoch == 0;
        let member_id = if req.member_id.is_empty() && joining {
            new_id()
        } else {
            req.member_id.clone()
        };
        let err = |f: Failure| (f, member_id.clone(), req.member_epoch);
        if let Some(a) = &req.server_assignor
            && !cfg.assignors.contains(a)
        {
            return Err(err((
                codes::UNSUPPORTED_ASSIGNOR,
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    cfg.assignors.join(", ")
                ),
            )));
        }
        if let Some(r) = req.topic_regex.as_deref().filter(|r| !r.is_empty()) {
            self.check_regex(r, cfg).map_err(err)?;
        }
        if self.model.members.len() >= cfg.max_size && !self.model.members.contains_key(&member_id)
        {
            return Err(err((
                codes::GROUP_MAX_SIZE_REACHED,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    cfg.max_size
                ),
            )));
        }
        // The member as it was (a new one if it joins), and the member it
        // replaces (a static member rejoining under a new member id).
        let (before, replaced) = self
            .resolve_member(&member_id, &req, joining)
            .map_err(err)?;
        let mut m = before.clone();
        let is_new = !self.model.members.contains_key(&member_id);
        if let Some(i) = &req.instance_id {
            m.sub.instance_id = Some(i.clone());
        }
        if let Some(r) = &req.rack_id {
            m.sub.rack_id = Some(r.clone());
        }
        if req.rebalance_timeout_ms != -1 {
            m.sub.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(a) = &req.server_assignor {
            m.sub.server_assignor = Some(a.clone());
        }
        if let Some(names) = &req.topic_names {
            m.sub.topic_names = names.iter().cloned().collect();
        }
        if let Some(r) = &req.topic_regex {
            m.sub.topic_regex = (!r.is_empty()).then(|| r.clone());
        }
        m.sub.client_id = req.client_id.clone();
        m.sub.client_host = req.client_host.clone();
        // A static member taking its old place keeps the old subscription.
        let subscription_changed = (is_new && replaced.is_none())
            || m.sub.topic_names != before.sub.topic_names
            || m.sub.topic_regex != before.sub.topic_regex;
        // A regular expression no member uses yet is resolved after this
        // heartbeat, as Kafka 4.0 resolves them off the request path: this
        // heartbeat's target has the member's named topics, the next
        // heartbeat of the group adds what the expression matches.
        let fresh_regex = m.sub.topic_regex.clone().filter(|r| {
            before.sub.topic_regex.as_ref() != Some(r)
                && !self
                    .model
                    .members
                    .iter()
                    .any(|(id, o)| *id != member_id && o.sub.topic_regex.as_ref() == Some(r))
        });

        if let Some(old) = replaced {
            tracing::info!(group = %self.id, member = %member_id, replaced = %old,
                "static member rejoins under a new member id");
            // Its target moves to the new member id (Kafka recomputes it
            // with the new member in the old one's place).
            let target = self.model.targets.get(&old).cloned();
            self.remove_member(&old, changes);
            if let Some(assignment) = target {
                changes.push(ConsumerRecord::Target {
                    member: member_id.clone(),
                    assignment: assignment.clone(),
                });
                self.model.targets.insert(member_id.clone(), assignment);
            }
        }
        if let Some(i) = &m.sub.instance_id {
            self.static_members.insert(i.clone(), member_id.clone());
        }
        if is_new {
            tracing::info!(group = %self.id, member = %member_id, "member joins the consumer group");
        }
        self.model.members.insert(member_id.clone(), m.clone());
        self.deadlines.insert(
            member_id.clone(),
            Deadlines {
                session: now.at + cfg.session_timeout,
                revocation: self.deadlines.get(&member_id).and_then(|d| d.revocation),
            },
        );

        // 1. The group epoch moves when a subscription or the subscribed
        //    topics changed.
        let mut bump = subscription_changed;
        if bump || self.subscribed_at != Some(topics.version()) {
            let meta = self.subscription_metadata(topics, fresh_regex.as_deref());
            if meta != self.model.subscribed {
                bump = true;
                changes.push(ConsumerRecord::Metadata(meta.clone()));
                self.model.subscribed = meta;
            }
            // With a regular expression left unresolved, the next heartbeat
            // computes the subscribed topics again.
            self.subscribed_at = fresh_regex.is_none().then(|| topics.version());
        }
        let epochs_before = (self.model.epoch, self.model.assignment_epoch);
        if bump {
            self.model.epoch += 1;
        }
        // 2. A new target assignment for the new epoch.
        if self.model.epoch > self.model.assignment_epoch {
            self.compute_targets(cfg, changes);
            self.model.assignment_epoch = self.model.epoch;
        }
        if (self.model.epoch, self.model.assignment_epoch) != epochs_before {
            changes.push(ConsumerRecord::Epochs {
                epoch: self.model.epoch,
                assignment_epoch: self.model.assignment_epoch,
            });
        }
        // 3. The member's next step towards its target.
        let target = self
            .model
            .targets
            .get(&member_id)
            .cloned()
            .unwrap_or_default();
        let owners = &self.owners;
        let next = member::reconcile(
            &m.progress,
            self.model.assignment_epoch,
            &target,
            req.owned.as_ref(),
            &|t, p| owners.get(&(*t, p)).is_some_and(|o| *o != member_id),
        );
        let assignment_changed = next.assigned != before.progress.assigned || is_new;
        if next != m.progress {
            self.set_owners(&member_id, Some(&m.progress), Some(&next));
            if let Some(d) = self.deadlines.get_mut(&member_id) {
                d.revocation = (next.state == MemberState::UnrevokedPartitions)
                    .then(|| now.at + rebalance_timeout(&m));
            }
            m.progress = next;
        }
        if m != before || is_new {
            self.model.members.insert(member_id.clone(), m.clone());
            changes.push(ConsumerRecord::Member(Box::new(m.clone())));
        }
        let full = joining
            || (req.rebalance_timeout_ms != -1 && req.topic_names.is_some() && req.owned.is_some());
        let assignment = (full || assignment_changed).then(|| m.progress.assigned.clone());
        Ok((member_id, m.progress.epoch, assignment))
    }

    /// The member a heartbeat speaks for, and the member id it replaces.
    fn resolve_member(
        &self,
        member_id: &str,
        req: &Heartbeat,
        joining: bool,
    ) -> Result<(Member, Option<String>), Failure> {
        let fresh = || Member {
            id: member_id.to_string(),
            sub: Subscription::default(),
            progress: Progress::joining(),
        };
        let Some(instance) = &req.instance_id else {
            return match self.model.members.get(member_id) {
                Some(m) => {
                    check_epoch(m, req.member_epoch, req.owned.as_ref())?;
                    Ok((m.clone(), None))
                }
                None if joining => Ok((fresh(), None)),
                None => Err(unknown_member(member_id, &self.id)),
            };
        };
        let prior = self
            .static_members
            .get(instance)
            .and_then(|id| self.model.members.get(id));
        match prior {
            None if joining => match self.model.members.get(member_id) {
                Some(m) => {
                    check_epoch(m, req.member_epoch, req.owned.as_ref())?;
                    Ok((m.clone(), None))
                }
                None => Ok((fresh(), None)),
            },
            None => Err((
                codes::UNKNOWN_MEMBER_ID,
                format!("Instance id {instance} is unknown."),
            )),
            Some(old) if joining => {
                if old.epoch() != LEFT_STATIC_EPOCH {
                    return Err((
                        codes::UNRELEASED_INSTANCE_ID,
                        format!(
                            "Static member {member_id} with instance id {instance} cannot join the \
                             group because the instance id is owned by {} member.",
                            old.id
                        ),
                    ));
                }
                // The new member takes the old one's place and assignment.
                let mut m = old.clone();
                m.id = member_id.to_string();
                m.progress.epoch = 0;
                m.progress.previous_epoch = 0;
                let replaced = (old.id != member_id).then(|| old.id.clone());
                Ok((m, replaced))
            }
            Some(old) => {
                if old.id != member_id {
                    return Err((
                        codes::FENCED_INSTANCE_ID,
                        format!(
                            "Static member {member_id} with instance id {instance} was fenced by \
                             member {}.",
                            old.id
                        ),
                    ));
                }
                check_epoch(old, req.member_epoch, req.owned.as_ref())?;
                Ok((old.clone(), None))
            }
        }
    }

    /// A leave (-1) or a static member's temporary leave (-2): the epoch
    /// to answer with.
    fn leave(
        &mut self,
        req: &Heartbeat,
        now: Now,
        changes: &mut Vec<ConsumerRecord>,
    ) -> Result<i32, Failure> {
        let Some(instance) = &req.instance_id else {
            if !self.model.members.contains_key(&req.member_id) {
                return Err(unknown_member(&req.member_id, &self.id));
            }
            tracing::info!(group = %self.id, member = %req.member_id, "member left the consumer group");
            self.fence(&req.member_id, now, changes);
            return Ok(req.member_epoch);
        };
        let Some(id) = self.static_members.get(instance).cloned() else {
            return Err((
                codes::UNKNOWN_MEMBER_ID,
                format!("Instance id {instance} is unknown."),
            ));
        };
        if id != req.member_id {
            return Err((
                codes::FENCED_INSTANCE_ID,
                format!(
                    "Static member {} with instance id {instance} was fenced by member {id}.",
                    req.member_id
                ),
            ));
        }
        if req.member_epoch == LEFT_STATIC_EPOCH {
            let Some(m) = self.model.members.get_mut(&id) else {
                return Err(unknown_member(&id, &self.id));
            };
            tracing::info!(group = %self.id, member = %id, instance = %instance,
                "static member temporarily left the consumer group");
            let before = m.progress.clone();
            m.progress.epoch = LEFT_STATIC_EPOCH;
            m.progress.pending_revocation.clear();
            let (m, after) = (m.clone(), m.progress.clone());
            self.set_owners(&id, Some(&before), Some(&after));
            if let Some(d) = self.deadlines.get_mut(&id) {
                d.revocation = None;
            }
            changes.push(ConsumerRecord::Member(Box::new(m)));
            Ok(LEFT_STATIC_EPOCH)
        } else {
            tracing::info!(group = %self.id, member = %id, instance = %instance,
                "static member left the consumer group");
            self.fence(&id, now, changes);
            Ok(req.member_epoch)
        }
    }

    /// Removes a member and bumps the epoch (Kafka's fencing).
    fn fence(&mut self, id: &str, now: Now, changes: &mut Vec<ConsumerRecord>) {
        if !self.model.members.contains_key(id) {
            return;
        }
        self.remove_member(id, changes);
        self.model.epoch += 1;
        // Its topics may no longer be subscribed: recompute on the next heartbeat.
        self.subscribed_at = None;
        if self.model.members.is_empty() {
            self.state_ms = now.wall_ms;
            // Kafka computes the (empty) target assignment of the new epoch.
            self.model.assignment_epoch = self.model.epoch;
        }
        changes.push(ConsumerRecord::Epochs {
            epoch: self.model.epoch,
            assignment_epoch: self.model.assignment_epoch,
        });
    }

    fn remove_member(&mut self, id: &str, changes: &mut Vec<ConsumerRecord>) {
        let Some(m) = self.model.members.remove(id) else {
            return;
        };
        if let Some(i) = &m.sub.instance_id
            && self.static_members.get(i).is_some_and(|x| x == id)
        {
            self.static_members.remove(i);
        }
        self.set_owners(id, Some(&m.progress), None);
        self.model.targets.remove(id);
        self.deadlines.remove(id);
        changes.push(ConsumerRecord::Removed {
            member: id.to_string(),
        });
    }

    /// Moves the owner entries of `id` from `before` to `after`.
    fn set_owners(&mut self, id: &str, before: Option<&Progress>, after: Option<&Progress>) {
        let parts = |p: &Progress| -> Vec<(TopicId, i32)> {
            p.assigned
                .iter()
                .chain(&p.pending_revocation)
                .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                .collect()
        };
        if let Some(b) = before {
            for tp in parts(b) {
                if self.owners.get(&tp).is_some_and(|o| o == id) {
                    self.owners.remove(&tp);
                }
            }
        }
        if let Some(a) = after {
            for tp in parts(a) {
                self.owners.insert(tp, id.to_string());
            }
        }
    }
}

fn rebalance_timeout(m: &Member) -> Duration {
    Duration::from_millis(m.sub.rebalance_timeout_ms.max(0) as u64)
}

fn unknown_member(member: &str, group: &str) -> Failure {
    (
        codes::UNKNOWN_MEMBER_ID,
        format!("Member {member} is not a member of group {group}."),
    )
}

/// Kafka's epoch check: a newer epoch than the group knows is fenced; an
/// older one only passes as the previous epoch with owned partitions inside
/// the current assignment (the answer that moved it on was lost).
fn check_epoch(m: &Member, received: i32, owned: Option<&Assignment>) -> Result<(), Failure> {
    let known = m.epoch();
    if received > known {
        return Err((
            codes::FENCED_MEMBER_EPOCH,
            format!(
                "The consumer group member has a greater member epoch ({received}) than the one \
                 known by the group coordinator ({known}). The member must abandon all its \
                 partitions and rejoin."
            ),
        ));
    }
    if received < known
        && (received != m.progress.previous_epoch
            || !member::is_subset(owned, &m.progress.assigned))
    {
        return Err((
            codes::FENCED_MEMBER_EPOCH,
            format!(
                "The consumer group member has a smaller member epoch ({received}) than the one \
                 known by the group coordinator ({known}). The member must abandon all its \
                 partitions and rejoin."
            ),
        ));
    }
    Ok(())
}
