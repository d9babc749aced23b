//! What cluster mode keeps in etcd, and under which keys. Every key lives
//! under `/kaas/<cluster id>/`:
//!
//! - `brokers/<id>` → [`NodeInfo`], attached to the broker's lease: live
//!   membership is exactly the keys present.
//! - `topics/<name>` → [`TopicMeta`]: the topic's id, partition count,
//!   configs, replication factor and stored replica sets (persistent).
//! - `leaders/<unit>` → [`LeaderRec`], attached to the leader's lease: it
//!   disappears when that lease ends, and a new leader may take the unit
//!   only while it is absent.
//! - `epochs/<unit>` → [`EpochRec`] (persistent): the unit's leader epoch,
//!   which only grows, and the write-ahead logs a new leader must replay.
//! - `producer_ids` → the first producer id no block has taken.
//! - `fences/<id>` → [`FenceRec`], attached to broker `id`'s lease: the
//!   last producer-epoch bump that broker's coordinator made (the push path
//!   of the cross-broker fence ring, [`super::fences`]). One key per broker;
//!   every put is a revision of its own, so the watch sees each bump.
//! - `config/broker-default` → the cluster-wide dynamic broker defaults
//!   of topic configs (a JSON map of Kafka broker names to values,
//!   persistent; see [`crate::log::config::broker_defaults`]).
//! - `acls/<sha-256 of the record>` → one ACL (persistent),
//!   read and watched by [`crate::security::acl_store`], not by the view.
//!
//! A unit is a topic partition (`p/<topic>/<n>`) or a group-coordinator
//! shard (`g/<n>`). Topic names cannot contain `/` (see
//! [`crate::log::valid_topic_name`]).

use serde::{Deserialize, Serialize};

/// A live broker, as it registers itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: i32,
    pub host: String,
    pub port: i32,
    /// The lease the broker registered under: names its write-ahead log
    /// directory (see [`wal_dir_name`]).
    #[serde(default)]
    pub incarnation: i64,
    /// Every listener's advertised address; Metadata answers a
    /// client with the address of the listener it came in on. `host` and
    /// `port` are the first listener's, which brokers use among themselves.
    #[serde(default)]
    pub listeners: Vec<Endpoint>,
}

/// One listener's advertised address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: i32,
}

impl NodeInfo {
    /// The address a client that came in on `listener` should use: that
    /// listener's, or the broker's first one if it has no such listener.
    pub fn endpoint(&self, listener: &str) -> (String, i32) {
        self.listeners
            .iter()
            .find(|e| e.name == listener)
            .map_or_else(
                || (self.host.clone(), self.port),
                |e| (e.host.clone(), e.port),
            )
    }
}

/// Who leads a unit now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderRec {
    pub node: i32,
    pub epoch: i32,
    pub incarnation: i64,
}

/// A write-ahead log a taker must replay: the one `node` wrote under lease
/// `incarnation` while it led the unit at `epoch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalSource {
    pub node: i32,
    pub incarnation: i64,
    pub epoch: i32,
}

/// A unit's epoch history head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochRec {
    pub epoch: i32,
    pub node: i32,
    pub incarnation: i64,
    /// Write-ahead logs that may hold batches the unit's files lack,
    /// oldest first; emptied once the leader has taken them back.
    #[serde(default)]
    pub wal: Vec<WalSource>,
}

/// A producer-epoch bump, as the push path of the fence ring carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceRec {
    pub pid: i64,
    pub epoch: i16,
    /// Wall-clock time of the bump, in ms since the Unix epoch.
    pub at_ms: i64,
}

/// A topic partition, a group-coordinator shard or a
/// transaction-coordinator shard.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    Partition(String, i32),
    GroupShard(u32),
    TxnShard(u32),
}

impl Unit {
    /// The key suffix naming this unit.
    pub fn key(&self) -> String {
        match self {
            Unit::Partition(t, p) => format!("p/{t}/{p}"),
            Unit::GroupShard(s) => format!("g/{s}"),
            Unit::TxnShard(s) => format!("t/{s}"),
        }
    }

    /// The unit a key suffix names.
    pub fn parse(s: &str) -> Option<Unit> {
        let mut it = s.splitn(3, '/');
        match (it.next()?, it.next()?, it.next()) {
            ("p", t, Some(p)) => Some(Unit::Partition(t.into(), p.parse().ok()?)),
            ("g", n, None) => Some(Unit::GroupShard(n.parse().ok()?)),
            ("t", n, None) => Some(Unit::TxnShard(n.parse().ok()?)),
            _ => None,
        }
    }
}

