//! DescribeQuorum (key 55, v0–2): kaas has no KRaft quorum, so there is
//! nothing to describe. `kafka-metadata-quorum.sh` gets a clear refusal
//! instead of a disconnect: UNSUPPORTED_VERSION (what a broker without a
//! KRaft controller answered before, and not retriable, so the admin client
//! fails at once) with a message (v2+) saying where kaas keeps its
//! metadata: in etcd in cluster mode, in the data directory otherwise. A
//! caller that may not DESCRIBE the cluster gets CLUSTER_AUTHORIZATION_FAILED
//! first, as on Kafka.

use std::sync::Arc;

use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

/// The refusal's message: where this broker's metadata lives instead.
pub fn no_quorum_message(clustered: bool) -> &'static str {
    if clustered {
        "kaas has no KRaft metadata quorum to describe: its brokers agree on \
         metadata through etcd (cluster mode); ask etcd (etcdctl endpoint \
         status) for the quorum's state"
    } else {
        "kaas has no KRaft metadata quorum to describe: this single kaas broker \
         keeps its metadata in its data directory (cluster mode keeps it in etcd)"
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    _req: DescribeQuorumRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeQuorum);
    let resp = if !checks.cluster(Operation::Describe) {
        DescribeQuorumResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(None)
    } else {
        DescribeQuorumResponse::default()
            .with_error_code(codes::UNSUPPORTED_VERSION)
            .with_error_message(Some(str_bytes(no_quorum_message(
                !broker.config.etcd.is_empty(),
            ))))
    };
    ResponseKind::DescribeQuorum(resp)
}

#[cfg(test)]
mod tests {
    use super::no_quorum_message;

    #[test]
    fn the_refusal_says_where_the_metadata_is() {
        assert!(no_quorum_message(true).contains("etcd"));
        assert!(no_quorum_message(false).contains("data directory"));
        assert!(no_quorum_message(false).contains("etcd"));
    }
}
