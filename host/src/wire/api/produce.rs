//! Produce (key 0): validate and append each partition's batch, then, for
//! acks 1/-1, wait until the appends are durable (one group-commit round for
//! the whole request) before answering; acks 0 gets no response. Produce
//! never answers PRODUCER_FENCED (KAFKA-10687): a stale epoch is
//! INVALID_PRODUCER_EPOCH on every version.
//!
//! One pass per step over the request, parsed once into its partitions'
//! entries ([`Request`]: each partition's records and their batch header):
//! authorization ([`authorize`]), the checks before any append ([`admit`]),
//! transaction verification ([`verify`]), then the appends ([`append_all`]),
//! where the log validates each batch whole.
//!
//! Authorization: a request carrying transactional batches
//! needs a transactional id with WRITE on it, else every partition is
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE, else its
//! partitions are TOPIC_AUTHORIZATION_FAILED (before existence is looked
//! at). Beyond Kafka, a batch under a producer id bound to another
//! principal (or to none) is refused like one under an id never handed out
//! (`security::pid_owners`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::codes;
use crate::log::batch::{self, BatchError, BatchHeader};
use crate::log::partition::{AppendError, Appended};
use crate::log::producer::ProducerError;
use crate::log::{FsyncMode, Partition};
use crate::security::Operation;
use crate::security::pid_owners::Owner;
use crate::txn::route;
use crate::wire::handled::Handled;

/// The Kafka error code for a refused append.
pub fn append_error_code(e: &AppendError) -> i16 {
    match e {
        AppendError::Batch(BatchError::Corrupt(_)) => codes::CORRUPT_MESSAGE,
        AppendError::Batch(
            BatchError::Invalid(_) | BatchError::OldMagic(_) | BatchError::KeylessOnCompacted(_),
        ) => codes::INVALID_RECORD,
        AppendError::Batch(BatchError::TooLarge { .. }) => codes::MESSAGE_TOO_LARGE,
        AppendError::Batch(BatchError::TimestampOutOfRange(..)) => codes::INVALID_TIMESTAMP,
        AppendError::Producer(ProducerError::StaleEpoch) => codes::INVALID_PRODUCER_EPOCH,
        AppendError::Producer(ProducerError::OutOfOrder) => codes::OUT_OF_ORDER_SEQUENCE_NUMBER,
        AppendError::Producer(ProducerError::TxnState) => codes::INVALID_TXN_STATE,
        AppendError::Producer(ProducerError::CoordinatorFenced) => {
            codes::TRANSACTION_COORDINATOR_FENCED
        }
        AppendError::NotLeader => codes::NOT_LEADER_OR_FOLLOWER,
        AppendError::Io(_) => codes::KAFKA_STORAGE_ERROR,
    }
}

/// Why records were refused, one by one (Produce v8+'s record_errors):
/// the message and the refused records' indexes in the batch.
type Detail = (String, Vec<i32>);

/// What one partition of the request came to: its append's result (or
/// the code it was refused with), before the response is encoded.
struct PartitionOutcome {
    partition: Option<Arc<Partition>>,
    index: i32,
    result: Result<Appended, i16>,
    detail: Option<Detail>,
}

/// Record bytes in one request above which its appends run off the async
/// runtime even when uncompressed (walking them takes a while).
const OFFLOAD_PLAIN_BYTES: usize = 1 << 20;

/// A Produce request, parsed once: every step after the parse reads its
/// entries, not the request.
struct Request {
    head: Head,
    /// Each topic's name and partition entries, in request order.
    topics: Vec<(TopicName, Vec<Entry>)>,
}

/// What every entry of a request shares.
struct Head {
    acks: i16,
    version: i16,
    transactional_id: Option<String>,
}

