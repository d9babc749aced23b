//! Transaction coordinator shards: which transactional ids this broker
//! coordinates.
//!
//! Transactional ids map onto a fixed number of shards the way Kafka maps
//! them onto the partitions of `__transaction_state`: `abs(hashCode(id)) %
//! 50`, with Java's `String.hashCode` ([`crate::group::offsets_topic::offsets_partition`] computes
//! the same function). Each shard is one [`Coordinator`] with its own
//! policy-driven machine and state log.
//!
//! - Single-node mode: one shard (index 0 of 1), opened at start from
//!   `<data dir>/__transaction_state/state.log`, coordinator epoch 0: every
//!   transactional id is local, as before.
//! - Cluster mode: 50 shards, none open at start. The cluster module opens
//!   a shard when this broker gains it, as its leader at the shard's leader
//!   epoch ([`TxnShards::open_shard`]: the state log on the shared volume,
//!   sealed against the previous coordinator, see
//!   [`TxnStore::open_shard`]); that epoch is the coordinator epoch its
//!   markers carry. Ids of shards not open here answer NOT_COORDINATOR.
//!   The idempotent InitProducerId, which keeps no state, is answered by
//!   a coordinator of this broker's own that never writes.
//!
//! This module touches only the coordinators and their directories; it
//! knows nothing of etcd or placement.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use super::coordinator::Coordinator;
use super::machine::TxnMachine;
use super::store::TxnStore;
use super::tenant::TenantClasses;
use crate::lease_gate::LeaseGate;
use crate::log::GroupCommit;
use crate::policy::{Limits, Policy, PolicySlot};

/// Shards in cluster mode (Kafka's default `transaction.state.log.num.partitions`).
pub const CLUSTER_SHARDS: u32 = 50;

/// The directory of the shard state logs, under the data directory.
pub const DIR: &str = "__transaction_state";

/// The transaction coordinators of this broker.
pub struct TxnShards {
    data_dir: PathBuf,
    /// The one policy slot every shard's machine reads (hot swap).
    policy: Arc<PolicySlot>,
    /// What every decision is made under (`--transaction-max-timeout-ms`).
    limits: Limits,
    /// Each decision's tenant class (`--tenant-class`).
    tenants: Arc<TenantClasses>,
    expiration_ms: i64,
    /// 1 (single-node mode) or [`CLUSTER_SHARDS`].
    count: u32,
    open: RwLock<BTreeMap<u32, Arc<Coordinator>>>,
    /// Single-node mode: the only shard. Cluster mode: a coordinator with no
    /// shard for the idempotent InitProducerId (it keeps no state).
    idempotent: Arc<Coordinator>,
    /// Held while a shard opens, so two opens never race.
    opening: Mutex<()>,
    /// The state logs' flusher (shared by every shard of this broker).
    group_commit: Arc<GroupCommit>,
}

impl std::fmt::Debug for TxnShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnShards")
            .field("count", &self.count)
            .field("local", &self.local_shards())
            .finish_non_exhaustive()
    }
}

impl TxnShards {
    /// Single-node mode: one shard, loaded now from `<own_dir>/__transaction_state`.
    pub fn single(
        own_dir: &Path,
        policy: Arc<PolicySlot>,
        limits: Limits,
        tenants: Arc<TenantClasses>,
        expiration_ms: i64,
    ) -> io::Result<Self> {
        let (store, records) = TxnStore::open(own_dir)?;
        let group_commit = store.group_commit().clone();
        let only = Arc::new(Coordinator::new(
            TxnMachine::with_slot(policy.clone(), limits).with_tenants(tenants.clone()),
            Box::new(store),
            records,
            expiration_ms,
            0,
        ));
        Ok(TxnShards {
            data_dir: own_dir.to_path_buf(),
            policy,
            limits,
            tenants,
            expiration_ms,
            count: 1,
            open: RwLock::new(BTreeMap::from([(0, only.clone())])),
            idempotent: only,
            opening: Mutex::new(()),
            group_commit,
        })
    }

    /// Cluster mode: [`CLUSTER_SHARDS`] shards under `data_dir` (the
    /// shared volume), none open yet; `own_dir` holds the idempotent
    /// path's coordinator (which never writes).
    pub fn cluster(
        data_dir: &Path,
        own_dir: &Path,
        policy: Arc<PolicySlot>,
        limits: Limits,
        tenants: Arc<TenantClasses>,
        expiration_ms: i64,
    ) -> io::Result<Self> {
        let (store, records) = TxnStore::open(own_dir)?;
        let idempotent = Arc::new(Coordinator::new(
            TxnMachine::with_slot(policy.clone(), limits).with_tenants(tenants.clone()),
            Box::new(store),
            records,
            expiration_ms,
            0,
        ));
        Ok(TxnShards {
            data_dir: data_dir.to_path_buf(),
            policy,
            limits,
            tenants,
            expiration_ms,
            count: CLUSTER_SHARDS,
            open: RwLock::new(BTreeMap::new()),
            idempotent,
            opening: Mutex::new(()),
            group_commit: GroupCommit::new(crate::log::FsyncMode::Always),
        })
    }

