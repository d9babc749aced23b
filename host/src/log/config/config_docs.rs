//! One line of documentation per topic config, as DescribeConfigs v3+
//! returns it when asked (`include_documentation`), in kaas's own words:
//! what the config means to a user, and for the no-ops, that kaas has
//! nothing it tunes (`topic_config::Support` carries the reason).

/// The documentation of topic config `name`.
pub fn doc(name: &str) -> Option<&'static str> {
    Some(match name {
        "segment.bytes" => {
            "Largest size of one segment file; the active segment rolls before an append would pass it."
        }
        "segment.ms" => {
            "Longest time a segment stays active: once a batch's timestamp is this far past the segment's first, the segment rolls (so retention and compaction can act on it)."
        }
        "segment.jitter.ms" => {
            "Random jitter subtracted from segment.ms in Kafka to spread rolls; accepted, rolls here are not jittered."
        }
        "segment.index.bytes" => {
            "Size of Kafka's offset index files; accepted, kaas lays out its own index files."
        }
        "flush.messages" => {
            "Messages between forced flushes in Kafka; accepted, durability here follows the broker's --fsync mode."
        }
        "flush.ms" => {
            "Time between forced flushes in Kafka; accepted, durability here follows the broker's --fsync mode."
        }
        "retention.bytes" => {
            "Largest size a partition may grow to before its oldest segments are deleted (delete policy); -1 for no limit."
        }
        "retention.ms" => {
            "How long a segment is kept after its newest record before it is deleted (delete policy); -1 keeps data forever."
        }
        "max.message.bytes" => {
            "Largest record batch the topic accepts, after compression; larger batches are refused with MESSAGE_TOO_LARGE."
        }
        "index.interval.bytes" => {
            "Bytes between offset index entries in Kafka; accepted, kaas lays out its own index files."
        }
        "delete.retention.ms" => {
            "How long a tombstone (and a transaction marker whose records are gone) stays in a compacted topic after the cleaner first saw it, so consumers can see the delete."
        }
        "min.compaction.lag.ms" => "Least time a record stays uncompacted after it is written.",
        "max.compaction.lag.ms" => {
            "Most time a record may stay uncompacted: older dirty data makes the partition eligible for cleaning whatever its dirty ratio."
        }
        "file.delete.delay.ms" => {
            "Delay before a deleted segment file is removed in Kafka; accepted, segments are removed at once."
        }
        "min.cleanable.dirty.ratio" => {
            "Share of the log that must be uncleaned before the cleaner compacts the partition."
        }
        "cleanup.policy" => {
            "What happens to old data: delete (retention by time and size), compact (keep the last record per key), or both."
        }
        "unclean.leader.election.enable" => {
            "Whether a replica out of sync may become leader; accepted, all replicas share one volume and are always in sync."
        }
        "min.insync.replicas" => {
            "Fewest in-sync replicas an acks=all write needs; fewer answer NOT_ENOUGH_REPLICAS."
        }
        "compression.type" => {
            "The codec batches are stored with: producer keeps the producer's; any other value makes the broker recompress batches that differ."
        }
        "preallocate" => {
            "Whether Kafka preallocates segment files; accepted, segments keep a zero-filled tail of their own."
        }
        "message.format.version" => {
            "Deprecated record format version; accepted, every batch is record batch format 2."
        }
        "message.timestamp.type" => {
            "CreateTime keeps the producer's timestamps; LogAppendTime makes the broker stamp each batch with the time it appended it."
        }
        "message.timestamp.difference.max.ms" => {
            "Deprecated: the largest difference allowed between a record's timestamp and the broker's clock, either way (CreateTime only)."
        }
        "message.timestamp.before.max.ms" => {
            "How far in the past a record's timestamp may be (CreateTime only); older records are refused with INVALID_TIMESTAMP."
        }
        "message.timestamp.after.max.ms" => {
            "How far in the future a record's timestamp may be (CreateTime only); later records are refused with INVALID_TIMESTAMP."
        }
        "leader.replication.throttled.replicas" => {
            "Replicas whose leader-side replication is throttled in Kafka; accepted, there is no replication traffic on a shared volume."
        }
        "follower.replication.throttled.replicas" => {
            "Replicas whose follower-side replication is throttled in Kafka; accepted, there is no replication traffic on a shared volume."
        }
        "message.downconversion.enable" => {
            "Whether old consumers get down-converted batches in Kafka; accepted, every batch is served as format 2."
        }
        "remote.storage.enable" => {
            "Tiered storage; kaas keeps everything local, so only false is accepted."
        }
        "local.retention.ms" => {
            "Local retention under tiered storage; accepted, everything is local."
        }
        "local.retention.bytes" => {
            "Local retention under tiered storage; accepted, everything is local."
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_topic_config_is_documented() {
        for d in super::super::topic_config::TOPIC_CONFIGS {
            assert!(
                super::doc(d.name).is_some(),
                "{} has no documentation",
                d.name
            );
        }
    }
}
