//! Records first: a group changes in memory only by applying records the
//! journal accepted. A journal write that fails mid-join or mid-heartbeat
//! leaves the group exactly as it was, and as a replay of the journal
//! rebuilds it.

use std::collections::BTreeMap;

use super::*;
use crate::group::consumer::{ConsumerGroup, Heartbeat, TopicId, Topics};

struct Catalog(BTreeMap<String, (TopicId, i32)>);

impl Topics for Catalog {
    fn lookup(&self, name: &str) -> Option<(TopicId, i32)> {
        self.0.get(name).copied()
    }
    fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
    fn version(&self) -> u64 {
        1
    }
}

fn catalog() -> Catalog {
    Catalog(BTreeMap::from([("t".to_string(), ([7u8; 16], 6))]))
}

fn open(dir: &Path) -> GroupCoordinator {
    let gc = GroupCommit::new(FsyncMode::Always);
    GroupCoordinator::open(dir, GroupConfig::default(), gc, |_| true).expect("open")
}

fn join(member_id: &str) -> Heartbeat {
    Heartbeat {
        member_id: member_id.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 300_000,
        topic_names: Some(vec!["t".to_string()]),
        owned: Some(Default::default()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Heartbeat::default()
    }
}

/// One heartbeat; the reply (its write not awaited: the file is written,
/// which is what a replay reads).
fn beat(c: &GroupCoordinator, req: Heartbeat) -> crate::group::consumer::Reply {
    let (reply, durable) = c.consumer_heartbeat("g", req, &catalog());
    drop(durable);
    reply
}

/// The group as a fresh coordinator replays it from the journal.
fn replayed(dir: &Path) -> ConsumerGroup {
    let c = open(dir);
    c.consumer_group("g").expect("the group is in the journal")
}

#[test]
fn a_failed_journal_write_mid_join_leaves_the_group_as_it_was_and_as_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = open(dir.path());
    let a = beat(&c, join("a"));
    assert_eq!(a.error, codes::NONE, "{a:?}");
    let before = c.consumer_group("g").expect("group");

    c.fail_next_journal_write();
    let b = beat(&c, join("b"));
    assert_eq!(b.error, codes::NOT_COORDINATOR, "{b:?}");

    let after = c.consumer_group("g").expect("group");
    assert!(
        after.same_state(&before),
        "the failed join changed the group"
    );
    assert_eq!(after.member_count(), 1);
    assert_eq!(after.epoch(), before.epoch());
    c.close().expect("close");
    assert!(
        replayed(dir.path()).same_state(&after),
        "memory differs from the journal"
    );

    // The same join, written this time, takes effect.
    let c = open(dir.path());
    let b = beat(&c, join("b"));
    assert_eq!(b.error, codes::NONE, "{b:?}");
    assert_eq!(c.consumer_group("g").expect("group").member_count(), 2);
}

#[test]
fn a_failed_journal_write_mid_heartbeat_leaves_the_group_as_it_was_and_as_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = open(dir.path());
    let a = beat(&c, join("a"));
    assert_eq!(a.error, codes::NONE, "{a:?}");
    let b = beat(&c, join("b"));
    assert_eq!(b.error, codes::NONE, "{b:?}");
    // a's next heartbeat is told to give partitions up to b: a change of
    // its progress, journaled.
    let ack = Heartbeat {
        member_id: "a".into(),
        member_epoch: a.member_epoch,
        owned: a.assignment.clone(),
        rebalance_timeout_ms: -1,
        topic_names: None,
        ..join("a")
    };
    let before = c.consumer_group("g").expect("group");
    c.fail_next_journal_write();
    let r = beat(&c, ack.clone());
    let after = c.consumer_group("g").expect("group");
    assert_eq!(r.error, codes::NOT_COORDINATOR, "{r:?}");
    assert!(
        after.same_state(&before),
        "the failed heartbeat changed the group"
    );
    c.close().expect("close");
    assert!(
        replayed(dir.path()).same_state(&after),
        "memory differs from the journal"
    );

    // Written this time, the heartbeat takes effect: a gives partitions up.
    let c = open(dir.path());
    let r = beat(&c, ack);
    assert_eq!(r.error, codes::NONE, "{r:?}");
    assert!(!c.consumer_group("g").expect("group").same_state(&after));
}