    /// fdatasync statistics of the state logs (for /metrics).
    pub fn sync_stats(&self) -> &Arc<crate::log::sync::SyncStats> {
        self.group_commit.stats()
    }

    /// Number of shards (1 in single-node mode).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether transactional ids are spread over the cluster's shards.
    pub fn is_sharded(&self) -> bool {
        self.count > 1
    }

    /// The policy deciding now.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.current()
    }

    /// The slot every shard reads its policy from (hot swap).
    pub fn policy_slot(&self) -> &Arc<PolicySlot> {
        &self.policy
    }

    /// The limits every decision is made under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The shard of a transactional id (0 in single-node mode).
    pub fn shard_of(&self, transactional_id: &str) -> u32 {
        if self.count == 1 {
            return 0;
        }
        let p = u32::try_from(crate::group::offsets_topic::offsets_partition(
            transactional_id,
        ))
        .unwrap_or(0);
        p % self.count
    }

    /// The directory of shard `n`'s state logs (cluster mode).
    pub fn shard_dir(data_dir: &Path, n: u32) -> PathBuf {
        data_dir.join(DIR).join(format!("shard-{n}"))
    }

    /// The coordinator of `transactional_id`, if its shard is open here
    /// (None: NOT_COORDINATOR).
    pub fn for_txn(&self, transactional_id: &str) -> Option<Arc<Coordinator>> {
        self.shard(self.shard_of(transactional_id))
    }

    /// The coordinator answering idempotent InitProducerIds.
    pub fn idempotent(&self) -> &Arc<Coordinator> {
        &self.idempotent
    }

    fn shard(&self, n: u32) -> Option<Arc<Coordinator>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&n)
            .cloned()
    }

    /// Starts coordinating shard `n` as its leader at `epoch` (cluster
    /// mode): loads its state log, sealed against the previous leader.
    /// Returns the coordinator, whose Prepare* entries the caller resumes
    /// ([`Coordinator::resume`]); None when it was open already. Blocking.
    pub fn open_shard(
        &self,
        n: u32,
        epoch: i32,
        gate: LeaseGate,
    ) -> io::Result<Option<Arc<Coordinator>>> {
        if self.count == 1 || n >= self.count {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "transaction shard {n} does not exist (shards: {})",
                    self.count
                ),
            ));
        }
        let _opening = self.opening.lock().unwrap_or_else(|p| p.into_inner());
        if self.shard(n).is_some() {
            return Ok(None);
        }
        let (store, records) = TxnStore::open_shard(
            &Self::shard_dir(&self.data_dir, n),
            epoch,
            gate,
            self.group_commit.clone(),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("opening transaction shard {n}: {e}")))?;
        let c = Arc::new(Coordinator::new(
            TxnMachine::with_slot(self.policy.clone(), self.limits)
                .with_tenants(self.tenants.clone()),
            Box::new(store),
            records,
            self.expiration_ms,
            epoch,
        ));
        self.open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(n, c.clone());
        tracing::info!(
            shard = n,
            coordinator_epoch = epoch,
            "transaction shard opened"
        );
        Ok(Some(c))
    }

    fn take(&self, n: u32) -> Option<Arc<Coordinator>> {
        if self.count == 1 {
            return None;
        }
        self.open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&n)
    }

    /// Stops coordinating shard `n` (handed over, or the lease was lost):
    /// nothing more is written by it; its in-flight work stops at its next
    /// write (the coordinator is retired).
    pub fn close_shard(&self, n: u32) {
        if let Some(c) = self.take(n) {
            c.retire();
            tracing::info!(shard = n, "transaction shard closed");
        }
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
    pub fn all(&self) -> Vec<Arc<Coordinator>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// Test seeding (the `txn-seed` command): appends `entry` through the real
/// store, to the single-node log or (with `cluster`) to a new shard log of
/// its transactional id, before any broker has led the shard. Returns the
/// log's directory.
pub async fn seed(
    data_dir: &Path,
    cluster: bool,
    entry: &crate::policy::Entry,
) -> io::Result<PathBuf> {
    let record = super::record::StateRecord::upsert(entry, Some("seed"));
    if !cluster {
        let (store, _) = TxnStore::open(data_dir)?;
        store.append(&record).await?;
        return Ok(data_dir.join(DIR));
    }
    let shard = u32::try_from(crate::group::offsets_topic::offsets_partition(
        &entry.transactional_id,
    ))
    .unwrap_or(0)
        % CLUSTER_SHARDS;
    let dir = TxnShards::shard_dir(data_dir, shard);
    // Below the first leader's epoch (0).
    let (store, _) = TxnStore::open_shard(
        &dir,
        -1,
        Arc::new(|| true),
        GroupCommit::new(crate::log::FsyncMode::Always),
    )?;
    store.append(&record).await?;
    Ok(dir)
}
