//! One file per Kafka API: parse (already decoded), apply, respond.

pub mod api_versions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_configs;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod produce;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// A topic name for a response.
pub(crate) fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A string for a response.
pub(crate) fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}
