//! ListGroups (key 16): every group, optionally only those in the given
//! states (v4+, compared case-insensitively).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse, ResponseKind};

use super::sb;
use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, req: ListGroupsRequest, version: i16) -> ResponseKind {
    let states: Vec<String> = if version >= 4 {
        req.states_filter.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let groups = broker
        .groups
        .list(&states)
        .into_iter()
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(sb(&g.group_id)))
                .with_protocol_type(sb(&g.protocol_type))
                .with_group_state(sb(g.state))
        })
        .collect();
    ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups))
}
