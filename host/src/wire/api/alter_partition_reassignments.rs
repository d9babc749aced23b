//! AlterPartitionReassignments (key 45, v0). A kaas partition has one copy
//! on the shared volume; which broker serves it is agreed through etcd, not
//! assigned. So: the replica set a partition already has is accepted (a
//! no-op, as on Kafka); a cancellation finds NO_REASSIGNMENT_IN_PROGRESS;
//! a set naming a broker that is not live, or any other set, is
//! INVALID_REPLICA_ASSIGNMENT; an unknown partition is
//! UNKNOWN_TOPIC_OR_PARTITION. Needs ALTER on the cluster.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ResponseKind,
};

use super::placement::Placement;
use super::str_bytes;
use crate::codes;

/// The answer for partition `p` of `topic` asked to move to `target`
/// (None: cancel).
fn answer(
    placement: &Placement<'_>,
    topic: &str,
    p: i32,
    target: Option<&[i32]>,
) -> (i16, Option<String>) {
    let Some(placed) = placement.partition(topic, p) else {
        return (
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            Some("The partition does not exist.".into()),
        );
    };
    let Some(target) = target else {
        return (
            codes::NO_REASSIGNMENT_IN_PROGRESS,
            Some(format!("No ongoing reassignment for {topic}-{p}.")),
        );
    };
    if target.is_empty() {
        return (
            codes::INVALID_REPLICA_ASSIGNMENT,
            Some("The manual partition assignment includes an empty replica list.".into()),
        );
    }
    if let Some(absent) = target.iter().find(|b| !placement.live(**b)) {
        return (
            codes::INVALID_REPLICA_ASSIGNMENT,
            Some(format!(
                "The manual partition assignment includes broker {absent}, but no such broker is registered."
            )),
        );
    }
    if target != placed.replicas {
        return (
            codes::INVALID_REPLICA_ASSIGNMENT,
            Some(format!(
                "kaas keeps {topic}-{p} once, on the shared volume, served by replicas {:?} as the brokers agree through etcd; it cannot be moved",
                placed.replicas
            )),
        );
    }
    (codes::NONE, None)
}

pub fn handle(
    placement: &Placement<'_>,
    authorized: bool,
    req: AlterPartitionReassignmentsRequest,
) -> ResponseKind {
    if !authorized {
        return ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default()
                .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
                .with_error_message(Some(str_bytes("Cluster authorization failed."))),
        );
    }
    let responses = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let target: Option<Vec<i32>> =
                        p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                    let (code, msg) =
                        answer(placement, &t.name.0, p.partition_index, target.as_deref());
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(msg.as_deref().map(str_bytes))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::AlterPartitionReassignments(
        AlterPartitionReassignmentsResponse::default().with_responses(responses),
    )
}
