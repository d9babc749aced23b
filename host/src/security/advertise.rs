//! Which address a client is told to use for a broker: the one of the
//! listener the client came in on (issue 16 item 1, Kafka's per-listener
//! `advertised.listeners`).
//!
//! Handlers build Metadata and FindCoordinator answers with each broker's
//! first listener (`NodeInfo::host/port`, the address brokers use among
//! themselves); [`for_listener`] then rewrites every node of those two
//! responses to `NodeInfo::endpoint(session.listener)`. It reads the
//! cluster view and touches nothing else.

use kafka_protocol::messages::ResponseKind;
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::security::Session;
use crate::wire::Handled;

/// `handled`, with every broker address in a Metadata or FindCoordinator
/// answer replaced by that broker's address on `session`'s listener.
pub fn for_listener(broker: &Broker, session: &Session, handled: Handled) -> Handled {
    let Handled::Now(mut resp) = handled else {
        return handled;
    };
    if !matches!(
        resp,
        ResponseKind::Metadata(_) | ResponseKind::FindCoordinator(_)
    ) {
        return Handled::Now(resp);
    }
    let nodes = broker.cluster.brokers();
    let endpoint = |id: i32| {
        nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| n.endpoint(&session.listener))
    };
    match &mut resp {
        ResponseKind::Metadata(m) => {
            for b in &mut m.brokers {
                if let Some((host, port)) = endpoint(b.node_id.0) {
                    b.host = StrBytes::from_string(host);
                    b.port = port;
                }
            }
        }
        ResponseKind::FindCoordinator(f) => {
            if f.error_code == 0
                && let Some((host, port)) = endpoint(f.node_id.0)
            {
                f.host = StrBytes::from_string(host);
                f.port = port;
            }
            for c in f.coordinators.iter_mut().filter(|c| c.error_code == 0) {
                if let Some((host, port)) = endpoint(c.node_id.0) {
                    c.host = StrBytes::from_string(host);
                    c.port = port;
                }
            }
        }
        _ => {}
    }
    Handled::Now(resp)
}
