//! The broker's side of the ports its subsystems are written against: the
//! one place that knows which field of [`Broker`] answers which question.
//!
//! - [`crate::cluster::reconcile::ControlLoopPorts`]: what opening, closing and
//!   abandoning a unit means for the log and the coordinators (the control
//!   loop calls it; nothing else does);
//! - [`crate::txn::port`]: the transaction coordinator's producer ids,
//!   fences, leader view and marker writers;
//! - [`crate::txn::markers::LeaderSide`]: the partitions and offsets shards
//!   a marker is written into;
//! - [`crate::cluster::fences::FenceHost`]: what a peer's fence is applied to;
//! - [`crate::server::Dispatch`] and the [`Serving`] the server runs on;
//! - the narrow views handlers hand to topic administration and to
//!   transaction routing.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::broker::Broker;
use crate::cluster::NodeInfo;
use crate::cluster::admin::TopicAdmin;
use crate::cluster::fences::{FenceHost, FenceRing};
use crate::cluster::keys::{EpochRec, wal_dir_name};
use crate::cluster::reconcile::ControlLoopPorts;
use crate::group::coordinator::Durable;
use crate::group::offsets_topic::OFFSETS_TOPIC;
use crate::lease_gate::LeaseGate;
use crate::log::{GroupCommit, Partition, TopicMeta};
use crate::policy::TopicPartition;
use crate::server::{Dispatch, ServerConfig, Serving};
use crate::txn::markers::{self, LeaderSide, MarkerSet};
use crate::txn::port::{
    BoxFuture, CoordinatorPorts, FenceSink, Flush, Leader, LeaderView, MarkerSink, PeerMarkers,
    ProducerIdSource, Unflushed,
};
use crate::txn::record::UnsyncedMarkers;
use crate::txn::route::Routes;

impl Broker {
    /// The transaction coordinator's ports.
    pub fn coordinator_ports(self: &Arc<Self>) -> Arc<dyn CoordinatorPorts> {
        self.clone()
    }

    /// What finding a transaction's coordinator reads.
    pub fn txn_routes(&self) -> Routes<'_> {
        Routes {
            shards: &self.txn,
            cluster: &self.cluster,
            peers: &self.peers,
        }
    }

    /// What topic administration changes.
    pub fn topic_admin(&self) -> TopicAdmin<'_> {
        TopicAdmin {
            logs: &self.logs,
            cluster: &self.cluster,
            max_partitions: self.config.max_partitions,
            default_replication_factor: self.config.default_replication_factor,
        }
    }
}

impl Broker {
    /// What the server runs on: its part of the configuration, the
    /// metrics, the SASL mechanisms, and this broker as the dispatcher.
    pub fn serving(self: &Arc<Self>) -> Arc<Serving<Dispatcher>> {
        let c = &self.config;
        Arc::new(Serving {
            config: ServerConfig {
                max_connections: c.max_connections,
                request_timeout: c.request_timeout,
                queued_max_request_bytes: c.queued_max_request_bytes,
                max_request_bytes: c.max_request_bytes,
                connections_max_idle: c.connections_max_idle,
                security: c.security.clone(),
            },
            metrics: self.metrics.clone(),
            sasl: self.sasl.clone(),
            dispatch: Dispatcher(self.clone()),
        })
    }
}

/// The broker as the server's dispatcher.
#[derive(Debug)]
pub struct Dispatcher(Arc<Broker>);

impl Dispatch for Dispatcher {
    fn dispatch<'a>(
        &'a self,
        session: &'a Arc<crate::security::Session>,
        req: crate::wire::Request,
        mute: &'a Arc<crate::wire::Mute>,
    ) -> impl std::future::Future<Output = crate::wire::Handled> + Send + 'a {
        crate::wire::throttling::dispatch(&self.0, session, req, mute)
    }
}

impl ProducerIdSource for Broker {
    fn allocate(&self) -> BoxFuture<'_, io::Result<i64>> {
        Box::pin(self.producer_ids.allocate())
    }
}

impl FenceSink for Broker {
    fn fence(&self, producer_id: i64, epoch: i16) {
        let fenced = self.logs.fence_producer(producer_id, epoch);
        tracing::debug!(producer_id, epoch, fenced, "fence ring");
        // The other brokers' partitions (cluster::fences).
        self.fences.broadcast(producer_id, epoch);
    }
}

