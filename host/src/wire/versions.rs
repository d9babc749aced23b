//! The API versions this broker advertises in ApiVersions and accepts:
//! Kafka 3.7's ranges, bounded by what the codec decodes. A leaf, read by
//! the frame decoder and the ApiVersions handler.

use kafka_protocol::messages::ApiKey;

/// (api key, min version, max version) we advertise and accept.
pub const VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 10),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::AddPartitionsToTxn, 0, 4),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    // Kafka 3.7 speaks 0-1; kafka-protocol decodes only v1 (the flexible
    // version, which kaas's own coordinators send).
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DescribeCluster, 0, 1),
    // Kafka 3.7 speaks 0-4; kafka-protocol decodes 1-4.
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 0),
    // Answered with a refusal naming etcd: kaas has no KRaft quorum
    // (Kafka 4.x's range, so the message field, v2, reaches 4.x tools).
    (ApiKey::DescribeQuorum, 0, 2),
    // Consumer groups (group::). Kafka 3.7's maxima; minima bounded by what
    // kafka-protocol decodes (OffsetCommit 2+, OffsetFetch 1+,
    // OffsetForLeaderEpoch 2+).
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    // KIP-848's consumer group protocol (Kafka 4.0's ranges).
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    // End of consumer groups.
    // Security: SASL (served by security::authenticate on SASL
    // listeners) and KIP-554's SCRAM credential APIs.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // ACL admin: Kafka 3.7 speaks 0-3; kafka-protocol decodes
    // 1-3 (v0 lacks the pattern type fields; clients use v1+).
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    // Client quotas (quota::): Kafka 3.7's ranges.
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    // Replica management, answered in kaas's model (one copy of each
    // partition on the shared volume): Kafka 3.7's ranges, from what
    // kafka-protocol decodes (AlterReplicaLogDirs 1+, tokens 1+).
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 0),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::UpdateFeatures, 0, 1),
    // Delegation tokens: refused (kaas issues none).
    (ApiKey::CreateDelegationToken, 1, 3),
    (ApiKey::RenewDelegationToken, 1, 2),
    (ApiKey::ExpireDelegationToken, 1, 2),
    (ApiKey::DescribeDelegationToken, 1, 3),
    // ListClientMetricsResources (kafka-protocol: ListConfigResources).
    (ApiKey::ListConfigResources, 0, 0),
];

/// The advertised range of an API, if we implement it.
pub fn range(key: ApiKey) -> Option<(i16, i16)> {
    VERSIONS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, lo, hi)| (lo, hi))
}
