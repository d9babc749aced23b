//! Client quotas over the wire: AlterClientQuotas and DescribeClientQuotas
//! round trip with Kafka 3.7's filters and checks, validate_only writes
//! nothing, the quotas survive a restart, and the broker enforces them: a
//! produce over `producer_byte_rate` carries a throttle time and its
//! connection is muted for it (KIP-219), CreateTopics over
//! `controller_mutation_rate` answers THROTTLING_QUOTA_EXCEEDED from v6 and
//! is throttled before.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::records::{name, produce_request};
use support::{Client, InProcess};

const INVALID_REQUEST: i16 = 42;
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// An entity from (type, name) pairs; a None name is `<default>`.
fn entity(parts: &[(&str, Option<&str>)]) -> Vec<EntityData> {
    parts
        .iter()
        .map(|(t, n)| {
            EntityData::default()
                .with_entity_type(s(t))
                .with_entity_name(n.map(s))
        })
        .collect()
}

fn set(key: &str, value: f64) -> OpData {
    OpData::default().with_key(s(key)).with_value(value)
}

fn remove(key: &str) -> OpData {
    OpData::default().with_key(s(key)).with_remove(true)
}

/// AlterClientQuotas v1: (error code, message) of each entry.
async fn alter(
    c: &mut Client,
    entries: Vec<(Vec<EntityData>, Vec<OpData>)>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let req = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(
            entries
                .into_iter()
                .map(|(e, ops)| EntryData::default().with_entity(e).with_ops(ops))
                .collect(),
        );
    let resp = c.call(&req, 1).await;
    resp.entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// One described entry: its (type, name) pairs and (key, value) pairs.
type Described = (Vec<(String, Option<String>)>, Vec<(String, f64)>);

/// DescribeClientQuotas v1: the entries, sorted, or (code, message).
async fn describe(
    c: &mut Client,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<Vec<Described>, (i16, String)> {
    let req = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            components
                .iter()
                .map(|(t, m, n)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(*m)
                        .with_match(n.map(s))
                })
                .collect(),
        );
    let resp = c.call(&req, 1).await;
    if resp.error_code != 0 {
        return Err((
            resp.error_code,
            resp.error_message
                .map(|m| m.to_string())
                .unwrap_or_default(),
        ));
    }
    let mut out: Vec<Described> = resp
        .entries
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e.entity
                    .iter()
                    .map(|x| {
                        (
                            x.entity_type.to_string(),
                            x.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                e.values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            )
        })
        .collect();
    out.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    Ok(out)
}

fn ent(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    parts
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(|n| n.to_string())))
        .collect()
}