/// The key layout of one cluster.
#[derive(Debug, Clone)]
pub struct Keys {
    root: String,
}

impl Keys {
    pub fn new(cluster_id: &str) -> Self {
        Keys {
            root: format!("/kaas/{cluster_id}/"),
        }
    }
    pub fn root(&self) -> &str {
        &self.root
    }
    pub fn broker(&self, id: i32) -> String {
        format!("{}brokers/{id}", self.root)
    }
    pub fn topic(&self, name: &str) -> String {
        format!("{}topics/{name}", self.root)
    }
    pub fn leader(&self, u: &Unit) -> String {
        format!("{}leaders/{}", self.root, u.key())
    }
    pub fn epoch(&self, u: &Unit) -> String {
        format!("{}epochs/{}", self.root, u.key())
    }
    pub fn epochs_prefix(&self) -> String {
        format!("{}epochs/", self.root)
    }
    pub fn producer_ids(&self) -> String {
        format!("{}producer_ids", self.root)
    }
    pub fn fence(&self, node: i32) -> String {
        format!("{}fences/{node}", self.root)
    }
    pub fn broker_defaults(&self) -> String {
        format!("{}config/broker-default", self.root)
    }
    pub fn client_quotas(&self) -> String {
        format!("{}config/client-quotas", self.root)
    }
    pub fn acls_prefix(&self) -> String {
        format!("{}acls/", self.root)
    }
    pub fn acl(&self, id: &str) -> String {
        format!("{}acls/{id}", self.root)
    }
}

/// What a key under the root names.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Broker(i32),
    Topic(String),
    Leader(Unit),
    Epoch(Unit),
    ProducerIds,
    Fence(i32),
    BrokerDefaults,
    ClientQuotas,
}

impl Keys {
    pub fn parse(&self, key: &[u8]) -> Option<Parsed> {
        let s = std::str::from_utf8(key).ok()?.strip_prefix(&self.root)?;
        let (kind, rest) = s.split_once('/').unwrap_or((s, ""));
        match kind {
            "brokers" => rest.parse().ok().map(Parsed::Broker),
            "topics" if !rest.is_empty() => Some(Parsed::Topic(rest.into())),
            "leaders" => Unit::parse(rest).map(Parsed::Leader),
            "epochs" => Unit::parse(rest).map(Parsed::Epoch),
            "producer_ids" => Some(Parsed::ProducerIds),
            "fences" => rest.parse().ok().map(Parsed::Fence),
            "config" if rest == "broker-default" => Some(Parsed::BrokerDefaults),
            "config" if rest == "client-quotas" => Some(Parsed::ClientQuotas),
            _ => None,
        }
    }
}

/// The directory, under `<data dir>/__cluster/wal/`, of the write-ahead log
/// a broker writes under one lease.
pub fn wal_dir_name(node: i32, incarnation: i64) -> String {
    format!("{node}-{incarnation:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let k = Keys::new("c1");
        let u = Unit::Partition("a.b_c-d".into(), 7);
        assert_eq!(
            k.parse(k.leader(&u).as_bytes()),
            Some(Parsed::Leader(u.clone()))
        );
        assert_eq!(k.parse(k.epoch(&u).as_bytes()), Some(Parsed::Epoch(u)));
        let g = Unit::GroupShard(49);
        assert_eq!(k.parse(k.leader(&g).as_bytes()), Some(Parsed::Leader(g)));
        let t = Unit::TxnShard(0);
        assert_eq!(k.parse(k.epoch(&t).as_bytes()), Some(Parsed::Epoch(t)));
        assert_eq!(k.parse(k.broker(3).as_bytes()), Some(Parsed::Broker(3)));
        assert_eq!(
            k.parse(k.topic("x").as_bytes()),
            Some(Parsed::Topic("x".into()))
        );
        assert_eq!(
            k.parse(k.producer_ids().as_bytes()),
            Some(Parsed::ProducerIds)
        );
        assert_eq!(k.parse(k.fence(2).as_bytes()), Some(Parsed::Fence(2)));
        assert_eq!(k.parse(b"/kaas/other/brokers/1"), None);
    }
}
