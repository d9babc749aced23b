//! The control loop of a clustered broker: keeps its lease, and makes what
//! it leads match what placement says it should lead.
//!
//! Each turn reads the cached view ([`super::etcd::View`]) and, for every
//! unit (topic partition or group shard):
//! - placement picks this broker and nobody holds the unit: take it (the
//!   etcd transaction decides; the loser of a race just sees it held);
//! - this broker holds it and placement picks another live broker: close it
//!   cleanly and give it up, so the other can take it;
//! - this broker holds it but the view, once it has caught up with the
//!   takeover, shows another holder or none (the topic was deleted): drop it.
//!
//! When the lease is lost, every unit is abandoned at once (without writing:
//! another broker may be writing the files already), and the broker joins
//! again under a new lease, with a new write-ahead log directory.
//! It opens and closes units only through the [`ControlLoopPorts`] port.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::etcd::{Etcd, View};
use super::keys::{EpochRec, LeaderRec, NodeInfo, Unit};
use super::placement;
use crate::lease_gate::LeaseGate;
use crate::log::TopicMeta;
use crate::ratelimit::Backoff;

/// What the control loop asks of the broker. Blocking methods run on the
/// blocking pool.
pub trait ControlLoopPorts: Send + Sync + 'static {
    /// Group-coordinator shards (0 when groups are not sharded).
    fn group_shards(&self) -> u32;
    /// The topics are now `topics` (created, grown, deleted).
    fn topics_changed(&self, topics: &BTreeMap<String, TopicMeta>);
    /// The cluster-wide dynamic broker defaults are now `layer`.
    fn defaults_changed(&self, layer: &crate::log::config::broker_defaults::Layer);
    /// The cluster-wide client quotas are now `table`.
    fn quotas_changed(&self, table: &crate::quota::QuotaTable);
    /// Opens partition `p` of `meta` as its leader at `rec.epoch`, taking
    /// back what the write-ahead logs of `rec.wal` hold (blocking).
    fn take_over_partition(
        &self,
        meta: &TopicMeta,
        p: i32,
        rec: &EpochRec,
        gate: LeaseGate,
    ) -> io::Result<()>;
    /// Closes a partition this broker gives up (blocking).
    fn release_partition(&self, topic: &str, p: i32);
    /// Drops a partition without writing anything more.
    fn abandon_partition(&self, topic: &str, p: i32);
    /// Opens a group shard as its coordinator (blocking).
    fn open_group_shard(&self, shard: u32, gate: LeaseGate) -> io::Result<()>;
    /// Closes a group shard this broker gives up.
    fn close_group_shard(&self, shard: u32);
    /// Drops a group shard without writing anything more.
    fn abandon_group_shard(&self, shard: u32);
    /// Transaction-coordinator shards (0 when transactions are not sharded).
    fn txn_shards(&self) -> u32;
    /// Opens a transaction shard as its coordinator at `epoch` (blocking)
    /// and resumes the markers of its transactions found Prepare*.
    fn open_txn_shard(&self, shard: u32, epoch: i32, gate: LeaseGate) -> io::Result<()>;
    /// Stops coordinating a transaction shard (handed over or lost).
    fn close_txn_shard(&self, shard: u32);
    /// A new lease: appends go to the write-ahead log of this incarnation.
    fn new_incarnation(&self, incarnation: i64) -> io::Result<()>;
    /// Removes the write-ahead log directories not in `keep` that nothing
    /// has written for a while; returns how many it removed (blocking).
    fn collect_wal_dirs(&self, keep: &BTreeSet<String>) -> usize;
}

/// The wait before trying again to join the cluster (register with etcd,
/// open the new lease's write-ahead log).
const JOIN_RETRY: Backoff = Backoff::fixed(Duration::from_millis(500));

/// How often the controller looks for write-ahead logs nobody needs.
const WAL_GC_EVERY: Duration = Duration::from_secs(30);

/// The controller's sweep: a write-ahead log directory is kept while a
/// live broker writes it or a unit's epoch record still lists it (or names
/// its writer as the current leader).
async fn collect_wal_dirs(etcd: &Etcd, host: &Arc<dyn ControlLoopPorts>) {
    let epochs = match etcd.epochs().await {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(error = %e, "write-ahead log sweep skipped");
            return;
        }
    };
    let mut keep = BTreeSet::new();
    for b in etcd.view().brokers.values() {
        keep.insert(super::keys::wal_dir_name(b.id, b.incarnation));
    }
    for e in &epochs {
        keep.insert(super::keys::wal_dir_name(e.node, e.incarnation));
        for w in &e.wal {
            keep.insert(super::keys::wal_dir_name(w.node, w.incarnation));
        }
    }
    let host = host.clone();
    if let Ok(n) = tokio::task::spawn_blocking(move || host.collect_wal_dirs(&keep)).await
        && n > 0
    {
        tracing::info!(removed = n, "write-ahead logs nobody needs were removed");
    }
}

