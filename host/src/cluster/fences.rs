//! The cross-broker fence ring: a producer-epoch bump
//! made by this broker's transaction coordinator reaches the partitions
//! every other broker leads, so a zombie producer's batches at the old
//! epoch are refused everywhere, not only where the coordinator runs.
//!
//! Two paths carry a bump, and [`Applied`] (shared by both) makes each
//! (producer id, epoch) apply once:
//!
//! - the file: [`FenceRing::broadcast`] appends to this broker's outbound
//!   fence file ([`super::fence_log`]); every peer polls the directory every
//!   `--fence-poll-ms` ([`super::fence_watcher`]). Slow, but it needs no etcd
//!   and survives a missed watch event.
//! - the push (`--fence-push`, default on): the bump also goes, through a
//!   bounded queue and a publisher task, to etcd under `fences/<own id>`;
//!   every peer's view watch hands it back ([`super::etcd::Etcd::fence_events`])
//!   and it is applied at once.
//!
//! Applying a fence means `Partition::fence_producer` on every partition
//! open here; the applied fences are remembered (bounded), so a partition
//! taken over later gets them too ([`FenceRing::fence_taken_over`]).
//! `broadcast` never waits on disk or etcd. Single-node mode has no ring
//! (unless [`RingSettings::outbound_file`] asks for the outbound file, for
//! tests). What applying touches comes through [`FenceHost`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::etcd::Etcd;
use super::fence_log::{Fence, FenceLog};
use super::fence_watcher::{Applied, FenceWatcher};
use super::keys::FenceRec;
use crate::log::Partition;

/// Bumps waiting for their etcd put; past this the newest are dropped (the
/// file carries them).
const PUSH_QUEUE: usize = 4096;
/// Fence events from the watch waiting to be applied.
const EVENT_QUEUE: usize = 4096;

static PUSH_DROPPED: crate::ratelimit::RateLimit = crate::ratelimit::RateLimit::per_second();
static PUSH_FAILED: crate::ratelimit::RateLimit =
    crate::ratelimit::RateLimit::new(Duration::from_secs(10));

/// How a fence reached this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Push,
    Poll,
}

impl Via {
    pub fn name(self) -> &'static str {
        match self {
            Via::Push => "push",
            Via::Poll => "poll",
        }
    }
}

/// What a ring is opened with.
#[derive(Debug, Clone)]
pub struct RingSettings {
    /// The data directory (the fence files live under it).
    pub data_dir: PathBuf,
    pub node_id: i32,
    /// How often the peers' fence files are read (`--fence-poll-ms`).
    pub poll: Duration,
    /// Cluster mode: push bumps through etcd too (`--fence-push`).
    pub push: bool,
    /// Single-node mode: write the outbound file anyway (tests).
    pub outbound_file: bool,
}

/// What applying a peer's fence touches (the broker implements it).
pub trait FenceHost: Send + Sync + 'static {
    /// This broker's ring.
    fn ring(&self) -> &FenceRing;

    /// Fences `pid` at `epoch` on every partition open here; returns how
    /// many changed.
    fn fence_open_partitions(&self, pid: i64, epoch: i16) -> usize;
}

/// The ring of one broker.
#[derive(Debug)]
pub struct FenceRing {
    own: i32,
    root: PathBuf,
    poll: Duration,
    /// Cluster mode: peers apply what this broker bumps.
    clustered: bool,
    outbound: Option<FenceLog>,
    push: Option<mpsc::Sender<FenceRec>>,
    push_rx: Mutex<Option<mpsc::Receiver<FenceRec>>>,
    applied: Arc<Applied>,
    applied_push: AtomicU64,
    applied_poll: AtomicU64,
}