/// One partition's part of a Produce request.
struct Entry {
    index: i32,
    records: Option<Bytes>,
    /// The header of the records' (first) batch, parsed once; None when
    /// the records are absent, empty or too short for one.
    header: Option<BatchHeader>,
    /// What the checks before any append decided ([`admit`]).
    admission: Admission,
    /// A transactional batch whose producer had no transaction open on the
    /// partition when [`admit`] looked: the coordinator must know the
    /// partition is in its transaction ([`verify`]).
    opens_txn: bool,
    /// The coordinator's answer for that, as Produce's code ([`verify`]).
    verified: Option<i16>,
}

/// What the checks before any append decided for an entry.
enum Admission {
    /// Answered so, nothing appended.
    Refused(i16, Option<Detail>),
    /// A batch under a producer id this broker never handed out, or one
    /// bound to another principal: answered with this code, unless the
    /// batch is invalid anyway (then with its own; see [`refuse_valid`]).
    RefusedIfValid(Arc<Partition>, i16),
    /// To be appended to the partition.
    Append(Arc<Partition>),
}

impl Request {
    /// Parses `req` (of `version`): each partition's records and their
    /// batch header.
    fn parse(req: ProduceRequest, version: i16) -> Request {
        let entry = |p: kafka_protocol::messages::produce_request::PartitionProduceData| Entry {
            index: p.index,
            header: p.records.as_deref().and_then(batch::parse_header),
            records: p.records,
            // Until [`admit`] decides.
            admission: Admission::Refused(codes::UNKNOWN_SERVER_ERROR, None),
            opens_txn: false,
            verified: None,
        };
        Request {
            head: Head {
                acks: req.acks,
                version,
                transactional_id: req.transactional_id.map(|t| t.0.to_string()),
            },
            topics: req
                .topic_data
                .into_iter()
                .map(|t| (t.name, t.partition_data.into_iter().map(entry).collect()))
                .collect(),
        }
    }

    /// Every entry, with its topic's name.
    fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.topics
            .iter()
            .flat_map(|(name, es)| es.iter().map(move |e| (name.0.as_str(), e)))
    }

    /// Every batch header, with its topic's name.
    fn headers(&self) -> impl Iterator<Item = (&str, BatchHeader)> {
        self.entries()
            .filter_map(|(topic, e)| e.header.map(|h| (topic, h)))
    }
}

/// What authorization decided before any append.
#[derive(Debug, Default)]
struct Checks {
    /// Topics without WRITE.
    denied_topics: HashSet<String>,
    /// Producer ids not bound to the session's principal.
    foreign_pids: HashSet<i64>,
}

/// Every partition of `req` answered `code`, nothing appended.
fn refuse_all(req: Request, code: i16) -> Handled {
    if req.head.acks == 0 {
        // Kafka closes the connection of a failed acks=0 produce.
        return Handled::Close;
    }
    let topics = req
        .topics
        .into_iter()
        .map(|(name, es)| {
            let outs = es
                .iter()
                .map(|e| PartitionOutcome {
                    partition: None,
                    index: e.index,
                    result: Err(code),
                    detail: None,
                })
                .collect();
            (name, outs)
        })
        .collect();
    Handled::Now(respond(topics, req.head.version))
}

