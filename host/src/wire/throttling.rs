//! Client quotas on the request path: what each request records against
//! its (user, client id)'s quotas ([`crate::quota::Quotas`]), the
//! `throttle_time_ms` its response carries, and the mute (KIP-219) of its
//! connection. As Kafka 3.7's KafkaApis:
//!
//! 1. Produce records the request's size against `producer_byte_rate`
//!    before it is appended; acks=0 sends nothing, so only the mute tells.
//! 2. Fetch (from a consumer, not a follower) asks for at most what the
//!    consumer quota allows in one window, then records the answer's record
//!    bytes against `consumer_byte_rate`; if the client is then over any
//!    quota the bytes are taken back and it gets an empty answer carrying
//!    the throttle time (the data is read again on its next fetch).
//! 3. Every request but ApiVersions, SASL and broker-to-broker markers
//!    records its handler time against `request_percentage` (see
//!    docs/design.md "Client quotas" for what the time is here).
//! 4. CreateTopics, CreatePartitions and DeleteTopics take tokens from
//!    `controller_mutation_rate` in their handlers (`wire::mutation_quota`);
//!    their answer's throttle time is read back here.
//!
//! The response carries the largest throttle time that applies, and the
//! connection is muted for it.

use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};

use super::{Handled, Mute, Request};
use crate::broker::Broker;
use crate::quota::{Kind, Quotas, clamp_ms};

/// The quota entity of a request: the session's user and the header's
/// client id.
struct Who {
    user: String,
    client_id: String,
}

fn who(session: &crate::security::Session, header: &RequestHeader) -> Who {
    Who {
        user: session.principal.name.clone(),
        client_id: header.client_id.as_deref().unwrap_or_default().to_owned(),
    }
}

/// Whether `request_percentage` leaves the API alone (Kafka exempts
/// ApiVersions, SASL and inter-broker actions).
fn exempt(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::ApiVersions
            | ApiKey::SaslHandshake
            | ApiKey::SaslAuthenticate
            | ApiKey::WriteTxnMarkers
    )
}

/// Dispatches `req` with its quotas applied; sets `mute` when the client
/// is throttled.
pub async fn dispatch(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    mut req: Request,
    mute: &Arc<Mute>,
) -> Handled {
    let quotas = &broker.quotas;
    if !Kind::ALL.into_iter().any(|k| quotas.enabled(k)) {
        return super::dispatch(broker, session, req).await;
    }
    let w = who(session, &req.header);
    let api = req.api_key;
    // 1. Produce: the request's bytes.
    let mut produce_throttle = 0;
    let mut acks_zero = false;
    if let Some(RequestKind::Produce(p)) = &req.body {
        acks_zero = p.acks == 0;
        produce_throttle = quotas.record(
            Kind::ProducerByteRate,
            &w.user,
            &w.client_id,
            req.size as f64,
        );
        quotas.note_throttle(
            Kind::ProducerByteRate,
            &w.user,
            &w.client_id,
            produce_throttle,
        );
    }
    // 2. Fetch: no more than the quota allows in one window.
    let mut consumer_fetch = false;
    if let Some(RequestKind::Fetch(f)) = &mut req.body {
        let replica = if req.version >= 15 {
            f.replica_state.replica_id.0
        } else {
            f.replica_id.0
        };
        consumer_fetch = replica < 0;
        if consumer_fetch
            && let Some(max) = quotas.max_in_window(Kind::ConsumerByteRate, &w.user, &w.client_id)
        {
            let max = max.clamp(1.0, i32::MAX as f64) as i32;
            f.max_bytes = f.max_bytes.min(max);
        }
    }
    let started = Instant::now();
    let handled = super::dispatch(broker, session, req).await;
    // 3. The handler's time, as a percentage of one thread for a second.
    let request_throttle = if exempt(api) {
        0
    } else {
        let percent_seconds = started.elapsed().as_nanos() as f64 * 100.0 / 1e9;
        let t = quotas.record(
            Kind::RequestPercentage,
            &w.user,
            &w.client_id,
            percent_seconds,
        );
        quotas.note_throttle(Kind::RequestPercentage, &w.user, &w.client_id, t);
        t
    };
    let throttle = produce_throttle.max(request_throttle);
    if consumer_fetch && quotas.enabled(Kind::ConsumerByteRate) {
        let quotas = quotas.clone();
        let mute = mute.clone();
        return match handled {
            Handled::Now(mut r) => {
                after_fetch(&quotas, &w, &mut r, request_throttle, &mute);
                Handled::Now(r)
            }
            Handled::Later(f) => Handled::Later(Box::pin(async move {
                let mut r = f.await;
                after_fetch(&quotas, &w, &mut r, request_throttle, &mute);
                r
            })),
            other => other,
        };
    }
    match handled {
        Handled::Now(mut r) => {
            // 4. A mutation's throttle, set by its handler.
            let t = throttle.max(throttle_of(&r).max(0) as u64);
            set_throttle(&mut r, t);
            mute.mute_for(t);
            Handled::Now(r)
        }
        Handled::Later(f) if throttle > 0 => {
            mute.mute_for(throttle);
            Handled::Later(Box::pin(async move {
                let mut r = f.await;
                set_throttle(&mut r, throttle);
                r
            }))
        }
        Handled::Nothing if acks_zero => {
            mute.mute_for(throttle);
            Handled::Nothing
        }
        other => {
            mute.mute_for(throttle);
            other
        }
    }
}

