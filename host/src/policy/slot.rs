//! The policy slot: the one place a running broker's current policy lives,
//! so a new policy can take over without a restart.
//!
//! Every decision-maker (each coordinator shard's machine, the idempotent
//! coordinator, the conformance runner's machines) holds the same
//! `Arc<PolicySlot>` and reads it once per decision ([`PolicySlot::current`]):
//! a decision is made wholly by the policy it read, and a swap
//! ([`PolicySlot::replace`]) takes effect between decisions. Vetting a new
//! policy (compiling it, the smoke vectors) happens before the replacement,
//! outside the slot, while the old policy keeps deciding; the replacement
//! itself is one pointer store under a write lock that readers hold only
//! for an `Arc` clone.
//!
//! The slot also counts swaps (accepted and refused) for /metrics, and
//! keeps the features epoch ApiVersions reports (`FinalizedFeaturesEpoch`):
//! it rises with every swap, since the finalized features travel with the
//! policy and a Java client re-reads them only when the epoch grows. It
//! touches nothing else.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::{Policy, ProtocolFeature};

/// The current policy and the swap counters.
#[derive(Debug)]
pub struct PolicySlot {
    /// Held for a clone (readers) or a store (a swap): never across a call.
    current: RwLock<Arc<Policy>>,
    /// Swaps that took effect.
    swaps_ok: AtomicU64,
    /// Offered policies that were refused (the old one kept deciding).
    swaps_refused: AtomicU64,
}

/// What ApiVersions reports of the deciding policy's features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// FinalizedFeaturesEpoch: the number of swaps since start.
    pub epoch: i64,
    pub features: Vec<ProtocolFeature>,
}

impl PolicySlot {
    /// A slot holding `policy`.
    pub fn new(policy: Arc<Policy>) -> Arc<Self> {
        Arc::new(PolicySlot {
            current: RwLock::new(policy),
            swaps_ok: AtomicU64::new(0),
            swaps_refused: AtomicU64::new(0),
        })
    }

    /// The policy deciding now. Read it once per decision and decide with
    /// what was read.
    pub fn current(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `next` the deciding policy; returns the one it replaced.
    /// Decisions already under way finish with the old one.
    pub fn replace(&self, next: Arc<Policy>) -> Arc<Policy> {
        let old = {
            let mut guard = self.current.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *guard, next)
        };
        self.swaps_ok.fetch_add(1, Ordering::Release);
        // The old policy (its instance, compiled code) is dropped by the
        // caller, outside the lock.
        old
    }

    /// The deciding policy's protocol features and their epoch.
    pub fn features(&self) -> Features {
        // The epoch is read before the policy, and a swap stores the policy
        // before it raises the epoch: the features reported are never older
        // than their epoch (at worst newer, and the next swap's epoch is
        // higher still), so a client that keeps the features of the highest
        // epoch it saw never keeps stale ones.
        let epoch = self.swaps_ok.load(Ordering::Acquire) as i64;
        let policy = self.current();
        Features {
            epoch,
            features: policy.identity().protocol_features.clone(),
        }
    }

    /// Counts a refused swap.
    pub fn note_refused(&self) {
        self.swaps_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Swaps that took effect since start.
    pub fn swaps_ok(&self) -> u64 {
        self.swaps_ok.load(Ordering::Relaxed)
    }

    /// Policies refused since start.
    pub fn swaps_refused(&self) -> u64 {
        self.swaps_refused.load(Ordering::Relaxed)
    }
}
