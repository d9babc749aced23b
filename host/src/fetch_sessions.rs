//! Incremental fetch sessions (KIP-227): the broker remembers, per session,
//! which partitions a fetcher reads and from where, so a fetch only names
//! what changed and its answer only carries partitions with something new
//! (records, a moved high watermark, last stable or log start offset, or an
//! error). Kafka's rules: session id 0 with epoch -1 is a fetch without a
//! session; id 0 with epoch 0 asks for a new one (a full fetch, cached
//! when a slot is free); an id with epoch -1 closes it; an id with the
//! session's next epoch is an incremental fetch, any other epoch
//! codes::INVALID_FETCH_SESSION_EPOCH, an unknown id codes::FETCH_SESSION_ID_NOT_FOUND.
//!
//! Bounded: at most `max.incremental.fetch.session.cache.slots` sessions;
//! when they are all taken, a session idle for two minutes is evicted
//! first, else the least recently used session holding fewer partitions
//! than the new one, else the new one is not cached (the fetcher goes on
//! with full fetches). Partitions across all sessions are capped too, so a
//! fetcher adding partitions fetch after fetch cannot grow the cache
//! without end. A leaf: no broker, no wire types.

use crate::codes;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Kafka's default `max.incremental.fetch.session.cache.slots`.
pub const DEFAULT_SLOTS: usize = 1000;
/// A session idle this long may be evicted for a new one (Kafka's
/// `min.incremental.fetch.session.eviction.ms` default).
pub const EVICTABLE_AFTER: Duration = Duration::from_secs(120);
/// Most partitions all sessions together hold.
pub const DEFAULT_MAX_PARTITIONS: usize = 1_000_000;

/// A partition a session names: its topic (by id from Fetch v13, by name
/// before) and index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicRef {
    Id([u8; 16]),
    Name(String),
}

pub type PartKey = (TopicRef, i32);

/// What the fetcher asked of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    pub fetch_offset: i64,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub max_bytes: i32,
}

/// What the last answer told the fetcher of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

impl Sent {
    /// Whether a partition's answer must be sent in an incremental fetch.
    pub fn must_send(last: Option<&Sent>, now: &Sent, has_records: bool, error: i16) -> bool {
        has_records || error != 0 || last != Some(now)
    }
}

#[derive(Debug)]
struct Session {
    /// The epoch the next incremental fetch must carry.
    next_epoch: i32,
    parts: Vec<(PartKey, Wanted)>,
    sent: HashMap<PartKey, Sent>,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<i32, Session>,
    partitions: usize,
    next_id: u32,
}

/// How a fetch is to be served.
#[derive(Debug)]
pub enum Begin {
    /// Without a session (id 0 epoch -1, or a session just closed).
    Sessionless,
    /// A full fetch that asks for a new session: [`FetchSessions::create`]
    /// once answered.
    New,
    /// An incremental fetch of session `id`: read these partitions, in this
    /// order, and send those [`Sent::must_send`] says.
    Incremental {
        id: i32,
        parts: Vec<(PartKey, Wanted)>,
        sent: HashMap<PartKey, Sent>,
    },
    /// Refused with this error code.
    Refused(i16),
}

/// The broker's fetch session cache.
#[derive(Debug)]
pub struct FetchSessions {
    slots: usize,
    max_partitions: usize,
    inner: Mutex<Inner>,
}

