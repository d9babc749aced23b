//! Producer-id binding (beyond Kafka): every producer id InitProducerId hands
//! out is bound to the session's principal, durably; a batch or a
//! transaction request under a producer id bound to another principal (or
//! to none) is refused, across restarts and kill -9.
//!
//! The in-process tests have one principal (`User:ANONYMOUS`) and stand in
//! for a second one by binding an id to `User:owner` directly; the
//! two-principal tests log in with SASL PLAIN on a spawned broker.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use kafka_protocol::messages::*;

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;
use kaas::security::acl::{AclBinding, CLUSTER_NAME, PatternType, Permission};
use kaas::security::{Operation, Principal, ResourceType};
use support::records::{fetch_values, idempotent_pid, produce};
use support::sasl::{
    DESCRIBE, GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, add_user, connect_as, create_acls,
    spawn_sasl,
};
use support::txn::{add, end, fetch_committed, init, init_settled, produce_txn};
use support::{Client, InProcess};

const UNKNOWN_PRODUCER_ID: i16 = 59;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

fn allow(resource_type: ResourceType, name: &str, operation: Operation) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: Principal::anonymous(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    }
}

/// ANONYMOUS may write topic `t`, use transactional id `x`, read group `g`.
fn acls() -> Vec<AclBinding> {
    vec![
        allow(ResourceType::Topic, "t", Operation::Write),
        allow(ResourceType::Topic, "t", Operation::Read),
        allow(ResourceType::Topic, "t", Operation::Describe),
        allow(ResourceType::TransactionalId, "x", Operation::Write),
        allow(ResourceType::TransactionalId, "x", Operation::Describe),
        allow(ResourceType::Group, "g", Operation::Read),
        allow(ResourceType::Cluster, CLUSTER_NAME, Operation::Create),
    ]
}

async fn start(dir: &std::path::Path, enabled: bool) -> InProcess {
    let b = InProcess::start_with(dir, FsyncMode::Always, |c| {
        c.authorizer.enabled = enabled;
        c.acls = acls();
    })
    .await;
    if b.broker.logs.topic("t").is_none() {
        kaas::cluster::admin::create_topic(
            b.broker.topic_admin(),
            "t",
            2,
            &kaas::cluster::admin::Replication::Factor(-1),
            Default::default(),
            false,
        )
        .expect("create");
    }
    b
}

/// Binds `pid` to `User:owner`, as the owner's InitProducerId would.
fn give_to_owner(b: &InProcess, pid: i64, epoch: i16) {
    b.broker
        .pid_owners
        .as_ref()
        .expect("bindings on")
        .bind(pid, epoch, &Principal::user("owner"))
        .expect("bind");
}

fn batch(pid: i64, epoch: i16, seq: i32, v: &[u8]) -> Vec<u8> {
    data_batch(&[(None, v)], 1, Some((pid, epoch, seq)), false)
}

#[tokio::test]
async fn a_producer_id_bound_to_another_principal_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let mine = idempotent_pid(&mut c).await;
    let theirs = idempotent_pid(&mut c).await;
    give_to_owner(&b, theirs, 0);
    assert_eq!(
        produce(&mut c, "t", 0, batch(theirs, 0, 0, b"forged"))
            .await
            .0,
        UNKNOWN_PRODUCER_ID,
        "an idempotent batch under the owner's id"
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(mine, 0, 0, b"own")).await,
        (0, 0)
    );

    // Transactional: the id of `x` re-initialised by the owner.
    let (pid, epoch) = init_settled(&mut c, "x").await;
    assert_eq!(add(&mut c, "x", pid, epoch, "t", vec![1]).await, 0);
    give_to_owner(&b, pid, epoch);
    assert_eq!(
        produce_txn(&mut c, "x", "t", 1, pid, epoch, 0, &["forged"]).await,
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        add(&mut c, "x", pid, epoch, "t", vec![0]).await,
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        end(&mut c, "x", pid, epoch, true).await,
        INVALID_PRODUCER_ID_MAPPING
    );
    let offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(support::txn::s("x")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(support::txn::s("g")));
    assert_eq!(
        c.call(&offsets, 3).await.error_code,
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        fetch_values(&mut c, "t", 1, 0).await,
        Vec::<(i64, Vec<u8>)>::new(),
        "nothing forged was stored"
    );
    b.stop().await;
}

#[tokio::test]
async fn an_id_handed_out_before_the_authorizer_was_enabled_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), false).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let old = idempotent_pid(&mut c).await;
    assert!(
        !dir.path()
            .join(kaas::security::pid_owners::DIR)
            .join(kaas::security::pid_owners::FILE)
            .exists(),
        "no binding file while the authorizer is disabled"
    );
    b.stop().await;

    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(
        produce(&mut c, "t", 0, batch(old, 0, 0, b"v")).await.0,
        UNKNOWN_PRODUCER_ID,
        "bound to no one"
    );
    let new = idempotent_pid(&mut c).await;
    assert_eq!(
        produce(&mut c, "t", 0, batch(new, 0, 0, b"v")).await,
        (0, 0)
    );
    b.stop().await;
}