impl LeaderView for Broker {
    fn leader_of(&self, tp: &TopicPartition) -> Leader {
        if tp.topic == OFFSETS_TOPIC {
            if self.cluster.is_local() {
                return Leader::Here;
            }
            let Ok(shard) = u32::try_from(tp.partition) else {
                return Leader::Gone;
            };
            if self.groups.is_open(shard) {
                return Leader::Here;
            }
            return self.peer(self.cluster.group_coordinator(shard));
        }
        if self.logs.partition(&tp.topic, tp.partition).is_some() {
            return Leader::Here;
        }
        if !self.has_partition(&tp.topic, tp.partition) {
            return Leader::Gone;
        }
        let leader = self
            .cluster
            .partition_leader(&tp.topic, tp.partition)
            .and_then(|l| self.cluster.brokers().into_iter().find(|b| b.id == l.node));
        self.peer(leader)
    }

    fn exists(&self, tp: &TopicPartition) -> bool {
        self.has_partition(&tp.topic, tp.partition)
    }

    fn defers_marker_sync(&self) -> bool {
        self.cluster.is_local()
    }
}

impl Broker {
    /// A leader the cluster view names, as a marker's destination.
    fn peer(&self, node: Option<NodeInfo>) -> Leader {
        match node {
            // The view is ahead of our own opening.
            Some(n) if n.id == self.cluster.me().id => Leader::Unknown,
            Some(n) => Leader::Peer(n),
            None => Leader::Unknown,
        }
    }
}

impl MarkerSink for Broker {
    fn write_here(&self, set: MarkerSet) -> BoxFuture<'_, Vec<(TopicPartition, i16)>> {
        Box::pin(async move { markers::write_here(self, &set).await })
    }

    fn append_here(&self, set: &MarkerSet) -> Unflushed {
        markers::append_unsynced(self, set)
    }

    fn repair(&self, txn_id: &str, unsynced: &UnsyncedMarkers) -> Flush {
        markers::repair(self, txn_id, unsynced)
    }
}

impl PeerMarkers for Broker {
    fn send(
        &self,
        node: NodeInfo,
        set: MarkerSet,
    ) -> BoxFuture<'static, Vec<(TopicPartition, i16)>> {
        let peers = self.peers.clone();
        Box::pin(async move { crate::txn::marker_routing::send(&peers, &node, set).await })
    }
}

impl LeaderSide for Broker {
    fn partition(&self, topic: &str, p: i32) -> Option<Arc<Partition>> {
        self.logs.partition(topic, p)
    }

    fn not_here(&self, topic: &str, p: i32) -> i16 {
        Broker::not_here(self, topic, p)
    }

    fn complete_offsets(
        &self,
        producer_id: i64,
        partition: i32,
        commit: bool,
    ) -> io::Result<Option<Durable>> {
        self.groups.complete_txn(producer_id, partition, commit)
    }

    fn group_commit(&self) -> &Arc<GroupCommit> {
        self.logs.group_commit()
    }

    fn data_ready(&self) -> &Arc<Notify> {
        &self.data_ready
    }
}

impl FenceHost for Broker {
    fn ring(&self) -> &FenceRing {
        &self.fences
    }

    fn fence_open_partitions(&self, pid: i64, epoch: i16) -> usize {
        self.logs.fence_producer(pid, epoch)
    }
}

impl ControlLoopPorts for Broker {
    fn group_shards(&self) -> u32 {
        self.groups.count()
    }

    fn topics_changed(&self, topics: &BTreeMap<String, TopicMeta>) {
        let dropped = self.logs.sync_topics(topics);
        if dropped > 0 {
            tracing::info!(partitions = dropped, "partitions of deleted topics closed");
        }
    }

    fn defaults_changed(&self, layer: &crate::log::config::broker_defaults::Layer) {
        self.logs.apply_dynamic_defaults(layer);
    }

    fn quotas_changed(&self, table: &crate::quota::QuotaTable) {
        self.quotas.replace(table.clone());
    }

    fn take_over_partition(
        &self,
        meta: &TopicMeta,
        p: i32,
        rec: &EpochRec,
        gate: LeaseGate,
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
        // Fences applied here before it was ours.
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

    fn open_group_shard(&self, shard: u32, gate: LeaseGate) -> io::Result<()> {
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

    fn open_txn_shard(&self, shard: u32, epoch: i32, gate: LeaseGate) -> io::Result<()> {
        let Some(me) = self.shared() else {
            return Err(io::Error::other("the broker is not running yet"));
        };
        if let Some(c) = self.txn.open_shard(shard, epoch, gate)? {
            // Prepare* entries get their markers, with this coordinator's epoch.
            c.resume(&me.coordinator_ports());
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

/// The log cleaner's view of this broker: the compacted partitions it
/// writes now.
impl crate::log::cleaner::Compacted for Broker {
    fn compacted_partitions(&self) -> Vec<Arc<crate::log::Partition>> {
        crate::log::cleaner::Compacted::compacted_partitions(&self.logs)
    }
}
