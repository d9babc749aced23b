//! CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) over the wire:
//! round trips with Kafka's filter rules, per-creation
//! validation, SECURITY_DISABLED without an authorizer,
//! CLUSTER_AUTHORIZATION_FAILED without DESCRIBE / ALTER on the cluster,
//! the --max-acls bound, and ACLs surviving a restart on the same data
//! directory. The test connections are `User:ANONYMOUS` (PLAINTEXT).

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, InProcess, Process};

use kaas::log::FsyncMode;
use kaas::security::Principal;
use kaas::security::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};

const NONE: i16 = 0;
const POLICY_VIOLATION: i16 = 44;
const INVALID_REQUEST: i16 = 42;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const SECURITY_DISABLED: i16 = 54;

// Wire codes.
const ANY: i8 = 1;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const ALTER: i8 = 7;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// One ACL as the tests compare them: (type, name, pattern, principal,
/// host, operation, permission).
type Acl = (i8, String, i8, String, String, i8, i8);

fn acl(rt: i8, name: &str, pt: i8, principal: &str, op: i8, perm: i8) -> Acl {
    (rt, name.into(), pt, principal.into(), "*".into(), op, perm)
}

fn creation(a: &Acl) -> AclCreation {
    AclCreation::default()
        .with_resource_type(a.0)
        .with_resource_name(s(&a.1))
        .with_resource_pattern_type(a.2)
        .with_principal(s(&a.3))
        .with_host(s(&a.4))
        .with_operation(a.5)
        .with_permission_type(a.6)
}

/// A filter: (type, name, pattern, principal, host, operation, permission).
#[derive(Clone, Copy)]
struct Filter<'a> {
    rt: i8,
    name: Option<&'a str>,
    pt: i8,
    principal: Option<&'a str>,
    host: Option<&'a str>,
    op: i8,
    perm: i8,
}

const ALL: Filter<'static> = Filter {
    rt: ANY,
    name: None,
    pt: ANY,
    principal: None,
    host: None,
    op: ANY,
    perm: ANY,
};