/// The authorization checks of `req` (nothing to check when the
/// authorizer is disabled); Err: the code for every partition.
async fn authorize(
    broker: &Broker,
    session: &crate::security::Session,
    req: &Request,
) -> Result<Checks, i16> {
    let mut checks = Checks::default();
    // Kafka checks this first, authorizer or not: a transactional (or
    // control) batch needs a transactional id.
    let transactional = req.headers().any(|(_, h)| h.is_transactional());
    if req.head.transactional_id.is_none() && transactional {
        return Err(codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    if !broker.authz.is_enabled() {
        return Ok(checks);
    }
    let mut access = super::Checks::new(broker, session, ApiKey::Produce);
    if transactional {
        let allowed = req
            .head
            .transactional_id
            .as_ref()
            .is_some_and(|id| access.txn(Operation::Write, id));
        if !allowed {
            return Err(codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        }
    }
    for (name, _) in &req.topics {
        if !access.topic(Operation::Write, &name.0) {
            checks.denied_topics.insert(name.0.to_string());
        }
    }
    if let Some(owners) = &broker.pid_owners {
        let mut pids: Vec<i64> = req
            .headers()
            .filter(|(topic, h)| {
                !checks.denied_topics.contains(*topic)
                    && h.has_producer_id()
                    && broker.producer_ids.issued(h.producer_id)
            })
            .map(|(_, h)| h.producer_id)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        owners.refresh_on_miss(&pids, &session.principal).await;
        for pid in pids {
            let owner = owners.owner(pid, &session.principal);
            if owner != Owner::Mine {
                crate::security::pid_owners::audit_refusal(
                    &session.principal,
                    "Produce",
                    pid,
                    owner,
                );
                checks.foreign_pids.insert(pid);
            }
        }
    }
    Ok(checks)
}

pub async fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: ProduceRequest,
    version: i16,
) -> Handled {
    let mut req = Request::parse(req, version);
    let acks = req.head.acks;
    let checks = match authorize(broker, session, &req).await {
        Ok(c) => c,
        Err(code) => return refuse_all(req, code),
    };
    // Cluster mode: a producer id above what this broker has seen may come
    // from a block another broker took a moment ago.
    if let Some(etcd) = broker.producer_ids.etcd() {
        let unseen = req
            .headers()
            .any(|(_, h)| h.has_producer_id() && !broker.producer_ids.issued(h.producer_id));
        if unseen && let Err(e) = etcd.refresh_producer_ids().await {
            tracing::warn!(error = %e, "cannot read the producer-id counter from etcd");
        }
    }
    admit(broker, &mut req, &checks);
    verify(broker, &mut req).await;
    // Validation decompresses and walks every record (batch::walk_records):
    // for a compressed batch, up to MAX_SCAN_BYTES of work, so such a
    // request is appended on the blocking pool, and so is one a topic's
    // compression.type has compressed on append. The connection's reader
    // awaits this before reading its next request, so appends keep their
    // order; small uncompressed requests stay on this thread.
    let (compressed, plain) = req
        .entries()
        .filter_map(|(_, e)| e.records.as_ref().map(|b| (e.header, b.len())))
        .fold((false, 0usize), |(c, n), (h, len)| {
            (c || h.is_some_and(|h| h.compression() != 0), n + len)
        });
    let mut topics = if compressed || plain > OFFLOAD_PLAIN_BYTES || compresses(broker, &req) {
        match batch::offload(move || append_all(req)).await {
            Some(t) => t,
            None if acks == 0 => return Handled::Close,
            None => return Handled::Now(ResponseKind::Produce(ProduceResponse::default())),
        }
    } else {
        append_all(req)
    };
    let needs_wait = broker.logs.group_commit().mode() == FsyncMode::Always
        && topics.iter().any(|(_, outs)| {
            outs.iter()
                .any(|o| matches!(&o.result, Ok(a) if a.file.is_some()))
        });
    if acks == 0 {
        return acks_zero(broker, topics, needs_wait);
    }
    if !needs_wait {
        broker.data_ready.notify_waiters();
        return Handled::Now(respond(topics, version));
    }
    let broker = broker.clone();
    // Join the group commit now, not when the connection's writer gets to
    // this response: pipelined produces on one connection then share one
    // fdatasync instead of syncing one after another.
    let durable = tokio::spawn(async move {
        wait_durable(&broker, &mut topics).await;
        respond(topics, version)
    });
    Handled::Later(Box::pin(async move {
        durable.await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "the durability wait failed");
            ResponseKind::Produce(ProduceResponse::default())
        })
    }))
}