impl FetchSessions {
    pub fn new(slots: usize, max_partitions: usize) -> FetchSessions {
        FetchSessions {
            slots,
            max_partitions,
            inner: Mutex::new(Inner {
                next_id: rand::random::<u32>() | 1,
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sessions cached now.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decides how to serve a fetch of session `id` at `epoch` naming
    /// `changed` partitions (added or updated) and `forgotten` ones.
    pub fn begin(
        &self,
        id: i32,
        epoch: i32,
        changed: Vec<(PartKey, Wanted)>,
        forgotten: Vec<PartKey>,
        now: Instant,
    ) -> Begin {
        let mut st = self.lock();
        if epoch == -1 {
            if id != 0
                && let Some(s) = st.sessions.remove(&id)
            {
                st.partitions -= s.parts.len();
            }
            return Begin::Sessionless;
        }
        if id == 0 {
            return if epoch == 0 {
                Begin::New
            } else {
                Begin::Refused(codes::INVALID_FETCH_SESSION_EPOCH)
            };
        }
        let total = st.partitions;
        let Some(s) = st.sessions.get_mut(&id) else {
            return Begin::Refused(codes::FETCH_SESSION_ID_NOT_FOUND);
        };
        if epoch != s.next_epoch {
            return Begin::Refused(codes::INVALID_FETCH_SESSION_EPOCH);
        }
        let before = s.parts.len();
        if !forgotten.is_empty() {
            s.parts.retain(|(k, _)| !forgotten.contains(k));
            for k in &forgotten {
                s.sent.remove(k);
            }
        }
        let mut index: HashMap<PartKey, usize> = s
            .parts
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        for (k, w) in changed {
            match index.get(&k) {
                Some(&i) => s.parts[i].1 = w,
                None => {
                    index.insert(k.clone(), s.parts.len());
                    s.parts.push((k, w));
                }
            }
        }
        let after = s.parts.len();
        if total - before + after > self.max_partitions {
            st.sessions.remove(&id);
            st.partitions = total - before;
            tracing::warn!(
                session = id,
                "fetch session dropped: the cache's partition cap is reached"
            );
            return Begin::Refused(codes::FETCH_SESSION_ID_NOT_FOUND);
        }
        s.next_epoch = next_epoch(s.next_epoch);
        s.last_used = now;
        let out = Begin::Incremental {
            id,
            parts: s.parts.clone(),
            sent: s.sent.clone(),
        };
        st.partitions = total - before + after;
        out
    }

    /// Caches a new session for a full fetch's partitions and what its
    /// answer told of them: its id, or 0 when it could not be cached.
    pub fn create(&self, parts: Vec<(PartKey, Wanted, Sent)>, now: Instant) -> i32 {
        let mut st = self.lock();
        let n = parts.len();
        if self.slots == 0 || n > self.max_partitions {
            return 0;
        }
        while st.sessions.len() >= self.slots || st.partitions + n > self.max_partitions {
            let victim = st
                .sessions
                .iter()
                .filter(|(_, s)| now.duration_since(s.last_used) >= EVICTABLE_AFTER)
                .min_by_key(|(_, s)| s.last_used)
                .or_else(|| {
                    st.sessions
                        .iter()
                        .filter(|(_, s)| s.parts.len() < n)
                        .min_by_key(|(_, s)| (s.parts.len(), s.last_used))
                })
                .map(|(id, _)| *id);
            let Some(victim) = victim else {
                return 0;
            };
            if let Some(s) = st.sessions.remove(&victim) {
                st.partitions -= s.parts.len();
            }
        }
        let id = loop {
            let candidate = (st.next_id & 0x7fff_ffff) as i32;
            st.next_id = st.next_id.wrapping_mul(2_891_336_453).wrapping_add(1);
            if candidate != 0 && !st.sessions.contains_key(&candidate) {
                break candidate;
            }
        };
        let mut sent = HashMap::with_capacity(n);
        let mut list = Vec::with_capacity(n);
        for (k, w, s) in parts {
            sent.insert(k.clone(), s);
            list.push((k, w));
        }
        st.partitions += n;
        st.sessions.insert(
            id,
            Session {
                next_epoch: 1,
                parts: list,
                sent,
                last_used: now,
            },
        );
        id
    }

    /// Remembers what an incremental answer told of the partitions it sent.
    pub fn record_sent(&self, id: i32, sent: Vec<(PartKey, Sent)>) {
        let mut st = self.lock();
        if let Some(s) = st.sessions.get_mut(&id) {
            for (k, v) in sent {
                if s.sent.contains_key(&k) || s.parts.iter().any(|(p, _)| *p == k) {
                    s.sent.insert(k, v);
                }
            }
        }
    }
}

/// Kafka's epoch sequence: 1, 2, … wrapping to 1 after i32::MAX.
fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX { 1 } else { e + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> PartKey {
        (TopicRef::Name("t".into()), p)
    }

    fn wanted(offset: i64) -> Wanted {
        Wanted {
            fetch_offset: offset,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: -1,
            max_bytes: 1 << 20,
        }
    }

    fn sent(hw: i64) -> Sent {
        Sent {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
        }
    }

    #[test]
    fn a_session_goes_epoch_by_epoch_and_keeps_its_partitions() {
        let c = FetchSessions::new(10, 100);
        let now = Instant::now();
        assert!(matches!(c.begin(0, 0, vec![], vec![], now), Begin::New));
        let id = c.create(
            vec![(key(0), wanted(0), sent(5)), (key(1), wanted(0), sent(0))],
            now,
        );
        assert_ne!(id, 0);
        // Epoch 1 updates partition 0's offset and forgets nothing.
        let Begin::Incremental { parts, sent: s, .. } =
            c.begin(id, 1, vec![(key(0), wanted(5))], vec![], now)
        else {
            panic!("incremental");
        };
        assert_eq!(parts, vec![(key(0), wanted(5)), (key(1), wanted(0))]);
        assert_eq!(s[&key(0)], sent(5));
        // A repeated or skipped epoch is refused; an unknown id too.
        assert!(matches!(
            c.begin(id, 1, vec![], vec![], now),
            Begin::Refused(codes::INVALID_FETCH_SESSION_EPOCH)
        ));
        assert!(matches!(
            c.begin(id, 3, vec![], vec![], now),
            Begin::Refused(codes::INVALID_FETCH_SESSION_EPOCH)
        ));
        assert!(matches!(
            c.begin(id ^ 1, 2, vec![], vec![], now),
            Begin::Refused(codes::FETCH_SESSION_ID_NOT_FOUND)
        ));
        // Forgetting a partition, then closing.
        let Begin::Incremental { parts, .. } = c.begin(id, 2, vec![], vec![key(1)], now) else {
            panic!("incremental");
        };
        assert_eq!(parts.len(), 1);
        assert!(matches!(
            c.begin(id, -1, vec![], vec![], now),
            Begin::Sessionless
        ));
        assert!(c.is_empty());
    }

    #[test]
    fn a_full_cache_evicts_an_idle_session_then_a_smaller_one_then_refuses() {
        let c = FetchSessions::new(2, 1000);
        let t0 = Instant::now();
        let a = c.create(vec![(key(0), wanted(0), sent(0))], t0);
        let b = c.create(
            vec![(key(0), wanted(0), sent(0)), (key(1), wanted(0), sent(0))],
            t0,
        );
        assert!(a != 0 && b != 0);
        // Not idle yet: a new one-partition session finds nothing smaller.
        assert_eq!(c.create(vec![(key(0), wanted(0), sent(0))], t0), 0);
        // A three-partition one evicts the smallest (a).
        let three = vec![
            (key(0), wanted(0), sent(0)),
            (key(1), wanted(0), sent(0)),
            (key(2), wanted(0), sent(0)),
        ];
        let d = c.create(three.clone(), t0);
        assert_ne!(d, 0);
        assert!(matches!(
            c.begin(a, 1, vec![], vec![], t0),
            Begin::Refused(codes::FETCH_SESSION_ID_NOT_FOUND)
        ));
        // Two minutes later b is idle and goes first.
        let later = t0 + EVICTABLE_AFTER;
        assert!(matches!(
            c.begin(d, 1, vec![], vec![], later),
            Begin::Incremental { .. }
        ));
        let e = c.create(vec![(key(0), wanted(0), sent(0))], later);
        assert_ne!(e, 0);
        assert!(matches!(
            c.begin(b, 1, vec![], vec![], later),
            Begin::Refused(codes::FETCH_SESSION_ID_NOT_FOUND)
        ));
    }

    #[test]
    fn the_partition_cap_bounds_sessions_that_grow() {
        let c = FetchSessions::new(10, 3);
        let now = Instant::now();
        let id = c.create(vec![(key(0), wanted(0), sent(0))], now);
        assert!(matches!(
            c.begin(
                id,
                1,
                vec![(key(1), wanted(0)), (key(2), wanted(0))],
                vec![],
                now
            ),
            Begin::Incremental { .. }
        ));
        assert!(matches!(
            c.begin(id, 2, vec![(key(3), wanted(0))], vec![], now),
            Begin::Refused(codes::FETCH_SESSION_ID_NOT_FOUND)
        ));
        assert!(c.is_empty(), "the session that grew past the cap is gone");
        assert_eq!(
            c.create((0..4).map(|p| (key(p), wanted(0), sent(0))).collect(), now),
            0
        );
    }

    #[test]
    fn only_changed_partitions_must_be_sent() {
        let last = sent(5);
        assert!(!Sent::must_send(Some(&last), &sent(5), false, 0));
        assert!(Sent::must_send(Some(&last), &sent(6), false, 0));
        assert!(Sent::must_send(Some(&last), &sent(5), true, 0));
        assert!(Sent::must_send(Some(&last), &sent(5), false, 3));
        assert!(Sent::must_send(None, &sent(5), false, 0));
    }
}
