//! Fetch (key 1): reads each partition from its fetch offset (at most the
//! partition's and the response's max bytes, the response also at most the
//! broker's `fetch.max.bytes`; only the response's first batch may exceed
//! them, so a consumer makes progress; a partition named twice is read
//! once), below the high watermark, or below
//! the last stable offset for read_committed. Long-polls up to max_wait_ms
//! until min_bytes are available. From v7, incremental fetch sessions
//! (KIP-227, [`crate::fetch_sessions`]): a session's fetch names only what
//! changed and is answered with only the partitions that have something
//! new. From v9 a partition whose current_leader_epoch fails
//! the KIP-320 check ([`super::leader_epoch::check`]) is answered
//! FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH without records, and from
//! v12 with the partition's current leader and epoch.
//!
//! Authorization: READ on each topic, or for a follower's fetch
//! (a replica id ≥ 0) CLUSTER_ACTION on the cluster; a refused partition
//! is answered TOPIC_AUTHORIZATION_FAILED whether or not its topic exists
//! (a v13+ topic id unknown here is UNKNOWN_TOPIC_ID first).
//!
//! Below v10, a partition of a topic with compression.type=zstd is
//! answered UNSUPPORTED_COMPRESSION_TYPE without records, as Kafka does.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProducerId, ResponseKind,
};

use super::{leader_epoch, topic_name};
use crate::broker::Broker;
use crate::codes;
use crate::log::Topic;
use crate::log::partition::ReadError;
use crate::security::Operation;
use crate::wire::handled::Handled;

use crate::fetch_sessions::{Begin, PartKey, Sent, TopicRef, Wanted};

/// The topics (by name) the session may not read, decided once per request.
fn refused_topics(
    broker: &Broker,
    session: &crate::security::Session,
    req: &FetchRequest,
    version: i16,
) -> HashSet<String> {
    let mut checks = super::Checks::new(broker, session, ApiKey::Fetch);
    if !checks.authz_enabled() {
        return HashSet::new();
    }
    let replica = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let follower_allowed = replica >= 0 && checks.cluster(Operation::ClusterAction);
    let mut names = Vec::new();
    for t in &req.topics {
        match find_topic(broker, &t.topic.0, t.topic_id, version) {
            Some(tp) => names.push(tp.name.clone()),
            None if version < 13 => names.push(t.topic.0.to_string()),
            None => {}
        }
    }
    names
        .into_iter()
        .filter(|n| {
            if replica >= 0 {
                !follower_allowed
            } else {
                !checks.topic(Operation::Read, n)
            }
        })
        .collect()
}

/// How the answer relates to a fetch session.
enum Mode {
    None,
    New,
    Incremental {
        id: i32,
        sent: HashMap<PartKey, Sent>,
    },
}

fn topic_ref(name: &str, id: uuid::Uuid, version: i16) -> TopicRef {
    if version >= 13 {
        TopicRef::Id(*id.as_bytes())
    } else {
        TopicRef::Name(name.to_string())
    }
}

fn wanted(p: &FetchPartition) -> Wanted {
    Wanted {
        fetch_offset: p.fetch_offset,
        current_leader_epoch: p.current_leader_epoch,
        last_fetched_epoch: p.last_fetched_epoch,
        log_start_offset: p.log_start_offset,
        max_bytes: p.partition_max_bytes,
    }
}

/// The request an incremental fetch stands for: every partition of the
/// session, in its order, grouped by topic.
fn whole_session(mut req: FetchRequest, parts: &[(PartKey, Wanted)]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut at: HashMap<&TopicRef, usize> = HashMap::new();
    for ((t, p), w) in parts {
        let i = *at.entry(t).or_insert_with(|| {
            let topic = match t {
                TopicRef::Id(id) => {
                    FetchTopic::default().with_topic_id(uuid::Uuid::from_bytes(*id))
                }
                TopicRef::Name(n) => FetchTopic::default().with_topic(topic_name(n)),
            };
            topics.push(topic);
            topics.len() - 1
        });
        topics[i].partitions.push(
            FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(w.fetch_offset)
                .with_current_leader_epoch(w.current_leader_epoch)
                .with_last_fetched_epoch(w.last_fetched_epoch)
                .with_log_start_offset(w.log_start_offset)
                .with_partition_max_bytes(w.max_bytes),
        );
    }
    req.topics = topics;
    req.forgotten_topics_data.clear();
    req
}

fn sent_of(p: &PartitionData) -> Sent {
    Sent {
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        log_start_offset: p.log_start_offset,
    }
}