#[tokio::test]
async fn quotas_round_trip_validate_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;

    // Three entities at three levels.
    let said = alter(
        &mut c,
        vec![
            (
                entity(&[("user", Some("alice"))]),
                vec![
                    set("producer_byte_rate", 1024.0),
                    set("request_percentage", 50.5),
                ],
            ),
            (
                entity(&[("user", None), ("client-id", None)]),
                vec![set("consumer_byte_rate", 2048.0)],
            ),
            (
                entity(&[("client-id", Some("app"))]),
                vec![set("controller_mutation_rate", 2.5)],
            ),
        ],
        false,
    )
    .await;
    assert_eq!(said, vec![(0, None); 3]);

    let all = describe(&mut c, &[], false).await.unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    let alice = describe(&mut c, &[("user", 0, Some("alice"))], true)
        .await
        .unwrap();
    assert_eq!(
        alice,
        vec![(
            ent(&[("user", Some("alice"))]),
            vec![
                ("producer_byte_rate".into(), 1024.0),
                ("request_percentage".into(), 50.5)
            ]
        )]
    );
    // Default user, not strict: also the (default user, default client).
    let defaults = describe(&mut c, &[("user", 1, None)], false).await.unwrap();
    assert_eq!(defaults.len(), 1);
    assert_eq!(defaults[0].0, ent(&[("user", None), ("client-id", None)]));
    // Strict with only the user component: the pair does not match.
    assert!(
        describe(&mut c, &[("user", 1, None)], true)
            .await
            .unwrap()
            .is_empty()
    );
    // Specified client ids: "app", not <default>.
    let specified = describe(&mut c, &[("client-id", 2, None)], false)
        .await
        .unwrap();
    assert_eq!(specified.len(), 1);
    assert_eq!(specified[0].0, ent(&[("client-id", Some("app"))]));

    // Validation, each entry on its own, with Kafka's messages.
    let said = alter(
        &mut c,
        vec![
            (entity(&[("user", Some("bob"))]), vec![set("foo", 1.0)]),
            (
                entity(&[("group", Some("g"))]),
                vec![set("producer_byte_rate", 1.0)],
            ),
            (entity(&[]), vec![set("producer_byte_rate", 1.0)]),
            (
                entity(&[("user", Some("bob"))]),
                vec![set("producer_byte_rate", 10.5)],
            ),
            (
                entity(&[("user", Some(""))]),
                vec![set("producer_byte_rate", 1.0)],
            ),
            (
                entity(&[("user", Some("carol"))]),
                vec![set("producer_byte_rate", 7.0)],
            ),
        ],
        false,
    )
    .await;
    let msgs: Vec<_> = said
        .iter()
        .map(|(_, m)| m.clone().unwrap_or_default())
        .collect();
    assert_eq!(said[0].0, INVALID_REQUEST);
    assert_eq!(msgs[0], "Invalid configuration key foo");
    assert_eq!(msgs[1], "Unhandled client quota entity type: group");
    assert_eq!(msgs[2], "Invalid empty client quota entity");
    assert_eq!(
        msgs[3],
        "Configuration producer_byte_rate must be a Long value"
    );
    assert_eq!(msgs[4], "Empty user not supported");
    assert_eq!(said[5], (0, None), "a valid entry beside bad ones applies");
    assert!(said[..5].iter().all(|(c, _)| *c == INVALID_REQUEST));

    // Bad filters.
    let e = describe(&mut c, &[("user", 0, None)], false)
        .await
        .unwrap_err();
    assert_eq!(
        e,
        (
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.".into()
        )
    );
    let e = describe(&mut c, &[("user", 9, None)], false)
        .await
        .unwrap_err();
    assert_eq!(e.0, 35);

    // validate_only: checked, not written.
    let said = alter(
        &mut c,
        vec![(
            entity(&[("user", Some("dave"))]),
            vec![set("producer_byte_rate", 5.0)],
        )],
        true,
    )
    .await;
    assert_eq!(said, vec![(0, None)]);
    assert!(
        describe(&mut c, &[("user", 0, Some("dave"))], false)
            .await
            .unwrap()
            .is_empty()
    );
    // Removing the last key removes the entity.
    let said = alter(
        &mut c,
        vec![(
            entity(&[("user", Some("carol"))]),
            vec![remove("producer_byte_rate")],
        )],
        false,
    )
    .await;
    assert_eq!(said, vec![(0, None)]);

    let before = describe(&mut c, &[], false).await.unwrap();
    assert_eq!(before.len(), 3);
    drop(c);
    b.stop().await;

    // A restart reads them back.
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(describe(&mut c, &[], false).await.unwrap(), before);
    drop(c);
    b.stop().await;
}

#[tokio::test]
async fn a_produce_over_the_byte_rate_is_throttled_and_its_connection_muted() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    support::records::create(&mut c, "q", 1).await;
    // Plaintext clients are User:ANONYMOUS.
    let said = alter(
        &mut c,
        vec![(
            entity(&[("user", Some("ANONYMOUS"))]),
            vec![set("producer_byte_rate", 15_000.0)],
        )],
        false,
    )
    .await;
    assert_eq!(said, vec![(0, None)]);
    // 200 KB over the 10 s minimum window is about 20 KB/s against 15 KB/s:
    // about (20 − 15)/15 × 10 s = 3.3 s of throttle.
    let value = vec![7u8; 200_000];
    let batch = data_batch(&[(None, &value)], 1, None, false);
    let resp = c.call(&produce_request("q", 0, batch), 9).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    let t = resp.throttle_time_ms;
    assert!((2_500..=4_500).contains(&t), "throttle {t} ms");
    // The connection is muted: the next request is answered no sooner
    // than the throttle time (a lower bound: a slow machine only adds).
    let started = std::time::Instant::now();
    let _ = c.call(&support::api_versions_v3(), 3).await;
    assert!(
        started.elapsed().as_millis() as i32 >= t - 200,
        "answered after {:?}, throttle {t} ms",
        started.elapsed()
    );
    // Another connection of the same user shares the quota.
    let mut other = Client::connect(&b.addr.to_string()).await;
    let small = data_batch(&[(None, b"x")], 1, None, false);
    let resp = other.call(&produce_request("q", 0, small), 9).await;
    assert!(resp.throttle_time_ms > 0);
    // The metrics name the user.
    let page = kaas::exposition::render(&b.broker);
    assert!(
        page.contains(
            "kaas_quota_throttled_total{quota_type=\"producer_byte_rate\",user=\"ANONYMOUS\",client_id=\"\"}"
        ),
        "{page}"
    );
    drop((c, other));
    b.stop().await;
}

