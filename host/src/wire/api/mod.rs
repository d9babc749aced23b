//! One file per Kafka API: parse (already decoded), apply, respond.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod api_versions;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_producers;
pub mod describe_transactions;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leader_epoch;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod scram_credentials;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

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
