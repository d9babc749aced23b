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