/// The end of an acks=0 produce, which gets no answer. A failure closes
/// the connection, as Kafka does: the client learns of it so. Otherwise
/// the connection's next request other than a Produce waits until the
/// appends are visible (durable, with --fsync always): Kafka answers a
/// connection's requests in order, so a Fetch after it sees the records.
fn acks_zero(broker: &Arc<Broker>, mut topics: Topics, needs_wait: bool) -> Handled {
    let failed = topics
        .iter()
        .any(|(_, outs)| outs.iter().any(|o| o.result.is_err()));
    // Durability follows the fsync mode's background path.
    let b = broker.clone();
    let durable = tokio::spawn(async move {
        wait_durable(&b, &mut topics).await;
        topics
            .iter()
            .all(|(_, outs)| outs.iter().all(|o| o.result.is_ok()))
    });
    if failed {
        Handled::Close
    } else if needs_wait {
        Handled::NothingUntil(Box::pin(async move { durable.await.unwrap_or(false) }))
    } else {
        Handled::Nothing
    }
}

/// Whether a topic of `req` stores its batches compressed
/// (compression.type gzip, snappy, lz4 or zstd): its uncompressed batches
/// are compressed on append.
fn compresses(broker: &Broker, req: &Request) -> bool {
    req.topics.iter().any(|(name, _)| {
        broker
            .logs
            .topic(&name.0)
            .is_some_and(|t| t.config.compression.is_some_and(|c| c != 0))
    })
}

/// Each topic's append outcomes, in request order.
type Topics = Vec<(TopicName, Vec<PartitionOutcome>)>;

/// The checks before any append, for every entry of `req`, in Kafka's
/// order; also counts the bytes that pass them (bytes_in).
fn admit(broker: &Broker, req: &mut Request, checks: &Checks) {
    for (name, entries) in &mut req.topics {
        let topic = name.0.as_str();
        let denied = checks.denied_topics.contains(topic);
        for e in entries {
            let part = if denied {
                None
            } else {
                broker.logs.partition(topic, e.index)
            };
            e.opens_txn = match (&part, e.header) {
                (Some(part), Some(h)) => {
                    h.is_transactional()
                        && h.producer_id >= 0
                        && !checks.foreign_pids.contains(&h.producer_id)
                        && !part.has_open_txn(h.producer_id)
                }
                _ => false,
            };
            e.admission = admission(broker, checks, &req.head, topic, denied, e, part);
        }
    }
}

