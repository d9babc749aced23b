//! The broker over a real socket with exact request bytes: the version
//! table, KIP-511, bad input handling, and produce/fetch semantics of the
//! idempotent producer (spec §3, PS-xx).

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use support::records::{create, fetch_values, idempotent_pid, name, produce};
use support::{Client, InProcess};

use kaas::log::FsyncMode;
use kaas::log::batch::{control_batch, data_batch};

#[tokio::test]
async fn api_versions_advertises_kafka_37_ranges() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let resp = c.call(&support::api_versions_v3(), 3).await;
    assert_eq!(resp.error_code, 0);
    let get = |k: ApiKey| {
        resp.api_keys
            .iter()
            .find(|a| a.api_key == k as i16)
            .map(|a| (a.min_version, a.max_version))
    };
    assert_eq!(get(ApiKey::Produce), Some((3, 10)));
    assert_eq!(get(ApiKey::Fetch), Some((4, 16)));
    assert_eq!(get(ApiKey::InitProducerId), Some((0, 4)));
    assert_eq!(get(ApiKey::Metadata), Some((0, 12)));
    // Kafka 3.7 has 0-1; kafka-protocol decodes v1 only.
    assert_eq!(get(ApiKey::WriteTxnMarkers), Some((1, 1)));
    b.stop().await;
}

#[tokio::test]
async fn a_too_new_api_versions_gets_unsupported_version_in_the_v0_format() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    // Header v2: key 18, version 9, correlation 77, client id "x", no tags;
    // then a body this broker cannot know.
    let mut frame = vec![0, 18, 0, 9, 0, 0, 0, 77, 0, 1, b'x', 0];
    frame.extend_from_slice(&[9, 9, 9, 9]);
    c.send_raw(&frame).await;
    let mut resp = c.read_frame().await.expect("a response");
    let header = ResponseHeader::decode(&mut resp, 0).expect("header v0");
    assert_eq!(header.correlation_id, 77);
    let body = ApiVersionsResponse::decode(&mut resp, 0).expect("v0 body");
    assert_eq!(body.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(
        body.api_keys
            .iter()
            .any(|a| a.api_key == 18 && a.max_version == 3)
    );
    b.stop().await;
}

#[tokio::test]
async fn bad_frames_close_the_connection_and_the_broker_keeps_serving() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.max_request_bytes = 1 << 20
    })
    .await;
    let addr = b.addr.to_string();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "unknown api key",
            vec![0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff],
        ),
        (
            "unsupported produce version",
            vec![0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff],
        ),
        ("too short", vec![0, 3]),
        (
            "garbage metadata body",
            vec![0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff],
        ),
    ];
    for (what, frame) in cases {
        let mut c = Client::connect(&addr).await;
        c.send_raw(&frame).await;
        assert!(
            c.read_frame().await.is_none(),
            "{what}: expected the connection to close"
        );
    }
    // A frame declared larger than the limit closes without reading it.
    let mut c = Client::connect(&addr).await;
    let mut huge = Vec::new();
    huge.extend_from_slice(&(2i32 << 20).to_be_bytes());
    c.send_raw(&huge[..0]).await;
    let _ = tokio::io::AsyncWriteExt::write_all(
        &mut tokio::net::TcpStream::connect(&addr).await.expect("c"),
        &huge,
    )
    .await;
    // The broker still answers.
    let mut ok = Client::connect(&addr).await;
    assert_eq!(ok.call(&support::api_versions_v3(), 3).await.error_code, 0);
    b.stop().await;
}

#[tokio::test]
async fn produce_then_fetch_returns_the_records_with_assigned_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 2).await;
    let (e1, o1) = produce(
        &mut c,
        "t",
        1,
        data_batch(&[(None, b"a"), (None, b"b")], 1000, None, false),
    )
    .await;
    let (e2, o2) = produce(
        &mut c,
        "t",
        1,
        data_batch(&[(None, b"c")], 2000, None, false),
    )
    .await;
    assert_eq!((e1, o1, e2, o2), (0, 0, 0, 2));
    let got = fetch_values(&mut c, "t", 1, 0).await;
    assert_eq!(
        got,
        vec![(0, b"a".to_vec()), (1, b"b".to_vec()), (2, b"c".to_vec())]
    );
    assert_eq!(
        fetch_values(&mut c, "t", 1, 2).await,
        vec![(2, b"c".to_vec())]
    );
    b.stop().await;
}