#[tokio::test]
async fn bindings_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let mine = idempotent_pid(&mut c).await;
    let theirs = idempotent_pid(&mut c).await;
    give_to_owner(&b, theirs, 0);
    b.stop().await;

    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(
        produce(&mut c, "t", 0, batch(theirs, 0, 0, b"forged"))
            .await
            .0,
        UNKNOWN_PRODUCER_ID
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(mine, 0, 0, b"own")).await,
        (0, 0)
    );
    b.stop().await;
}

// Two principals over SASL PLAIN (a spawned broker).

/// Users admin, owner and mallory (password: the name twice), topic `t`,
/// and the ACLs: owner may write `t` and use transactional id `payments`;
/// mallory may write `t` and use transactional id `m`.
async fn secured(dir: &std::path::Path) -> support::Process {
    for u in ["admin", "owner", "mallory"] {
        add_user(dir, u, &format!("{u}{u}"));
    }
    let p = spawn_sasl(dir);
    let mut admin = connect_as(&p.addr, "admin").await;
    support::txn::create_topic(&mut admin, "t", 1).await;
    create_acls(
        &mut admin,
        &[
            (TOPIC, "t", "User:owner", WRITE),
            (TOPIC, "t", "User:owner", READ),
            (TRANSACTIONAL_ID, "payments", "User:owner", WRITE),
            (TRANSACTIONAL_ID, "payments", "User:owner", DESCRIBE),
            (TOPIC, "t", "User:mallory", WRITE),
            (TRANSACTIONAL_ID, "m", "User:mallory", WRITE),
            (TRANSACTIONAL_ID, "m", "User:mallory", DESCRIBE),
            (GROUP, "none", "User:mallory", READ),
        ],
    )
    .await;
    p
}

#[tokio::test]
async fn mallory_cannot_fence_or_hijack_the_owners_transaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = secured(dir.path()).await;
    let mut owner = connect_as(&p.addr, "owner").await;
    let mut mallory = connect_as(&p.addr, "mallory").await;
    let (pid, epoch) = init_settled(&mut owner, "payments").await;
    assert_eq!(
        add(&mut owner, "payments", pid, epoch, "t", vec![0]).await,
        0
    );
    assert_eq!(
        produce_txn(&mut owner, "payments", "t", 0, pid, epoch, 0, &["pay-1"]).await,
        0
    );
    // The fencing attack: InitProducerId on the owner's transactional id.
    assert_eq!(
        init(&mut mallory, "payments", (-1, -1)).await.0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    // Forged batches under the owner's producer id and epoch.
    assert_eq!(
        produce_txn(&mut mallory, "payments", "t", 0, pid, epoch, 1, &["evil"]).await,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce_txn(&mut mallory, "m", "t", 0, pid, epoch, 1, &["evil"]).await,
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        end(&mut mallory, "m", pid, epoch, false).await,
        INVALID_PRODUCER_ID_MAPPING
    );
    // The owner's transaction commits with its own data only.
    assert_eq!(
        produce_txn(&mut owner, "payments", "t", 0, pid, epoch, 1, &["pay-2"]).await,
        0
    );
    assert_eq!(end(&mut owner, "payments", pid, epoch, true).await, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let f = fetch_committed(&mut owner, "t", 0).await;
        if f.committed.len() == 2 || std::time::Instant::now() > deadline {
            assert_eq!(f.committed, vec!["pay-1".to_string(), "pay-2".to_string()]);
            assert!(!f.values.iter().any(|v| v == "evil"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.terminate();
}

/// The forged-producer-id attack on an idempotent producer, then the owner's
/// next batch: (owner's pid, next sequence).
async fn forge_and_check(p: &support::Process, pid: i64, seq: i32) {
    let mut mallory = connect_as(&p.addr, "mallory").await;
    let mut owner = connect_as(&p.addr, "owner").await;
    assert_eq!(
        produce(&mut mallory, "t", 0, batch(pid, 0, seq, b"evil"))
            .await
            .0,
        UNKNOWN_PRODUCER_ID,
        "mallory's batch under the owner's producer id"
    );
    let (code, offset) = produce(&mut owner, "t", 0, batch(pid, 0, seq, b"real")).await;
    assert_eq!(code, 0, "the owner's next batch is acknowledged");
    let stored = fetch_values(&mut owner, "t", 0, 0).await;
    assert!(stored.contains(&(offset, b"real".to_vec())), "{stored:?}");
    assert!(!stored.iter().any(|(_, v)| v == b"evil"));
}

#[tokio::test]
async fn a_forged_producer_id_is_refused_and_the_binding_survives_kill_9() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = secured(dir.path()).await;
    let mut owner = connect_as(&p.addr, "owner").await;
    let pid = idempotent_pid(&mut owner).await;
    assert_eq!(
        produce(&mut owner, "t", 0, batch(pid, 0, 0, b"first")).await,
        (0, 0)
    );
    forge_and_check(&p, pid, 1).await;
    p.kill9();
    let p = spawn_sasl(dir.path());
    forge_and_check(&p, pid, 2).await;
    p.terminate();
}