/// [`admit`] for one entry `e` of `topic` (`denied`: without WRITE);
/// `part`: its partition, when it is here and the topic not denied.
fn admission(
    broker: &Broker,
    checks: &Checks,
    head: &Head,
    topic: &str,
    denied: bool,
    e: &Entry,
    part: Option<Arc<Partition>>,
) -> Admission {
    use Admission::Refused;
    let acks = head.acks;
    if !matches!(acks, -1..=1) {
        return Refused(codes::INVALID_REQUIRED_ACKS, None);
    }
    if denied {
        return Refused(codes::TOPIC_AUTHORIZATION_FAILED, None);
    }
    let Some(part) = part else {
        let code = broker.not_here(topic, e.index);
        // Cluster mode: remembered, so that a batch of the same producer
        // pipelined behind this one is not appended should the partition
        // come back here before it (a gap the client would answer with an
        // epoch bump and duplicates).
        if code == codes::NOT_LEADER_OR_FOLLOWER
            && let Some(h) = &e.header
        {
            broker.logs.refused_unheld_header(topic, e.index, h);
        }
        return Refused(code, None);
    };
    // As Kafka: a partition's records hold one batch at least.
    let Some(bytes) = e.records.as_ref().filter(|b| !b.is_empty()) else {
        return Refused(codes::INVALID_RECORD, None);
    };
    // zstd needs Produce v7 (KIP-110), as in Kafka.
    if head.version < 7
        && e.header
            .is_some_and(|h| h.compression() == batch::CODEC_ZSTD)
    {
        return Refused(codes::UNSUPPORTED_COMPRESSION_TYPE, None);
    }
    if let Some(m) = too_few_in_sync(broker, acks, &part, topic, e.index) {
        return Refused(codes::NOT_ENOUGH_REPLICAS, Some((m, Vec::new())));
    }
    broker
        .metrics
        .bytes_in
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    let Some(h) = e.header else {
        return Admission::Append(part);
    };
    // Only ids this broker handed out may carry state: a batch under the
    // next ids, written before InitProducerId hands them out, would make the
    // real producer's first batch look like a duplicate of it. With the
    // authorizer enabled, only ids bound to the session's principal: to
    // the sender, an id another principal holds is as good as one never
    // handed out (the same answer, so it learns nothing of which ids are
    // live; a client whose binding was dropped re-initialises).
    if h.has_producer_id()
        && (!broker.producer_ids.issued(h.producer_id)
            || checks.foreign_pids.contains(&h.producer_id))
    {
        let code = if h.is_transactional() {
            codes::INVALID_PRODUCER_ID_MAPPING
        } else {
            codes::UNKNOWN_PRODUCER_ID
        };
        return Admission::RefusedIfValid(part, code);
    }
    if h.is_transactional() {
        // Test-only: answer one later transactional batch as if the broker had
        // lost the producer's state (UNKNOWN_PRODUCER_ID), so the client must
        // recover with a KIP-360 epoch bump. (librdkafka treats an
        // OUT_OF_ORDER_SEQUENCE_NUMBER on the next expected sequence as fatal
        // "sequence desynchronization", so that code cannot drive the bump.)
        if h.base_sequence > 0 && crate::fault::once("produce-unknown-producer-id-once") {
            return Refused(codes::UNKNOWN_PRODUCER_ID, None);
        }
        if head.transactional_id.is_none() {
            return Refused(codes::INVALID_RECORD, None);
        }
    }
    Admission::Append(part)
}

/// An entry's place in a [`Request`]: (topic, entry) indexes.
type EntryAt = (usize, usize);

/// KIP-890 part 1 (docs/txn-semantics.md §3.6): the first transactional
/// batch of a producer on a partition must belong to a transaction the
/// coordinator knows includes the partition. Asked before any append, for
/// every admitted entry that [`Entry::opens_txn`], in one
/// [`route::verify_only`] call per producer, wherever the coordinator runs
/// (on this broker: a call; on another: one AddPartitionsToTxn VerifyOnly).
async fn verify(broker: &Broker, req: &mut Request) {
    let Request { head, topics } = req;
    let Some(txn_id) = head.transactional_id.as_deref() else {
        return;
    };
    // The request's producer: the first of its transactional batches (a
    // client's batches all carry its id). A coordinator on another broker
    // is asked about it only; another producer's batches (a forged request)
    // get "not reached" there (NOT_ENOUGH_REPLICAS: the client retries).
    let mut first = None;
    // Each producer's entries to ask about.
    let mut asks: Vec<((i64, i16), Vec<EntryAt>)> = Vec::new();
    for (ti, (_, entries)) in topics.iter().enumerate() {
        for (ei, e) in entries.iter().enumerate() {
            let Some(h) = e.header.filter(|_| e.opens_txn) else {
                continue;
            };
            let producer = (h.producer_id, h.producer_epoch);
            first.get_or_insert(producer);
            if !matches!(e.admission, Admission::Append(_)) {
                continue;
            }
            match asks.iter_mut().find(|(p, _)| *p == producer) {
                Some((_, at)) => at.push((ti, ei)),
                None => asks.push((producer, vec![(ti, ei)])),
            }
        }
    }
    for ((pid, epoch), at) in asks {
        let tps: Vec<crate::policy::TopicPartition> = at
            .iter()
            .map(|&(ti, ei)| crate::policy::TopicPartition {
                topic: topics[ti].0.0.to_string(),
                partition: topics[ti].1[ei].index,
            })
            .collect();
        let answers = if first == Some((pid, epoch))
            || matches!(
                route::coordinator_of(broker.txn_routes(), txn_id),
                route::CoordinatorLocation::Here(_)
            ) {
            route::verify_only(broker.txn_routes(), txn_id, pid, epoch, &tps).await
        } else {
            vec![codes::COORDINATOR_NOT_AVAILABLE; tps.len()]
        };
        for ((ti, ei), code) in at.into_iter().zip(answers) {
            topics[ti].1[ei].verified = Some(route::produce_code(code));
        }
    }
}

