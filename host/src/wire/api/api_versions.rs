//! ApiVersions (key 18): our version table (Kafka 3.7's ranges for what we
//! implement). A request newer than v3 gets UNSUPPORTED_VERSION in the v0
//! format plus the table (KIP-511), so the client retries with a version
//! we speak.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};

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

/// KIP-511: from v3 the client software name and version must each be
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`; a request naming anything
/// else is INVALID_REQUEST with no API keys (as Kafka answers it).
fn valid_software(v: &str) -> bool {
    let b = v.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || *c == b'-' || *c == b'.')
}

pub fn handle(req: &ApiVersionsRequest, version: i16) -> ResponseKind {
    if version >= 3
        && !(valid_software(req.client_software_name.as_str())
            && valid_software(req.client_software_version.as_str()))
    {
        return ResponseKind::ApiVersions(
            ApiVersionsResponse::default().with_error_code(codes::INVALID_REQUEST),
        );
    }
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

#[cfg(test)]
mod tests {
    use super::valid_software;

    #[test]
    fn client_software_names_are_checked_as_kip_511_says() {
        for ok in ["a", "kaas-wirekit", "my-client.x", "1.0-rc1", "A.9"] {
            assert!(valid_software(ok), "{ok:?}");
        }
        for bad in ["", "-a", "a-", ".a", "a.", "bad name", "1+2", "é"] {
            assert!(!valid_software(bad), "{bad:?}");
        }
    }
}
