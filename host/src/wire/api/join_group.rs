//! JoinGroup (key 11): joins (or rejoins) a classic group. The answer is a
//! long poll: it comes when the group's join phase completes (see
//! `group::state`). v4+ members without an instance id first get
//! MEMBER_ID_REQUIRED with their id (KIP-394); v5+ carry a
//! group.instance.id (static membership, KIP-345).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{
    ApiKey, JoinGroupRequest, JoinGroupResponse, RequestHeader, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::group::outcome::join_answer;
use crate::group::{JoinOutcome, JoinRequest, Reply};
use crate::security::Operation;
use crate::wire::handled::Handled;

fn ms(v: i32) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    header: &RequestHeader,
    req: JoinGroupRequest,
    version: i16,
) -> Handled {
    let instance_id = req.group_instance_id.map(|s| s.to_string());
    let mut protocols: Vec<(String, bytes::Bytes)> = Vec::with_capacity(req.protocols.len());
    for p in req.protocols {
        // Kafka keys the protocols by name: the first of a name counts.
        if !protocols.iter().any(|(n, _)| **n == *p.name) {
            protocols.push((p.name.to_string(), p.metadata));
        }
    }
    let join = JoinRequest {
        member_id: req.member_id.to_string(),
        require_known_member_id: version >= 4 && instance_id.is_none(),
        instance_id,
        client_id: header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        // Kafka's form: "/" and the client's address.
        client_host: format!("/{}", session.client_ip),
        session_timeout: ms(req.session_timeout_ms),
        // v0 has no rebalance timeout: the session timeout stands in.
        rebalance_timeout: ms(if version == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        }),
        protocol_type: req.protocol_type.to_string(),
        protocols,
    };
    let member_id = join.member_id.clone();
    let mut checks = super::Checks::new(broker, session, ApiKey::JoinGroup);
    if !checks.group(Operation::Read, &req.group_id.0) {
        let o = JoinOutcome::error(&member_id, crate::codes::GROUP_AUTHORIZATION_FAILED);
        return Handled::Now(response(o, version));
    }
    let Some(groups) = broker.groups.for_group(&req.group_id.0) else {
        let o = JoinOutcome::error(&member_id, crate::codes::NOT_COORDINATOR);
        return Handled::Now(response(o, version));
    };
    match groups.join(&req.group_id.0, join) {
        Reply::Now(o) => Handled::Now(response(o, version)),
        Reply::Later(rx) => Handled::Later(Box::pin(async move {
            response(join_answer(rx, member_id).await, version)
        })),
    }
}

fn response(o: JoinOutcome, version: i16) -> ResponseKind {
    // Before v7 the protocol name is not nullable.
    let protocol_name = if version >= 7 {
        o.protocol.as_deref().map(str_bytes)
    } else {
        Some(str_bytes(o.protocol.as_deref().unwrap_or("")))
    };
    let protocol_type = if version >= 7 {
        o.protocol_type.as_deref().map(str_bytes)
    } else {
        None
    };
    let members = o
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                .with_metadata(m.metadata)
        })
        .collect();
    ResponseKind::JoinGroup(
        JoinGroupResponse::default()
            .with_error_code(o.error)
            .with_generation_id(o.generation)
            .with_protocol_type(protocol_type)
            .with_protocol_name(protocol_name)
            .with_leader(str_bytes(&o.leader))
            .with_member_id(str_bytes(&o.member_id))
            .with_skip_assignment(version >= 9 && o.skip_assignment)
            .with_members(members),
    )
}
