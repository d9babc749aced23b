//! The broker's side of the [`super::reconcile::Host`] port: what opening,
//! closing and abandoning a unit means for the log and the group
//! coordinator. The control loop calls it; nothing else does.

use std::collections::BTreeMap;
use std::io;

use super::keys::{EpochRec, wal_dir_name};
use super::lease::Gate;
use super::reconcile::Host;
use crate::broker::Broker;
use crate::log::TopicMeta;

impl Host for Broker {
    fn group_shards(&self) -> u32 {
        self.groups.count()
    }

    fn topics_changed(&self, topics: &BTreeMap<String, TopicMeta>) {
        let dropped = self.logs.sync_topics(topics);
        if dropped > 0 {
            tracing::info!(partitions = dropped, "partitions of deleted topics closed");
        }
    }

    fn take_over_partition(
        &self,
        meta: &TopicMeta,
        p: i32,
        rec: &EpochRec,
        gate: Gate,
    ) -> io::Result<()> {
        let replay: Vec<String> = rec
            .wal
            .iter()
            .map(|w| wal_dir_name(w.node, w.incarnation))
            .collect();
        let part = self
            .logs
            .take_over(&meta.name, p, rec.epoch, &replay, gate)?;
        // State under ids no block ever held can only be forged.
        let forged = part.forget_producers_from(self.producer_ids.next());
        if forged > 0 {
            tracing::warn!(topic = %meta.name, partition = p, entries = forged, "dropped producer state under producer ids never handed out");
        }
        // Fences applied here before it was ours (issue 15 item 4).
        self.fences.fence_taken_over(&part);
        self.data_ready.notify_waiters();
        Ok(())
    }

    fn release_partition(&self, topic: &str, p: i32) {
        self.logs.release(topic, p);
    }

    fn abandon_partition(&self, topic: &str, p: i32) {
        self.logs.abandon(topic, p);
    }

    fn open_group_shard(&self, shard: u32, gate: Gate) -> io::Result<()> {
        self.groups.open_shard(shard, gate)
    }

    fn close_group_shard(&self, shard: u32) {
        self.groups.close_shard(shard);
    }

    fn abandon_group_shard(&self, shard: u32) {
        self.groups.abandon_shard(shard);
    }

    fn txn_shards(&self) -> u32 {
        if self.txn.is_sharded() {
            self.txn.count()
        } else {
            0
        }
    }

    fn open_txn_shard(&self, shard: u32, epoch: i32, gate: Gate) -> io::Result<()> {
        let Some(me) = self.shared() else {
            return Err(io::Error::other("the broker is not running yet"));
        };
        if let Some(c) = self.txn.open_shard(shard, epoch, gate)? {
            // Prepare* entries get their markers, with this coordinator's epoch.
            c.resume(&me);
        }
        Ok(())
    }

    fn close_txn_shard(&self, shard: u32) {
        self.txn.close_shard(shard);
    }

    fn collect_wal_dirs(&self, keep: &std::collections::BTreeSet<String>) -> usize {
        let root = self.logs.root().join(crate::log::CLUSTER_WAL_DIR);
        let Ok(entries) = std::fs::read_dir(&root) else {
            return 0;
        };
        let idle = std::time::Duration::from_secs(120);
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > idle);
            if keep.contains(&name) || !old {
                continue;
            }
            match std::fs::remove_dir_all(e.path()) {
                Ok(()) => removed += 1,
                Err(err) => {
                    tracing::warn!(dir = %e.path().display(), error = %err, "removing an old write-ahead log failed")
                }
            }
        }
        removed
    }

    fn new_incarnation(&self, incarnation: i64) -> io::Result<()> {
        self.logs
            .use_wal_dir(&wal_dir_name(self.config.node_id, incarnation))
    }
}
