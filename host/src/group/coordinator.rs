//! The group coordinator of one shard (`super::shards`): its groups, their
//! durable committed offsets and the journal behind them, under one lock.
//! In single-node mode the one shard holds every group.
//!
//! Each operation validates its input (group id, session timeout), runs the
//! group's state machine ([`super::state`]) with the current time, journals
//! what must survive a restart, and tells the ticker when the earliest
//! deadline moved closer. Writes that a reply must wait for come back as a
//! [`Durable`]: the caller awaits it (one group-commit fsync shared with
//! every other waiter) before answering, and only then do committed offsets
//! become visible to OffsetFetch.
//!
//! What is journaled: commits, offset deletions (OffsetDelete, retention,
//! DeleteTopics), group deletions, and each group's generation and protocol
//! type when its generation changes. Membership itself is not: after a
//! restart every group is Empty with its last generation, and members
//! rejoin (their heartbeats get UNKNOWN_MEMBER_ID).

mod committed;
mod consumer;
#[cfg(test)]
mod records_first_tests;

pub use consumer::ConsumerDescription;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::config::GroupConfig;
use super::consumer::ConsumerGroup;
use super::journal::{self, Journal, OffsetKey, Opened};
use super::offsets::Offsets;
use super::outcome::{GroupOverview, GroupSummary, JoinOutcome, Reply, SyncOutcome};
use super::protocols::Group;
use super::record::{Committed, Record};
use super::state::{ClassicGroup, GroupState, JoinRequest, Now, SyncRequest};
use crate::codes;
use crate::lease_gate::LeaseGate;
use crate::log::{FsyncMode, GroupCommit};

/// Longest group id accepted (the journal stores u16-length strings; the
/// wire's non-flexible strings stop at 32767 bytes).
pub const MAX_GROUP_ID_BYTES: usize = i16::MAX as usize;

/// Longest the ticker sleeps when no deadline is near.
const MAX_IDLE: Duration = Duration::from_secs(1);

/// Directory of the coordinator's files inside the data directory.
pub const DIR: &str = "__groups";

struct State {
    /// Every group of the shard, of either protocol.
    groups: HashMap<String, Group>,
    offsets: Offsets,
    journal: Journal,
    /// When the ticker will next wake (None: it is not running yet).
    planned_wake: Option<Instant>,
    next_retention: Instant,
}

impl State {
    fn classic(&self, id: &str) -> Option<&ClassicGroup> {
        self.groups.get(id).and_then(Group::classic)
    }

    fn classic_mut(&mut self, id: &str) -> Option<&mut ClassicGroup> {
        self.groups.get_mut(id).and_then(Group::classic_mut)
    }

    fn consumer(&self, id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(id).and_then(Group::consumer)
    }

    fn consumer_mut(&mut self, id: &str) -> Option<&mut ConsumerGroup> {
        self.groups.get_mut(id).and_then(Group::consumer_mut)
    }

