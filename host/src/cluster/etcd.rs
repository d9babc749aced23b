//! The etcd side of cluster mode: the broker's lease and its keep-alive,
//! its membership key, a cached view of the cluster kept current by a watch,
//! and the few transactions that change leadership, topics and producer-id
//! blocks, and the fence ring's push path (each broker's last bump under
//! `fences/<id>`, handed to [`Etcd::fence_events`]). It decides nothing about placement (see [`super::placement`] and
//! [`super::reconcile`]) and touches no file.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    WatchOptions,
};
use tokio::sync::Notify;

use super::keys::{EpochRec, FenceRec, Keys, LeaderRec, NodeInfo, Parsed, Unit, WalSource};
use super::lease::LeaseState;
use crate::log::TopicMeta;
use crate::ratelimit::Backoff;

/// What every broker knows of the cluster, as of `revision`.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub brokers: BTreeMap<i32, NodeInfo>,
    pub topics: BTreeMap<String, TopicMeta>,
    pub leaders: BTreeMap<Unit, LeaderRec>,
    /// The cluster-wide dynamic broker defaults (None: never set).
    pub broker_defaults: Option<crate::log::config::broker_defaults::Layer>,
    /// The cluster-wide client quotas (None: never set).
    pub client_quotas: Option<crate::quota::QuotaTable>,
    pub revision: i64,
    /// False until the first full read.
    pub loaded: bool,
}

impl View {
    /// Live broker ids, ascending.
    pub fn live(&self) -> Vec<i32> {
        self.brokers.keys().copied().collect()
    }
}

/// An etcd error, as the rest of the broker sees it.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("etcd: {0}")]
    Client(#[from] etcd_client::Error),
    #[error("etcd record {key}: {error}")]
    Record { key: String, error: String },
    #[error("etcd did not answer within {0:?}")]
    Timeout(Duration),
}

/// While etcd is away these repeat every few hundred milliseconds: one line
/// a second each, with the count held back.
/// The pause before a keep-alive stream that broke (an answer missing or
/// late) is opened again.
const KEEP_ALIVE_REOPEN: Backoff = Backoff::fixed(Duration::from_millis(100));

/// The wait before the view is read again after its watch failed.
const VIEW_RELOAD: Backoff = Backoff::fixed(Duration::from_millis(200));

static UNREACHABLE: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();
static UNANSWERED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();
static UNWATCHED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();
static FENCES_DROPPED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();

/// Most operations one transaction may hold (etcd's default
/// `--max-txn-ops` is 128).
pub const MAX_TXN_OPS: usize = 100;

/// Bounds every etcd call, so a partitioned etcd cannot hold a request.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);

async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, EtcdError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(EtcdError::Timeout(CALL_TIMEOUT)),
    }
}

fn decode<T: serde::de::DeserializeOwned>(key: &[u8], v: &[u8]) -> Result<T, EtcdError> {
    serde_json::from_slice(v).map_err(|e| EtcdError::Record {
        key: String::from_utf8_lossy(key).into_owned(),
        error: e.to_string(),
    })
}

fn encode<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // Plain records of strings and integers always serialize.
    serde_json::to_vec(v).unwrap_or_default()
}

/// One broker's connection to etcd.
pub struct Etcd {
    client: Client,
    pub keys: Keys,
    pub ttl: Duration,
    pub lease: Arc<LeaseState>,
    view: RwLock<Arc<View>>,
    /// Woken whenever the view changes.
    pub changed: Notify,
    /// The first producer id no block has taken, as last seen.
    pid_next: AtomicI64,
    /// Where the watch hands each `fences/<id>` put (see [`Self::fence_events`]).
    fence_tx: Mutex<Option<tokio::sync::mpsc::Sender<(i32, FenceRec)>>>,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("root", &self.keys.root())
            .field("ttl", &self.ttl)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Etcd {
    /// Connects (retrying until `deadline`).
    pub async fn connect(
        endpoints: &[String],
        cluster_id: &str,
        ttl: Duration,
    ) -> Result<Arc<Etcd>, EtcdError> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(CALL_TIMEOUT)
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
        let client = bounded(Client::connect(endpoints, Some(opts))).await?;
        Ok(Arc::new(Etcd {
            client,
            keys: Keys::new(cluster_id),
            ttl,
            lease: Arc::new(LeaseState::default()),
            view: RwLock::new(Arc::new(View::default())),
            changed: Notify::new(),
            pid_next: AtomicI64::new(0),
            fence_tx: Mutex::new(None),
        }))
    }