/// The topic list and the dynamic defaults the log was last brought up to.
#[derive(Default)]
struct Synced {
    topics: BTreeMap<String, TopicMeta>,
    defaults: Option<crate::log::config::broker_defaults::Layer>,
    quotas: Option<crate::quota::QuotaTable>,
}

/// A unit this broker leads, and the revision its takeover was written at.
struct Held {
    rec: LeaderRec,
    revision: i64,
}

/// Runs the control loop for ever.
pub async fn run(etcd: Arc<Etcd>, me: NodeInfo, host: Arc<dyn ControlLoopPorts>) {
    let view_task = tokio::spawn(etcd.clone().run_view());
    let mut held: BTreeMap<Unit, Held> = BTreeMap::new();
    // What the log was last brought up to (work only on a change).
    let mut synced = Synced::default();
    let mut join = JOIN_RETRY;
    loop {
        let lease = loop {
            match etcd.register(&me).await {
                Ok(id) => break id,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot register with etcd; retrying");
                    tokio::time::sleep(join.failed()).await;
                }
            }
        };
        if let Err(e) = host.new_incarnation(lease) {
            tracing::error!(error = %e, "cannot open a write-ahead log for the new lease; retrying");
            etcd.lease.lost();
            tokio::time::sleep(join.failed()).await;
            continue;
        }
        join.succeeded();
        tracing::info!(node = me.id, lease, "joined the cluster");
        let generation = etcd.lease.generation();
        let keeper = {
            let etcd = etcd.clone();
            tokio::spawn(async move { etcd.keep_alive(lease).await })
        };
        let mut next_gc = tokio::time::Instant::now() + WAL_GC_EVERY;
        while etcd.lease.generation() == generation {
            let view = etcd.view();
            if view.loaded {
                turn(&etcd, &me, lease, &host, &view, &mut held, &mut synced).await;
                if tokio::time::Instant::now() >= next_gc {
                    next_gc = tokio::time::Instant::now() + WAL_GC_EVERY;
                    if view.live().first() == Some(&me.id) {
                        collect_wal_dirs(&etcd, &host).await;
                    }
                }
            }
            etcd.changed_or(Duration::from_millis(250)).await;
        }
        keeper.abort();
        for u in std::mem::take(&mut held).into_keys() {
            abandon(&host, &u);
        }
        tracing::warn!(
            node = me.id,
            "lease lost: every partition and group shard was dropped; joining again"
        );
        if view_task.is_finished() {
            tracing::error!("the cluster view task ended");
        }
    }
}

/// Drops a unit without writing anything more.
fn abandon(host: &Arc<dyn ControlLoopPorts>, u: &Unit) {
    match u {
        Unit::Partition(t, p) => host.abandon_partition(t, *p),
        Unit::GroupShard(s) => host.abandon_group_shard(*s),
        Unit::TxnShard(s) => host.close_txn_shard(*s),
    }
}

/// Every unit of the view.
fn units(view: &View, shards: u32, txn_shards: u32) -> Vec<Unit> {
    let mut out: Vec<Unit> = view
        .topics
        .values()
        .flat_map(|m| (0..m.partitions).map(|p| Unit::Partition(m.name.clone(), p)))
        .collect();
    out.extend((0..shards).map(Unit::GroupShard));
    out.extend((0..txn_shards).map(Unit::TxnShard));
    out
}