    /// Removes `id` if it is a classic group.
    fn remove_classic(&mut self, id: &str) -> Option<ClassicGroup> {
        self.classic(id)?;
        match self.groups.remove(id) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    /// Removes `id` if it is a consumer group.
    fn remove_consumer(&mut self, id: &str) -> Option<ConsumerGroup> {
        self.consumer(id)?;
        match self.groups.remove(id) {
            Some(Group::Consumer(g)) => Some(g),
            _ => None,
        }
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("groups", &self.groups.len())
            .field("journal_bytes", &self.journal.len())
            .finish_non_exhaustive()
    }
}

/// What the ticker and the coordinator share.
pub(super) struct Inner {
    config: GroupConfig,
    state: Mutex<State>,
    group_commit: Arc<GroupCommit>,
    pub(super) wake: Arc<Notify>,
    ids: AtomicU64,
    compacting: AtomicBool,
    /// This broker may still write (cluster mode: its lease is valid).
    gate: LeaseGate,
    /// Set (under the state lock) when the shard is closed or abandoned:
    /// nothing is written from then on.
    closed: Arc<AtomicBool>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .field("state", &self.state)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// The group coordinator of one shard.
#[derive(Debug)]
pub struct GroupCoordinator {
    inner: Arc<Inner>,
    ticker: AtomicBool,
}

/// A journal write a reply waits for.
#[derive(Debug)]
#[must_use = "a reply must wait for its write to be durable"]
pub struct Durable {
    inner: Arc<Inner>,
    file: Option<Arc<File>>,
    /// Offsets to make visible once durable: (group, key, record sequence).
    visible: Vec<(String, OffsetKey, u64)>,
}

impl Durable {
    /// Waits until the write is durable, then publishes the offsets it
    /// wrote. Err(NOT_COORDINATOR) if the fsync failed (Kafka's answer to a
    /// storage error on the offsets log: the client looks up the
    /// coordinator again and retries). Err(NOT_COORDINATOR) too when the
    /// write gate closed meanwhile: this broker may no longer answer for
    /// the shard, though the write may be durable.
    pub async fn wait(self) -> Result<(), i16> {
        if let Some(file) = self.file
            && let Err(e) = self.inner.group_commit.sync(file).await
        {
            tracing::error!(error = %e, "offsets journal fsync failed");
            return Err(codes::NOT_COORDINATOR);
        }
        if !(self.inner.gate)() {
            tracing::warn!("the write gate closed before the answer: NOT_COORDINATOR");
            return Err(codes::NOT_COORDINATOR);
        }
        if !self.visible.is_empty() {
            let mut st = self.inner.lock();
            let st = &mut *st;
            for (group, key, seq) in self.visible {
                if st.journal.live().seq_of(&group, &key) != Some(seq) {
                    continue; // superseded or deleted meanwhile
                }
                if let Some((_, c)) = st
                    .journal
                    .live()
                    .groups
                    .get(&group)
                    .and_then(|g| g.offsets.get(&key))
                {
                    let c = c.clone();
                    st.offsets.insert(&group, key, c);
                }
            }
        }
        Ok(())
    }
}

/// A partition's answer in OffsetFetch: its committed offset, if any, and
/// its error code (UNSTABLE_OFFSET_COMMIT while a transaction holds a
/// pending offset for it and the client asked for stable offsets).
pub type FetchedTopic = (String, Vec<(i32, Option<Committed>, i16)>);

fn valid_group_id(id: &str, may_be_empty: bool) -> bool {
    (may_be_empty || !id.is_empty()) && id.len() <= MAX_GROUP_ID_BYTES
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the shard was closed or abandoned (the ticker stops).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn new_member_id(&self, prefix: &str, group: &str) -> String {
        use sha2::{Digest, Sha256};
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let d = Sha256::digest(format!("{group}/{n}/{nanos}/{}", std::process::id()));
        let mut b = [0u8; 16];
        b.copy_from_slice(&d[..16]);
        let uuid = uuid::Builder::from_random_bytes(b).into_uuid();
        format!("{prefix}-{uuid}")
    }

    /// Runs `op` on the classic group `group`, records first: on a copy,
    /// its answers to parked requests held. A generation change is written
    /// (the group's metadata record) before the copy becomes the group and
    /// the answers go out; a failed write leaves the group as it was, every
    /// parked request still parked, and gives `failed()` instead. Then wakes
    /// the ticker if the group's next deadline is earlier than planned.
    /// None when `group` is not a classic group.
    fn run_classic<R>(
        &self,
        st: &mut State,
        group: &str,
        op: impl FnOnce(&mut ClassicGroup) -> R,
        failed: impl FnOnce() -> R,
    ) -> Option<R> {
        let g = st.classic(group)?;
        let generation = g.generation();
        let mut scratch = g.clone();
        scratch.outbox().hold();
        let out = op(&mut scratch);
        if scratch.generation() != generation {
            let rec = Record::GroupMeta {
                group: group.to_string(),
                meta: scratch.meta(),
            };
            if !self.append_in_background(st, &[rec]) {
                scratch.outbox().discard();
                return Some(failed());
            }
        }
        let next = scratch.next_deadline();
        let outbox = scratch.outbox().clone();
        if let Some(g) = st.classic_mut(group) {
            *g = scratch;
        }
        outbox.deliver();
        if let Some(d) = next
            && st.planned_wake.is_none_or(|w| d < w)
        {
            st.planned_wake = Some(d);
            self.wake.notify_one();
        }
        Some(out)
    }

    /// Appends records no reply waits for; their fsync rides along with the
    /// next one (or runs in the background). False if the write failed.
    fn append_in_background(&self, st: &mut State, records: &[Record]) -> bool {
        match st.journal.append(records) {
            Ok((file, _)) => {
                if self.group_commit.mode() != FsyncMode::Never
                    && let Ok(rt) = tokio::runtime::Handle::try_current()
                {
                    let gc = self.group_commit.clone();
                    rt.spawn(async move {
                        if let Err(e) = gc.sync(file).await {
                            tracing::error!(error = %e, "offsets journal fsync failed");
                        }
                    });
                }
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "offsets journal append failed");
                false
            }
        }
    }

