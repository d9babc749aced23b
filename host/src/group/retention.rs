//! Which committed offsets have expired (Kafka 3.7's
//! `GroupMetadata.removeExpiredOffsets`, `offsets.retention.minutes`):
//!
//! - a group with a protocol type and no members (Empty): every offset, once
//!   the retention has passed since the group became Empty;
//! - a Stable consumer group that knows its members' subscriptions: offsets
//!   of topics nobody subscribes to, once the retention has passed since
//!   their commit;
//! - a group that never had members (offsets only, no protocol type): each
//!   offset once the retention has passed since its commit;
//! - otherwise nothing.
//!
//! An offset committed with an explicit retention (OffsetCommit v2–v4)
//! expires at its own expire time instead.

use std::collections::{BTreeMap, BTreeSet};

use super::consumer::ConsumerGroup;
use super::journal::OffsetKey;
use super::record::Committed;
use super::state::{ClassicGroup, GroupState};

/// The keys of `offsets` that have expired at `now_ms`.
pub fn expired(
    group: &ClassicGroup,
    offsets: &BTreeMap<OffsetKey, Committed>,
    now_ms: i64,
    retention_ms: i64,
) -> Vec<OffsetKey> {
    let check = |base: &dyn Fn(&Committed) -> i64, skip: &dyn Fn(&str) -> bool| {
        offsets
            .iter()
            .filter(|((topic, _), c)| {
                !skip(topic)
                    && match c.expire_ms {
                        Some(at) => now_ms >= at,
                        None => now_ms - base(c) >= retention_ms,
                    }
            })
            .map(|(k, _)| k.clone())
            .collect()
    };
    match (group.protocol_type(), group.state()) {
        (Some(_), GroupState::Empty) => check(&|_| group.state_ms(), &|_| false),
        (Some("consumer"), GroupState::Stable) => match group.subscribed() {
            Some(subscribed) => check(&|c| c.commit_ms, &|t| subscribed.contains(t)),
            None => Vec::new(),
        },
        (None, _) => check(&|c| c.commit_ms, &|_| false),
        _ => Vec::new(),
    }
}

/// The keys of a consumer-protocol group's `offsets` that have expired:
/// every offset once the group has been empty for the retention, else
/// those of topics no member subscribes to, by their commit time.
pub fn expired_consumer(
    group: &ConsumerGroup,
    offsets: &BTreeMap<OffsetKey, Committed>,
    now_ms: i64,
    retention_ms: i64,
) -> Vec<OffsetKey> {
    let empty = group.member_count() == 0;
    let subscribed: BTreeSet<&String> = group.subscribed_topics().collect();
    offsets
        .iter()
        .filter(|((topic, _), c)| {
            if !empty && subscribed.contains(topic) {
                return false;
            }
            match c.expire_ms {
                Some(at) => now_ms >= at,
                None if empty => now_ms - group.state_ms() >= retention_ms,
                None => now_ms - c.commit_ms >= retention_ms,
            }
        })
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::config::GroupConfig;
    use crate::group::record::GroupMeta;
    use crate::group::state::Now;

    fn offsets(commits: &[(&str, i64, Option<i64>)]) -> BTreeMap<OffsetKey, Committed> {
        commits
            .iter()
            .map(|(t, ms, exp)| {
                (
                    (t.to_string(), 0),
                    Committed {
                        offset: 1,
                        leader_epoch: -1,
                        metadata: String::new(),
                        commit_ms: *ms,
                        expire_ms: *exp,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn an_empty_group_expires_everything_once_it_has_been_empty_long_enough() {
        let now = Now::current();
        let meta = GroupMeta {
            generation: 3,
            protocol_type: "consumer".into(),
            protocol: String::new(),
            state_ms: 1_000,
        };
        let g = ClassicGroup::restore("g", &meta, &GroupConfig::default(), now);
        let o = offsets(&[("a", 10, None), ("b", 5_000, None)]);
        assert!(expired(&g, &o, 1_500, 1_000).is_empty());
        assert_eq!(expired(&g, &o, 2_000, 1_000).len(), 2);
    }

    #[test]
    fn a_standalone_group_expires_each_offset_by_its_commit_time_or_expire_time() {
        let g = ClassicGroup::new("g", &GroupConfig::default(), Now::current());
        let o = offsets(&[("a", 0, None), ("b", 900, None), ("c", 900, Some(950))]);
        let got = expired(&g, &o, 1_000, 1_000);
        let topics: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(topics, vec!["a", "c"]);
    }
}
