//! Group coordinator shards: which consumer groups this broker coordinates.
//!
//! Group ids map onto a fixed number of shards the way Kafka maps them onto
//! the partitions of `__consumer_offsets`: `abs(hashCode(group_id)) % 50`,
//! with Java's `String.hashCode` over UTF-16 code units
//! ([`crate::group::offsets_topic::offsets_partition`]). Each shard is one
//! [`GroupCoordinator`] with its own offsets journal.
//!
//! - Single-node mode: one shard (index 0 of 1), opened at start from
//!   today's `<data dir>/__groups/offsets.log`; every group is local.
//! - Cluster mode: 50 shards, none open at start. The cluster module opens
//!   a shard when this broker gains it ([`GroupShards::open_shard`], from
//!   `<data dir>/__groups/shard-<n>/` on the shared volume, sealing the
//!   journal against the previous coordinator: see
//!   [`super::journal::Journal::open_sealed`]) and closes or abandons it
//!   when the broker loses it. Groups of shards not open here answer
//!   NOT_COORDINATOR.
//!
//! This module touches only the group coordinators and their directories;
//! it knows nothing of etcd or placement.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use super::config::GroupConfig;
use super::coordinator::{DIR, Durable, GroupCoordinator};
use super::outcome::GroupOverview;
use crate::codes;
use crate::lease_gate::LeaseGate;
use crate::log::GroupCommit;

/// Shards in cluster mode (Kafka's default `offsets.topic.num.partitions`).
pub const CLUSTER_SHARDS: u32 = 50;

/// Whether a topic exists (offsets of missing topics are dropped on open).
pub type TopicExists = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The shards this broker currently coordinates.
pub struct GroupShards {
    data_dir: PathBuf,
    config: GroupConfig,
    group_commit: Arc<GroupCommit>,
    /// 1 (single-node mode) or [`CLUSTER_SHARDS`].
    count: u32,
    topic_exists: RwLock<TopicExists>,
    open: RwLock<BTreeMap<u32, Arc<GroupCoordinator>>>,
    /// Held while a shard opens, so two opens never race (requests keep
    /// reading `open` meanwhile).
    opening: Mutex<()>,
}

impl std::fmt::Debug for GroupShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupShards")
            .field("count", &self.count)
            .field("local", &self.local_shards())
            .finish_non_exhaustive()
    }
}

impl GroupShards {
    /// Single-node mode: one shard, opened now from `<data dir>/__groups`.
    pub fn single(
        data_dir: &Path,
        config: GroupConfig,
        group_commit: Arc<GroupCommit>,
        topic_exists: impl Fn(&str) -> bool,
    ) -> io::Result<Self> {
        let only =
            GroupCoordinator::open(data_dir, config.clone(), group_commit.clone(), topic_exists)?;
        Ok(GroupShards {
            data_dir: data_dir.to_path_buf(),
            config,
            group_commit,
            count: 1,
            topic_exists: RwLock::new(Arc::new(|_| true)),
            open: RwLock::new(BTreeMap::from([(0, Arc::new(only))])),
            opening: Mutex::new(()),
        })
    }

    /// Cluster mode: [`CLUSTER_SHARDS`] shards, none open yet. Until
    /// [`Self::set_topic_exists`] is called every topic counts as existing.
    pub fn cluster(data_dir: &Path, config: GroupConfig, group_commit: Arc<GroupCommit>) -> Self {
        GroupShards {
            data_dir: data_dir.to_path_buf(),
            config,
            group_commit,
            count: CLUSTER_SHARDS,
            topic_exists: RwLock::new(Arc::new(|_| true)),
            open: RwLock::new(BTreeMap::new()),
            opening: Mutex::new(()),
        }
    }

    /// How opening a shard learns which topics exist.
    pub fn set_topic_exists(&self, f: TopicExists) {
        *self.topic_exists.write().unwrap_or_else(|p| p.into_inner()) = f;
    }

