//! Kafka error codes the broker answers with.
//!
//! Every code is declared here and nowhere else in host/src (scripts/structure
//! checks it), once, under Kafka's own name: the test below holds each one
//! against kafka-protocol's table of Kafka's errors by name and number.

/// Declares each code as a `pub const` and lists them all in [`ALL`].
macro_rules! kafka_codes {
    ($($(#[$doc:meta])* $name:ident = $code:expr;)*) => {
        $($(#[$doc])* pub const $name: i16 = $code;)*
        /// Every code declared here, by name, for the check against Kafka's table.
        pub const ALL: &[(&str, i16)] = &[$((stringify!($name), $name)),*];
    };
}

kafka_codes! {
    NONE = 0;
    UNKNOWN_SERVER_ERROR = -1;
    OFFSET_OUT_OF_RANGE = 1;
    CORRUPT_MESSAGE = 2;
    UNKNOWN_TOPIC_OR_PARTITION = 3;
    MESSAGE_TOO_LARGE = 10;
    COORDINATOR_LOAD_IN_PROGRESS = 14;
    COORDINATOR_NOT_AVAILABLE = 15;
    NOT_COORDINATOR = 16;
    INVALID_TOPIC_EXCEPTION = 17;
    INVALID_REQUIRED_ACKS = 21;
    INVALID_PARTITIONS = 37;
    INVALID_REPLICATION_FACTOR = 38;
    TOPIC_ALREADY_EXISTS = 36;
    INVALID_CONFIG = 40;
    INVALID_REQUEST = 42;
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43;
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45;
    INVALID_PRODUCER_EPOCH = 47;
    INVALID_TXN_STATE = 48;
    TRANSACTION_COORDINATOR_FENCED = 52;
    UNSUPPORTED_VERSION = 35;
    KAFKA_STORAGE_ERROR = 56;
    FENCED_LEADER_EPOCH = 74;
    UNKNOWN_LEADER_EPOCH = 75;
    /// A Fetch below v10 of a partition whose topic stores zstd batches.
    UNSUPPORTED_COMPRESSION_TYPE = 76;
    MISMATCHED_ENDPOINT_TYPE = 114;
    INVALID_RECORD = 87;
    UNKNOWN_TOPIC_ID = 100;

    LEADER_NOT_AVAILABLE = 5;
    REQUEST_TIMED_OUT = 7;
    /// The broker does not (or no longer) lead the partition.
    NOT_LEADER_OR_FOLLOWER = 6;
    POLICY_VIOLATION = 44;

    // Cluster mode:
    REASSIGNMENT_IN_PROGRESS = 60;
    INVALID_REPLICA_ASSIGNMENT = 39;

    // Security:
    TOPIC_AUTHORIZATION_FAILED = 29;
    GROUP_AUTHORIZATION_FAILED = 30;
    CLUSTER_AUTHORIZATION_FAILED = 31;
    INVALID_TIMESTAMP = 32;
    INVALID_PRODUCER_ID_MAPPING = 49;
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53;
    OPERATION_NOT_ATTEMPTED = 55;
    UNKNOWN_PRODUCER_ID = 59;
    // Security: SASL.
    UNSUPPORTED_SASL_MECHANISM = 33;
    ILLEGAL_SASL_STATE = 34;
    SASL_AUTHENTICATION_FAILED = 58;
    // KIP-554 (SCRAM credential APIs).
    RESOURCE_NOT_FOUND = 91;
    DUPLICATE_RESOURCE = 92;
    UNACCEPTABLE_CREDENTIAL = 93;
    // The ACL admin APIs:
    SECURITY_DISABLED = 54;
    // Transactions.
    NOT_ENOUGH_REPLICAS = 19;
    INVALID_TRANSACTION_TIMEOUT = 50;
    CONCURRENT_TRANSACTIONS = 51;
    PRODUCER_FENCED = 90;
    // Consumer groups.
    OFFSET_METADATA_TOO_LARGE = 12;
    ILLEGAL_GENERATION = 22;
    INCONSISTENT_GROUP_PROTOCOL = 23;
    INVALID_GROUP_ID = 24;
    UNKNOWN_MEMBER_ID = 25;
    INVALID_SESSION_TIMEOUT = 26;
    REBALANCE_IN_PROGRESS = 27;
    NON_EMPTY_GROUP = 68;
    GROUP_ID_NOT_FOUND = 69;
    MEMBER_ID_REQUIRED = 79;
    GROUP_MAX_SIZE_REACHED = 81;
    FENCED_INSTANCE_ID = 82;
    GROUP_SUBSCRIBED_TO_TOPIC = 86;
    UNSTABLE_OFFSET_COMMIT = 88;
    THROTTLING_QUOTA_EXCEEDED = 89;
    // Fetch sessions and transaction admin.
    FETCH_SESSION_ID_NOT_FOUND = 70;
    TRANSACTIONAL_ID_NOT_FOUND = 105;
    // Replica management (ElectLeaders, reassignments, log dirs) and features.
    REPLICA_NOT_AVAILABLE = 9;
    LOG_DIR_NOT_FOUND = 57;
    PREFERRED_LEADER_NOT_AVAILABLE = 80;
    ELECTION_NOT_NEEDED = 84;
    NO_REASSIGNMENT_IN_PROGRESS = 85;
    INVALID_UPDATE_VERSION = 95;
    // Delegation tokens (kaas issues none).
    DELEGATION_TOKEN_AUTH_DISABLED = 61;
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64;
    // KIP-848 consumer groups.
    /// The member's epoch is fenced: it must rejoin with epoch 0.
    FENCED_MEMBER_EPOCH = 110;
    /// A static member's instance id is still held by a member that has not left.
    UNRELEASED_INSTANCE_ID = 111;
    /// The server-side assignor named in the request is not one the broker has.
    UNSUPPORTED_ASSIGNOR = 112;
    /// A commit or heartbeat at an epoch that is not the member's current one.
    STALE_MEMBER_EPOCH = 113;
    /// A subscribed pattern that does not compile as a regular expression.
    INVALID_REGULAR_EXPRESSION = 128;
    // Fetch sessions.
    INVALID_FETCH_SESSION_EPOCH = 71;
}

#[cfg(test)]
mod table {
    use kafka_protocol::error::ResponseError;
    use std::collections::HashMap;

    /// Kafka's Java name for a code, as kafka-protocol spells its variant.
    fn camel(name: &str) -> String {
        name.split('_')
            .map(|w| {
                let mut c = w.chars();
                match c.next() {
                    Some(f) => f.to_string() + &c.as_str().to_lowercase(),
                    None => String::new(),
                }
            })
            .collect()
    }

    #[test]
    fn every_code_is_kafkas_by_name_and_number() {
        for &(name, code) in super::ALL {
            if code == 0 {
                assert_eq!(name, "NONE");
                continue;
            }
            let kafka = ResponseError::try_from_code(code)
                .unwrap_or_else(|| panic!("{name}={code} is not a Kafka error code"));
            assert_eq!(format!("{kafka:?}"), camel(name), "{name}={code}");
        }
    }

    #[test]
    fn no_code_is_declared_twice() {
        let mut seen: HashMap<i16, &str> = HashMap::new();
        for &(name, code) in super::ALL {
            if let Some(other) = seen.insert(code, name) {
                panic!("code {code} declared as {other} and as {name}");
            }
        }
    }
}
