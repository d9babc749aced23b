//! ApiVersions (key 18): our version table (Kafka 3.7's ranges for what we
//! implement). A request newer than v3 gets UNSUPPORTED_VERSION in the v0
//! format plus the table (KIP-511), so the client retries with a version
//! we speak.
//!
//! v3 also carries the feature flags (KIP-584) that `kafka-features.sh
//! describe` prints: the broker's own, `group.version` 1 (KIP-848's consumer
//! group protocol, which kaas serves), and the deciding policy's (ABI 3.0
//! `protocol-features`): `transaction.version`, 0 under apache37 (Kafka 3.x
//! transactions), 2 under a policy of KIP-890 part 2. Their epoch
//! (FinalizedFeaturesEpoch) is the number of policy swaps since start, so a
//! client that keeps the features of the highest epoch sees a swap. As on
//! Kafka, a feature at level 0 is supported but not listed as finalized (a
//! 4.x client reads it as level 0).
//! `metadata.version` and `kraft.version` are KRaft's: kaas has no KRaft
//! log, so it reports neither.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};

use super::str_bytes;
use crate::codes;
use crate::policy::Features;
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

/// The broker's own features: (feature, supported min, supported max,
/// finalized level; 0: not finalized). The policy's follow them.
pub const HOST_FEATURES: &[(&str, i16, i16, i16)] = &[("group.version", 0, 1, 1)];

/// Every feature ApiVersions reports: the broker's, then the policy's.
pub fn all_features(policy: &Features) -> Vec<(String, i16, i16, i16)> {
    HOST_FEATURES
        .iter()
        .map(|&(n, lo, hi, level)| (n.to_owned(), lo, hi, level))
        .chain(policy.features.iter().map(|f| {
            (
                f.name.clone(),
                f.min_version,
                f.max_version,
                f.finalized_level,
            )
        }))
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

pub fn handle(req: &ApiVersionsRequest, version: i16, policy: &Features) -> ResponseKind {
    if version >= 3
        && !(valid_software(req.client_software_name.as_str())
            && valid_software(req.client_software_version.as_str()))
    {
        return ResponseKind::ApiVersions(
            ApiVersionsResponse::default().with_error_code(codes::INVALID_REQUEST),
        );
    }
    let features = all_features(policy);
    ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(codes::NONE)
            .with_api_keys(table())
            .with_supported_features(
                features
                    .iter()
                    .map(|(name, lo, hi, _)| {
                        SupportedFeatureKey::default()
                            .with_name(str_bytes(name))
                            .with_min_version(*lo)
                            .with_max_version(*hi)
                    })
                    .collect(),
            )
            .with_finalized_features_epoch(policy.epoch)
            .with_finalized_features(
                features
                    .iter()
                    .filter(|(_, _, _, level)| *level > 0)
                    .map(|(name, _, _, level)| {
                        FinalizedFeatureKey::default()
                            .with_name(str_bytes(name))
                            .with_min_version_level(*level)
                            .with_max_version_level(*level)
                    })
                    .collect(),
            ),
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
