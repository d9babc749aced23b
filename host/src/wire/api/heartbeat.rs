//! Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS
//! tells it to rejoin.

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse, ResponseKind};

use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: HeartbeatRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::Heartbeat);
    if !checks.group(Operation::Read, &req.group_id.0) {
        return ResponseKind::Heartbeat(
            HeartbeatResponse::default().with_error_code(codes::GROUP_AUTHORIZATION_FAILED),
        );
    }
    let code = match broker.groups.for_group(&req.group_id.0) {
        Some(groups) => groups.heartbeat(
            &req.group_id.0,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        ),
        None => crate::codes::NOT_COORDINATOR,
    };
    ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
}