async fn create_acls(c: &mut Client, acls: &[Acl], version: i16) -> Vec<(i16, Option<String>)> {
    let resp = c
        .call(
            &CreateAclsRequest::default().with_creations(acls.iter().map(creation).collect()),
            version,
        )
        .await;
    assert_eq!(resp.results.len(), acls.len(), "one result per creation");
    resp.results
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// DescribeAcls: (error code, ACLs sorted).
async fn describe(c: &mut Client, f: Filter<'_>, version: i16) -> (i16, Vec<Acl>) {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(f.rt)
        .with_resource_name_filter(f.name.map(s))
        .with_pattern_type_filter(f.pt)
        .with_principal_filter(f.principal.map(s))
        .with_host_filter(f.host.map(s))
        .with_operation(f.op)
        .with_permission_type(f.perm);
    let resp = c.call(&req, version).await;
    let mut out: Vec<Acl> = resp
        .resources
        .iter()
        .flat_map(|r| {
            r.acls.iter().map(move |a| {
                (
                    r.resource_type,
                    r.resource_name.to_string(),
                    r.pattern_type,
                    a.principal.to_string(),
                    a.host.to_string(),
                    a.operation,
                    a.permission_type,
                )
            })
        })
        .collect();
    out.sort();
    (resp.error_code, out)
}

/// DeleteAcls: per filter, (error code, ACLs it deleted, sorted).
async fn delete(c: &mut Client, filters: &[Filter<'_>], version: i16) -> Vec<(i16, Vec<Acl>)> {
    let req = DeleteAclsRequest::default().with_filters(
        filters
            .iter()
            .map(|f| {
                DeleteAclsFilter::default()
                    .with_resource_type_filter(f.rt)
                    .with_resource_name_filter(f.name.map(s))
                    .with_pattern_type_filter(f.pt)
                    .with_principal_filter(f.principal.map(s))
                    .with_host_filter(f.host.map(s))
                    .with_operation(f.op)
                    .with_permission_type(f.perm)
            })
            .collect(),
    );
    let resp = c.call(&req, version).await;
    assert_eq!(
        resp.filter_results.len(),
        filters.len(),
        "one result per filter"
    );
    resp.filter_results
        .iter()
        .map(|r| {
            let mut acls: Vec<Acl> = r
                .matching_acls
                .iter()
                .map(|m| {
                    assert_eq!(m.error_code, NONE);
                    (
                        m.resource_type,
                        m.resource_name.to_string(),
                        m.pattern_type,
                        m.principal.to_string(),
                        m.host.to_string(),
                        m.operation,
                        m.permission_type,
                    )
                })
                .collect();
            acls.sort();
            (r.error_code, acls)
        })
        .collect()
}

/// A broker enforcing ACLs, with ANONYMOUS (the test connections) a super
/// user when `anonymous_is_super`.
async fn start(dir: &std::path::Path, anonymous_is_super: bool) -> InProcess {
    InProcess::start_with(dir, FsyncMode::Always, |cfg| {
        cfg.authorizer.enabled = true;
        if anonymous_is_super {
            cfg.authorizer.super_users.insert(Principal::anonymous());
        }
    })
    .await
}

fn sorted(mut v: Vec<Acl>) -> Vec<Acl> {
    v.sort();
    v
}

fn some_acls() -> Vec<Acl> {
    vec![
        acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "pre", PREFIXED, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "*", LITERAL, "User:*", DESCRIBE, ALLOW),
        acl(TOPIC, "t", PREFIXED, "User:bob", READ, DENY),
        acl(GROUP, "g", LITERAL, "User:bob", READ, ALLOW),
    ]
}

#[tokio::test]
async fn created_acls_are_described_and_deleted_through_filters() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let acls = some_acls();
    for r in create_acls(&mut c, &acls, 3).await {
        assert_eq!(r, (NONE, None));
    }
    assert_eq!(describe(&mut c, ALL, 3).await, (NONE, sorted(acls.clone())));
    // Pattern ANY: either pattern type, the name equal.
    let t_any = Filter {
        name: Some("t"),
        ..ALL
    };
    assert_eq!(
        describe(&mut c, t_any, 2).await.1,
        sorted(vec![acls[0].clone(), acls[3].clone()])
    );
    // MATCH: every pattern applying to the literal name.
    let matching = Filter {
        rt: TOPIC,
        name: Some("prefix-x"),
        pt: MATCH,
        ..ALL
    };
    assert_eq!(
        describe(&mut c, matching, 1).await.1,
        sorted(vec![acls[1].clone(), acls[2].clone()])
    );
    let by_principal = Filter {
        principal: Some("User:bob"),
        ..ALL
    };
    assert_eq!(
        describe(&mut c, by_principal, 3).await.1,
        sorted(vec![acls[3].clone(), acls[4].clone()])
    );
    let denies = Filter { perm: DENY, ..ALL };
    assert_eq!(describe(&mut c, denies, 3).await.1, vec![acls[3].clone()]);
    // Deleting: each filter reports what it removed.
    let prefixed = Filter {
        pt: PREFIXED,
        ..ALL
    };
    let groups = Filter { rt: GROUP, ..ALL };
    let nothing = Filter {
        name: Some("nope"),
        ..ALL
    };
    let deleted = delete(&mut c, &[prefixed, groups, nothing], 3).await;
    assert_eq!(
        deleted,
        vec![
            (NONE, sorted(vec![acls[1].clone(), acls[3].clone()])),
            (NONE, vec![acls[4].clone()]),
            (NONE, vec![]),
        ]
    );
    assert_eq!(
        describe(&mut c, ALL, 3).await.1,
        sorted(vec![acls[0].clone(), acls[2].clone()])
    );
    b.stop().await;
}

#[tokio::test]
async fn a_duplicate_creation_succeeds_and_adds_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let a = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
    assert_eq!(
        create_acls(&mut c, std::slice::from_ref(&a), 3).await,
        [(NONE, None)]
    );
    assert_eq!(
        create_acls(&mut c, &[a.clone(), a.clone()], 3).await,
        [(NONE, None), (NONE, None)]
    );
    assert_eq!(describe(&mut c, ALL, 3).await.1, vec![a]);
    b.stop().await;
}

