//! Answers the wire test kit found differing from Apache Kafka 3.7
//! (compat/kafka/differences): each test pins Kafka's answer.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, InProcess};

use kaas::log::FsyncMode;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// KIP-511 (AV-04): ApiVersions v3 whose client software name or version
/// is empty or not `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?` is
/// INVALID_REQUEST with no API keys; a valid one is answered in full.
#[tokio::test]
async fn api_versions_v3_refuses_an_invalid_client_software_name_or_version() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    for (name, version, valid) in [
        ("", "1", false),
        ("bad name", "1", false),
        ("client-", "1", false),
        ("-client", "1", false),
        ("kaas", "", false),
        ("kaas", "1+2", false),
        ("my-client.x", "1.0-rc1", true),
        ("a", "1", true),
    ] {
        let r = c
            .call(
                &ApiVersionsRequest::default()
                    .with_client_software_name(s(name))
                    .with_client_software_version(s(version)),
                3,
            )
            .await;
        let want = if valid { 0 } else { 42 };
        assert_eq!(r.error_code, want, "{name:?} {version:?}");
        assert_eq!(r.api_keys.is_empty(), !valid, "{name:?} {version:?}");
    }
    // Before v3 there are no such fields: nothing to refuse.
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 2).await.error_code,
        0
    );
    b.stop().await;
}