    fn client(&self) -> Client {
        self.client.clone()
    }

    /// The current view.
    pub fn view(&self) -> Arc<View> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn ttl_secs(&self) -> i64 {
        i64::try_from(self.ttl.as_millis().div_ceil(1000))
            .unwrap_or(i64::MAX)
            .max(1)
    }

    /// Grants a new lease and registers `me` under it; returns the lease id.
    pub async fn register(&self, me: &NodeInfo) -> Result<i64, EtcdError> {
        let sent = Instant::now();
        let granted = bounded(self.client().lease_grant(self.ttl_secs(), None)).await?;
        let id = granted.id();
        let ttl = Duration::from_secs(u64::try_from(granted.ttl()).unwrap_or(0));
        let mut me = me.clone();
        me.incarnation = id;
        bounded(self.client().put(
            self.keys.broker(me.id),
            encode(&me),
            Some(PutOptions::new().with_lease(id)),
        ))
        .await?;
        self.lease.granted(id, sent, ttl);
        Ok(id)
    }

    /// Keeps lease `id` alive until etcd says it is gone (returns then).
    /// While etcd cannot be reached it keeps trying; the gate closes by
    /// itself when the deadline passes.
    pub async fn keep_alive(&self, id: i64) {
        let every = (self.ttl / 5).max(Duration::from_millis(100));
        // etcd out of reach: the next try one keep-alive period later.
        let mut unreachable = Backoff::fixed(every);
        let mut reopen = KEEP_ALIVE_REOPEN;
        loop {
            let stream = bounded(self.client().lease_keep_alive(id)).await;
            let (mut keeper, mut answers) = match stream {
                Ok(s) => s,
                // The client opens the stream with a first keep-alive and
                // answers this when etcd says the lease has no TTL left.
                Err(EtcdError::Client(etcd_client::Error::LeaseKeepAliveError(why))) => {
                    tracing::error!(
                        lease = id,
                        %why,
                        "etcd says the lease has expired: this broker leads nothing now"
                    );
                    self.lease.lost();
                    return;
                }
                Err(e) => {
                    if let Some(suppressed) = UNREACHABLE.allow() {
                        tracing::warn!(error = %e, suppressed, "lease keep-alive: cannot reach etcd");
                    }
                    tokio::time::sleep(unreachable.failed()).await;
                    continue;
                }
            };
            loop {
                let sent = Instant::now();
                let answer = tokio::time::timeout(every.max(Duration::from_millis(500)), async {
                    keeper.keep_alive().await?;
                    answers.message().await
                })
                .await;
                match answer {
                    Ok(Ok(Some(a))) if a.ttl() > 0 => {
                        let ttl = Duration::from_secs(u64::try_from(a.ttl()).unwrap_or(0));
                        self.lease.renewed(sent, ttl);
                    }
                    Ok(Ok(Some(_))) => {
                        tracing::error!(
                            lease = id,
                            "etcd says the lease has expired: this broker leads nothing now"
                        );
                        self.lease.lost();
                        return;
                    }
                    Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                        if let Some(suppressed) = UNANSWERED.allow() {
                            tracing::warn!(
                                lease = id,
                                remaining_ms = self.lease.remaining().as_millis() as u64,
                                suppressed,
                                "lease keep-alive unanswered; retrying"
                            );
                        }
                        break;
                    }
                }
                let next = sent + every;
                tokio::time::sleep_until(next.into()).await;
            }
            tokio::time::sleep(reopen.failed()).await;
        }
    }

    /// Keeps the view current: a full read, then a watch from its revision;
    /// any failure starts over with a full read.
    pub async fn run_view(self: Arc<Self>) {
        let mut reload = VIEW_RELOAD;
        loop {
            if let Err(e) = self.follow().await {
                if let Some(suppressed) = UNWATCHED.allow() {
                    tracing::warn!(error = %e, suppressed, "cluster view: etcd watch failed; reloading");
                }
                tokio::time::sleep(reload.failed()).await;
            }
        }
    }

    async fn follow(&self) -> Result<(), EtcdError> {
        let root = self.keys.root().to_string();
        let all = bounded(
            self.client()
                .get(root.clone(), Some(GetOptions::new().with_prefix())),
        )
        .await?;
        let mut v = View::default();
        for kv in all.kvs() {
            self.apply(&mut v, kv.key(), Some(kv.value()));
        }
        v.revision = all.header().map_or(0, |h| h.revision());
        v.loaded = true;
        let start = v.revision + 1;
        self.publish(v);
        let mut stream = bounded(self.client().watch(
            root,
            Some(WatchOptions::new().with_prefix().with_start_revision(start)),
        ))
        .await?;
        while let Some(resp) = stream.message().await? {
            if resp.canceled() {
                return Err(EtcdError::Record {
                    key: self.keys.root().into(),
                    error: "watch canceled".into(),
                });
            }
            if resp.events().is_empty() {
                continue;
            }
            let mut v = (*self.view()).clone();
            for ev in resp.events() {
                if let Some(kv) = ev.kv() {
                    let value = (ev.event_type() == EventType::Put).then(|| kv.value());
                    self.apply(&mut v, kv.key(), value);
                    v.revision = v.revision.max(kv.mod_revision());
                }
            }
            self.publish(v);
        }
        Err(EtcdError::Record {
            key: self.keys.root().into(),
            error: "watch ended".into(),
        })
    }

    fn publish(&self, v: View) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(v);
        self.changed.notify_waiters();
    }

    fn apply(&self, v: &mut View, key: &[u8], value: Option<&[u8]>) {
        let Some(parsed) = self.keys.parse(key) else {
            return;
        };
        let bad = |e: EtcdError| tracing::error!(error = %e, "unreadable cluster record; ignored");
        match (parsed, value) {
            (Parsed::Broker(id), Some(b)) => match decode::<NodeInfo>(key, b) {
                Ok(n) => {
                    v.brokers.insert(id, n);
                }
                Err(e) => bad(e),
            },
            (Parsed::Broker(id), None) => {
                v.brokers.remove(&id);
            }
            (Parsed::Topic(name), Some(b)) => match decode::<TopicMeta>(key, b) {
                Ok(m) => {
                    v.topics.insert(name, m);
                }
                Err(e) => bad(e),
            },
            (Parsed::Topic(name), None) => {
                v.topics.remove(&name);
            }
            (Parsed::Leader(u), Some(b)) => match decode::<LeaderRec>(key, b) {
                Ok(l) => {
                    v.leaders.insert(u, l);
                }
                Err(e) => bad(e),
            },
            (Parsed::Leader(u), None) => {
                v.leaders.remove(&u);
            }
            (Parsed::ProducerIds, Some(b)) => {
                if let Some(n) = std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()) {
                    self.pid_next.fetch_max(n, Ordering::AcqRel);
                }
            }
            (Parsed::Fence(node), Some(b)) => match decode::<FenceRec>(key, b) {
                Ok(f) => self.fence_event(node, f),
                Err(e) => bad(e),
            },
            (Parsed::BrokerDefaults, Some(b)) => match decode(key, b) {
                Ok(d) => v.broker_defaults = Some(d),
                Err(e) => bad(e),
            },
            (Parsed::BrokerDefaults, None) => v.broker_defaults = None,
            (Parsed::ClientQuotas, Some(b)) => match decode(key, b) {
                Ok(q) => v.client_quotas = Some(q),
                Err(e) => bad(e),
            },
            (Parsed::ClientQuotas, None) => v.client_quotas = None,
            (Parsed::ProducerIds, None) | (Parsed::Epoch(_), _) | (Parsed::Fence(_), None) => {}
        }
    }

    /// Hands a fence put to the fence ring; a full queue drops it (the
    /// ring's poll of the fence files is the backstop).
    fn fence_event(&self, node: i32, f: FenceRec) {
        let tx = self.fence_tx.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = tx.as_ref()
            && tx.try_send((node, f)).is_err()
            && let Some(suppressed) = FENCES_DROPPED.allow()
        {
            tracing::warn!(
                suppressed,
                "fence events are not being taken fast enough; dropped one (the fence-file poll applies it)"
            );
        }
    }

    /// From now on, every `fences/<broker>` put the view's watch (or full
    /// read) sees arrives here as (broker id, record), up to `capacity`
    /// waiting. Replaces an earlier receiver.
    pub fn fence_events(&self, capacity: usize) -> tokio::sync::mpsc::Receiver<(i32, FenceRec)> {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        *self.fence_tx.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        rx
    }

    /// Puts broker `node`'s last bump under `fences/<node>`, attached to
    /// this broker's lease (so it goes with the broker).
    pub async fn publish_fence(&self, node: i32, f: &FenceRec) -> Result<(), EtcdError> {
        let lease = self.lease.id();
        let key = self.keys.fence(node);
        if lease == 0 {
            return Err(EtcdError::Record {
                key,
                error: "no lease yet".into(),
            });
        }
        bounded(
            self.client()
                .put(key, encode(f), Some(PutOptions::new().with_lease(lease))),
        )
        .await?;
        Ok(())
    }

    /// Takes the lead of `unit` if nobody holds it: the new epoch is one
    /// above the last (0 for a unit never led), and the write-ahead log of
    /// the last leader joins the ones to replay. Returns the new record and
    /// the revision it was written at; None when someone else holds the
    /// unit or took it first.
    pub async fn acquire(
        &self,
        unit: &Unit,
        me: i32,
        lease: i64,
    ) -> Result<Option<(EpochRec, i64)>, EtcdError> {
        let ekey = self.keys.epoch(unit);
        let lkey = self.keys.leader(unit);
        let got = bounded(self.client().get(ekey.clone(), None)).await?;
        let (prev, rev) = match got.kvs().first() {
            Some(kv) => (
                Some(decode::<EpochRec>(kv.key(), kv.value())?),
                kv.mod_revision(),
            ),
            None => (None, 0),
        };
        let next = match &prev {
            None => EpochRec {
                epoch: 0,
                node: me,
                incarnation: lease,
                wal: Vec::new(),
            },
            Some(p) => {
                let mut wal = p.wal.clone();
                let last = WalSource {
                    node: p.node,
                    incarnation: p.incarnation,
                    epoch: p.epoch,
                };
                if !wal.contains(&last) {
                    wal.push(last);
                }
                EpochRec {
                    epoch: p.epoch.saturating_add(1),
                    node: me,
                    incarnation: lease,
                    wal,
                }
            }
        };
        let leader = LeaderRec {
            node: me,
            epoch: next.epoch,
            incarnation: lease,
        };
        let txn = Txn::new()
            .when([
                Compare::create_revision(lkey.clone(), CompareOp::Equal, 0),
                Compare::mod_revision(ekey.clone(), CompareOp::Equal, rev),
            ])
            .and_then([
                TxnOp::put(
                    lkey,
                    encode(&leader),
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::put(ekey, encode(&next), None),
            ]);
        let r = bounded(self.client().txn(txn)).await?;
        if !r.succeeded() {
            return Ok(None);
        }
        Ok(Some((next, r.header().map_or(0, |h| h.revision()))))
    }

    /// After a takeover took every write-ahead log back: the unit's record
    /// no longer lists them (if nobody changed it since `rev`).
    pub async fn absorbed(&self, unit: &Unit, rec: &EpochRec, rev: i64) -> Result<(), EtcdError> {
        if rec.wal.is_empty() {
            return Ok(());
        }
        let ekey = self.keys.epoch(unit);
        let mut done = rec.clone();
        done.wal.clear();
        let txn = Txn::new()
            .when([Compare::mod_revision(ekey.clone(), CompareOp::Equal, rev)])
            .and_then([TxnOp::put(ekey, encode(&done), None)]);
        bounded(self.client().txn(txn)).await?;
        Ok(())
    }

    /// Gives up the lead of `unit` (only if this broker still holds it).
    pub async fn release(&self, unit: &Unit, mine: &LeaderRec) -> Result<(), EtcdError> {
        let lkey = self.keys.leader(unit);
        let txn = Txn::new()
            .when([Compare::value(lkey.clone(), CompareOp::Equal, encode(mine))])
            .and_then([TxnOp::delete(lkey, None)]);
        bounded(self.client().txn(txn)).await?;
        Ok(())
    }

    /// Creates a topic's record; false if the topic exists.
    pub async fn create_topic(&self, meta: &TopicMeta) -> Result<bool, EtcdError> {
        let key = self.keys.topic(&meta.name);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, encode(meta), None)]);
        Ok(bounded(self.client().txn(txn)).await?.succeeded())
    }

    /// Replaces a topic's record `meta` by `new` (a partition count or a
    /// config change); false if the record changed meanwhile or is gone.
    pub async fn replace_topic(
        &self,
        meta: &TopicMeta,
        new: &TopicMeta,
    ) -> Result<bool, EtcdError> {
        let key = self.keys.topic(&meta.name);
        let txn = Txn::new()
            .when([Compare::value(key.clone(), CompareOp::Equal, encode(meta))])
            .and_then([TxnOp::put(key, encode(new), None)]);
        Ok(bounded(self.client().txn(txn)).await?.succeeded())
    }

    /// Replaces the dynamic broker defaults `old` (None: never set) by
    /// `new`; false if they changed meanwhile.
    pub async fn replace_broker_defaults(
        &self,
        old: Option<&crate::log::config::broker_defaults::Layer>,
        new: &crate::log::config::broker_defaults::Layer,
    ) -> Result<bool, EtcdError> {
        self.replace_value(self.keys.broker_defaults(), old, new)
            .await
    }

    /// Replaces the client quotas `old` (None: never set) by `new`; false
    /// if they changed meanwhile.
    pub async fn replace_client_quotas(
        &self,
        old: Option<&crate::quota::QuotaTable>,
        new: &crate::quota::QuotaTable,
    ) -> Result<bool, EtcdError> {
        self.replace_value(self.keys.client_quotas(), old, new)
            .await
    }

    /// Puts `new` at `key` if it still holds `old` (None: never set); false
    /// if it changed meanwhile. One agreed value replaced whole.
    async fn replace_value<T: serde::Serialize>(
        &self,
        key: String,
        old: Option<&T>,
        new: &T,
    ) -> Result<bool, EtcdError> {
        let unchanged = match old {
            Some(old) => Compare::value(key.clone(), CompareOp::Equal, encode(old)),
            None => Compare::create_revision(key.clone(), CompareOp::Equal, 0),
        };
        let txn = Txn::new()
            .when([unchanged])
            .and_then([TxnOp::put(key, encode(new), None)]);
        Ok(bounded(self.client().txn(txn)).await?.succeeded())
    }

    /// Deletes a topic's record and its partitions' leadership and epoch
    /// records; false if it did not exist.
    pub async fn delete_topic(&self, name: &str) -> Result<bool, EtcdError> {
        let key = self.keys.topic(name);
        let units = |kind: &str| format!("{}{kind}/p/{name}/", self.keys.root());
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Greater, 0)])
            .and_then([
                TxnOp::delete(key, None),
                TxnOp::delete(
                    units("leaders"),
                    Some(etcd_client::DeleteOptions::new().with_prefix()),
                ),
                TxnOp::delete(
                    units("epochs"),
                    Some(etcd_client::DeleteOptions::new().with_prefix()),
                ),
            ]);
        Ok(bounded(self.client().txn(txn)).await?.succeeded())
    }

    /// Takes a block of `size` producer ids no other broker will ever hand
    /// out; returns its first id.
    pub async fn producer_id_block(&self, size: i64) -> Result<i64, EtcdError> {
        let key = self.keys.producer_ids();
        for _ in 0..100 {
            let got = bounded(self.client().get(key.clone(), None)).await?;
            let (start, cmp) = match got.kvs().first() {
                Some(kv) => {
                    let n: i64 = kv
                        .value_str()
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| EtcdError::Record {
                            key: key.clone(),
                            error: "not an integer".into(),
                        })?;
                    (
                        n,
                        Compare::mod_revision(key.clone(), CompareOp::Equal, kv.mod_revision()),
                    )
                }
                None => (
                    0,
                    Compare::create_revision(key.clone(), CompareOp::Equal, 0),
                ),
            };
            let end = start.saturating_add(size);
            let txn =
                Txn::new()
                    .when([cmp])
                    .and_then([TxnOp::put(key.clone(), end.to_string(), None)]);
            if bounded(self.client().txn(txn)).await?.succeeded() {
                self.pid_next.fetch_max(end, Ordering::AcqRel);
                return Ok(start);
            }
        }
        Err(EtcdError::Record {
            key,
            error: "producer id block: too much contention".into(),
        })
    }

    /// The first producer id no block has taken, as last seen.
    pub fn producer_ids_next(&self) -> i64 {
        self.pid_next.load(Ordering::Acquire)
    }

    /// Reads the producer-id counter again (a pid above what this broker
    /// has seen may come from a block another broker just took).
    pub async fn refresh_producer_ids(&self) -> Result<i64, EtcdError> {
        let got = bounded(self.client().get(self.keys.producer_ids(), None)).await?;
        if let Some(n) = got
            .kvs()
            .first()
            .and_then(|kv| kv.value_str().ok())
            .and_then(|s| s.parse::<i64>().ok())
        {
            self.pid_next.fetch_max(n, Ordering::AcqRel);
        }
        Ok(self.producer_ids_next())
    }

    /// Every unit's epoch record (for garbage-collecting write-ahead logs).
    pub async fn epochs(&self) -> Result<Vec<EpochRec>, EtcdError> {
        let got = bounded(self.client().get(
            self.keys.epochs_prefix(),
            Some(GetOptions::new().with_prefix()),
        ))
        .await?;
        got.kvs()
            .iter()
            .map(|kv| decode::<EpochRec>(kv.key(), kv.value()))
            .collect()
    }

    // Security: the ACL store (security::acl_store) keeps ACLs under
    // `acls/`, read and followed by its own watch, not by the view's.

    /// Every key and value under `prefix`, and the revision they were read at.
    pub async fn get_prefix(
        &self,
        prefix: &str,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, i64), EtcdError> {
        let all = bounded(
            self.client()
                .get(prefix, Some(GetOptions::new().with_prefix())),
        )
        .await?;
        let revision = all.header().map_or(0, |h| h.revision());
        let kvs = all
            .kvs()
            .iter()
            .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
            .collect();
        Ok((kvs, revision))
    }

    /// A watch of every key under `prefix`, from revision `start`.
    pub async fn watch_prefix(
        &self,
        prefix: &str,
        start: i64,
    ) -> Result<etcd_client::WatchStream, EtcdError> {
        bounded(self.client().watch(
            prefix,
            Some(WatchOptions::new().with_prefix().with_start_revision(start)),
        ))
        .await
    }

    /// Puts and deletes keys in one transaction (at most [`MAX_TXN_OPS`]).
    pub async fn put_and_delete(
        &self,
        puts: Vec<(String, Vec<u8>)>,
        deletes: Vec<String>,
    ) -> Result<(), EtcdError> {
        let ops: Vec<TxnOp> = puts
            .into_iter()
            .map(|(k, v)| TxnOp::put(k, v, None))
            .chain(deletes.into_iter().map(|k| TxnOp::delete(k, None)))
            .collect();
        if ops.is_empty() {
            return Ok(());
        }
        bounded(self.client().txn(Txn::new().and_then(ops))).await?;
        Ok(())
    }

    /// Waits until the view changes or `max` passes.
    pub async fn changed_or(&self, max: Duration) {
        let _ = tokio::time::timeout(max, self.changed.notified()).await;
    }
}