#[test]
fn a_failed_journal_write_creating_a_group_leaves_no_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = open(dir.path());
    c.fail_next_journal_write();
    let a = beat(&c, join("a"));
    assert_eq!(a.error, codes::NOT_COORDINATOR, "{a:?}");
    assert!(c.consumer_group("g").is_none());
    assert!(c.consumer_state("g").is_none());
}

// ---- classic groups: the generation is written before any answer leaves.

fn open_classic(dir: &Path) -> GroupCoordinator {
    let gc = GroupCommit::new(FsyncMode::Always);
    let config = GroupConfig {
        initial_rebalance_delay: std::time::Duration::ZERO,
        ..GroupConfig::default()
    };
    GroupCoordinator::open(dir, config, gc, |_| true).expect("open")
}

fn classic_join(member_id: &str) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout: std::time::Duration::from_secs(10),
        rebalance_timeout: std::time::Duration::from_secs(10),
        protocol_type: "consumer".into(),
        protocols: vec![("range".to_string(), bytes::Bytes::from_static(b"m"))],
        require_known_member_id: false,
    }
}

/// The answer now, or the parked request (its answer if already given).
fn answer(
    r: &mut crate::group::Reply<crate::group::JoinOutcome>,
) -> Option<crate::group::JoinOutcome> {
    match r {
        crate::group::Reply::Now(o) => Some(o.clone()),
        crate::group::Reply::Later(rx) => rx.try_recv().ok(),
    }
}

fn generation_on_disk(dir: &Path) -> Option<i32> {
    let c = open_classic(dir);
    let st = c.inner.lock();
    st.classic("g").map(ClassicGroup::generation)
}

#[test]
fn a_failed_generation_write_mid_join_answers_no_one_and_leaves_the_group_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = open_classic(dir.path());
    let mut a = c.join("g", classic_join(""));
    // The first join phase ends on the ticker (group.initial.rebalance.delay.ms).
    c.inner.tick();
    let a1 = answer(&mut a).expect("a answered");
    assert_eq!((a1.error, a1.generation), (codes::NONE, 1), "{a1:?}");
    // b joins: the group prepares a rebalance and waits for a to rejoin.
    let mut b = c.join("g", classic_join(""));
    assert!(answer(&mut b).is_none(), "b waits for the join phase");
    let meta_before = c.inner.lock().classic("g").map(ClassicGroup::meta);

    // a's rejoin completes the join phase (generation 2), but its write fails.
    c.fail_next_journal_write();
    let mut a2 = c.join("g", classic_join(&a1.member_id));
    let failed = answer(&mut a2).expect("a answered at once");
    assert_eq!(failed.error, codes::NOT_COORDINATOR, "{failed:?}");
    assert!(answer(&mut b).is_none(), "no answer left before the write");
    let meta_after = c.inner.lock().classic("g").map(ClassicGroup::meta);
    assert_eq!(meta_after, meta_before, "the failed join changed the group");

    // a rejoins again, the write succeeds: both are answered, generation 2.
    let mut a3 = c.join("g", classic_join(&a1.member_id));
    let a3 = answer(&mut a3).expect("a answered");
    let b2 = answer(&mut b).expect("b answered with a");
    assert_eq!((a3.error, a3.generation), (codes::NONE, 2), "{a3:?}");
    assert_eq!((b2.error, b2.generation), (codes::NONE, 2), "{b2:?}");
    c.close().expect("close");
    assert_eq!(generation_on_disk(dir.path()), Some(2));
}

#[test]
fn a_failed_generation_write_on_the_tick_keeps_the_join_parked_until_a_write_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = open_classic(dir.path());
    let mut a = c.join("g", classic_join(""));
    assert!(
        answer(&mut a).is_none(),
        "the first join phase ends on the ticker"
    );
    c.fail_next_journal_write();
    c.inner.tick();
    assert!(
        answer(&mut a).is_none(),
        "answered before its generation was written"
    );
    let generation = c.inner.lock().classic("g").map(ClassicGroup::generation);
    assert_eq!(generation, Some(0), "the failed tick changed the group");
    c.inner.tick();
    let a = answer(&mut a).expect("answered once written");
    assert_eq!((a.error, a.generation), (codes::NONE, 1), "{a:?}");
    c.close().expect("close");
    assert_eq!(generation_on_disk(dir.path()), Some(1));
}
