//! UpdateFeatures (key 57, v0–1). kaas's feature levels are fixed by its
//! build (`group.version`) and by the deciding policy (`transaction.version`:
//! a policy is a whole transaction protocol, so the level changes by a
//! policy swap, `kaas policy load`, not by this request). An update to the
//! level a feature already has is accepted (nothing changes, as on Kafka);
//! any other level, or a feature kaas does not have, is
//! INVALID_UPDATE_VERSION with the reason. Needs ALTER on the cluster (else
//! CLUSTER_AUTHORIZATION_FAILED for the request).

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{
    ApiVersionsRequest, ResponseKind, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::codes;
use crate::policy::Features;

/// The finalized feature levels, as ApiVersions reports them.
pub fn finalized(policy: &Features) -> Vec<(String, i16)> {
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kaas"))
        .with_client_software_version(StrBytes::from_static_str("0"));
    match super::api_versions::handle(&req, 3, policy) {
        ResponseKind::ApiVersions(r) => r
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect(),
        _ => Vec::new(),
    }
}

/// The answer to setting `feature` to `level`, given the finalized levels.
fn answer(finalized: &[(String, i16)], feature: &str, level: i16) -> (i16, Option<String>) {
    match finalized.iter().find(|(f, _)| f == feature) {
        Some(&(_, at)) if at == level => (codes::NONE, None),
        Some(&(_, at)) if feature == "transaction.version" => (
            codes::INVALID_UPDATE_VERSION,
            Some(format!(
                "{feature} is at level {at}, the level the transaction policy in force finalizes; \
                 load a policy that finalizes level {level} instead (kaas policy load)"
            )),
        ),
        Some(&(_, at)) => (
            codes::INVALID_UPDATE_VERSION,
            Some(format!(
                "{feature} is at level {at}, fixed by this kaas build; it cannot be changed to {level}"
            )),
        ),
        None if level == 0 => (codes::NONE, None),
        None => (
            codes::INVALID_UPDATE_VERSION,
            Some(format!("kaas does not support feature {feature}")),
        ),
    }
}

pub fn handle(
    finalized: &[(String, i16)],
    authorized: bool,
    req: UpdateFeaturesRequest,
) -> ResponseKind {
    if !authorized {
        return ResponseKind::UpdateFeatures(
            UpdateFeaturesResponse::default()
                .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
                .with_error_message(Some(str_bytes("Cluster authorization failed."))),
        );
    }
    let results = req
        .feature_updates
        .into_iter()
        .map(|u| {
            let (code, msg) = answer(finalized, &u.feature, u.max_version_level);
            UpdatableFeatureResult::default()
                .with_feature(u.feature)
                .with_error_code(code)
                .with_error_message(msg.as_deref().map(str_bytes))
        })
        .collect();
    ResponseKind::UpdateFeatures(UpdateFeaturesResponse::default().with_results(results))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_level_a_feature_has_is_accepted() {
        let f = [("group.version".to_string(), 1)];
        assert_eq!(answer(&f, "group.version", 1).0, codes::NONE);
        assert_eq!(
            answer(&f, "group.version", 0).0,
            codes::INVALID_UPDATE_VERSION
        );
        assert_eq!(
            answer(&f, "nope.version", 2).0,
            codes::INVALID_UPDATE_VERSION
        );
        assert_eq!(answer(&f, "nope.version", 0).0, codes::NONE);
    }
}