/// Records a consumer fetch's answer against its quota; over it (or over
/// `request_throttle`), takes the bytes back and empties the answer.
fn after_fetch(quotas: &Quotas, w: &Who, r: &mut ResponseKind, request_throttle: u64, mute: &Mute) {
    let ResponseKind::Fetch(f) = r else {
        return;
    };
    let bytes: usize = f
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |b| b.len()))
        .sum();
    let k = Kind::ConsumerByteRate;
    let fetch_throttle = quotas.record(k, &w.user, &w.client_id, bytes as f64);
    let throttle = fetch_throttle.max(request_throttle);
    if throttle > 0 {
        quotas.unrecord(k, &w.user, &w.client_id, bytes as f64);
        quotas.note_throttle(k, &w.user, &w.client_id, fetch_throttle);
        f.responses.clear();
        f.error_code = crate::codes::NONE;
    }
    f.throttle_time_ms = clamp_ms(throttle);
    mute.mute_for(throttle);
}

/// Reads or writes `throttle_time_ms` of every response that has one.
macro_rules! throttle_field {
    ($($v:ident),* $(,)?) => {
        /// The response's throttle time (0 for one without the field).
        fn throttle_of(r: &ResponseKind) -> i32 {
            match r {
                $(ResponseKind::$v(x) => x.throttle_time_ms,)*
                _ => 0,
            }
        }

        /// Sets the response's throttle time (nothing for one without the
        /// field; the encoder drops it from versions before it existed).
        fn set_throttle(r: &mut ResponseKind, ms: u64) {
            let ms = clamp_ms(ms);
            match r {
                $(ResponseKind::$v(x) => x.throttle_time_ms = x.throttle_time_ms.max(ms),)*
                _ => {}
            }
        }
    };
}

throttle_field!(
    Produce,
    Fetch,
    ListOffsets,
    Metadata,
    CreateTopics,
    DeleteTopics,
    DeleteRecords,
    CreatePartitions,
    InitProducerId,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    TxnOffsetCommit,
    DescribeConfigs,
    DescribeCluster,
    DescribeLogDirs,
    AlterConfigs,
    IncrementalAlterConfigs,
    DescribeProducers,
    DescribeTransactions,
    ListTransactions,
    FindCoordinator,
    JoinGroup,
    SyncGroup,
    Heartbeat,
    LeaveGroup,
    DescribeGroups,
    ListGroups,
    DeleteGroups,
    OffsetCommit,
    OffsetFetch,
    OffsetDelete,
    OffsetForLeaderEpoch,
    ConsumerGroupHeartbeat,
    ConsumerGroupDescribe,
    DescribeUserScramCredentials,
    AlterUserScramCredentials,
    DescribeAcls,
    CreateAcls,
    DeleteAcls,
    DescribeClientQuotas,
    AlterClientQuotas,
);