    /// Number of shards (1 in single-node mode).
    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The directory of shard `n`'s journal (cluster mode).
    pub fn shard_dir(&self, n: u32) -> PathBuf {
        self.data_dir.join(DIR).join(format!("shard-{n}"))
    }

    /// The shard of a group: Kafka's `__consumer_offsets` partition in
    /// cluster mode, 0 in single-node mode.
    pub fn shard_of(&self, group_id: &str) -> u32 {
        if self.count == 1 {
            return 0;
        }
        let p =
            u32::try_from(crate::group::offsets_topic::offsets_partition(group_id)).unwrap_or(0);
        p % self.count
    }

    /// Starts coordinating shard `n` (cluster mode): loads its journal as a
    /// restart does, then seals it so the previous coordinator's late
    /// writes are never seen. Already open: nothing happens. It reads and
    /// writes files: call it off the async threads (`spawn_blocking`).
    pub fn open_shard(&self, n: u32, gate: LeaseGate) -> io::Result<()> {
        if self.count == 1 || n >= self.count {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("group shard {n} does not exist (shards: {})", self.count),
            ));
        }
        let _opening = self.opening.lock().unwrap_or_else(|p| p.into_inner());
        if self.shard(n).is_some() {
            return Ok(());
        }
        let topic_exists = self
            .topic_exists
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let c = GroupCoordinator::open_sealed(
            &self.shard_dir(n),
            self.config.clone(),
            self.group_commit.clone(),
            |t| topic_exists(t),
            gate,
        )
        .map_err(|e| io::Error::new(e.kind(), format!("opening group shard {n}: {e}")))?;
        self.open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(n, Arc::new(c));
        tracing::info!(shard = n, "group shard opened");
        Ok(())
    }

    fn take(&self, n: u32) -> Option<Arc<GroupCoordinator>> {
        self.open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&n)
    }

    /// Stops coordinating shard `n` cleanly: its writes are durable when
    /// this returns.
    pub fn close_shard(&self, n: u32) {
        if let Some(c) = self.take(n) {
            match c.close() {
                Ok(()) => tracing::info!(shard = n, "group shard closed"),
                Err(e) => {
                    tracing::error!(shard = n, error = %e, "closing group shard: final sync failed")
                }
            }
        }
    }

    /// Stops coordinating shard `n` after the lease was lost: nothing more
    /// is written.
    pub fn abandon_shard(&self, n: u32) {
        if let Some(c) = self.take(n) {
            c.abandon();
            tracing::warn!(shard = n, "group shard abandoned");
        }
    }

    /// The coordinator of `group_id`, if its shard is open here (None: the
    /// handler answers NOT_COORDINATOR).
    pub fn for_group(&self, group_id: &str) -> Option<Arc<GroupCoordinator>> {
        self.shard(self.shard_of(group_id))
    }

    fn shard(&self, n: u32) -> Option<Arc<GroupCoordinator>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&n)
            .cloned()
    }

    /// Whether shard `n` is open here.
    pub fn is_open(&self, n: u32) -> bool {
        self.shard(n).is_some()
    }

    /// The shards open here, ascending.
    pub fn local_shards(&self) -> Vec<u32> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// Every open shard's coordinator.
    pub fn all(&self) -> Vec<Arc<GroupCoordinator>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// ListGroups over every open shard, by group id.
    pub fn list(&self, states: &[String]) -> Vec<GroupOverview> {
        let mut out: Vec<GroupOverview> = self.all().iter().flat_map(|c| c.list(states)).collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DeleteTopics hook: every open shard drops the topic's offsets.
    pub fn topic_deleted(&self, topic: &str) {
        for c in self.all() {
            c.topic_deleted(topic);
        }
    }

    /// DeleteGroups: each group's code (NOT_COORDINATOR for groups of
    /// shards not open here) and the writes to wait for.
    pub fn delete_groups(&self, ids: &[String]) -> (Vec<i16>, Vec<Durable>) {
        let mut codes = vec![codes::NOT_COORDINATOR; ids.len()];
        let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, id) in ids.iter().enumerate() {
            by_shard.entry(self.shard_of(id)).or_default().push(i);
        }
        let mut durables = Vec::new();
        for (n, indexes) in by_shard {
            let Some(c) = self.shard(n) else {
                continue;
            };
            let mine: Vec<String> = indexes
                .iter()
                .filter_map(|&i| ids.get(i).cloned())
                .collect();
            let (got, durable) = c.delete_groups(&mine);
            for (&i, code) in indexes.iter().zip(got) {
                if let Some(slot) = codes.get_mut(i) {
                    *slot = code;
                }
            }
            durables.push(durable);
        }
        (codes, durables)
    }

    /// A transaction marker reached offsets partition `offsets_partition`:
    /// the shard holding it completes its groups' pending offsets. An error
    /// when that shard is not open here (the caller retries).
    pub fn complete_txn(
        &self,
        producer_id: i64,
        offsets_partition: i32,
        commit: bool,
    ) -> io::Result<Option<Durable>> {
        let n = if self.count == 1 {
            0
        } else {
            u32::try_from(offsets_partition).unwrap_or(u32::MAX)
        };
        // cluster: the shard's leader completes them (the coordinator routes
        // the marker there).
        let Some(c) = self.shard(n) else {
            return Err(crate::lease_gate::closed(format!(
                "group shard of offsets partition {offsets_partition} is not open here"
            )));
        };
        c.complete_txn(producer_id, offsets_partition, commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::record::Committed;
    use crate::log::FsyncMode;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn cluster(dir: &Path) -> GroupShards {
        GroupShards::cluster(
            dir,
            GroupConfig::default(),
            GroupCommit::new(FsyncMode::Always),
        )
    }

    fn open_gate() -> LeaseGate {
        Arc::new(|| true)
    }

    fn committed(offset: i64) -> Committed {
        Committed {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_ms: 1,
            expire_ms: None,
        }
    }

    async fn commit(c: &GroupCoordinator, group: &str, offset: i64) -> Result<(), i16> {
        c.commit(
            9,
            group,
            -1,
            "",
            None,
            vec![("t".into(), 0, committed(offset))],
        )?
        .wait()
        .await
    }

    fn fetched(c: &GroupCoordinator, group: &str) -> Option<i64> {
        let topics = c
            .fetch(group, Some(vec![("t".into(), vec![0])]), false)
            .expect("fetch");
        topics
            .first()
            .and_then(|(_, ps)| ps.first())
            .and_then(|(_, c, _)| c.as_ref())
            .map(|c| c.offset)
    }

    #[test]
    fn shard_of_is_kafkas_offsets_partition_of_the_java_hash_code() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = cluster(dir.path());
        // Java's String.hashCode, s[0]*31^(n-1) + ... + s[n-1] in i32:
        // "a" = 97; "group" = 98629247; "my-group" = -1906497762 (abs %
        // 50 = 12); "" = 0; "😀" is the UTF-16 pair D83D DE00, so
        // 55357 * 31 + 56832 = 1772899; "polygenelubricants" hashes to
        // i32::MIN, which Kafka's Utils.abs maps to 0.
        assert_eq!(s.shard_of("a"), 47);
        assert_eq!(s.shard_of("group"), 47);
        assert_eq!(s.shard_of("my-group"), 12);
        assert_eq!(s.shard_of(""), 0);
        assert_eq!(s.shard_of("😀"), 49);
        assert_eq!(s.shard_of("polygenelubricants"), 0);
        let single = GroupShards::single(
            dir.path(),
            GroupConfig::default(),
            GroupCommit::new(FsyncMode::Always),
            |_| true,
        )
        .expect("single");
        assert_eq!(single.shard_of("my-group"), 0);
        assert_eq!(single.count(), 1);
    }

    #[test]
    fn single_node_mode_has_shard_zero_open_at_todays_path() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = GroupShards::single(
            dir.path(),
            GroupConfig::default(),
            GroupCommit::new(FsyncMode::Always),
            |_| true,
        )
        .expect("single");
        assert_eq!(s.local_shards(), vec![0]);
        assert!(s.for_group("anything").is_some());
        assert!(
            dir.path()
                .join(DIR)
                .join(super::super::journal::FILE)
                .is_file()
        );
        assert!(s.open_shard(1, open_gate()).is_err(), "no shards to gain");
    }

    #[tokio::test]
    async fn open_close_and_abandon_decide_which_groups_are_local() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = cluster(dir.path());
        assert!(s.local_shards().is_empty());
        assert!(s.for_group("my-group").is_none());
        s.open_shard(12, open_gate()).expect("open");
        s.open_shard(47, open_gate()).expect("open");
        assert!(s.open_shard(50, open_gate()).is_err(), "out of range");
        assert_eq!(s.local_shards(), vec![12, 47]);
        assert!(dir.path().join(DIR).join("shard-12").is_dir());
        let c = s.for_group("my-group").expect("local");
        commit(&c, "my-group", 5).await.expect("commit");
        s.close_shard(12);
        assert!(s.for_group("my-group").is_none());
        assert_eq!(
            commit(&c, "my-group", 6).await,
            Err(codes::NOT_COORDINATOR),
            "a closed shard writes nothing"
        );
        // Reopened, it has what was committed before the close.
        s.open_shard(12, open_gate()).expect("reopen");
        let c = s.for_group("my-group").expect("local");
        assert_eq!(fetched(&c, "my-group"), Some(5));
        let g = s.for_group("group").expect("local");
        s.abandon_shard(47);
        assert_eq!(s.local_shards(), vec![12]);
        assert_eq!(commit(&g, "group", 1).await, Err(codes::NOT_COORDINATOR));
        assert_eq!(s.all().len(), 1);
    }

    #[tokio::test]
    async fn a_zombie_commit_after_takeover_is_never_visible() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = cluster(dir.path());
        let b = cluster(dir.path());
        // A's lease check already passed: its gate is still open.
        let a_gate = Arc::new(AtomicBool::new(true));
        let g = a_gate.clone();
        a.open_shard(12, Arc::new(move || g.load(Ordering::Acquire)))
            .expect("A opens");
        let za = a.for_group("my-group").expect("A coordinates");
        commit(&za, "my-group", 1).await.expect("A's commit");
        // A pauses past its lease; B takes the shard over.
        b.open_shard(12, open_gate()).expect("B opens");
        let cb = b.for_group("my-group").expect("B coordinates");
        assert_eq!(fetched(&cb, "my-group"), Some(1), "B loads A's commit");
        // A resumes, its write already past the lease check.
        let late = za
            .commit(
                9,
                "my-group",
                -1,
                "",
                None,
                vec![("t".into(), 0, committed(99))],
            )
            .expect("the zombie's append");
        // Its lease is gone by the time it would answer.
        a_gate.store(false, Ordering::Release);
        assert_eq!(late.wait().await, Err(codes::NOT_COORDINATOR));
        assert_eq!(fetched(&cb, "my-group"), Some(1), "B never sees it");
        // Nor does a later opener.
        let c = cluster(dir.path());
        c.open_shard(12, open_gate()).expect("C opens");
        let cc = c.for_group("my-group").expect("C coordinates");
        assert_eq!(fetched(&cc, "my-group"), Some(1), "C never sees it");
        // A's gate is closed: it cannot write at all any more.
        assert_eq!(
            commit(&za, "my-group", 100).await,
            Err(codes::NOT_COORDINATOR)
        );
    }
}