/// Appends every admitted entry of `req`.
fn append_all(req: Request) -> Topics {
    req.topics
        .into_iter()
        .map(|(name, entries)| (name, entries.into_iter().map(append).collect()))
        .collect()
}

/// Why an acks=all append to `part` must not be written (min.insync.replicas
/// against the ISR the cluster seam reports), or None. The default of 1 is
/// met by the leader alone, so only a higher value asks the cluster.
fn too_few_in_sync(
    broker: &Broker,
    acks: i16,
    part: &Partition,
    topic: &str,
    p: i32,
) -> Option<String> {
    let min = part.config().min_insync_replicas;
    if acks != -1 || min <= 1 {
        return None;
    }
    let set = broker.cluster.led_replicas(topic, p);
    super::min_isr::refusal(acks, min, set.replicas.len(), &set.isr, topic, p)
}

/// The outcome of one entry: its refusal, or its append.
fn append(e: Entry) -> PartitionOutcome {
    let mut detail = None;
    let records = e.records.unwrap_or_default();
    let (partition, result) = match e.admission {
        Admission::Refused(code, d) => {
            detail = d;
            (None, Err(code))
        }
        Admission::RefusedIfValid(part, code) => {
            let result = refuse_valid(&part, &records, code);
            (Some(part), result)
        }
        Admission::Append(part) => {
            let result = write(&part, &records, e.header, e.verified, &mut detail);
            (Some(part), result)
        }
    };
    PartitionOutcome {
        partition,
        index: e.index,
        result,
        detail,
    }
}

/// Err(`code`), or the batch's own code when it is invalid anyway (only
/// on this refusal path is a batch validated before the log does).
fn refuse_valid(part: &Partition, records: &[u8], code: i16) -> Result<Appended, i16> {
    batch::validate_client_batch(records, part.config().max_message_bytes)
        .map_err(|e| append_error_code(&AppendError::Batch(e)))?;
    Err(code)
}

/// Appends an admitted batch (`header`, when parsed) to `part`. A
/// transactional batch whose producer has no open transaction on the
/// partition now needs the coordinator's yes ([`verify`]); with no answer
/// (the transaction was open when [`admit`] looked, and has ended since)
/// the client is told to retry (NOT_ENOUGH_REPLICAS).
fn write(
    part: &Partition,
    records: &[u8],
    header: Option<BatchHeader>,
    verified: Option<i16>,
    detail: &mut Option<Detail>,
) -> Result<Appended, i16> {
    if let Some(h) = header.filter(|h| h.is_transactional() && h.producer_id >= 0)
        && !part.has_open_txn(h.producer_id)
    {
        let code =
            verified.unwrap_or_else(|| route::produce_code(codes::COORDINATOR_NOT_AVAILABLE));
        if code != codes::NONE {
            return Err(code);
        }
    }
    part.append(records.to_vec()).map_err(|e| {
        if matches!(e, AppendError::Io(_)) {
            tracing::error!(topic = %part.topic, partition = part.id, error = %e, "append failed");
        }
        if let AppendError::Batch(BatchError::KeylessOnCompacted(indexes)) = &e {
            *detail = Some((
                format!(
                    "Compacted topic cannot accept message without key in topic partition {}-{}.",
                    part.topic, part.id
                ),
                indexes.clone(),
            ));
        }
        if let AppendError::Batch(BatchError::TimestampOutOfRange(message, indexes)) = &e {
            *detail = Some((message.clone(), indexes.clone()));
        }
        append_error_code(&e)
    })
}

