//! SyncGroup (key 14): the leader hands in the assignments; every member
//! gets its own. During CompletingRebalance the answer is a long poll that
//! the leader's SyncGroup completes.

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, ResponseKind, SyncGroupRequest, SyncGroupResponse};

use super::str_bytes;
use crate::broker::Broker;
use crate::group::outcome::sync_answer;
use crate::group::{Reply, SyncOutcome, SyncRequest};
use crate::security::Operation;
use crate::wire::handled::Handled;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: SyncGroupRequest,
    version: i16,
) -> Handled {
    let mut checks = super::Checks::new(broker, session, ApiKey::SyncGroup);
    if !checks.group(Operation::Read, &req.group_id.0) {
        let o = SyncOutcome::error(crate::codes::GROUP_AUTHORIZATION_FAILED);
        return Handled::Now(response(o, version));
    }
    let sync = SyncRequest {
        generation: req.generation_id,
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.map(|s| s.to_string()),
        protocol_type: req.protocol_type.map(|s| s.to_string()),
        protocol: req.protocol_name.map(|s| s.to_string()),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let Some(groups) = broker.groups.for_group(&req.group_id.0) else {
        let o = SyncOutcome::error(crate::codes::NOT_COORDINATOR);
        return Handled::Now(response(o, version));
    };
    match groups.sync(&req.group_id.0, sync) {
        Reply::Now(o) => Handled::Now(response(o, version)),
        Reply::Later(rx) => {
            Handled::Later(Box::pin(
                async move { response(sync_answer(rx).await, version) },
            ))
        }
    }
}

fn response(o: SyncOutcome, version: i16) -> ResponseKind {
    let r = SyncGroupResponse::default()
        .with_error_code(o.error)
        .with_assignment(o.assignment);
    ResponseKind::SyncGroup(if version >= 5 {
        r.with_protocol_type(o.protocol_type.as_deref().map(str_bytes))
            .with_protocol_name(o.protocol.as_deref().map(str_bytes))
    } else {
        r
    })
}
