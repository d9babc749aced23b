//! One member of a classic group: its identity, timeouts, the protocols it
//! supports (name and opaque metadata, in its order of preference), its
//! current assignment, the JoinGroup/SyncGroup answers it is waiting for,
//! and when its session expires.
//!
//! A parked JoinGroup or SyncGroup is a [`Waiter`]; answering it puts the
//! answer in the group's [`Outbox`]. The coordinator runs each operation on
//! a copy of the group with the outbox held, and the answers go out only
//! once what the operation must journal is written — a failed write sends
//! nothing and leaves every parked request parked.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::outcome::{JoinOutcome, SyncOutcome};

/// A parked request: the channel its answer goes out on, shared by a group
/// and the copies an operation runs on.
#[derive(Debug)]
pub struct Waiter<T>(Arc<Mutex<Option<oneshot::Sender<T>>>>);

impl<T> Clone for Waiter<T> {
    fn clone(&self) -> Self {
        Waiter(self.0.clone())
    }
}

impl<T> Waiter<T> {
    pub fn new(tx: oneshot::Sender<T>) -> Self {
        Waiter(Arc::new(Mutex::new(Some(tx))))
    }

    fn send(&self, answer: T) {
        let tx = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(answer);
        }
    }
}

#[derive(Debug)]
enum Answer {
    Join(Waiter<JoinOutcome>, JoinOutcome),
    Sync(Waiter<SyncOutcome>, SyncOutcome),
}

#[derive(Debug, Default)]
struct Queue {
    held: bool,
    answers: Vec<Answer>,
}

/// A group's answers to parked requests. Sent at once unless held; held
/// answers go out with [`Outbox::deliver`] or are dropped, unsent, with
/// [`Outbox::discard`].
#[derive(Debug, Clone, Default)]
pub struct Outbox(Arc<Mutex<Queue>>);

impl Outbox {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, answer: Answer) {
        let mut q = self.queue();
        if q.held {
            q.answers.push(answer);
            return;
        }
        drop(q);
        match answer {
            Answer::Join(w, o) => w.send(o),
            Answer::Sync(w, o) => w.send(o),
        }
    }

    /// Holds answers until [`Self::deliver`] or [`Self::discard`].
    pub fn hold(&self) {
        self.queue().held = true;
    }

    /// Sends the held answers and stops holding.
    pub fn deliver(&self) {
        let answers = {
            let mut q = self.queue();
            q.held = false;
            std::mem::take(&mut q.answers)
        };
        for a in answers {
            match a {
                Answer::Join(w, o) => w.send(o),
                Answer::Sync(w, o) => w.send(o),
            }
        }
    }

    /// Drops the held answers unsent (their requests stay parked in the
    /// group that was not changed) and stops holding.
    pub fn discard(&self) {
        let mut q = self.queue();
        q.held = false;
        q.answers.clear();
    }
}

/// A member.
#[derive(Debug, Clone)]
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
    pub(super) join_waiter: Option<Waiter<JoinOutcome>>,
    pub(super) sync_waiter: Option<Waiter<SyncOutcome>>,
    /// Its group's outbox.
    pub(super) outbox: Outbox,
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
            Some(w) => {
                self.outbox.push(Answer::Join(w, outcome));
                true
            }
            None => false,
        }
    }

    /// Answers a pending SyncGroup, if any. True if one was pending.
    pub fn answer_sync(&mut self, outcome: SyncOutcome) -> bool {
        match self.sync_waiter.take() {
            Some(w) => {
                self.outbox.push(Answer::Sync(w, outcome));
                true
            }
            None => false,
        }
    }

    /// Parks a JoinGroup; one parked before is answered `superseded`.
    pub fn park_join(&mut self, tx: oneshot::Sender<JoinOutcome>, superseded: JoinOutcome) {
        self.answer_join(superseded);
        self.join_waiter = Some(Waiter::new(tx));
    }

    /// Parks a SyncGroup; one parked before is answered `superseded`.
    pub fn park_sync(&mut self, tx: oneshot::Sender<SyncOutcome>, superseded: SyncOutcome) {
        self.answer_sync(superseded);
        self.sync_waiter = Some(Waiter::new(tx));
    }

    /// Restarts the session clock (a heartbeat, or a completed phase).
    pub fn touch(&mut self, now: Instant) {
        self.deadline = now + self.session_timeout;
    }
}