/// Ties an answer to its session: a new session is cached with what the
/// answer told; an incremental answer keeps only the partitions with
/// something new.
fn finish(
    broker: &Broker,
    mut resp: FetchResponse,
    req: &FetchRequest,
    mode: Mode,
    version: i16,
) -> FetchResponse {
    match mode {
        Mode::None => resp,
        Mode::New => {
            let asked: HashMap<PartKey, Wanted> = req
                .topics
                .iter()
                .flat_map(|t| {
                    let r = topic_ref(&t.topic.0, t.topic_id, version);
                    t.partitions
                        .iter()
                        .map(move |p| ((r.clone(), p.partition), wanted(p)))
                })
                .collect();
            let mut parts = Vec::with_capacity(asked.len());
            for t in &resp.responses {
                let r = topic_ref(&t.topic.0, t.topic_id, version);
                for p in &t.partitions {
                    let k = (r.clone(), p.partition_index);
                    if let Some(w) = asked.get(&k) {
                        parts.push((k, *w, sent_of(p)));
                    }
                }
            }
            resp.session_id = broker.fetch_sessions.create(parts, Instant::now());
            resp
        }
        Mode::Incremental { id, sent } => {
            let mut told = Vec::new();
            for t in &mut resp.responses {
                let r = topic_ref(&t.topic.0, t.topic_id, version);
                t.partitions.retain(|p| {
                    let k = (r.clone(), p.partition_index);
                    let now = sent_of(p);
                    let records = p.records.as_ref().is_some_and(|b| !b.is_empty());
                    let send = Sent::must_send(sent.get(&k), &now, records, p.error_code);
                    if send {
                        told.push((k, now));
                    }
                    send
                });
            }
            resp.responses.retain(|t| !t.partitions.is_empty());
            broker.fetch_sessions.record_sent(id, told);
            resp.session_id = id;
            resp
        }
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: FetchRequest,
    version: i16,
) -> Handled {
    // Fetch sessions exist from v7 (KIP-227).
    let begin = if version >= 7 {
        let changed = req
            .topics
            .iter()
            .flat_map(|t| {
                let r = topic_ref(&t.topic.0, t.topic_id, version);
                t.partitions
                    .iter()
                    .map(move |p| ((r.clone(), p.partition), wanted(p)))
            })
            .collect();
        let forgotten = req
            .forgotten_topics_data
            .iter()
            .flat_map(|t| {
                let r = topic_ref(&t.topic.0, t.topic_id, version);
                t.partitions.iter().map(move |&p| (r.clone(), p))
            })
            .collect();
        broker.fetch_sessions.begin(
            req.session_id,
            req.session_epoch,
            changed,
            forgotten,
            Instant::now(),
        )
    } else {
        Begin::Sessionless
    };
    let (req, mode) = match begin {
        Begin::Refused(code) => {
            return Handled::Now(ResponseKind::Fetch(
                FetchResponse::default().with_error_code(code),
            ));
        }
        Begin::Sessionless => (req, Mode::None),
        Begin::New => (req, Mode::New),
        Begin::Incremental { id, parts, sent } => {
            (whole_session(req, &parts), Mode::Incremental { id, sent })
        }
    };
    let refused = refused_topics(broker, session, &req, version);
    let broker = broker.clone();
    Handled::Later(Box::pin(async move {
        let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
        loop {
            let notified = broker.data_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (resp, bytes, errors) = gather(&broker, &req, version, &refused);
            let now = Instant::now();
            if bytes >= req.min_bytes.max(0) as usize || errors || now >= deadline {
                broker
                    .metrics
                    .bytes_out
                    .fetch_add(bytes as u64, Ordering::Relaxed);
                return ResponseKind::Fetch(finish(&broker, resp, &req, mode, version));
            }
            let _ = tokio::time::timeout(deadline - now, notified).await;
        }
    }))
}

fn find_topic(broker: &Broker, name: &str, id: uuid::Uuid, version: i16) -> Option<Arc<Topic>> {
    if version >= 13 {
        broker.topic_ids.topic(&broker.logs, id.as_bytes())
    } else {
        broker.logs.topic(name)
    }
}

/// Which partition of which topic a request names: by topic id from v13,
/// by name before.
#[derive(PartialEq, Eq, Hash)]
enum TopicKey<'a> {
    Id(uuid::Uuid),
    Name(&'a str),
}

fn topic_key(t: &FetchTopic, version: i16) -> TopicKey<'_> {
    if version >= 13 {
        TopicKey::Id(t.topic_id)
    } else {
        TopicKey::Name(t.topic.0.as_str())
    }
}