async fn turn(
    etcd: &Arc<Etcd>,
    me: &NodeInfo,
    lease: i64,
    host: &Arc<dyn ControlLoopPorts>,
    view: &View,
    held: &mut BTreeMap<Unit, Held>,
    synced: &mut Synced,
) {
    // Defaults first: topics opened next start from them.
    if synced.defaults != view.broker_defaults {
        let host = host.clone();
        let layer = view.broker_defaults.clone().unwrap_or_default();
        let _ = tokio::task::spawn_blocking(move || host.defaults_changed(&layer)).await;
        synced.defaults.clone_from(&view.broker_defaults);
    }
    if synced.quotas != view.client_quotas {
        host.quotas_changed(&view.client_quotas.clone().unwrap_or_default());
        synced.quotas.clone_from(&view.client_quotas);
    }
    if synced.topics != view.topics {
        let host = host.clone();
        let topics = view.topics.clone();
        let _ = tokio::task::spawn_blocking(move || host.topics_changed(&topics)).await;
        synced.topics.clone_from(&view.topics);
    }
    let all = units(view, host.group_shards(), host.txn_shards());
    let wanted: BTreeSet<&Unit> = all.iter().collect();
    // Units gone from the view (a deleted topic) or held by another.
    let stale: Vec<Unit> = held
        .iter()
        .filter(|(u, h)| {
            !wanted.contains(u)
                || (view.revision >= h.revision && view.leaders.get(*u) != Some(&h.rec))
        })
        .map(|(u, _)| u.clone())
        .collect();
    for u in stale {
        held.remove(&u);
        tracing::warn!(unit = u.key(), "no longer the leader in etcd; dropping it");
        abandon(host, &u);
    }
    let live = view.live();
    if !live.contains(&me.id) {
        return; // our registration is not in the view yet
    }
    for u in &all {
        if !etcd.lease.valid() {
            return;
        }
        let stored = match u {
            Unit::Partition(t, p) => view
                .topics
                .get(t)
                .map_or(&[][..], |m| m.stored_replicas(*p)),
            Unit::GroupShard(_) | Unit::TxnShard(_) => &[],
        };
        let desired = placement::preferred_leader(&live, u, stored);
        let holder = view.leaders.get(u);
        if let Some(h) = held.get(u) {
            if desired.is_some_and(|d| d != me.id) {
                release(etcd, host, u, &h.rec).await;
                held.remove(u);
            }
            continue;
        }
        if desired == Some(me.id)
            && holder.is_none()
            && let Some(h) = take(etcd, me, lease, host, view, u).await
        {
            held.insert(u.clone(), h);
        }
    }
}

async fn take(
    etcd: &Arc<Etcd>,
    me: &NodeInfo,
    lease: i64,
    host: &Arc<dyn ControlLoopPorts>,
    view: &View,
    u: &Unit,
) -> Option<Held> {
    let (rec, revision) = match etcd.acquire(u, me.id, lease).await {
        Ok(Some(r)) => r,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(unit = u.key(), error = %e, "taking the lead failed");
            return None;
        }
    };
    let gate = etcd.lease.gate();
    let opened = {
        let host = host.clone();
        let rec = rec.clone();
        let u = u.clone();
        let meta = match &u {
            Unit::Partition(t, _) => view.topics.get(t).cloned(),
            Unit::GroupShard(_) | Unit::TxnShard(_) => None,
        };
        tokio::task::spawn_blocking(move || match (&u, meta) {
            (Unit::Partition(_, p), Some(meta)) => host.take_over_partition(&meta, *p, &rec, gate),
            (Unit::Partition(t, _), None) => Err(io::Error::other(format!("topic {t} is gone"))),
            (Unit::GroupShard(s), _) => host.open_group_shard(*s, gate),
            (Unit::TxnShard(s), _) => host.open_txn_shard(*s, rec.epoch, gate),
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
    };
    let mine = LeaderRec {
        node: me.id,
        epoch: rec.epoch,
        incarnation: lease,
    };
    if let Err(e) = opened {
        tracing::error!(unit = u.key(), error = %e, "opening a unit taken over failed; giving it up");
        let _ = etcd.release(u, &mine).await;
        return None;
    }
    if let Err(e) = etcd.absorbed(u, &rec, revision).await {
        tracing::warn!(unit = u.key(), error = %e, "recording the replayed write-ahead logs failed (a later takeover replays them again)");
    }
    tracing::info!(unit = u.key(), epoch = rec.epoch, "leading");
    Some(Held {
        rec: mine,
        revision,
    })
}

async fn release(etcd: &Arc<Etcd>, host: &Arc<dyn ControlLoopPorts>, u: &Unit, mine: &LeaderRec) {
    {
        let host = host.clone();
        let u = u.clone();
        let _ = tokio::task::spawn_blocking(move || match &u {
            Unit::Partition(t, p) => host.release_partition(t, *p),
            Unit::GroupShard(s) => host.close_group_shard(*s),
            Unit::TxnShard(s) => host.close_txn_shard(*s),
        })
        .await;
    }
    if let Err(e) = etcd.release(u, mine).await {
        tracing::warn!(unit = u.key(), error = %e, "giving up the lead failed (it ends with the lease)");
    }
    tracing::info!(unit = u.key(), "handed over");
}
