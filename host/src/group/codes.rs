//! Kafka error codes the group coordinator answers with (those the rest of
//! the broker shares live in [`crate::codes`]).

pub use crate::codes::{
    COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST, NONE, UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
};

pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub const NOT_COORDINATOR: i16 = 16;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const UNKNOWN_LEADER_EPOCH: i16 = 76;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub const FENCED_INSTANCE_ID: i16 = 82;
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