#[tokio::test]
async fn a_retried_batch_returns_its_original_offset_and_is_stored_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let pid = idempotent_pid(&mut c).await;
    let first = data_batch(&[(None, b"x")], 1, Some((pid, 0, 0)), false);
    assert_eq!(produce(&mut c, "t", 0, first.clone()).await, (0, 0));
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"y")], 1, Some((pid, 0, 1)), false)
        )
        .await,
        (0, 1)
    );
    assert_eq!(
        produce(&mut c, "t", 0, first).await,
        (0, 0),
        "PS-04: the retry is a duplicate"
    );
    assert_eq!(fetch_values(&mut c, "t", 0, 0).await.len(), 2);
    b.stop().await;
}

#[tokio::test]
async fn sequence_and_epoch_rules_answer_kafkas_codes() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    let pid = idempotent_pid(&mut c).await;
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"a")], 1, Some((pid, 3, 0)), false)
        )
        .await
        .0,
        0
    );
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"b")], 1, Some((pid, 3, 5)), false)
        )
        .await
        .0,
        45,
        "PS-03 gap"
    );
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"c")], 1, Some((pid, 2, 1)), false)
        )
        .await
        .0,
        47,
        "PS-06 stale epoch"
    );
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"d")], 1, Some((pid, 4, 5)), false)
        )
        .await
        .0,
        45,
        "PS-08"
    );
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"e")], 1, Some((pid, 4, 0)), false)
        )
        .await
        .0,
        0,
        "PS-07"
    );
    b.stop().await;
}

#[tokio::test]
async fn bad_batches_are_refused_with_their_codes_and_never_stored() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    // A control batch is transactional: without a transactional id on the
    // request Kafka refuses it before looking at it (53), as kaas does (the
    // wire kit's PS-16 holds both to it).
    assert_eq!(
        produce(&mut c, "t", 0, control_batch(5, 0, true, 0, 1))
            .await
            .0,
        53,
        "PS-16"
    );
    let mut corrupt = data_batch(&[(None, b"value")], 1, None, false);
    let n = corrupt.len();
    corrupt[n - 3] ^= 1;
    assert_eq!(produce(&mut c, "t", 0, corrupt).await.0, 2, "CRC");
    let mut truncated = data_batch(&[(None, b"value")], 1, None, false);
    truncated.truncate(40);
    assert_eq!(produce(&mut c, "t", 0, truncated).await.0, 2);
    assert_eq!(
        produce(
            &mut c,
            "missing",
            0,
            data_batch(&[(None, b"v")], 1, None, false)
        )
        .await
        .0,
        3
    );
    assert!(fetch_values(&mut c, "t", 0, 0).await.is_empty());
    assert_eq!(
        produce(&mut c, "t", 0, data_batch(&[(None, b"ok")], 1, None, false)).await,
        (0, 0)
    );
    b.stop().await;
}

