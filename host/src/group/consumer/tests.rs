//! Scenarios of one consumer-protocol group, with simulated clients that do
//! what the server tells them (own what the last assignment said).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use super::*;
use crate::codes;
use crate::group::now::Now;

struct Catalog {
    topics: BTreeMap<String, (TopicId, i32)>,
    version: u64,
}

impl Catalog {
    fn new(topics: &[(&str, i32)]) -> Catalog {
        let mut c = Catalog {
            topics: BTreeMap::new(),
            version: 1,
        };
        for (n, p) in topics {
            c.create(n, *p);
        }
        c
    }

    fn create(&mut self, name: &str, partitions: i32) {
        let mut id = [0u8; 16];
        id[..name.len().min(16)].copy_from_slice(&name.as_bytes()[..name.len().min(16)]);
        self.topics.insert(name.into(), (id, partitions));
        self.version += 1;
    }

    fn id(&self, name: &str) -> TopicId {
        self.topics[name].0
    }
}

impl Topics for Catalog {
    fn lookup(&self, name: &str) -> Option<(TopicId, i32)> {
        self.topics.get(name).copied()
    }
    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }
    fn version(&self) -> u64 {
        self.version
    }
}

/// A client: its id, epoch and what it owns.
#[derive(Debug, Clone, Default)]
struct Client {
    id: String,
    epoch: i32,
    owned: Assignment,
    instance: Option<String>,
    topics: Vec<String>,
}

struct World {
    g: ConsumerGroup,
    cfg: ConsumerConfig,
    cat: Catalog,
    now: Now,
    next: u32,
    journal: Vec<ConsumerRecord>,
}

impl World {
    fn new(topics: &[(&str, i32)]) -> World {
        let now = Now::current();
        World {
            g: ConsumerGroup::new("g", now),
            cfg: ConsumerConfig::default(),
            cat: Catalog::new(topics),
            now,
            next: 0,
            journal: Vec::new(),
        }
    }

    fn join(&mut self, topics: &[&str]) -> Client {
        let mut c = Client {
            topics: topics.iter().map(|s| s.to_string()).collect(),
            ..Client::default()
        };
        let r = self.beat(&mut c, true);
        assert_eq!(r.error, codes::NONE, "{r:?}");
        c
    }