/// One pass over the requested partitions: the response, the bytes in it,
/// and whether any partition answered with an error.
///
/// Limits, as Kafka applies them: the response holds at most
/// min(max_bytes, `fetch.max.bytes`) of records, and each partition at most
/// its partition_max_bytes of what is left; only the first batch of the
/// whole response may exceed them (returned whole so a consumer makes
/// progress); a later partition whose next batch does not fit gets no
/// records. A partition named more than once is read once, at its first
/// place, with the last occurrence's fetch offset and limit (Kafka keeps a
/// request's partitions in an insertion-ordered map keyed by partition).
fn gather(
    broker: &Broker,
    req: &FetchRequest,
    version: i16,
    refused: &HashSet<String>,
) -> (FetchResponse, usize, bool) {
    let read_committed = req.isolation_level == 1;
    let mut budget = usize::try_from(req.max_bytes)
        .unwrap_or(0)
        .min(broker.config.fetch_max_bytes);
    let mut min_one = true;
    let key_of = |t| topic_key(t, version);
    let mut last = std::collections::HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            last.insert((key_of(t), p.partition), p);
        }
    }
    let mut done = std::collections::HashSet::new();
    let mut total = 0usize;
    let mut errors = false;
    let mut responses = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let topic = find_topic(broker, &t.topic.0, t.topic_id, version);
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let k = (key_of(t), p.partition);
            let p = last.get(&k).copied().unwrap_or(p);
            if !done.insert(k) {
                continue; // named before: answered there
            }
            let base = PartitionData::default()
                .with_partition_index(p.partition)
                .with_preferred_read_replica(BrokerId(-1));
            let shown_name = topic
                .as_ref()
                .map_or(t.topic.0.as_str(), |tp| tp.name.as_str());
            if !refused.is_empty() && refused.contains(shown_name) {
                errors = true;
                parts.push(
                    base.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1),
                );
                continue;
            }
            let Some(part) = topic.as_ref().and_then(|tp| tp.partition(p.partition)) else {
                errors = true;
                let code = match &topic {
                    None if version >= 13 => codes::UNKNOWN_TOPIC_ID,
                    None => codes::UNKNOWN_TOPIC_OR_PARTITION,
                    Some(tp) => broker.not_here(&tp.name, p.partition),
                };
                parts.push(
                    base.with_error_code(code)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1),
                );
                continue;
            };
            let current = part.leader_epoch();
            let code = if version >= 9 {
                leader_epoch::check(p.current_leader_epoch, current)
            } else {
                codes::NONE
            };
            if code != codes::NONE {
                errors = true;
                let mut r = base
                    .with_error_code(code)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1);
                if version >= 12 {
                    r = r.with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(broker.config.node_id))
                            .with_leader_epoch(current),
                    );
                }
                parts.push(r);
                continue;
            }
            // As Kafka: a topic storing zstd (compression.type=zstd) is not
            // served to a Fetch older than v10, whose clients may not read it.
            if version < 10 && part.config().compression == Some(crate::log::batch::CODEC_ZSTD) {
                errors = true;
                parts.push(
                    base.with_error_code(codes::UNSUPPORTED_COMPRESSION_TYPE)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1),
                );
                continue;
            }
            let max = usize::try_from(p.partition_max_bytes)
                .unwrap_or(0)
                .min(budget);
            match part.read_limited(p.fetch_offset, max, min_one, read_committed) {
                Ok(r) => {
                    let n = r.records.len();
                    if n > 0 {
                        min_one = false;
                    }
                    budget = budget.saturating_sub(n);
                    total += n;
                    let aborted = read_committed.then(|| {
                        r.aborted
                            .iter()
                            .map(|a| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(a.producer_id))
                                    .with_first_offset(a.first_offset)
                            })
                            .collect()
                    });
                    parts.push(
                        base.with_high_watermark(r.high_watermark)
                            .with_last_stable_offset(r.last_stable_offset)
                            .with_log_start_offset(r.log_start_offset)
                            .with_aborted_transactions(aborted)
                            .with_records(Some(Bytes::from(r.records))),
                    );
                }
                Err(ReadError::OutOfRange { .. }) => {
                    // As Kafka: a failed read reports no offsets.
                    errors = true;
                    parts.push(
                        base.with_error_code(codes::OFFSET_OUT_OF_RANGE)
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_log_start_offset(-1),
                    );
                }
                Err(ReadError::Io(e)) => {
                    errors = true;
                    tracing::error!(topic = %part.topic, partition = part.id, error = %e, "read failed");
                    parts.push(base.with_error_code(codes::KAFKA_STORAGE_ERROR));
                }
            }
        }
        if parts.is_empty() && !t.partitions.is_empty() {
            continue; // every partition was named before
        }
        let name = topic
            .as_ref()
            .map_or_else(|| t.topic.clone(), |tp| topic_name(&tp.name));
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(name)
                .with_topic_id(t.topic_id)
                .with_partitions(parts),
        );
    }
    if version < 5 {
        for t in &mut responses {
            for p in &mut t.partitions {
                p.log_start_offset = -1;
            }
        }
    }
    (
        FetchResponse::default()
            .with_session_id(0)
            .with_responses(responses),
        total,
        errors,
    )
}