#[tokio::test]
async fn data_and_producer_state_survive_a_clean_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    // Timestamps of now: producer state older than producer.id.expiration.ms
    // (a day) is expired at start, as Kafka does.
    let t0 = kaas::clock::now_ms();
    let pid;
    let first = {
        let b = InProcess::start(dir.path(), FsyncMode::Always).await;
        let mut c = Client::connect(&b.addr.to_string()).await;
        create(&mut c, "t", 1).await;
        pid = idempotent_pid(&mut c).await;
        let first = data_batch(&[(None, b"one")], t0 + 10, Some((pid, 0, 0)), false);
        assert_eq!(produce(&mut c, "t", 0, first.clone()).await, (0, 0));
        assert_eq!(
            produce(
                &mut c,
                "t",
                0,
                data_batch(&[(None, b"two")], t0 + 20, Some((pid, 0, 1)), false)
            )
            .await,
            (0, 1)
        );
        b.stop().await;
        first
    };
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    assert_eq!(
        fetch_values(&mut c, "t", 0, 0).await,
        vec![(0, b"one".to_vec()), (1, b"two".to_vec())]
    );
    assert_eq!(
        produce(&mut c, "t", 0, first).await,
        (0, 0),
        "the dedupe window survived the restart"
    );
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            data_batch(&[(None, b"z")], t0 + 30, Some((pid, 0, 5)), false)
        )
        .await
        .0,
        45
    );
    assert!(
        idempotent_pid(&mut c).await > pid,
        "producer ids are never reused"
    );
    let req = ListOffsetsRequest::default().with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-2),
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(t0 + 15),
            ]),
    ]);
    let resp = c.call(&req, 7).await;
    let offsets: Vec<i64> = resp.topics[0].partitions.iter().map(|p| p.offset).collect();
    assert_eq!(
        offsets,
        vec![0, 2, 1],
        "earliest, latest, first at or after ts 15"
    );
    b.stop().await;
}

/// Every advertised version of every API this broker answers must encode:
/// the codec refuses fields a version does not carry, and a client on an
/// old version would see its connection closed.
#[tokio::test]
async fn every_advertised_version_gets_an_encodable_response() {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    for v in 2..=7 {
        let topic = format!("v{v}");
        let req = CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(name(&topic))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]);
        assert_eq!(
            c.call(&req, v).await.topics[0].error_code,
            0,
            "CreateTopics v{v}"
        );
    }
    assert_eq!(
        produce(&mut c, "v2", 0, data_batch(&[(None, b"x")], 5, None, false))
            .await
            .0,
        0
    );
    for v in 0..=12 {
        let topics = if v == 0 { Some(vec![]) } else { None };
        let req = MetadataRequest::default().with_topics(topics.or(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("v2"))),
        ])));
        let resp = c.call(&req, v).await;
        assert_eq!(
            resp.topics.len(),
            if v == 0 { 0 } else { 1 },
            "Metadata v{v}"
        );
    }
    let meta = c
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("v2"))),
            ])),
            12,
        )
        .await;
    let topic_id = meta.topics[0].topic_id;
    for v in 3..=10 {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(name("v2"))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(data_batch(
                                &[(None, b"y")],
                                6,
                                None,
                                false,
                            )))),
                    ]),
            ]);
        assert_eq!(
            c.call(&req, v).await.responses[0].partition_responses[0].error_code,
            0,
            "Produce v{v}"
        );
    }
    for v in 4..=16 {
        let topic = if v >= 13 {
            FetchTopic::default().with_topic_id(topic_id)
        } else {
            FetchTopic::default().with_topic(name("v2"))
        };
        let req = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![topic.with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ])]);
        let resp = c.call(&req, v).await;
        assert!(
            !resp.responses[0].partitions[0]
                .records
                .clone()
                .unwrap_or_default()
                .is_empty(),
            "Fetch v{v}"
        );
    }
    for v in 1..=8 {
        let req = ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(name("v2"))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
        assert_eq!(
            c.call(&req, v).await.topics[0].partitions[0].offset,
            9,
            "ListOffsets v{v}"
        );
    }
    for v in 1..=4 {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("v2")),
        ]);
        assert!(
            !c.call(&req, v).await.results[0].configs.is_empty(),
            "DescribeConfigs v{v}"
        );
    }
    for v in 0..=4 {
        let resp = c
            .call(
                &InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_transaction_timeout_ms(1000),
                v,
            )
            .await;
        assert_eq!(resp.error_code, 0, "InitProducerId v{v}");
    }
    for v in 1..=6 {
        let topic = format!("v{}", v + 1);
        let req = if v >= 6 {
            DeleteTopicsRequest::default().with_topics(vec![
                DeleteTopicState::default().with_name(Some(name(&topic))),
            ])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![name(&topic)])
        };
        assert_eq!(
            c.call(&req, v).await.responses[0].error_code,
            0,
            "DeleteTopics v{v}"
        );
    }
    b.stop().await;
}
