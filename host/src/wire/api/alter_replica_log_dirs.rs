//! AlterReplicaLogDirs (key 34, v1–2). kaas has one log directory (its
//! data directory, the shared volume in cluster mode, as DescribeLogDirs
//! reports it): moving a partition to it is a no-op (0), to any other path
//! LOG_DIR_NOT_FOUND, and a partition kaas does not have
//! REPLICA_NOT_AVAILABLE, as Kafka answers. Needs ALTER on the cluster.

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ResponseKind,
};

use super::placement::Placement;
use crate::codes;

/// `log_dir`: the data directory as DescribeLogDirs names it.
pub fn handle(
    placement: &Placement<'_>,
    log_dir: &str,
    authorized: bool,
    req: AlterReplicaLogDirsRequest,
) -> ResponseKind {
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for dir in req.dirs {
        let ours = dir.path.as_str() == log_dir;
        for t in dir.topics {
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    let code = if !authorized {
                        codes::CLUSTER_AUTHORIZATION_FAILED
                    } else if !ours {
                        codes::LOG_DIR_NOT_FOUND
                    } else if placement.partition(&t.name.0, p).is_none() {
                        codes::REPLICA_NOT_AVAILABLE
                    } else {
                        codes::NONE
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(t.name)
                    .with_partitions(partitions),
            );
        }
    }
    ResponseKind::AlterReplicaLogDirs(AlterReplicaLogDirsResponse::default().with_results(results))
}