#[tokio::test]
async fn invalid_creations_are_refused_one_by_one_with_invalid_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let good = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
    let mut bad_host = good.clone();
    bad_host.4 = "example.com".into();
    let creations = vec![
        good.clone(),
        acl(ANY, "t", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "t", MATCH, "User:alice", READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", ANY, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", READ, ANY),
        acl(TOPIC, "", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "alice", READ, ALLOW),
        acl(CLUSTER, "my-cluster", LITERAL, "User:alice", ALTER, ALLOW),
        bad_host,
    ];
    let results = create_acls(&mut c, &creations, 3).await;
    assert_eq!(results[0], (NONE, None));
    for (i, (code, message)) in results.iter().enumerate().skip(1) {
        assert_eq!(*code, INVALID_REQUEST, "creation {i}");
        assert!(
            message.as_ref().is_some_and(|m| !m.is_empty()),
            "creation {i} says why"
        );
    }
    assert_eq!(describe(&mut c, ALL, 3).await.1, vec![good]);
    b.stop().await;
}

#[tokio::test]
async fn a_filter_with_an_unknown_value_is_an_invalid_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let unknown_op = Filter { op: 0, ..ALL };
    assert_eq!(describe(&mut c, unknown_op, 3).await.0, INVALID_REQUEST);
    let unknown_type = Filter { rt: 0, ..ALL };
    let results = delete(&mut c, &[ALL, unknown_type], 3).await;
    assert_eq!(results[0].0, NONE);
    assert_eq!(results[1].0, INVALID_REQUEST);
    b.stop().await;
}

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let a = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
    let created = create_acls(&mut c, &[a.clone(), a], 3).await;
    assert!(
        created.iter().all(|r| r.0 == SECURITY_DISABLED),
        "{created:?}"
    );
    assert_eq!(describe(&mut c, ALL, 3).await, (SECURITY_DISABLED, vec![]));
    assert_eq!(
        delete(&mut c, &[ALL], 3).await,
        [(SECURITY_DISABLED, vec![])]
    );
    assert_eq!(b.broker.authz.acl_count(), 0);
    b.stop().await;
}

#[tokio::test]
async fn the_acl_apis_need_describe_or_alter_on_the_cluster() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), false).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let a = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
    assert_eq!(
        create_acls(&mut c, std::slice::from_ref(&a), 3).await[0].0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        describe(&mut c, ALL, 3).await.0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        delete(&mut c, &[ALL], 3).await[0].0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        b.broker.authz.denied_total(),
        3,
        "each refusal is a counted denial"
    );
    let metrics = kaas::exposition::render(&b.broker);
    assert!(
        metrics.contains("\nkaas_authorization_denied_total 3\n"),
        "{metrics}"
    );
    // DESCRIBE on the cluster lets ANONYMOUS list ACLs, not change them.
    let describe_cluster = AclBinding {
        resource_type: ResourceType::Cluster,
        resource_name: "kafka-cluster".into(),
        pattern_type: PatternType::Literal,
        principal: Principal::anonymous(),
        host: "*".into(),
        operation: Operation::Describe,
        permission: Permission::Allow,
    };
    let broker = b.broker.clone();
    let made = tokio::task::spawn_blocking(move || broker.authz.create(vec![describe_cluster]))
        .await
        .expect("create");
    assert_eq!(made, [Ok(())]);
    let (code, listed) = describe(&mut c, ALL, 3).await;
    assert_eq!(code, NONE);
    assert_eq!(
        listed,
        vec![acl(
            CLUSTER,
            "kafka-cluster",
            LITERAL,
            "User:ANONYMOUS",
            DESCRIBE,
            ALLOW
        )]
    );
    assert_eq!(
        create_acls(&mut c, &[a], 3).await[0].0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        delete(&mut c, &[ALL], 3).await[0].0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(b.broker.authz.acl_count(), 1);
    b.stop().await;
}

