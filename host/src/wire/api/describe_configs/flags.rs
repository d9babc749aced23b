//! The broker configs kaas takes from its flags, under Kafka's names, as
//! the broker resource describes them (read-only, static): only settings
//! kaas honours, each with the value it applies.

use crate::config::BrokerConfig;

const BOOLEAN: i8 = 1;
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;

/// (name, value, type, documentation) of each.
pub(super) fn broker_flags(
    c: &BrokerConfig,
    transaction_max_timeout_ms: i32,
) -> Vec<(&'static str, String, i8, &'static str)> {
    let ms = |d: std::time::Duration| d.as_millis().to_string();
    let g = &c.groups;
    vec![
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            BOOLEAN,
            "Whether a Metadata request creates the unknown topics it names (--no-auto-create-topics).",
        ),
        (
            "default.replication.factor",
            c.default_replication_factor.to_string(),
            INT,
            "Replication factor of a topic created without one (--default-replication-factor).",
        ),
        (
            "num.partitions",
            c.default_partitions.to_string(),
            INT,
            "Partitions of a topic created without a count (--default-partitions).",
        ),
        (
            "socket.request.max.bytes",
            c.max_request_bytes.to_string(),
            INT,
            "Largest request frame; a larger one closes the connection (--max-request-bytes).",
        ),
        // What the policy is configured with (and so enforces).
        (
            "transaction.max.timeout.ms",
            transaction_max_timeout_ms.to_string(),
            INT,
            "Longest transaction timeout a producer may ask for (--transaction-max-timeout-ms).",
        ),
        (
            "broker.id",
            c.node_id.to_string(),
            INT,
            "This broker's id (--node-id).",
        ),
        (
            "node.id",
            c.node_id.to_string(),
            INT,
            "This broker's id (--node-id).",
        ),
        (
            "log.dirs",
            c.data_dir.display().to_string(),
            STRING,
            "The data directory (--data-dir; the shared volume in cluster mode).",
        ),
        (
            "delete.topic.enable",
            "true".into(),
            BOOLEAN,
            "Topics may always be deleted (DeleteTopics).",
        ),
        (
            "group.initial.rebalance.delay.ms",
            ms(g.initial_rebalance_delay),
            INT,
            "How long a new classic group waits for more members before its first rebalance.",
        ),
        (
            "group.min.session.timeout.ms",
            ms(g.min_session_timeout),
            INT,
            "Shortest session timeout a classic group member may ask for.",
        ),
        (
            "group.max.session.timeout.ms",
            ms(g.max_session_timeout),
            INT,
            "Longest session timeout a classic group member may ask for.",
        ),
        (
            "group.max.size",
            g.max_size.to_string(),
            INT,
            "Most members a group may have.",
        ),
        (
            "offset.metadata.max.bytes",
            g.offset_metadata_max_bytes.to_string(),
            INT,
            "Largest metadata string of a committed offset.",
        ),
        (
            "offsets.retention.minutes",
            (g.offsets_retention.as_secs() / 60).to_string(),
            INT,
            "How long an empty group's committed offsets are kept.",
        ),
        (
            "offsets.retention.check.interval.ms",
            ms(g.offsets_retention_check),
            LONG,
            "How often committed offsets are checked for expiry.",
        ),
        (
            "transactional.id.expiration.ms",
            c.transactional_id_expiration_ms.to_string(),
            INT,
            "How long an idle transactional id is kept.",
        ),
        (
            "producer.id.expiration.ms",
            c.producer_id_expiration_ms.to_string(),
            INT,
            "How long an idle producer id's state is kept.",
        ),
        (
            "max.incremental.fetch.session.cache.slots",
            c.fetch_session_slots.to_string(),
            INT,
            "Most incremental fetch sessions kept.",
        ),
        (
            "fetch.max.bytes",
            c.fetch_max_bytes.to_string(),
            INT,
            "Most bytes one Fetch response carries.",
        ),
        (
            "connections.max.idle.ms",
            ms(c.connections_max_idle),
            LONG,
            "How long an idle connection is kept open.",
        ),
        (
            "max.connections",
            c.max_connections.to_string(),
            INT,
            "Most connections the broker accepts.",
        ),
    ]
}
