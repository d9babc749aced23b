//! Kafka error codes the broker answers with.

pub const NONE: i16 = 0;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_CONFIG: i16 = 40;
pub const INVALID_REQUEST: i16 = 42;
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const INVALID_TXN_STATE: i16 = 48;
pub const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
/// A Fetch below v10 of a partition whose topic stores zstd batches.
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
pub const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
pub const INVALID_RECORD: i16 = 87;
pub const UNKNOWN_TOPIC_ID: i16 = 100;

pub const LEADER_NOT_AVAILABLE: i16 = 5;
pub const REQUEST_TIMED_OUT: i16 = 7;
/// The broker does not (or no longer) lead the partition.
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const POLICY_VIOLATION: i16 = 44;

// Cluster mode:
pub const REASSIGNMENT_IN_PROGRESS: i16 = 60;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;

// Security:
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const INVALID_TIMESTAMP: i16 = 32;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
pub const UNKNOWN_PRODUCER_ID: i16 = 59;
// Security: SASL.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
// KIP-554 (SCRAM credential APIs).
pub const RESOURCE_NOT_FOUND: i16 = 91;
pub const DUPLICATE_RESOURCE: i16 = 92;
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
// The ACL admin APIs:
pub const SECURITY_DISABLED: i16 = 54;
// Transactions.
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const PRODUCER_FENCED: i16 = 90;
// Consumer groups.
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub const FENCED_INSTANCE_ID: i16 = 82;
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
// Fetch sessions and transaction admin.
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
// Replica management (ElectLeaders, reassignments, log dirs) and features.
pub const REPLICA_NOT_AVAILABLE: i16 = 9;
pub const LOG_DIR_NOT_FOUND: i16 = 57;
pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
pub const ELECTION_NOT_NEEDED: i16 = 84;
pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
pub const INVALID_UPDATE_VERSION: i16 = 95;
// Delegation tokens (kaas issues none).
pub const DELEGATION_TOKEN_AUTH_DISABLED: i16 = 61;
pub const DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: i16 = 64;

#[cfg(test)]
mod tests {
    use kafka_protocol::error::ResponseError;

    #[test]
    fn leader_epoch_and_compression_codes_are_kafkas() {
        for (code, kafka) in [
            (super::FENCED_LEADER_EPOCH, ResponseError::FencedLeaderEpoch),
            (
                super::UNKNOWN_LEADER_EPOCH,
                ResponseError::UnknownLeaderEpoch,
            ),
            (
                super::UNSUPPORTED_COMPRESSION_TYPE,
                ResponseError::UnsupportedCompressionType,
            ),
            (
                super::MISMATCHED_ENDPOINT_TYPE,
                ResponseError::MismatchedEndpointType,
            ),
        ] {
            assert_eq!(ResponseError::try_from_code(code), Some(kafka));
        }
    }

    #[test]
    fn replica_management_and_token_codes_are_kafkas() {
        for (code, kafka) in [
            (
                super::REPLICA_NOT_AVAILABLE,
                ResponseError::ReplicaNotAvailable,
            ),
            (super::LOG_DIR_NOT_FOUND, ResponseError::LogDirNotFound),
            (
                super::PREFERRED_LEADER_NOT_AVAILABLE,
                ResponseError::PreferredLeaderNotAvailable,
            ),
            (super::ELECTION_NOT_NEEDED, ResponseError::ElectionNotNeeded),
            (
                super::NO_REASSIGNMENT_IN_PROGRESS,
                ResponseError::NoReassignmentInProgress,
            ),
            (
                super::INVALID_UPDATE_VERSION,
                ResponseError::InvalidUpdateVersion,
            ),
            (
                super::DELEGATION_TOKEN_AUTH_DISABLED,
                ResponseError::DelegationTokenAuthDisabled,
            ),
            (
                super::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                ResponseError::DelegationTokenRequestNotAllowed,
            ),
        ] {
            assert_eq!(ResponseError::try_from_code(code), Some(kafka));
        }
    }
}