#[tokio::test]
async fn creations_past_max_acls_answer_policy_violation() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |cfg| {
        cfg.authorizer.enabled = true;
        cfg.authorizer.super_users.insert(Principal::anonymous());
        cfg.authorizer.max_acls = 2;
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let acls = some_acls();
    let results = create_acls(&mut c, &acls[..3], 3).await;
    assert_eq!(results[..2], [(NONE, None), (NONE, None)]);
    assert_eq!(results[2].0, POLICY_VIOLATION);
    assert!(
        results[2]
            .1
            .as_ref()
            .is_some_and(|m| m.contains("--max-acls")),
        "{:?}",
        results[2].1
    );
    assert_eq!(describe(&mut c, ALL, 3).await.1.len(), 2);
    b.stop().await;
}

#[tokio::test]
async fn acls_survive_a_restart_on_the_same_data_dir() {
    let dir = tempfile::tempdir().expect("tmp");
    let acls = some_acls();
    {
        let b = start(dir.path(), true).await;
        let mut c = Client::connect(&b.addr.to_string()).await;
        create_acls(&mut c, &acls, 3).await;
        let groups = Filter { rt: GROUP, ..ALL };
        assert_eq!(delete(&mut c, &[groups], 3).await[0].1.len(), 1);
        b.stop().await;
    }
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(describe(&mut c, ALL, 3).await.1, sorted(acls[..4].to_vec()));
    // And they are enforced.
    let alice = kaas::security::Session {
        principal: Principal::user("alice"),
        ..(*kaas::security::Session::internal()).clone()
    };
    assert!(
        b.broker
            .authz
            .probe(&alice, Operation::Read, ResourceType::Topic, "t")
    );
    assert!(
        b.broker
            .authz
            .probe(&alice, Operation::Write, ResourceType::Topic, "pre-1")
    );
    assert!(
        !b.broker
            .authz
            .probe(&alice, Operation::Write, ResourceType::Topic, "t")
    );
    b.stop().await;
}

#[tokio::test]
async fn api_versions_advertises_the_acl_apis_v1_to_v3() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path(), true).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let v = c.call(&support::api_versions_v3(), 3).await;
    for key in [29, 30, 31] {
        let k = v
            .api_keys
            .iter()
            .find(|k| k.api_key == key)
            .unwrap_or_else(|| panic!("ApiVersions lists {key}"));
        assert_eq!((k.min_version, k.max_version), (1, 3), "api {key}");
    }
    b.stop().await;
}

/// A log line without its ANSI colour sequences.
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

#[tokio::test]
async fn a_decisive_denial_is_audited_with_its_fields_and_a_burst_is_rate_limited() {
    let dir = tempfile::tempdir().expect("tmp");
    let stderr_path = dir.path().join("stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--policy")
        .arg(support::wasm("kaas_policy_apache37.wasm"))
        .args(["--authorizer", "acl"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn kaas broker");
    let p = Process::listening(child);
    let mut c = Client::connect(&p.addr).await;
    const BURST: usize = 50;
    for _ in 0..BURST {
        assert_eq!(
            describe(&mut c, ALL, 3).await.0,
            CLUSTER_AUTHORIZATION_FAILED
        );
    }
    let audit = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("kaas::audit"))
            .map(without_colours)
            .collect()
    };
    let read = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let await_lines = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let lines = audit(&read());
            if lines.len() >= n {
                return lines;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "audit lines: {}",
                read()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let first = await_lines(1).remove(0);
    for field in [
        "principal=User:ANONYMOUS",
        "listener=PLAINTEXT",
        "host=127.0.0.1",
        "api=DescribeAcls",
        "operation=Describe",
        "resource_type=Cluster",
        "name=\"kafka-cluster\"",
        "suppressed=0",
    ] {
        assert!(first.contains(field), "{field} in {first}");
    }
    // Once the limit lets a line through again, it counts those held back:
    // every denial is a line or is counted in one.
    let burst_lines = audit(&read()).len();
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(
        describe(&mut c, ALL, 3).await.0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    let lines = await_lines(burst_lines + 1);
    let suppressed: usize = lines
        .iter()
        .map(|l| {
            l.split("suppressed=")
                .nth(1)
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no suppressed count in {l}"))
        })
        .sum();
    assert_eq!(lines.len() + suppressed, BURST + 1, "{lines:?}");
    assert!(
        lines.len() < BURST,
        "a burst is not one line per denial: {lines:?}"
    );
    p.terminate();
}
