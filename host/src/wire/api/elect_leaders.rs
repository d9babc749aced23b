//! ElectLeaders (key 43, v0–2). kaas keeps one copy of each partition on
//! the shared volume and its brokers agree on the leader through etcd, so
//! the leader a partition has is its preferred one: a preferred (0) or
//! unclean (1) election of a led partition is ELECTION_NOT_NEEDED, as
//! Kafka answers for a partition led by its preferred replica; one without
//! a leader yet is PREFERRED_LEADER_NOT_AVAILABLE (etcd is choosing it).
//! An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION. All
//! partitions (null topics): only the partitions an election would change,
//! so none. Needs ALTER on the cluster.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, ResponseKind};

use super::placement::Placement;
use super::str_bytes;
use crate::codes;

pub fn handle(
    placement: &Placement<'_>,
    authorized: bool,
    req: ElectLeadersRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = ElectLeadersResponse::default();
    if version >= 1 && !authorized {
        resp.error_code = codes::CLUSTER_AUTHORIZATION_FAILED;
    }
    let election = req.election_type;
    resp.replica_election_results = req
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let results = t
                .partitions
                .iter()
                .map(|&p| {
                    let (code, msg) = if !authorized {
                        (codes::CLUSTER_AUTHORIZATION_FAILED, None)
                    } else if !(0..=1).contains(&election) {
                        (codes::INVALID_REQUEST, Some("unknown election type"))
                    } else {
                        match placement.partition(&t.topic.0, p) {
                            None => (
                                codes::UNKNOWN_TOPIC_OR_PARTITION,
                                Some("The partition does not exist."),
                            ),
                            Some(x) if x.leader.is_some() => (
                                codes::ELECTION_NOT_NEEDED,
                                Some("Leader election not needed for topic partition."),
                            ),
                            Some(_) => (
                                codes::PREFERRED_LEADER_NOT_AVAILABLE,
                                Some("the brokers are agreeing on this partition's leader (etcd)"),
                            ),
                        }
                    };
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code)
                        .with_error_message(msg.map(str_bytes))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(t.topic)
                .with_partition_result(results)
        })
        .collect();
    ResponseKind::ElectLeaders(resp)
}
