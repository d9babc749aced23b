//! ListClientMetricsResources (key 74, v0; kafka-protocol names it
//! ListConfigResources). kaas has no client metrics subscriptions
//! (KIP-714), so the list is empty. Needs DESCRIBE_CONFIGS on the cluster.

use kafka_protocol::messages::{ListConfigResourcesResponse, ResponseKind};

use crate::codes;

pub fn handle(authorized: bool) -> ResponseKind {
    let code = if authorized {
        codes::NONE
    } else {
        codes::CLUSTER_AUTHORIZATION_FAILED
    };
    ResponseKind::ListConfigResources(ListConfigResourcesResponse::default().with_error_code(code))
}
