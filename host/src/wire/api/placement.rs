//! Where partitions live, as the replica-management APIs (ElectLeaders,
//! the partition reassignment APIs, AlterReplicaLogDirs) see it: kaas keeps
//! each partition once, on the shared volume, and the brokers agree on its
//! leader through etcd (cluster mode) or this broker leads everything
//! (single node). Built once per request from the cluster view and the log.

use std::collections::BTreeMap;

use crate::cluster::Cluster;
use crate::log::{LogManager, TopicMeta};

/// One partition: its replicas as Metadata lists them, and its live
/// leader (None while the brokers have not agreed on one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub replicas: Vec<i32>,
    pub leader: Option<i32>,
}

/// The partitions and live brokers a request is answered against.
pub struct Placement<'a> {
    cluster: &'a Cluster,
    logs: &'a LogManager,
    /// Cluster mode: the topics etcd has.
    topics: Option<BTreeMap<String, TopicMeta>>,
}

impl<'a> Placement<'a> {
    pub fn new(cluster: &'a Cluster, logs: &'a LogManager) -> Self {
        Placement {
            cluster,
            logs,
            topics: cluster.topics(),
        }
    }

    /// Partition `p` of `topic`, if the topic has it.
    pub fn partition(&self, topic: &str, p: i32) -> Option<Placed> {
        if p < 0 {
            return None;
        }
        match &self.topics {
            Some(all) => {
                let m = all.get(topic).filter(|m| p < m.partitions)?;
                let (leader, set) = self.cluster.replica_set(m, p);
                Some(Placed {
                    replicas: set.replicas,
                    leader: leader.map(|l| l.node),
                })
            }
            None => {
                self.logs.topic(topic).filter(|t| p < t.partition_count)?;
                let me = self.cluster.me().id;
                Some(Placed {
                    replicas: vec![me],
                    leader: Some(me),
                })
            }
        }
    }

    /// Whether broker `id` is live.
    pub fn live(&self, id: i32) -> bool {
        self.cluster.live_ids().contains(&id)
    }
}

impl std::fmt::Debug for Placement<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("topics", &self.topics.as_ref().map(BTreeMap::len))
            .finish_non_exhaustive()
    }
}