    /// Appends records a reply waits for.
    fn append(
        self: &Arc<Self>,
        st: &mut State,
        records: &[Record],
    ) -> io::Result<(Arc<File>, Vec<u64>)> {
        let r = st.journal.append(records);
        if st.journal.compaction_due() && !self.compacting.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    let me = self.clone();
                    rt.spawn_blocking(move || me.compact());
                }
                Err(_) => self.compacting.store(false, Ordering::Release),
            }
        }
        r
    }

    fn compact(&self) {
        let job = self.lock().journal.begin_compaction();
        let written = journal::write_snapshot(&job);
        let mut st = self.lock();
        match written {
            Ok(tmp) => {
                if let Err(e) = st.journal.finish_compaction(&job, tmp) {
                    tracing::error!(error = %e, "offsets journal compaction failed");
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "offsets journal compaction failed");
                st.journal.abort_compaction(&job);
            }
        }
        drop(st);
        self.compacting.store(false, Ordering::Release);
    }

    /// Runs every due deadline and returns when to run again.
    pub(super) fn tick(&self) -> Instant {
        let now = Now::current();
        let mut st = self.lock();
        let st = &mut *st;
        if self.is_closed() {
            return now.at + MAX_IDLE;
        }
        let due: Vec<(String, bool)> = st
            .groups
            .iter()
            .filter(|(_, g)| g.next_deadline().is_some_and(|d| d <= now.at))
            .map(|(id, g)| (id.clone(), g.consumer().is_some()))
            .collect();
        for (id, consumer) in due {
            if consumer {
                self.tick_consumer(st, &id, now);
                continue;
            }
            self.run_classic(st, &id, |g| g.tick(now), || ());
        }
        if now.at >= st.next_retention {
            self.expire_offsets(st, now);
            st.next_retention = now.at + self.config.offsets_retention_check;
        }
        let next = st
            .groups
            .values()
            .filter_map(Group::next_deadline)
            .chain([st.next_retention, now.at + MAX_IDLE])
            .min()
            .unwrap_or(now.at + MAX_IDLE);
        st.planned_wake = Some(next);
        next
    }

    /// Offset retention, then removal of Empty groups left with nothing.
    fn expire_offsets(&self, st: &mut State, now: Now) {
        let retention_ms = self.config.offsets_retention.as_millis() as i64;
        let mut records = Vec::new();
        let names: Vec<String> = st.groups.keys().cloned().collect();
        for name in names {
            let Some(g) = st.groups.get(&name) else {
                continue;
            };
            let expired = st
                .offsets
                .group(&name)
                .map(|o| g.expired_offsets(o, now.wall_ms, retention_ms))
                .unwrap_or_default();
            for key in expired {
                st.offsets.remove(&name, &key);
                records.push(Record::DeleteOffset {
                    group: name.clone(),
                    topic: key.0,
                    partition: key.1,
                });
            }
            let gone = g.is_empty()
                && !st.offsets.has_offsets(&name)
                && st
                    .journal
                    .live()
                    .groups
                    .get(&name)
                    .is_none_or(|l| l.offsets.is_empty());
            if gone {
                st.groups.remove(&name);
                if st.journal.live().groups.contains_key(&name) {
                    records.push(Record::DeleteGroup { group: name });
                }
            }
        }
        if !records.is_empty() {
            tracing::info!(records = records.len(), "offset retention removed entries");
            self.append_in_background(st, &records);
        }
    }
}

