//! FindCoordinator (key 10): a group's coordinator (key type 0) is the
//! broker leading its shard (`group::shards`; in single-node mode this
//! broker, for every group); a transactional id's (key type 1) likewise the
//! broker leading its transaction shard (`txn::shards`). v0–v3 ask
//! for one key; v4+ for a batch (`coordinator_keys`). Any other key type is
//! INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// The coordinator of `group_id`: (node id, host, port) of this broker
/// when the group's shard is open here, else COORDINATOR_NOT_AVAILABLE
/// (the client asks again).
pub fn group_coordinator(
    broker: &Broker,
    group_id: &str,
    listener: &str,
) -> Result<(i32, String, i32), i16> {
    if broker.groups.for_group(group_id).is_some() {
        return Ok(this_broker(broker, listener));
    }
    // Cluster mode: the live leader of the group's shard.
    match broker
        .cluster
        .group_coordinator(broker.groups.shard_of(group_id))
    {
        Some(n) if !broker.cluster.is_local() => {
            let (host, port) = n.endpoint(listener);
            Ok((n.id, host, port))
        }
        _ => Err(codes::COORDINATOR_NOT_AVAILABLE),
    }
}

/// The coordinator of `transactional_id`: this broker when its shard is
/// open here, else (cluster mode) the shard's live leader; otherwise
/// COORDINATOR_NOT_AVAILABLE (the client asks again).
pub fn txn_coordinator(
    broker: &Broker,
    transactional_id: &str,
    listener: &str,
) -> Result<(i32, String, i32), i16> {
    if broker.txn.for_txn(transactional_id).is_some() {
        return Ok(this_broker(broker, listener));
    }
    match broker
        .cluster
        .txn_coordinator(broker.txn.shard_of(transactional_id))
    {
        Some(n) if !broker.cluster.is_local() => {
            let (host, port) = n.endpoint(listener);
            Ok((n.id, host, port))
        }
        _ => Err(codes::COORDINATOR_NOT_AVAILABLE),
    }
}

/// This broker's address on `listener` (the listener the request came in on).
fn this_broker(broker: &Broker, listener: &str) -> (i32, String, i32) {
    let (host, port) = broker.cluster.me().endpoint(listener);
    (broker.config.node_id, host, port)
}

/// The coordinator of one key, or its error code and message. DESCRIBE on
/// the group (key type 0) or the transactional id (1) first.
fn coordinator_of(
    broker: &Broker,
    listener: &str,
    checks: &mut super::Checks<'_>,
    key_type: i8,
    key: &str,
) -> Result<(i32, String, i32), (i16, &'static str)> {
    match key_type {
        GROUP if !checks.group(Operation::Describe, key) => Err((
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
        )),
        TRANSACTION if !checks.txn(Operation::Describe, key) => Err((
            codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "Transactional Id authorization failed.",
        )),
        GROUP => group_coordinator(broker, key, listener)
            .map_err(|e| (e, "the group's coordinator is not available")),
        TRANSACTION => txn_coordinator(broker, key, listener)
            .map_err(|e| (e, "the transaction coordinator is not available")),
        _ => Err((codes::INVALID_REQUEST, "unknown coordinator key type")),
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: FindCoordinatorRequest,
    version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::FindCoordinator);
    // v0 has no key type: always a group.
    let key_type = if version == 0 { GROUP } else { req.key_type };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key: StrBytes| {
                let found = coordinator_of(broker, &session.listener, &mut checks, key_type, &key);
                let c = Coordinator::default().with_key(key);
                match found {
                    Ok((node, host, port)) => c
                        .with_error_code(codes::NONE)
                        .with_node_id(BrokerId(node))
                        .with_host(str_bytes(&host))
                        .with_port(port),
                    Err((error, message)) => c
                        .with_error_code(error)
                        .with_error_message(Some(str_bytes(message)))
                        .with_node_id(BrokerId(-1))
                        .with_port(-1),
                }
            })
            .collect();
        return ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(coordinators),
        );
    }
    let r = FindCoordinatorResponse::default();
    ResponseKind::FindCoordinator(
        match coordinator_of(broker, &session.listener, &mut checks, key_type, &req.key) {
            Ok((node, host, port)) => r
                .with_error_code(codes::NONE)
                .with_node_id(BrokerId(node))
                .with_host(str_bytes(&host))
                .with_port(port),
            Err((error, message)) => r
                .with_error_code(error)
                .with_error_message(Some(str_bytes(message)))
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        },
    )
}
