//! LeaveGroup (key 13): one member (v0–v2) or a batch of members by member
//! id or group.instance.id (v3+, KIP-345). Before v3 the member's error is
//! the response's error.

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse, ResponseKind};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: LeaveGroupRequest,
    version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::LeaveGroup);
    if !checks.group(Operation::Read, &req.group_id.0) {
        return ResponseKind::LeaveGroup(
            LeaveGroupResponse::default().with_error_code(codes::GROUP_AUTHORIZATION_FAILED),
        );
    }
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let left = match broker.groups.for_group(&req.group_id.0) {
        Some(groups) => groups.leave(&req.group_id.0, &members),
        None => Err(crate::codes::NOT_COORDINATOR),
    };
    let resp = match left {
        Err(code) => LeaveGroupResponse::default().with_error_code(code),
        Ok(results) if version >= 3 => LeaveGroupResponse::default().with_members(
            members
                .iter()
                .zip(results)
                .map(|((m, i), code)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(m))
                        .with_group_instance_id(i.as_deref().map(str_bytes))
                        .with_error_code(code)
                })
                .collect(),
        ),
        Ok(results) => LeaveGroupResponse::default().with_error_code(
            results
                .into_iter()
                .find(|c| *c != codes::NONE)
                .unwrap_or(codes::NONE),
        ),
    };
    ResponseKind::LeaveGroup(resp)
}
