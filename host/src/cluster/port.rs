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
        self.groups.shard_count()
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
        let part = self.logs.take_over(&meta.name, p, rec.epoch, &replay, gate)?;
        // State under ids no block ever held can only be forged.
        let forged = part.forget_producers_from(self.producer_ids.next());
        if forged > 0 {
            tracing::warn!(topic = %meta.name, partition = p, entries = forged, "dropped producer state under producer ids never handed out");
        }
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

    fn new_incarnation(&self, incarnation: i64) -> io::Result<()> {
        self.logs
            .use_wal_dir(&wal_dir_name(self.config.node_id, incarnation))
    }
}
