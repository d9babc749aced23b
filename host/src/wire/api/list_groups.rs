//! ListGroups (key 16): every group, optionally only those in the given
//! states (v4+, compared case-insensitively) and of the given types
//! (v5+: "classic", "consumer"; KIP-848).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::security::{Operation, ResourceType};

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: ListGroupsRequest,
    version: i16,
) -> ResponseKind {
    // DESCRIBE on the cluster lists every group; otherwise only those the
    // session may describe (never an error, never audited).
    let checks = super::Checks::new(broker, session, ApiKey::ListGroups);
    let all = checks.cluster_probe(Operation::Describe);
    let states: Vec<String> = if version >= 4 {
        req.states_filter.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if version >= 5 {
        req.types_filter.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let groups = broker
        .groups
        .list(&states)
        .into_iter()
        .filter(|g| types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(g.group_type)))
        .filter(|g| all || checks.probe(Operation::Describe, ResourceType::Group, &g.group_id))
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_protocol_type(str_bytes(&g.protocol_type))
                .with_group_state(str_bytes(g.state))
                .with_group_type(str_bytes(g.group_type))
        })
        .collect();
    ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups))
}