    fn request(&self, c: &Client, full: bool) -> Heartbeat {
        Heartbeat {
            member_id: c.id.clone(),
            member_epoch: c.epoch,
            instance_id: c.instance.clone(),
            rebalance_timeout_ms: if full { 300_000 } else { -1 },
            topic_names: full.then(|| c.topics.clone()),
            owned: Some(c.owned.clone()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..Heartbeat::default()
        }
    }

    fn send(&mut self, req: Heartbeat) -> Reply {
        let n = &mut self.next;
        let mut new_id = || {
            *n += 1;
            format!("m{n:03}")
        };
        // As the coordinator does: on a copy, then the records applied.
        let mut scratch = self.g.clone();
        let (reply, changes) = scratch.heartbeat(req, &self.cfg, &self.cat, self.now, &mut new_id);
        self.commit(scratch, changes);
        reply
    }

    /// Applies a scratch copy's records to the group, which must then
    /// hold what the copy holds.
    fn commit(&mut self, scratch: ConsumerGroup, changes: Vec<ConsumerRecord>) {
        for c in &changes {
            self.g.apply(c);
        }
        assert!(
            self.g.same_state(&scratch),
            "applied records reproduce the copy"
        );
        self.g.adopt_unjournaled(scratch);
        self.journal.extend(changes);
    }

    /// One heartbeat; the client applies the answer.
    fn beat(&mut self, c: &mut Client, full: bool) -> Reply {
        let r = self.send(self.request(c, full || c.epoch == 0));
        if r.error == codes::NONE {
            c.id = r.member_id.clone();
            c.epoch = r.member_epoch;
            if let Some(a) = &r.assignment {
                c.owned = a.clone();
            }
        }
        r
    }

    fn advance(&mut self, d: Duration) {
        self.now = Now {
            at: self.now.at + d,
            wall_ms: self.now.wall_ms + d.as_millis() as i64,
        };
        let mut scratch = self.g.clone();
        let changes = scratch.tick(self.now);
        self.commit(scratch, changes);
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// No partition is owned by two clients.
fn exclusive(clients: &[&Client]) {
    let mut seen = HashMap::new();
    for c in clients {
        for (t, ps) in &c.owned {
            for p in ps {
                if let Some(other) = seen.insert((*t, *p), c.id.clone()) {
                    panic!("partition {p} owned by {other} and {}", c.id);
                }
            }
        }
    }
}

#[test]
fn the_first_member_gets_every_partition_at_epoch_one() {
    let mut w = World::new(&[("t", 4)]);
    let a = w.join(&["t"]);
    assert_eq!(a.epoch, 1);
    assert_eq!(count(&a.owned), 4);
    assert_eq!(w.g.state(), ConsumerState::Stable);
}

#[test]
fn a_joining_member_gets_partitions_only_after_the_owner_revokes_them() {
    let mut w = World::new(&[("t", 4)]);
    let mut a = w.join(&["t"]);
    let mut b = w.join(&["t"]);
    assert_eq!(b.epoch, 2);
    assert_eq!(count(&b.owned), 0, "nothing is free yet");
    assert_eq!(w.g.state(), ConsumerState::Reconciling);
    exclusive(&[&a, &b]);
    // a is asked to revoke two partitions; its epoch waits.
    w.beat(&mut a, false);
    assert_eq!(a.epoch, 1);
    assert_eq!(count(&a.owned), 2);
    exclusive(&[&a, &b]);
    // b still waits: a has not yet reported the revocation.
    w.beat(&mut b, false);
    assert_eq!(count(&b.owned), 0);
    // a reports it owns two: it moves to epoch 2.
    w.beat(&mut a, false);
    assert_eq!(a.epoch, 2);
    w.beat(&mut b, false);
    assert_eq!(count(&b.owned), 2);
    exclusive(&[&a, &b]);
    assert_eq!(w.g.state(), ConsumerState::Stable);
}

#[test]
fn a_leaving_member_s_partitions_go_to_the_others_without_a_revocation() {
    let mut w = World::new(&[("t", 6)]);
    let mut a = w.join(&["t"]);
    let mut b = w.join(&["t"]);
    for _ in 0..3 {
        w.beat(&mut a, false);
        w.beat(&mut b, false);
    }
    assert_eq!((count(&a.owned), count(&b.owned)), (3, 3));
    let kept = a.owned.clone();
    let mut leave = w.request(&b, false);
    leave.member_epoch = -1;
    let r = w.send(leave);
    assert_eq!((r.error, r.member_epoch), (codes::NONE, -1));
    w.beat(&mut a, false);
    assert_eq!(count(&a.owned), 6);
    assert!(
        kept.iter().all(|(t, ps)| ps.is_subset(&a.owned[t])),
        "a kept its own"
    );
}

#[test]
fn stale_and_future_epochs_are_fenced_and_strangers_unknown() {
    let mut w = World::new(&[("t", 2)]);
    let a = w.join(&["t"]);
    let mut req = w.request(&a, false);
    req.member_epoch = 7;
    assert_eq!(w.send(req).error, crate::codes::FENCED_MEMBER_EPOCH);
    let mut req = w.request(&a, false);
    req.member_id = "nobody".into();
    assert_eq!(w.send(req).error, codes::UNKNOWN_MEMBER_ID);
}

#[test]
fn the_previous_epoch_is_accepted_when_the_answer_was_lost() {
    let mut w = World::new(&[("t", 4)]);
    let mut a = w.join(&["t"]);
    let mut b = w.join(&["t"]);
    w.beat(&mut a, false);
    w.beat(&mut a, false); // a moves to epoch 2
    assert_eq!(a.epoch, 2);
    // a did not see the answer: it sends epoch 1 with what it owns now.
    let mut req = w.request(&a, false);
    req.member_epoch = 1;
    let r = w.send(req.clone());
    assert_eq!((r.error, r.member_epoch), (codes::NONE, 2));
    // With a partition it no longer has, the old epoch is fenced.
    req.owned = Some(Assignment::from([(
        w.cat.id("t"),
        BTreeSet::from([0, 1, 2, 3]),
    )]));
    assert_eq!(w.send(req).error, crate::codes::FENCED_MEMBER_EPOCH);
    w.beat(&mut b, false);
}

#[test]
fn a_member_whose_session_ends_is_fenced_and_its_partitions_reassigned() {
    let mut w = World::new(&[("t", 4)]);
    let mut a = w.join(&["t"]);
    let mut b = w.join(&["t"]);
    for _ in 0..3 {
        w.beat(&mut a, false);
        w.beat(&mut b, false);
    }
    w.advance(Duration::from_secs(30));
    w.beat(&mut a, false); // a keeps its session; b is silent
    w.advance(Duration::from_secs(20));
    assert!(w.g.member(&b.id).is_none(), "b was fenced");
    assert!(w.journal.contains(&ConsumerRecord::Removed {
        member: b.id.clone()
    }));
    w.beat(&mut a, false);
    assert_eq!(count(&a.owned), 4);
    // b's next heartbeat is refused; it rejoins with epoch 0.
    assert_eq!(w.beat(&mut b, false).error, codes::UNKNOWN_MEMBER_ID);
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let mut w = World::new(&[("t", 4)]);
    w.cfg.session_timeout = Duration::from_secs(3600);
    let a = w.join(&["t"]);
    let mut req = w.request(&a, true);
    req.rebalance_timeout_ms = 10_000;
    w.send(req);
    let mut b = w.join(&["t"]);
    // a is asked to revoke, answers it still owns everything.
    let mut req = w.request(&a, false);
    req.owned = Some(a.owned.clone());
    w.send(req);
    assert_eq!(
        w.g.member(&a.id).unwrap().progress.state,
        MemberState::UnrevokedPartitions
    );
    w.advance(Duration::from_secs(11));
    assert!(w.g.member(&a.id).is_none(), "a was fenced");
    w.beat(&mut b, false);
    assert_eq!(count(&b.owned), 4);
}

#[test]
fn a_static_member_that_leaves_temporarily_gets_its_partitions_back() {
    let mut w = World::new(&[("t", 4)]);
    let mut a = Client {
        instance: Some("i-a".into()),
        topics: vec!["t".into()],
        ..Client::default()
    };
    w.beat(&mut a, true);
    let mut b = w.join(&["t"]);
    for _ in 0..3 {
        w.beat(&mut a, false);
        w.beat(&mut b, false);
    }
    let had = a.owned.clone();
    assert_eq!(count(&had), 2);
    let mut leave = w.request(&a, false);
    leave.member_epoch = -2;
    assert_eq!(w.send(leave).member_epoch, -2);
    // A new process with the same instance id and a new member id.
    let mut a2 = Client {
        instance: Some("i-a".into()),
        topics: vec!["t".into()],
        ..Client::default()
    };
    let r = w.beat(&mut a2, true);
    assert_eq!(r.error, codes::NONE);
    assert_ne!(a2.id, a.id);
    assert_eq!(a2.owned, had, "same partitions, no rebalance of b");
    assert!(w.g.member(&a.id).is_none());
    // The old process is fenced by the new one.
    assert_eq!(w.beat(&mut a, false).error, codes::FENCED_INSTANCE_ID);
    // A third process while a2 holds the instance id is refused.
    let mut a3 = Client {
        instance: Some("i-a".into()),
        topics: vec!["t".into()],
        ..Client::default()
    };
    assert_eq!(
        w.beat(&mut a3, true).error,
        crate::codes::UNRELEASED_INSTANCE_ID
    );
}

#[test]
fn a_regex_subscription_follows_topics_as_they_are_created() {
    let mut w = World::new(&[("orders-eu", 2), ("payments", 2)]);
    let mut a = Client {
        id: String::new(),
        ..Client::default()
    };
    let mut req = w.request(&a, true);
    req.topic_names = Some(vec![]);
    req.topic_regex = Some("orders-.*".into());
    let r = w.send(req);
    assert_eq!(r.error, codes::NONE, "{r:?}");
    a.id = r.member_id;
    a.epoch = r.member_epoch;
    a.owned = r.assignment.unwrap();
    // A new expression is resolved after the heartbeat that brings it (as
    // Kafka 4.0 does, off the request path): the next one is assigned
    // what it matches.
    assert!(a.owned.is_empty(), "{:?}", a.owned);
    w.beat(&mut a, false);
    assert_eq!(
        a.owned.keys().copied().collect::<Vec<_>>(),
        vec![w.cat.id("orders-eu")]
    );
    // A second member with the same expression has it resolved at once.
    let mut b = Client {
        id: String::new(),
        ..Client::default()
    };
    let mut req = w.request(&b, true);
    req.topic_names = Some(vec![]);
    req.topic_regex = Some("orders-.*".into());
    let r = w.send(req);
    assert_eq!(r.error, codes::NONE, "{r:?}");
    b.id = r.member_id;
    b.epoch = r.member_epoch;
    b.owned = r.assignment.unwrap_or_default();
    for _ in 0..3 {
        w.beat(&mut a, false);
        w.beat(&mut b, false);
    }
    assert_eq!((count(&a.owned), count(&b.owned)), (1, 1));
    w.cat.create("orders-us", 3);
    for _ in 0..3 {
        w.beat(&mut a, false);
        w.beat(&mut b, false);
    }
    assert_eq!(count(&a.owned) + count(&b.owned), 5);
    // Once no member uses it, the expression is resolved afresh, after the
    // heartbeat that brings it back.
    for c in [&a, &b] {
        let mut leave = w.request(c, false);
        leave.member_epoch = -1;
        assert_eq!(w.send(leave).error, codes::NONE);
    }
    let mut req = w.request(&Client::default(), true);
    req.topic_names = Some(vec![]);
    req.topic_regex = Some("orders-.*".into());
    let r = w.send(req);
    assert_eq!(r.error, codes::NONE, "{r:?}");
    assert!(r.assignment.unwrap_or_default().is_empty());
    let mut bad = w.request(&Client::default(), true);
    bad.topic_regex = Some("orders-(".into());
    assert_eq!(w.send(bad).error, crate::codes::INVALID_REGULAR_EXPRESSION);
}

#[test]
fn added_partitions_are_assigned_on_the_next_heartbeat() {
    let mut w = World::new(&[("t", 2)]);
    let mut a = w.join(&["t"]);
    let epoch = a.epoch;
    w.cat.create("t", 5);
    w.beat(&mut a, false);
    assert!(a.epoch > epoch);
    assert_eq!(count(&a.owned), 5);
}

#[test]
fn unsupported_assignors_and_a_full_group_are_refused() {
    let mut w = World::new(&[("t", 2)]);
    let mut req = w.request(&Client::default(), true);
    req.topic_names = Some(vec!["t".into()]);
    req.server_assignor = Some("sticky".into());
    assert_eq!(w.send(req).error, crate::codes::UNSUPPORTED_ASSIGNOR);
    w.cfg.max_size = 1;
    w.join(&["t"]);
    let mut req = w.request(&Client::default(), true);
    req.topic_names = Some(vec!["t".into()]);
    assert_eq!(w.send(req).error, codes::GROUP_MAX_SIZE_REACHED);
}

#[test]
fn the_range_assignor_is_used_when_members_ask_for_it() {
    let mut w = World::new(&[("t", 4)]);
    let mut req = w.request(&Client::default(), true);
    req.topic_names = Some(vec!["t".into()]);
    req.server_assignor = Some("range".into());
    let r = w.send(req);
    assert_eq!(r.error, codes::NONE);
    assert_eq!(w.g.assignor(&w.cfg), "range");
}

#[test]
fn offset_commits_need_the_current_member_epoch() {
    let mut w = World::new(&[("t", 2)]);
    assert_eq!(
        w.g.validate_commit("", -1),
        Ok(()),
        "an empty group takes admin commits"
    );
    let a = w.join(&["t"]);
    assert_eq!(w.g.validate_commit(&a.id, a.epoch), Ok(()));
    assert_eq!(
        w.g.validate_commit(&a.id, a.epoch - 1),
        Err(crate::codes::STALE_MEMBER_EPOCH)
    );
    assert_eq!(w.g.validate_commit("x", 1), Err(codes::UNKNOWN_MEMBER_ID));
    assert_eq!(w.g.validate_commit("", -1), Err(codes::UNKNOWN_MEMBER_ID));
    // A transactional commit naming no member at all is taken (Kafka's
    // exception for producers that send offsets with the group id alone).
    assert_eq!(w.g.validate_txn_commit("", None, -1), Ok(()));
    assert_eq!(
        w.g.validate_txn_commit("", Some("i"), -1),
        Err(codes::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        w.g.validate_txn_commit(&a.id, None, a.epoch - 1),
        Err(crate::codes::STALE_MEMBER_EPOCH)
    );
}

/// Replays journaled records the way the journal's loader does.
fn replay(records: &[ConsumerRecord]) -> ConsumerModel {
    let mut model = ConsumerModel::default();
    for r in records {
        model.apply(r);
    }
    model
}

#[test]
fn many_members_joining_and_leaving_never_share_a_partition_and_replay_restores_the_group() {
    let mut w = World::new(&[("a", 37), ("b", 11)]);
    let mut clients: Vec<Client> = Vec::new();
    let mut rng: u64 = 0x9e3779b97f4a7c15;
    let mut step = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..400 {
        let r = step() % 10;
        if (r < 2 && clients.len() < 12) || clients.is_empty() {
            let topics: &[&str] = if step() % 3 == 0 { &["a"] } else { &["a", "b"] };
            clients.push(w.join(topics));
        } else if r < 3 && clients.len() > 1 {
            let i = (step() % clients.len() as u64) as usize;
            let c = clients.remove(i);
            let mut leave = w.request(&c, false);
            leave.member_epoch = -1;
            assert_eq!(w.send(leave).error, codes::NONE);
        } else {
            let i = (step() % clients.len() as u64) as usize;
            let mut c = clients[i].clone();
            let r = w.beat(&mut c, false);
            assert_eq!(r.error, codes::NONE, "round {round}: {r:?}");
            clients[i] = c;
        }
        exclusive(&clients.iter().collect::<Vec<_>>());
    }
    // Let everyone converge.
    for _ in 0..4 {
        for c in clients.iter_mut() {
            w.beat(c, false);
        }
    }
    assert_eq!(w.g.state(), ConsumerState::Stable);
    let total: usize = clients.iter().map(|c| count(&c.owned)).sum();
    assert_eq!(total, 48, "every partition owned once");
    let loads: Vec<usize> = clients.iter().map(|c| count(&c.owned)).collect();
    assert!(
        loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 2,
        "{loads:?}"
    );

    let model = replay(&w.journal);
    assert_eq!(
        &model,
        w.g.model(),
        "the journal's replay is the running group's model"
    );
    let mut back = ConsumerGroup::restore("g", &model, &w.cfg, w.now);
    assert!(back.same_state(&w.g));
    assert_eq!(
        (back.epoch(), back.assignment_epoch()),
        (w.g.epoch(), w.g.assignment_epoch())
    );
    for m in w.g.members() {
        assert_eq!(back.member(&m.id), Some(m), "member {} restored", m.id);
        assert_eq!(back.target(&m.id), w.g.target(&m.id));
    }
    assert_eq!(back.member_count(), w.g.member_count());
    // A heartbeat after the restore moves nothing: same epoch, no changes.
    let c = clients[0].clone();
    let mut n = 0;
    let (r, changes) = back.heartbeat(w.request(&c, false), &w.cfg, &w.cat, w.now, &mut || {
        n += 1;
        format!("new{n}")
    });
    assert_eq!((r.error, r.member_epoch), (codes::NONE, c.epoch));
    assert!(changes.is_empty(), "{changes:?}");
}