/// Waits for one group-commit round over every written file, then raises
/// the high watermarks; a failed sync turns those partitions' results into
/// KAFKA_STORAGE_ERROR.
async fn wait_durable(
    broker: &Arc<Broker>,
    topics: &mut [(kafka_protocol::messages::TopicName, Vec<PartitionOutcome>)],
) {
    let mut files = Vec::new();
    for (_, outs) in topics.iter() {
        for o in outs {
            if let Ok(Appended { file: Some(f), .. }) = &o.result
                && !files.iter().any(|g| Arc::ptr_eq(g, f))
            {
                files.push(f.clone());
            }
        }
    }
    let synced = broker.logs.group_commit().sync_all(files).await;
    for (_, outs) in topics.iter_mut() {
        for o in outs.iter_mut() {
            if let (Ok(a), Some(p)) = (&o.result, &o.partition) {
                match &synced {
                    Ok(()) => p.advance_high_watermark(a.end_offset),
                    Err(e) => {
                        tracing::error!(topic = %p.topic, partition = p.id, error = %e, "fdatasync failed");
                        o.result = Err(codes::KAFKA_STORAGE_ERROR);
                    }
                }
            }
        }
    }
    broker.data_ready.notify_waiters();
}

fn respond(
    topics: Vec<(kafka_protocol::messages::TopicName, Vec<PartitionOutcome>)>,
    version: i16,
) -> ResponseKind {
    let responses = topics
        .into_iter()
        .map(|(name, outs)| {
            let parts = outs
                .into_iter()
                .map(|o| {
                    let append_time = o.result.as_ref().map_or(-1, |a| a.log_append_time);
                    let r = PartitionProduceResponse::default()
                        .with_index(o.index)
                        .with_log_append_time_ms(append_time);
                    let start = if version >= 5 {
                        o.partition.as_ref().map_or(-1, |p| p.log_start_offset())
                    } else {
                        -1
                    };
                    // Cluster mode: the data is durable, but this broker's
                    // lease may have ended meanwhile: then another broker may
                    // have taken the partition over with or without it. The
                    // answer must say "possibly written" (REQUEST_TIMED_OUT,
                    // as Kafka answers an acks=all append it could not
                    // confirm): clients take NOT_LEADER_OR_FOLLOWER as "not
                    // written", and librdkafka then bumps its idempotent
                    // epoch and sends the batch again under the new one,
                    // past the dedupe window: a duplicate. With this answer
                    // it retries the same sequence, which the next leader
                    // recognises if it has the batch.
                    let gone = o.partition.as_ref().is_some_and(|p| !p.may_acknowledge());
                    let result = match o.result {
                        Ok(_) if gone => Err(codes::REQUEST_TIMED_OUT),
                        other => other,
                    };
                    let r = match o.detail {
                        Some((message, indexes)) if result.is_err() => r
                            .with_record_errors(
                                indexes
                                    .into_iter()
                                    .map(|i| {
                                        BatchIndexAndErrorMessage::default()
                                            .with_batch_index(i)
                                            .with_batch_index_error_message(Some(
                                                StrBytes::from_string(message.clone()),
                                            ))
                                    })
                                    .collect(),
                            )
                            .with_error_message(Some(StrBytes::from_string(message))),
                        _ => r,
                    };
                    match result {
                        Ok(a) => r
                            .with_base_offset(a.base_offset)
                            .with_log_start_offset(start),
                        Err(code) => r
                            .with_error_code(code)
                            .with_base_offset(-1)
                            .with_log_start_offset(-1),
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(parts)
        })
        .collect();
    ResponseKind::Produce(ProduceResponse::default().with_responses(responses))
}
