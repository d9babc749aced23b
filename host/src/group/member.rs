//! One member of a classic group: its identity, timeouts, the protocols it
//! supports (name and opaque metadata, in its order of preference), its
//! current assignment, the JoinGroup/SyncGroup answers it is waiting for,
//! and when its session expires.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::outcome::{JoinOutcome, SyncOutcome};

/// A member.
#[derive(Debug)]
pub struct Member {
    pub id: String,
    /// group.instance.id of a static member.
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: Duration,
    pub session_timeout: Duration,
    pub protocol_type: String,
    /// (name, metadata), most preferred first. Metadata is never parsed
    /// here; it goes to the leader as it came.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub(super) join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    pub(super) sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
    /// Joined but not yet through a completed join phase.
    pub is_new: bool,
    /// The session (or, while new, the join) deadline.
    pub(super) deadline: Instant,
    /// Order of arrival: the oldest member leads when a leader is needed.
    pub(super) order: u64,
}

impl Member {
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }

    /// This member's metadata for a protocol.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Same protocols, same order, same metadata (Kafka's `matches`).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &HashSet<&str>) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .find(|n| candidates.contains(n))
    }

    pub fn awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }

    pub fn awaiting_sync(&self) -> bool {
        self.sync_waiter.is_some()
    }

    /// When this member is removed unless it heartbeats. None while a
    /// pending JoinGroup or SyncGroup stands in for its heartbeats (the
    /// rebalance's own deadlines cover it then); a new member awaiting its
    /// first join still has its join deadline.
    pub fn expiry(&self) -> Option<Instant> {
        if self.is_new || !(self.awaiting_join() || self.awaiting_sync()) {
            Some(self.deadline)
        } else {
            None
        }
    }

    /// Answers a pending JoinGroup, if any. True if one was pending.
    pub fn answer_join(&mut self, outcome: JoinOutcome) -> bool {
        match self.join_waiter.take() {
            Some(tx) => {
                let _ = tx.send(outcome);
                true
            }
            None => false,
        }
    }

    /// Answers a pending SyncGroup, if any. True if one was pending.
    pub fn answer_sync(&mut self, outcome: SyncOutcome) -> bool {
        match self.sync_waiter.take() {
            Some(tx) => {
                let _ = tx.send(outcome);
                true
            }
            None => false,
        }
    }

    /// Restarts the session clock (a heartbeat, or a completed phase).
    pub fn touch(&mut self, now: Instant) {
        self.deadline = now + self.session_timeout;
    }
}
