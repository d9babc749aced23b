//! FindCoordinator (key 10): this broker is the coordinator of every group
//! (key type 0) and every transactional id (key type 1). v0–v3 ask for one
//! key; v4+ for a batch (`coordinator_keys`). Any other key type is
//! INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::sb;
use crate::broker::Broker;
use crate::wire::codes;

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

fn key_error(key_type: i8) -> i16 {
    match key_type {
        GROUP | TRANSACTION => codes::NONE,
        _ => codes::INVALID_REQUEST,
    }
}

pub fn handle(broker: &Arc<Broker>, req: FindCoordinatorRequest, version: i16) -> ResponseKind {
    let node = BrokerId(broker.config.node_id);
    let host = sb(&broker.config.advertised_host);
    let port = broker.config.advertised_port;
    // v0 has no key type: always a group.
    let key_type = if version == 0 { GROUP } else { req.key_type };
    let error = key_error(key_type);
    let message = |e: i16| (e != codes::NONE).then(|| sb("unknown coordinator key type"));
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key: StrBytes| {
                let c = Coordinator::default()
                    .with_key(key)
                    .with_error_code(error)
                    .with_error_message(message(error));
                if error == codes::NONE {
                    c.with_node_id(node).with_host(host.clone()).with_port(port)
                } else {
                    c.with_node_id(BrokerId(-1)).with_port(-1)
                }
            })
            .collect();
        return ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(coordinators),
        );
    }
    let r = FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_error_message(message(error));
    ResponseKind::FindCoordinator(if error == codes::NONE {
        r.with_node_id(node).with_host(host).with_port(port)
    } else {
        r.with_node_id(BrokerId(-1)).with_port(-1)
    })
}
