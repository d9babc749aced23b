//! DescribeCluster (key 60, v0–1): the live brokers (each at the address of
//! the listener the request came in on, as Metadata answers), the cluster
//! id and the controller Metadata reports, and, when asked, KIP-430's
//! authorized operations on the cluster: every operation the caller may
//! perform there if it may DESCRIBE the cluster, else 0, as Kafka 3.7
//! computes them. Any caller may describe the cluster itself, as on Kafka.
//! A v1 request for the controllers' endpoint is answered
//! MISMATCHED_ENDPOINT_TYPE: kaas has only brokers.

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;

/// DescribeCluster's endpoint type of brokers (v1+).
const BROKERS: i8 = 1;

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeClusterRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.config.cluster_id))
        .with_controller_id(BrokerId(broker.cluster.controller_id()))
        .with_cluster_authorized_operations(i32::MIN);
    if version >= 1 {
        resp.endpoint_type = BROKERS;
        if req.endpoint_type != BROKERS {
            return ResponseKind::DescribeCluster(
                resp.with_error_code(codes::MISMATCHED_ENDPOINT_TYPE)
                    .with_error_message(Some(str_bytes(&format!(
                        "The request was sent to an endpoint of type BROKER, but we wanted an \
                         endpoint of type {}",
                        if req.endpoint_type == 2 {
                            "CONTROLLER"
                        } else {
                            "UNKNOWN"
                        }
                    )))),
            );
        }
    }
    if req.include_cluster_authorized_operations {
        let mut checks = super::Checks::new(broker, session, ApiKey::DescribeCluster);
        resp.cluster_authorized_operations = checks.cluster_operations();
    }
    resp.brokers = super::advertised_brokers(broker, session)
        .into_iter()
        .map(|(id, host, port)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(str_bytes(&host))
                .with_port(port)
        })
        .collect();
    ResponseKind::DescribeCluster(resp)
}
