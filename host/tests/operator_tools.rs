//! What Kafka's own command-line tools (tests/clients/test_kafka_cli.py)
//! need from the wire beyond the client APIs: the feature flags ApiVersions
//! v3 carries (`kafka-features.sh describe`), and DescribeQuorum's clear
//! refusal (`kafka-metadata-quorum.sh`: kaas has no KRaft quorum).

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use kaas::log::FsyncMode;
use kaas::security::acl::{AclBinding, CLUSTER_NAME, PatternType, Permission};
use kaas::security::{Operation, Principal, ResourceType};
use support::{Client, InProcess};

const UNSUPPORTED_VERSION: i16 = 35;

/// ApiVersions v3 as a client sends it (KIP-511 wants its name and version).
fn api_versions() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("operator-tools"))
        .with_client_software_version(StrBytes::from_static_str("1"))
}
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

#[tokio::test]
async fn api_versions_v3_reports_the_features_kaas_supports_and_finalizes() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let r = c.call(&api_versions(), 3).await;
    assert_eq!(r.error_code, 0);
    let mut supported: Vec<_> = r
        .supported_features
        .iter()
        .map(|f| (f.name.to_string(), f.min_version, f.max_version))
        .collect();
    supported.sort();
    assert_eq!(
        supported,
        [
            ("group.version".to_string(), 0, 1),
            ("transaction.version".to_string(), 0, 0)
        ]
    );
    let mut finalized: Vec<_> = r
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    finalized.sort();
    // Level 0 is "not finalized", as Kafka lists it.
    assert_eq!(finalized, [("group.version".to_string(), 1)]);
    assert_eq!(r.finalized_features_epoch, 0);
    // The fields are v3's tagged fields: v2 has none of them.
    let r = c.call(&api_versions(), 2).await;
    assert!(r.supported_features.is_empty() && r.finalized_features.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn describe_quorum_is_refused_with_a_message_naming_where_the_metadata_lives() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let av = c.call(&api_versions(), 3).await;
    assert!(
        av.api_keys
            .iter()
            .any(|a| a.api_key == ApiKey::DescribeQuorum as i16 && a.max_version == 2)
    );
    let r = c.call(&DescribeQuorumRequest::default(), 2).await;
    assert_eq!(r.error_code, UNSUPPORTED_VERSION);
    let msg = r.error_message.as_deref().unwrap_or_default().to_string();
    assert!(msg.contains("no KRaft metadata quorum"), "{msg}");
    assert!(
        msg.contains("data directory") && msg.contains("etcd"),
        "{msg}"
    );
    assert!(r.topics.is_empty() && r.nodes.is_empty());
    // v0 has no message field: the code alone (the decoder fills in "").
    let r = c.call(&DescribeQuorumRequest::default(), 0).await;
    assert_eq!(r.error_code, UNSUPPORTED_VERSION);
    assert_eq!(r.error_message.as_deref().unwrap_or_default(), "");
    b.stop().await;
}

#[tokio::test]
async fn describe_quorum_needs_describe_on_the_cluster() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.authorizer.enabled = true;
        c.acls = vec![];
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let r = c.call(&DescribeQuorumRequest::default(), 2).await;
    assert_eq!(r.error_code, CLUSTER_AUTHORIZATION_FAILED);
    b.stop().await;

    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.authorizer.enabled = true;
        c.acls = vec![AclBinding {
            resource_type: ResourceType::Cluster,
            resource_name: CLUSTER_NAME.into(),
            pattern_type: PatternType::Literal,
            principal: Principal::anonymous(),
            host: "*".into(),
            operation: Operation::Describe,
            permission: Permission::Allow,
        }];
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let r = c.call(&DescribeQuorumRequest::default(), 2).await;
    assert_eq!(r.error_code, UNSUPPORTED_VERSION);
    b.stop().await;
}
