//! OffsetFetch (key 9): committed offsets of one group (v1–v7) or of
//! several (v8+ `groups`), for the given partitions or, with a null topic
//! list (v2+), every partition the group has. A partition without a
//! committed offset answers offset -1, leader epoch -1, metadata "".
//! With `require_stable` (v7+), a partition a transaction holds a pending
//! offset for answers UNSTABLE_OFFSET_COMMIT (KIP-447).

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, ResponseKind};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::group::Committed;
use crate::group::coordinator::FetchedTopic;
use crate::security::{Operation, ResourceType};

/// (offset, leader epoch, metadata) as answered.
fn answer(c: Option<&Committed>) -> (i64, i32, String) {
    match c {
        Some(c) => (c.offset, c.leader_epoch, c.metadata.clone()),
        None => (-1, -1, String::new()),
    }
}

/// The v8+ answer of one group's topics.
fn group_topics(topics: Vec<FetchedTopic>) -> Vec<OffsetFetchResponseTopics> {
    let partition = |(p, c, code): (i32, Option<Committed>, i16)| {
        let (offset, epoch, meta) = answer(c.as_ref());
        OffsetFetchResponsePartitions::default()
            .with_partition_index(p)
            .with_error_code(code)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(epoch)
            .with_metadata(Some(str_bytes(&meta)))
    };
    topics
        .into_iter()
        .map(|(t, parts)| {
            OffsetFetchResponseTopics::default()
                .with_name(topic_name(&t))
                .with_partitions(parts.into_iter().map(partition).collect())
        })
        .collect()
}

/// The v1–v7 answer: `partition_error` goes on every partition that has
/// no error of its own (before v2 the group's error travels there).
fn single_group_topics(
    topics: Vec<FetchedTopic>,
    partition_error: i16,
) -> Vec<OffsetFetchResponseTopic> {
    let partition = |(p, c, code): (i32, Option<Committed>, i16)| {
        let (offset, epoch, meta) = answer(c.as_ref());
        OffsetFetchResponsePartition::default()
            .with_partition_index(p)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(epoch)
            .with_metadata(Some(str_bytes(&meta)))
            .with_error_code(if code != 0 { code } else { partition_error })
    };
    topics
        .into_iter()
        .map(|(t, parts)| {
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&t))
                .with_partitions(parts.into_iter().map(partition).collect())
        })
        .collect()
}

/// Requested topics as the group coordinator takes them (None: all).
fn wanted<T>(
    topics: Option<Vec<T>>,
    split: impl Fn(T) -> (String, Vec<i32>),
) -> Option<Vec<(String, Vec<i32>)>> {
    topics.map(|ts| ts.into_iter().map(split).collect())
}

/// One group's fetch, authorized: DESCRIBE on the group, else
/// GROUP_AUTHORIZATION_FAILED; of the named topics, those without DESCRIBE
/// answer TOPIC_AUTHORIZATION_FAILED on each partition (after the others,
/// as Kafka orders them); of all topics (null), those are left out.
fn fetch_authorized(
    broker: &Broker,
    checks: &mut super::Checks<'_>,
    group: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<FetchedTopic>, i16> {
    if !checks.group(Operation::Describe, group) {
        return Err(crate::codes::GROUP_AUTHORIZATION_FAILED);
    }
    let Some(groups) = broker.groups.for_group(group) else {
        return Err(crate::codes::NOT_COORDINATOR);
    };
    match wanted {
        None => {
            let mut all = groups.fetch(group, None, require_stable)?;
            all.retain(|(t, _)| checks.probe(Operation::Describe, ResourceType::Topic, t));
            Ok(all)
        }
        Some(list) => {
            let (ok, denied): (Vec<_>, Vec<_>) = list
                .into_iter()
                .partition(|(t, _)| checks.topic(Operation::Describe, t));
            let mut out = groups.fetch(group, Some(ok), require_stable)?;
            out.extend(denied.into_iter().map(|(t, ps)| {
                let parts = ps
                    .into_iter()
                    .map(|p| (p, None, crate::codes::TOPIC_AUTHORIZATION_FAILED))
                    .collect();
                (t, parts)
            }));
            Ok(out)
        }
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: OffsetFetchRequest,
    version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::OffsetFetch);
    if version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let wanted = wanted(g.topics, |t| (t.name.0.to_string(), t.partition_indexes));
                let base = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                // v9 (KIP-848): a member of a consumer-protocol group names
                // itself and its epoch; a stale one is refused.
                let member = (version >= 9)
                    .then(|| {
                        g.member_id
                            .as_ref()
                            .map(|m| (m.to_string(), g.member_epoch))
                    })
                    .flatten();
                if let Some((id, epoch)) = &member
                    && let Some(groups) = broker.groups.for_group(&g.group_id.0)
                    && let Err(code) = groups.validate_consumer_fetch(&g.group_id.0, id, *epoch)
                {
                    return base.with_error_code(code);
                }
                let fetched = fetch_authorized(
                    broker,
                    &mut checks,
                    &g.group_id.0,
                    wanted,
                    req.require_stable,
                );
                match fetched {
                    Err(code) => base.with_error_code(code),
                    Ok(topics) => base.with_topics(group_topics(topics)),
                }
            })
            .collect();
        return ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_groups(groups));
    }
    let requested = wanted(req.topics, |t| (t.name.0.to_string(), t.partition_indexes));
    let fetched = fetch_authorized(
        broker,
        &mut checks,
        &req.group_id.0,
        requested.clone(),
        version >= 7 && req.require_stable,
    );
    let (topics, error): (Vec<FetchedTopic>, i16) = match fetched {
        Ok(t) => (t, 0),
        // Before v2 there is no top-level error: it goes on every
        // requested partition.
        Err(code) if version < 2 => (
            requested
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| (t, ps.into_iter().map(|p| (p, None, 0)).collect()))
                .collect(),
            code,
        ),
        Err(code) => (Vec::new(), code),
    };
    let partition_error = if version < 2 { error } else { 0 };
    ResponseKind::OffsetFetch(
        OffsetFetchResponse::default()
            .with_topics(single_group_topics(topics, partition_error))
            .with_error_code(error),
    )
}
