//! DescribeGroups (key 15): state, protocol and members of each group. An
//! unknown group is described as Dead with no error, as Kafka 3.7 does; a
//! member's metadata and assignment are shown only when the group is
//! Stable.

use std::sync::Arc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeGroupsRequest,
    version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeGroups);
    // KIP-430: what the caller may do with each group (READ, DELETE and
    // DESCRIBE as the ACLs allow), when asked.
    let operations = |checks: &super::Checks<'_>, group: &str| {
        if version >= 3 && req.include_authorized_operations {
            checks.operations(crate::security::ResourceType::Group, group)
        } else {
            i32::MIN
        }
    };
    let groups = req
        .groups
        .into_iter()
        .map(|id| {
            let base = DescribedGroup::default()
                .with_authorized_operations(operations(&checks, &id.0))
                .with_group_id(id.clone());
            if !checks.group(Operation::Describe, &id.0) {
                return base.with_error_code(crate::codes::GROUP_AUTHORIZATION_FAILED);
            }
            let described = match broker.groups.for_group(&id.0) {
                Some(groups) => groups.describe(&id.0),
                None => Err(crate::codes::NOT_COORDINATOR),
            };
            match described {
                Err(code) => base.with_error_code(code),
                Ok(s) => base
                    .with_group_state(str_bytes(s.state))
                    .with_protocol_type(str_bytes(&s.protocol_type))
                    .with_protocol_data(str_bytes(&s.protocol))
                    .with_members(
                        s.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(&m.member_id))
                                    .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                                    .with_client_id(str_bytes(&m.client_id))
                                    .with_client_host(str_bytes(&m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))
}