impl GroupCoordinator {
    /// Opens `<data dir>/__groups`, replays the journal, drops offsets of
    /// topics that no longer exist, and (inside a tokio runtime) starts the
    /// ticker.
    pub fn open(
        data_dir: &Path,
        config: GroupConfig,
        group_commit: Arc<GroupCommit>,
        topic_exists: impl Fn(&str) -> bool,
    ) -> io::Result<GroupCoordinator> {
        let closed = Arc::new(AtomicBool::new(false));
        let gate = journal::always_open();
        let journal_gate = Self::journal_gate(&closed, &gate);
        let opened = Journal::open_gated(&data_dir.join(DIR), config.compact_bytes, journal_gate)?;
        Self::assemble(opened, config, group_commit, topic_exists, gate, closed)
    }

    /// Opens a shard's sealed journal in `dir` (cluster mode; see
    /// [`Journal::open_sealed`]): the state its last writer left, then
    /// writes only while `gate` holds.
    pub fn open_sealed(
        dir: &Path,
        config: GroupConfig,
        group_commit: Arc<GroupCommit>,
        topic_exists: impl Fn(&str) -> bool,
        gate: LeaseGate,
    ) -> io::Result<GroupCoordinator> {
        let closed = Arc::new(AtomicBool::new(false));
        let journal_gate = Self::journal_gate(&closed, &gate);
        let opened = Journal::open_sealed(dir, config.compact_bytes, journal_gate)?;
        Self::assemble(opened, config, group_commit, topic_exists, gate, closed)
    }

    /// The journal's gate: the shard is open and the lease gate holds.
    fn journal_gate(closed: &Arc<AtomicBool>, gate: &LeaseGate) -> LeaseGate {
        let closed = closed.clone();
        let gate = gate.clone();
        Arc::new(move || !closed.load(Ordering::Acquire) && gate())
    }