#[tokio::test]
async fn create_topics_over_the_mutation_rate_is_refused_from_v6_and_throttled_before() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let said = alter(
        &mut c,
        vec![(
            entity(&[("user", None)]),
            vec![set("controller_mutation_rate", 1.0)],
        )],
        false,
    )
    .await;
    assert_eq!(said, vec![(0, None)]);
    let create = |topic: &str, partitions: i32| {
        CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(partitions)
                .with_replication_factor(1),
        ])
    };
    // A burst of 10 tokens: 20 partitions are accepted unthrottled (strict:
    // the bucket was not empty), then the bucket owes 10 and the next
    // creation is refused with the time until it is paid back.
    let r = c.call(&create("m1", 20), 7).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.throttle_time_ms, 0);
    let r = c.call(&create("m2", 1), 7).await;
    assert_eq!(r.topics[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(r.throttle_time_ms > 0);
    assert!(b.broker.logs.topic("m2").is_none());
    // v5 (before THROTTLING_QUOTA_EXCEEDED): accepted, and throttled.
    let mut c5 = Client::connect(&b.addr.to_string()).await;
    let r = c5.call(&create("m3", 1), 5).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert!(r.throttle_time_ms > 0);
    drop((c, c5));
    b.stop().await;
}

#[tokio::test]
async fn quota_apis_need_describe_configs_and_alter_configs_on_the_cluster() {
    use kaas::security::acl::{AclBinding, CLUSTER_NAME, PatternType, Permission};
    use kaas::security::{Operation, Principal, ResourceType};
    let dir = tempfile::tempdir().expect("tmp");
    // User:ANONYMOUS may describe configs of the cluster, not alter them.
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.authorizer.enabled = true;
        c.acls = vec![AclBinding {
            resource_type: ResourceType::Cluster,
            resource_name: CLUSTER_NAME.into(),
            pattern_type: PatternType::Literal,
            principal: Principal::anonymous(),
            host: "*".into(),
            operation: Operation::DescribeConfigs,
            permission: Permission::Allow,
        }];
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(describe(&mut c, &[], false).await.unwrap(), vec![]);
    let said = alter(
        &mut c,
        vec![(
            entity(&[("user", None)]),
            vec![set("producer_byte_rate", 1.0)],
        )],
        false,
    )
    .await;
    assert_eq!(said[0].0, 31, "CLUSTER_AUTHORIZATION_FAILED: {said:?}");
    assert!(b.broker.quotas.table().is_empty());
    drop(c);
    b.stop().await;
}

/// Fetch v12 of `topic`-0 from `offset` on `c`.
async fn fetch(c: &mut Client, topic: &str, offset: i64) -> FetchResponse {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(10 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(10 << 20),
                ]),
        ]);
    c.call(&req, 12).await
}

#[tokio::test]
async fn a_fetch_over_the_consumer_byte_rate_is_answered_empty_with_the_throttle_time() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    support::records::create(&mut c, "f", 1).await;
    for i in 0..30u8 {
        let value = vec![i; 1000];
        let batch = data_batch(&[(None, &value)], 1, None, false);
        let resp = c.call(&produce_request("f", 0, batch), 9).await;
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    let said = alter(
        &mut c,
        vec![(
            entity(&[("client-id", None)]),
            vec![set("consumer_byte_rate", 1000.0)],
        )],
        false,
    )
    .await;
    assert_eq!(said, vec![(0, None)]);
    // One window allows 1000 B/s × 10 s: the fetch asks for at most
    // 10 000 bytes, which is within the quota.
    let first = fetch(&mut c, "f", 0).await;
    assert_eq!(first.throttle_time_ms, 0);
    let got = first.responses[0].partitions[0]
        .records
        .as_ref()
        .map_or(0, |r| r.len());
    assert!((5_000..=10_000).contains(&got), "{got} bytes");
    // The next one would be over: answered empty, with the throttle time.
    let second = fetch(&mut c, "f", 5).await;
    assert_eq!(second.error_code, 0);
    assert!(second.responses.is_empty(), "{:?}", second.responses);
    assert!(second.throttle_time_ms > 0);
    drop(c);
    b.stop().await;
}

#[tokio::test]
async fn request_percentage_throttles_at_most_one_window() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let said = alter(
        &mut c,
        vec![(
            entity(&[("user", Some("ANONYMOUS")), ("client-id", None)]),
            vec![set("request_percentage", 0.000_001)],
        )],
        false,
    )
    .await;
    assert_eq!(said, vec![(0, None)]);
    // Any handler time is far over a millionth of a percent: the throttle
    // is Kafka's bound, one window (1 s).
    let r = c
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert_eq!(r.throttle_time_ms, 1000);
    // ApiVersions is exempt.
    let v = c.call(&support::api_versions_v3(), 3).await;
    assert_eq!(v.throttle_time_ms, 0);
    drop(c);
    b.stop().await;
}
