//! Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS
//! tells it to rejoin.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseKind};

use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, req: HeartbeatRequest, _version: i16) -> ResponseKind {
    let code = match broker.groups.for_group(&req.group_id.0) {
        Some(groups) => groups.heartbeat(
            &req.group_id.0,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        ),
        None => crate::group::codes::NOT_COORDINATOR,
    };
    ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
}
