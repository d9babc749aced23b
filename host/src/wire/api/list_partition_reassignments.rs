//! ListPartitionReassignments (key 46, v0). A kaas partition is never
//! being reassigned (AlterPartitionReassignments only accepts the set it
//! has), so the list is always empty. Needs DESCRIBE on the cluster.

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ResponseKind,
};

use super::str_bytes;
use crate::codes;

pub fn handle(authorized: bool, _req: ListPartitionReassignmentsRequest) -> ResponseKind {
    let resp = if authorized {
        ListPartitionReassignmentsResponse::default()
    } else {
        ListPartitionReassignmentsResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(str_bytes("Cluster authorization failed.")))
    };
    ResponseKind::ListPartitionReassignments(resp)
}