    fn assemble(
        opened: Opened,
        config: GroupConfig,
        group_commit: Arc<GroupCommit>,
        topic_exists: impl Fn(&str) -> bool,
        gate: LeaseGate,
        closed: Arc<AtomicBool>,
    ) -> io::Result<GroupCoordinator> {
        let mut journal = opened.journal;
        let now = Now::current();
        // Topics deleted while their DeleteTopic record was not yet durable.
        let mut missing: Vec<String> = journal
            .live()
            .groups
            .values()
            .flat_map(|g| {
                g.offsets
                    .keys()
                    .chain(g.pending.values().flat_map(|p| p.keys()))
                    .map(|(t, _)| t.clone())
            })
            .filter(|t| !topic_exists(t))
            .collect();
        missing.sort();
        missing.dedup();
        if !missing.is_empty() {
            let recs: Vec<Record> = missing
                .iter()
                .map(|t| Record::DeleteTopic { topic: t.clone() })
                .collect();
            let (file, _) = journal.append(&recs)?;
            file.sync_data()?;
            tracing::info!(topics = ?missing, "dropped committed offsets of deleted topics");
        }
        let offsets = Offsets::from_live(journal.live());
        let mut groups = HashMap::new();
        for (name, g) in &journal.live().groups {
            let group = match (&g.consumer, &g.meta) {
                (Some(c), _) => Group::Consumer(ConsumerGroup::restore(
                    name,
                    &c.model,
                    &config.consumer,
                    now,
                )),
                (None, Some(meta)) => {
                    Group::Classic(ClassicGroup::restore(name, meta, &config, now))
                }
                (None, None) => Group::Classic(ClassicGroup::new(name, &config, now)),
            };
            groups.insert(name.clone(), group);
        }
        tracing::info!(
            groups = groups.len(),
            records = opened.records,
            truncated = opened.truncated,
            "offsets journal replayed"
        );
        let coordinator = GroupCoordinator {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    groups,
                    offsets,
                    journal,
                    planned_wake: None,
                    next_retention: now.at + config.offsets_retention_check,
                }),
                config,
                group_commit,
                wake: Arc::new(Notify::new()),
                ids: AtomicU64::new(0),
                compacting: AtomicBool::new(false),
                gate,
                closed,
            }),
            ticker: AtomicBool::new(false),
        };
        coordinator.start_ticker();
        Ok(coordinator)
    }

    pub fn config(&self) -> &GroupConfig {
        &self.inner.config
    }

    /// Closes the shard cleanly: no write starts from now on, and what was
    /// written is made durable before this returns (the next coordinator
    /// of the shard reads it).
    pub fn close(&self) -> io::Result<()> {
        let file = {
            let st = self.inner.lock();
            self.inner.closed.store(true, Ordering::Release);
            st.journal.file()
        };
        self.inner.wake.notify_one();
        file.sync_data()
    }

    /// Makes the next journal write fail, nothing written (test builds).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn fail_next_journal_write(&self) {
        self.inner.lock().journal.fail_next_append();
    }

    /// A copy of a consumer group as it is in memory now (test builds).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn consumer_group(&self, id: &str) -> Option<crate::group::consumer::ConsumerGroup> {
        self.inner.lock().consumer(id).cloned()
    }

    /// Gives the shard up after the lease was lost: nothing more is
    /// written, not even a sync.
    pub fn abandon(&self) {
        let _st = self.inner.lock();
        self.inner.closed.store(true, Ordering::Release);
        self.inner.wake.notify_one();
    }

    /// Starts the background ticker once, if a tokio runtime is running
    /// (every operation calls this, so it also starts lazily).
    pub fn start_ticker(&self) {
        if self.ticker.load(Ordering::Acquire) {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current()
            && !self.ticker.swap(true, Ordering::AcqRel)
        {
            rt.spawn(super::ticker::run(
                Arc::downgrade(&self.inner),
                self.inner.wake.clone(),
            ));
        }
    }

    /// JoinGroup.
    pub fn join(&self, group_id: &str, req: JoinRequest) -> Reply<JoinOutcome> {
        self.start_ticker();
        let member_id = req.member_id.clone();
        let fail = |code| Reply::Now(JoinOutcome::error(&member_id, code));
        if !valid_group_id(group_id, false) {
            return fail(codes::INVALID_GROUP_ID);
        }
        let cfg = &self.inner.config;
        if req.session_timeout < cfg.min_session_timeout
            || req.session_timeout > cfg.max_session_timeout
        {
            return fail(codes::INVALID_SESSION_TIMEOUT);
        }
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        if let Some(c) = st.consumer(group_id) {
            if c.member_count() > 0 {
                return fail(codes::INCONSISTENT_GROUP_PROTOCOL);
            }
            // An empty consumer group becomes a classic one (offsets kept).
            st.remove_consumer(group_id);
            let rec = Record::Consumer {
                group: group_id.to_string(),
                change: super::record::ConsumerRecord::Dropped,
            };
            self.inner.append_in_background(st, &[rec]);
            tracing::info!(group = %group_id, "empty consumer group converted to a classic group");
        }
        let created = st.classic(group_id).is_none();
        if created {
            if !member_id.is_empty() {
                return fail(codes::UNKNOWN_MEMBER_ID);
            }
            let g = ClassicGroup::new(group_id, cfg, now);
            st.groups.insert(group_id.to_string(), Group::Classic(g));
        }
        let inner = &self.inner;
        let mut written = true;
        let join = |g: &mut ClassicGroup| {
            g.join(req, now, &mut |prefix| {
                inner.new_member_id(prefix, group_id)
            })
        };
        let reply = inner
            .run_classic(st, group_id, join, || {
                written = false;
                fail(codes::NOT_COORDINATOR)
            })
            .unwrap_or_else(|| fail(codes::COORDINATOR_NOT_AVAILABLE));
        if created && !written {
            // The group this join created goes with it.
            st.remove_classic(group_id);
        }
        reply
    }

    /// SyncGroup.
    pub fn sync(&self, group_id: &str, req: SyncRequest) -> Reply<SyncOutcome> {
        self.start_ticker();
        if !valid_group_id(group_id, false) {
            return Reply::Now(SyncOutcome::error(codes::INVALID_GROUP_ID));
        }
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        let fail = |code| Reply::Now(SyncOutcome::error(code));
        self.inner
            .run_classic(
                st,
                group_id,
                |g| g.sync(req, now),
                || fail(codes::NOT_COORDINATOR),
            )
            .unwrap_or_else(|| fail(codes::UNKNOWN_MEMBER_ID))
    }

    /// Heartbeat: the error code.
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> i16 {
        self.start_ticker();
        if !valid_group_id(group_id, false) {
            return codes::INVALID_GROUP_ID;
        }
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        let beat = |g: &mut ClassicGroup| g.heartbeat(member_id, instance_id, generation, now);
        self.inner
            .run_classic(st, group_id, beat, || codes::NOT_COORDINATOR)
            .unwrap_or(codes::UNKNOWN_MEMBER_ID)
    }

    /// LeaveGroup: each member's code, or a group-level error.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<i16>, i16> {
        self.start_ticker();
        if !valid_group_id(group_id, false) {
            return Err(codes::INVALID_GROUP_ID);
        }
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        let Some(g) = st.classic(group_id) else {
            return Ok(vec![codes::UNKNOWN_MEMBER_ID; members.len()]);
        };
        if g.state() == GroupState::Dead {
            return Err(codes::COORDINATOR_NOT_AVAILABLE);
        }
        let leave = |g: &mut ClassicGroup| {
            Ok(members
                .iter()
                .map(|(m, i)| g.leave(m, i.as_deref(), now))
                .collect())
        };
        self.inner
            .run_classic(st, group_id, leave, || Err(codes::NOT_COORDINATOR))
            .unwrap_or_else(|| Ok(vec![codes::UNKNOWN_MEMBER_ID; members.len()]))
    }

    /// DescribeGroups for one group (Dead when unknown, as Kafka answers).
    pub fn describe(&self, group_id: &str) -> Result<GroupSummary, i16> {
        if !valid_group_id(group_id, true) {
            return Err(codes::INVALID_GROUP_ID);
        }
        let st = self.inner.lock();
        if let Some(c) = st.consumer(group_id) {
            return Ok(GroupSummary {
                state: c.state().name(),
                protocol_type: "consumer".to_string(),
                protocol: c.assignor(&self.inner.config.consumer).to_string(),
                members: c
                    .members()
                    .map(|m| super::outcome::MemberSummary {
                        member_id: m.id.clone(),
                        instance_id: m.sub.instance_id.clone(),
                        client_id: m.sub.client_id.clone(),
                        client_host: m.sub.client_host.clone(),
                        metadata: Default::default(),
                        assignment: Default::default(),
                    })
                    .collect(),
            });
        }
        Ok(st
            .classic(group_id)
            .map_or_else(GroupSummary::dead, ClassicGroup::summary))
    }

    /// ListGroups, optionally only groups in the given states (compared
    /// case-insensitively).
    pub fn list(&self, states: &[String]) -> Vec<GroupOverview> {
        let st = self.inner.lock();
        let mut out: Vec<GroupOverview> = st
            .groups
            .values()
            .map(Group::overview)
            .filter(|o| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(o.state)))
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DeleteGroups: each group's code, and the write to wait for.
    pub fn delete_groups(&self, ids: &[String]) -> (Vec<i16>, Durable) {
        let now = Now::current();
        let mut st = self.inner.lock();
        let st = &mut *st;
        let mut records = Vec::new();
        let codes = ids
            .iter()
            .map(|id| {
                if !valid_group_id(id, true) {
                    return codes::INVALID_GROUP_ID;
                }
                if let Some(c) = st.consumer(id) {
                    if c.member_count() > 0 {
                        return codes::NON_EMPTY_GROUP;
                    }
                    st.remove_consumer(id);
                    st.offsets.remove_group(id);
                    if st.journal.live().groups.contains_key(id) {
                        records.push(Record::DeleteGroup { group: id.clone() });
                    }
                    tracing::info!(group = %id, "consumer group deleted");
                    return codes::NONE;
                }
                let Some(g) = st.classic_mut(id) else {
                    return codes::GROUP_ID_NOT_FOUND;
                };
                match g.mark_deleted(now) {
                    Ok(()) => {
                        st.remove_classic(id);
                        st.offsets.remove_group(id);
                        if st.journal.live().groups.contains_key(id) {
                            records.push(Record::DeleteGroup { group: id.clone() });
                        }
                        tracing::info!(group = %id, "group deleted");
                        codes::NONE
                    }
                    Err(code) => code,
                }
            })
            .collect();
        let mut durable = self.durable(None, Vec::new());
        if !records.is_empty() {
            match self.inner.append(st, &records) {
                Ok((file, _)) => durable.file = Some(file),
                // Kafka logs a failed tombstone write and still answers NONE:
                // the groups are gone from memory either way.
                Err(e) => tracing::error!(error = %e, "writing group deletions failed"),
            }
        }
        (codes, durable)
    }
}
