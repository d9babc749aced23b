//! Names as the Kafka protocol spells them: topic names and strings for
//! responses, and readable API names for logs and metrics. A leaf: the wire
//! handlers, the coordinators and the metrics all use it without importing
//! each other.

use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;

/// A topic name for a response.
pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A string for a response.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A readable API name for logs and metrics (`Produce`, `unknown_99`).
pub fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|_| format!("unknown_{key}"), |k| format!("{k:?}"))
}
