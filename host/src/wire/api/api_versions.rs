//! ApiVersions (key 18): our version table (Kafka 3.7's ranges for what we
//! implement). A request newer than v3 gets UNSUPPORTED_VERSION in the v0
//! format plus the table (KIP-511), so the client retries with a version
//! we speak.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsResponse, ResponseKind};

use crate::codes;
use crate::wire::versions::VERSIONS;

fn table() -> Vec<ApiVersion> {
    VERSIONS
        .iter()
        .map(|&(k, lo, hi)| {
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(lo)
                .with_max_version(hi)
        })
        .collect()
}

pub fn handle() -> ResponseKind {
    ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(codes::NONE)
            .with_api_keys(table()),
    )
}

pub fn unsupported() -> ResponseKind {
    ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(codes::UNSUPPORTED_VERSION)
            .with_api_keys(table()),
    )
}