impl FenceRing {
    /// The ring `settings` ask for: in cluster mode the outbound file and
    /// (with `push`) the push queue; in single-node mode the outbound file
    /// only if `outbound_file`, else nothing.
    pub fn open(settings: &RingSettings, clustered: bool) -> std::io::Result<FenceRing> {
        let outbound = if clustered || settings.outbound_file {
            Some(FenceLog::open(&settings.data_dir, settings.node_id)?)
        } else {
            None
        };
        let (push, push_rx) = if clustered && settings.push {
            let (tx, rx) = mpsc::channel(PUSH_QUEUE);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        Ok(FenceRing {
            own: settings.node_id,
            root: settings.data_dir.clone(),
            poll: settings.poll.max(Duration::from_millis(10)),
            clustered,
            outbound,
            push,
            push_rx: Mutex::new(push_rx),
            applied: Arc::new(Applied::default()),
            applied_push: AtomicU64::new(0),
            applied_poll: AtomicU64::new(0),
        })
    }

    /// This broker's outbound fence file, if it writes one.
    pub fn outbound(&self) -> Option<&FenceLog> {
        self.outbound.as_ref()
    }

    /// Tells the peers that `pid` moved to `epoch` (epoch 0 is a new
    /// producer: nothing to fence). Returns at once.
    pub fn broadcast(&self, pid: i64, epoch: i16) {
        if epoch <= 0 {
            return;
        }
        let at_ms = crate::clock::now_ms();
        if self.clustered {
            // Partitions this broker takes over later need it too.
            self.applied.offer(pid, Fence { epoch, at_ms });
        }
        if let Some(log) = &self.outbound {
            log.append_at(pid, epoch, at_ms);
        }
        if let Some(tx) = &self.push
            && tx.try_send(FenceRec { pid, epoch, at_ms }).is_err()
            && let Some(suppressed) = PUSH_DROPPED.allow()
        {
            tracing::warn!(target: "kaas::fence", pid, epoch, suppressed, "the fence push queue is full; peers get this fence from the file");
        }
    }

    /// Fences every remembered producer on a partition this broker just
    /// took over; returns how many entries changed.
    pub fn fence_taken_over(&self, part: &Partition) -> usize {
        self.applied
            .snapshot()
            .into_iter()
            .filter(|&(pid, epoch)| part.fence_producer(pid, epoch))
            .count()
    }

    /// Fences applied through `path` so far.
    pub fn applied_total(&self, path: Via) -> u64 {
        match path {
            Via::Push => self.applied_push.load(Ordering::Relaxed),
            Via::Poll => self.applied_poll.load(Ordering::Relaxed),
        }
    }

    /// Applies a fence that passed [`Applied::offer`] to every partition
    /// open here.
    fn apply(&self, host: &dyn FenceHost, pid: i64, fence: Fence, path: Via) {
        let fenced = host.fence_open_partitions(pid, fence.epoch);
        let counter = match path {
            Via::Push => &self.applied_push,
            Via::Poll => &self.applied_poll,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let delay_ms = crate::clock::now_ms().saturating_sub(fence.at_ms);
        tracing::debug!(target: "kaas::fence", pid, epoch = fence.epoch, path = path.name(), delay_ms, fenced, "peer fence applied");
    }
}

/// Cluster mode: starts the poll of the fence files, and (with the push
/// path on) the publisher of this broker's bumps and the applier of the
/// peers' bumps the etcd watch delivers.
pub fn spawn(host: Arc<dyn FenceHost>, etcd: Arc<Etcd>) {
    let ring = host.ring();
    if !ring.clustered {
        return;
    }
    tokio::spawn(run_poll(host.clone()));
    let rx = ring
        .push_rx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(mut rx) = rx {
        let own = ring.own;
        let e = etcd.clone();
        tokio::spawn(async move {
            while let Some(rec) = rx.recv().await {
                if let Err(err) = e.publish_fence(own, &rec).await
                    && let Some(suppressed) = PUSH_FAILED.allow()
                {
                    tracing::warn!(target: "kaas::fence", error = %err, suppressed, "pushing a fence to etcd failed; peers get it from the file");
                }
            }
        });
        let mut events = etcd.fence_events(EVENT_QUEUE);
        let b = host.clone();
        tokio::spawn(async move {
            while let Some((from, rec)) = events.recv().await {
                let ring = b.ring();
                if from == ring.own {
                    continue;
                }
                let fence = Fence {
                    epoch: rec.epoch,
                    at_ms: rec.at_ms,
                };
                if ring.applied.offer(rec.pid, fence) {
                    ring.apply(&*b, rec.pid, fence, Via::Push);
                }
            }
        });
    }
}

/// Polls the fence directory every `fence_poll` and applies what is new.
async fn run_poll(host: Arc<dyn FenceHost>) {
    let ring = host.ring();
    let watcher = Arc::new(FenceWatcher::new(
        &ring.root,
        ring.own,
        ring.applied.clone(),
    ));
    let mut tick = tokio::time::interval(ring.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let w = watcher.clone();
        let b = host.clone();
        let done = tokio::task::spawn_blocking(move || {
            for f in w.tick() {
                b.ring().apply(&*b, f.pid, f.fence, Via::Poll);
            }
        })
        .await;
        if let Err(e) = done {
            tracing::error!(target: "kaas::fence", error = %e, "a fence poll failed");
        }
    }
}
