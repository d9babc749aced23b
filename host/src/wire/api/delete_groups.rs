//! DeleteGroups (key 42): deletes Empty groups and their offsets
//! (NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown
//! groups), once per distinct group named, answering once the deletion is
//! durable.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, ResponseKind};

use crate::broker::Broker;
use crate::security::Operation;
use crate::wire::handled::Handled;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    mut req: DeleteGroupsRequest,
    _version: i16,
) -> Handled {
    // Kafka answers once per distinct group, in the order first named.
    let mut seen = std::collections::HashSet::new();
    req.groups_names.retain(|g| seen.insert(g.0.clone()));
    let mut checks = super::Checks::new(broker, session, ApiKey::DeleteGroups);
    let allowed: Vec<bool> = req
        .groups_names
        .iter()
        .map(|g| checks.group(Operation::Delete, &g.0))
        .collect();
    let ids: Vec<String> = req
        .groups_names
        .iter()
        .zip(&allowed)
        .filter(|(_, ok)| **ok)
        .map(|(g, _)| g.0.to_string())
        .collect();
    let (codes, durables) = broker.groups.delete_groups(&ids);
    let mut codes = codes.into_iter();
    let results: Vec<DeletableGroupResult> = req
        .groups_names
        .into_iter()
        .zip(allowed)
        .map(|(g, ok)| {
            let code = if ok {
                codes.next().unwrap_or(crate::codes::UNKNOWN_SERVER_ERROR)
            } else {
                crate::codes::GROUP_AUTHORIZATION_FAILED
            };
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code)
        })
        .collect();
    Handled::Later(Box::pin(async move {
        // The groups are gone from memory either way; Kafka answers NONE
        // after logging a failed tombstone write, and so does this.
        for durable in durables {
            let _ = durable.wait().await;
        }
        ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(results))
    }))
}
