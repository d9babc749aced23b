//! Who leads what: the one seam between the request handlers and the
//! cluster. Handlers ask it for the live brokers, the controller, each
//! partition's leader and epoch and each group shard's coordinator; the log
//! and the coordinators never learn whether they run alone.
//!
//! [`Cluster::Local`] is single-node mode (the embedded default, no etcd):
//! this broker is the only one and leads everything it has open.
//! [`Cluster::Etcd`] is cluster mode: membership, topics, leadership and
//! epochs agreed in etcd, placement computed by every broker alike, and a
//! control loop that opens and closes what this broker leads through the
//! [`reconcile::ControlLoopPorts`] port.
//!
//! The modules (cluster mode's, but for [`admin`]):
//!
//! - [`etcd`]: the etcd side: lease and keep-alive, membership, the cached view, transactions.
//! - [`keys`]: what cluster mode keeps in etcd, and under which keys.
//! - [`lease`]: the broker's lease and the write gate derived from it.
//! - [`placement`]: which live broker should lead each unit, alike on every broker.
//! - [`reconcile`]: the control loop: takes, gives up and drops units to match placement.
//! - [`replicas`]: replica sets and the ISR on a shared volume; replication-factor checks.
//! - [`admin`]: topic administration (either mode): create, delete, grow, from any broker.
//! - [`peer`]: the inter-broker client: one broker calling another over the Kafka wire.
//! - [`fences`]: the cross-broker fence ring: a producer-epoch bump reaches every broker.
//! - [`fence_log`]: the ring's outbound side: this broker's fence file on the shared volume.
//! - [`fence_watcher`]: the ring's inbound side: polls every peer's fence file.

pub mod admin;
pub mod etcd;
pub mod fence_log;
pub mod fence_watcher;
pub mod fences;
pub mod keys;
pub mod lease;
pub mod peer;
pub mod placement;
pub mod reconcile;
pub mod replicas;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::lease_gate::LeaseGate;
pub use keys::{LeaderRec, NodeInfo, Unit};

use crate::log::TopicMeta;

/// The cluster this broker belongs to.
#[derive(Debug)]
pub enum Cluster {
    Local(NodeInfo),
    Etcd { etcd: Arc<etcd::Etcd>, me: NodeInfo },
}

impl Cluster {
    /// This broker.
    pub fn me(&self) -> &NodeInfo {
        match self {
            Cluster::Local(me) | Cluster::Etcd { me, .. } => me,
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self, Cluster::Local(_))
    }

    /// The etcd connection (cluster mode).
    pub fn etcd(&self) -> Option<&Arc<etcd::Etcd>> {
        match self {
            Cluster::Local(_) => None,
            Cluster::Etcd { etcd, .. } => Some(etcd),
        }
    }

    /// Live brokers, by id.
    pub fn brokers(&self) -> Vec<NodeInfo> {
        match self {
            Cluster::Local(me) => vec![me.clone()],
            Cluster::Etcd { etcd, me } => {
                let v = etcd.view();
                if v.brokers.is_empty() {
                    vec![me.clone()]
                } else {
                    v.brokers.values().cloned().collect()
                }
            }
        }
    }

    /// The controller Metadata names: the live broker with the lowest id.
    pub fn controller_id(&self) -> i32 {
        self.brokers().first().map_or(self.me().id, |b| b.id)
    }

    /// The live leader of a partition and its epoch (cluster mode); None
    /// in single-node mode, where the open partition is the answer.
    pub fn partition_leader(&self, topic: &str, p: i32) -> Option<LeaderRec> {
        let etcd = self.etcd()?;
        let v = etcd.view();
        v.leaders
            .get(&Unit::Partition(topic.into(), p))
            .filter(|l| v.brokers.contains_key(&l.node))
            .cloned()
    }

    /// The broker coordinating group shard `shard`: this one in
    /// single-node mode, the shard's live leader in cluster mode.
    pub fn group_coordinator(&self, shard: u32) -> Option<NodeInfo> {
        match self {
            Cluster::Local(me) => Some(me.clone()),
            Cluster::Etcd { etcd, .. } => {
                let v = etcd.view();
                let l = v.leaders.get(&Unit::GroupShard(shard))?;
                v.brokers.get(&l.node).cloned()
            }
        }
    }

    /// The broker coordinating transaction shard `shard`: this one in
    /// single-node mode, the shard's live leader in cluster mode.
    pub fn txn_coordinator(&self, shard: u32) -> Option<NodeInfo> {
        match self {
            Cluster::Local(me) => Some(me.clone()),
            Cluster::Etcd { etcd, .. } => {
                let v = etcd.view();
                let l = v.leaders.get(&Unit::TxnShard(shard))?;
                v.brokers.get(&l.node).cloned()
            }
        }
    }

    /// Topics as etcd has them (cluster mode).
    pub fn topics(&self) -> Option<BTreeMap<String, TopicMeta>> {
        Some(self.etcd()?.view().topics.clone())
    }

    /// Live broker ids, ascending (the brokers a replication factor or an
    /// assignment may count on).
    pub fn live_ids(&self) -> Vec<i32> {
        self.brokers().iter().map(|b| b.id).collect()
    }

    /// Partition `p` of `meta`: its live leader (cluster mode; None while
    /// it has none) and its replicas and ISR ([`replicas`]). Single-node
    /// mode: this broker, alone.
    pub fn replica_set(
        &self,
        meta: &TopicMeta,
        p: i32,
    ) -> (Option<LeaderRec>, replicas::ReplicaSet) {
        let Some(etcd) = self.etcd() else {
            return (None, self.alone());
        };
        let v = etcd.view();
        let leader = v
            .leaders
            .get(&Unit::Partition(meta.name.clone(), p))
            .filter(|l| v.brokers.contains_key(&l.node))
            .cloned();
        let set = self.set_in(&v, meta, p, leader.as_ref().map(|l| l.node));
        (leader, set)
    }

    /// The replicas of partition `p` of `topic`, which this broker leads;
    /// those in sync are, on a shared volume, the live ones of its set.
    pub fn led_replicas(&self, topic: &str, p: i32) -> replicas::ReplicaSet {
        let Some(etcd) = self.etcd() else {
            return self.alone();
        };
        let v = etcd.view();
        match v.topics.get(topic) {
            Some(meta) => self.set_in(&v, meta, p, Some(self.me().id)),
            None => self.alone(),
        }
    }

    /// This broker as the only replica, in sync.
    fn alone(&self) -> replicas::ReplicaSet {
        let me = self.me().id;
        replicas::ReplicaSet {
            replicas: vec![me],
            isr: vec![me],
            offline: Vec::new(),
        }
    }

    /// Partition `p` of `meta` in view `v`, led by `leader`.
    fn set_in(
        &self,
        v: &etcd::View,
        meta: &TopicMeta,
        p: i32,
        leader: Option<i32>,
    ) -> replicas::ReplicaSet {
        let live = if v.brokers.is_empty() {
            vec![self.me().id]
        } else {
            v.live()
        };
        replicas::replica_set(
            &live,
            &meta.name,
            p,
            meta.stored_replicas(p),
            usize::try_from(meta.replication_factor).unwrap_or(1),
            leader,
        )
    }
}
