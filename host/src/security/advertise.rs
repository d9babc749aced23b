//! Which address this broker advertises to a client: the one of the
//! listener the client came in on (issue 16 item 1, Kafka's per-listener
//! `advertised.listeners`).
//!
//! Handlers build Metadata and FindCoordinator answers with the broker's
//! first listener (`config.advertised_host/port`, the address other brokers
//! use); [`for_listener`] then rewrites this broker's own entries for the
//! session's listener. It touches only those two responses. In cluster mode
//! other brokers are still advertised at their first listener's address.

use kafka_protocol::messages::ResponseKind;
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::security::Session;
use crate::wire::Handled;

/// One listener's advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerAddress {
    pub name: String,
    pub host: String,
    pub port: i32,
}

/// `handled`, with this broker's address in Metadata and FindCoordinator
/// answers replaced by the address of `session`'s listener.
pub fn for_listener(broker: &Broker, session: &Session, handled: Handled) -> Handled {
    let Handled::Now(mut resp) = handled else {
        return handled;
    };
    let cfg = &broker.config;
    let Some(own) = cfg
        .security
        .listener_addresses
        .iter()
        .find(|l| *l.name == *session.listener)
    else {
        return Handled::Now(resp);
    };
    if own.host == cfg.advertised_host && own.port == cfg.advertised_port {
        return Handled::Now(resp);
    }
    let me = cfg.node_id;
    let host = || StrBytes::from_string(own.host.clone());
    match &mut resp {
        ResponseKind::Metadata(m) => {
            for b in m.brokers.iter_mut().filter(|b| b.node_id.0 == me) {
                b.host = host();
                b.port = own.port;
            }
        }
        ResponseKind::FindCoordinator(f) => {
            if f.node_id.0 == me && f.port == cfg.advertised_port {
                f.host = host();
                f.port = own.port;
            }
            for c in f
                .coordinators
                .iter_mut()
                .filter(|c| c.node_id.0 == me && c.port == cfg.advertised_port)
            {
                c.host = host();
                c.port = own.port;
            }
        }
        _ => {}
    }
    Handled::Now(resp)
}
