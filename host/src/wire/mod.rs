//! The Kafka wire protocol: the version table we advertise, request
//! decoding, dispatch to one handler per API (`api/`), and response
//! encoding. Codecs come from kafka-protocol; which versions we accept is
//! ours (Kafka 3.7's ranges, bounded by what the codec decodes).
//!
//! - [`api`]: one handler per Kafka API: parse (already decoded), apply, respond.
//! - [`versions`]: the API versions advertised in ApiVersions, and accepted.
//! - [`handled`]: the shapes a request arrives in and a handler's answer leaves in.
//! - [`frame`]: a response frame as byte strings written in turn (Fetch's records uncopied).
//! - [`throttling`]: client quotas on the request path: throttle times, connection mutes.

pub mod api;
pub mod frame;
pub mod handled;
pub mod throttling;
pub mod versions;
use crate::codes;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::broker::Broker;
use crate::security::Operation;

pub use handled::{Handled, Mute, Pending, Request};
pub use versions::{VERSIONS, range};

/// Why a frame gets no response and its connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame too short for a request header")]
    Short,
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("{api} v{version} is not supported")]
    UnsupportedVersion { api: String, version: i16 },
    #[error("malformed {api} v{version}: {reason}")]
    Malformed {
        api: String,
        version: i16,
        reason: String,
    },
}

/// Decodes one frame (without its size prefix).
pub fn decode(frame: Bytes) -> Result<Request, FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::Short);
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|_| FrameError::UnknownApi(key))?;
    let malformed = |reason: String| FrameError::Malformed {
        api: format!("{api_key:?}"),
        version,
        reason,
    };
    let Some((lo, hi)) = range(api_key) else {
        return Err(FrameError::UnsupportedVersion {
            api: format!("{api_key:?}"),
            version,
        });
    };
    let too_new_api_versions = api_key == ApiKey::ApiVersions && version > hi;
    if !too_new_api_versions && !(lo..=hi).contains(&version) {
        return Err(FrameError::UnsupportedVersion {
            api: format!("{api_key:?}"),
            version,
        });
    }
    let size = frame.len();
    let mut buf = frame;
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let header_version = api_key.request_header_version(version);
        let header = RequestHeader::decode(&mut buf, header_version).map_err(|e| e.to_string())?;
        if too_new_api_versions {
            return Ok((header, None));
        }
        let body = RequestKind::decode(api_key, &mut buf, version).map_err(|e| e.to_string())?;
        Ok::<_, String>((header, Some(body)))
    }));
    let (header, body) = match decoded {
        Ok(Ok(v)) => v,
        Ok(Err(reason)) => return Err(malformed(reason)),
        Err(_) => return Err(malformed("the decoder panicked".into())),
    };
    Ok(Request {
        api_key,
        version,
        correlation_id: header.correlation_id,
        header,
        body,
        size,
    })
}

/// Encodes a response frame (size prefix included).
pub fn encode(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> anyhow::Result<BytesMut> {
    let mut out = BytesMut::with_capacity(128);
    out.extend_from_slice(&[0, 0, 0, 0]);
    // ApiVersions responses always use header v0 (KIP-511).
    let header_version = if api_key == ApiKey::ApiVersions {
        0
    } else {
        api_key.response_header_version(version)
    };
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, header_version)?;
    body.encode(&mut out, version)?;
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out)
}

/// Runs a handler that creates or deletes partitions (directories, files,
/// fsyncs: up to thousands per request) on the blocking pool, so the
/// runtime's workers keep serving other connections. Awaited by the
/// connection's reader like any dispatch, so its requests stay in order.
/// Not `log::batch::offload`: its few slots are for CPU-bound batch work,
/// and a creation holding one for seconds would stall compressed produces.
/// If the task fails (a bug), the answer is `failed`'s empty response.
async fn off_runtime(
    broker: &Arc<Broker>,
    failed: fn() -> ResponseKind,
    f: impl FnOnce(&Arc<Broker>) -> ResponseKind + Send + 'static,
) -> Handled {
    let b = broker.clone();
    match tokio::task::spawn_blocking(move || f(&b)).await {
        Ok(resp) => Handled::Now(resp),
        Err(e) => {
            tracing::error!(error = %e, "a topic handler failed");
            Handled::Now(failed())
        }
    }
}

/// A request's controller-mutation quota: strict from the versions that
/// know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6, CreatePartitions v3,
/// DeleteTopics v5), permissive before.
fn mutation_quota(
    broker: &Broker,
    session: &crate::security::Session,
    header: &RequestHeader,
    version: i16,
) -> crate::quota::MutationQuota {
    let strict_since = match ApiKey::try_from(header.request_api_key) {
        Ok(ApiKey::CreateTopics) => 6,
        Ok(ApiKey::CreatePartitions) => 3,
        Ok(ApiKey::DeleteTopics) => 5,
        _ => i16::MAX,
    };
    let user = &session.principal.name;
    let client_id = header.client_id.as_deref().unwrap_or_default();
    broker
        .quotas
        .mutation(user, client_id, version >= strict_since)
}

/// Whether `session` may do `op` on the cluster (decisive: a denial is
/// audited).
fn cluster_allows(
    broker: &Broker,
    session: &crate::security::Session,
    api: ApiKey,
    op: Operation,
) -> bool {
    api::Checks::new(broker, session, api).cluster(op)
}

/// Runs the handler for a request.
pub async fn dispatch(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: Request,
) -> Handled {
    let v = req.version;
    match req.body {
        None => Handled::Now(api::api_versions::unsupported()),
        Some(RequestKind::ApiVersions(r)) => Handled::Now(api::api_versions::handle(
            &r,
            v,
            &broker.txn.policy_slot().features(),
        )),
        Some(RequestKind::Metadata(r)) if api::metadata::may_create(broker, &r, v) => {
            let session = session.clone();
            off_runtime(
                broker,
                || ResponseKind::Metadata(Default::default()),
                move |b| api::metadata::handle(b, &session, r, v),
            )
            .await
        }
        Some(RequestKind::Metadata(r)) => {
            Handled::Now(api::metadata::handle(broker, session, r, v))
        }
        Some(RequestKind::Produce(r)) => api::produce::handle(broker, session, r, v).await,
        Some(RequestKind::Fetch(r)) => api::fetch::handle(broker, session, r, v),
        Some(RequestKind::ListOffsets(r)) => api::list_offsets::handle(broker, session, r, v),
        Some(RequestKind::CreateTopics(r)) => {
            let session = session.clone();
            let mut quota = mutation_quota(broker, &session, &req.header, v);
            off_runtime(
                broker,
                || ResponseKind::CreateTopics(Default::default()),
                move |b| api::create_topics::handle(b, &session, r, v, &mut quota),
            )
            .await
        }
        Some(RequestKind::DeleteTopics(r)) => {
            let session = session.clone();
            let mut quota = mutation_quota(broker, &session, &req.header, v);
            off_runtime(
                broker,
                || ResponseKind::DeleteTopics(Default::default()),
                move |b| api::delete_topics::handle(b, &session, r, v, &mut quota),
            )
            .await
        }
        Some(RequestKind::CreatePartitions(r)) => {
            let session = session.clone();
            let mut quota = mutation_quota(broker, &session, &req.header, v);
            off_runtime(
                broker,
                || ResponseKind::CreatePartitions(Default::default()),
                move |b| api::create_partitions::handle(b, &session, r, v, &mut quota),
            )
            .await
        }
        Some(RequestKind::DescribeClientQuotas(r)) => {
            Handled::Now(api::describe_client_quotas::handle(broker, session, r, v))
        }
        Some(RequestKind::AlterClientQuotas(r)) => {
            let session = session.clone();
            off_runtime(
                broker,
                || ResponseKind::AlterClientQuotas(Default::default()),
                move |b| api::alter_client_quotas::handle(b, &session, r, v),
            )
            .await
        }
        Some(RequestKind::DeleteRecords(r)) => {
            Handled::Now(api::delete_records::handle(broker, session, r, v))
        }
        Some(RequestKind::AlterConfigs(r)) => {
            let session = session.clone();
            off_runtime(
                broker,
                || ResponseKind::AlterConfigs(Default::default()),
                move |b| api::alter_configs::handle(b, &session, r, v),
            )
            .await
        }
        Some(RequestKind::IncrementalAlterConfigs(r)) => {
            let session = session.clone();
            off_runtime(
                broker,
                || ResponseKind::IncrementalAlterConfigs(Default::default()),
                move |b| api::alter_configs::handle_incremental(b, &session, r, v),
            )
            .await
        }
        Some(RequestKind::DescribeConfigs(r)) => {
            Handled::Now(api::describe_configs::handle(broker, session, r, v))
        }
        Some(RequestKind::InitProducerId(r)) => {
            api::init_producer_id::handle(broker, session, r, v)
        }
        Some(RequestKind::AddPartitionsToTxn(r)) => {
            api::add_partitions_to_txn::handle(broker, session, r, v)
        }
        Some(RequestKind::AddOffsetsToTxn(r)) => {
            api::add_offsets_to_txn::handle(broker, session, r, v)
        }
        Some(RequestKind::EndTxn(r)) => api::end_txn::handle(broker, session, r, v),
        Some(RequestKind::TxnOffsetCommit(r)) => {
            api::txn_offset_commit::handle(broker, session, r, v)
        }
        Some(RequestKind::WriteTxnMarkers(r)) => {
            api::write_txn_markers::handle(broker, session, r, v)
        }
        // Consumer groups (group::).
        Some(RequestKind::FindCoordinator(r)) => {
            Handled::Now(api::find_coordinator::handle(broker, session, r, v))
        }
        Some(RequestKind::JoinGroup(r)) => {
            api::join_group::handle(broker, session, &req.header, r, v)
        }
        Some(RequestKind::SyncGroup(r)) => api::sync_group::handle(broker, session, r, v),
        Some(RequestKind::Heartbeat(r)) => {
            Handled::Now(api::heartbeat::handle(broker, session, r, v))
        }
        Some(RequestKind::LeaveGroup(r)) => {
            Handled::Now(api::leave_group::handle(broker, session, r, v))
        }
        Some(RequestKind::DescribeLogDirs(r)) => {
            Handled::Now(api::describe_log_dirs::handle(broker, session, r, v))
        }
        Some(RequestKind::DescribeCluster(r)) => {
            Handled::Now(api::describe_cluster::handle(broker, session, r, v))
        }
        Some(RequestKind::DescribeGroups(r)) => {
            Handled::Now(api::describe_groups::handle(broker, session, r, v))
        }
        Some(RequestKind::ListGroups(r)) => {
            Handled::Now(api::list_groups::handle(broker, session, r, v))
        }
        Some(RequestKind::DeleteGroups(r)) => api::delete_groups::handle(broker, session, r, v),
        Some(RequestKind::OffsetCommit(r)) => api::offset_commit::handle(broker, session, r, v),
        Some(RequestKind::OffsetFetch(r)) => {
            Handled::Now(api::offset_fetch::handle(broker, session, r, v))
        }
        Some(RequestKind::OffsetDelete(r)) => api::offset_delete::handle(broker, session, r, v),
        Some(RequestKind::ConsumerGroupHeartbeat(r)) => {
            api::consumer_group_heartbeat::handle(broker, session, &req.header, r, v)
        }
        Some(RequestKind::ConsumerGroupDescribe(r)) => {
            Handled::Now(api::consumer_group_describe::handle(broker, session, r, v))
        }
        Some(RequestKind::OffsetForLeaderEpoch(r)) => {
            Handled::Now(api::offset_for_leader_epoch::handle(broker, session, r, v))
        }
        // End of consumer groups.
        Some(RequestKind::DescribeProducers(r)) => {
            Handled::Now(api::describe_producers::handle(broker, session, r, v))
        }
        Some(RequestKind::DescribeTransactions(r)) => {
            Handled::Now(api::describe_transactions::handle(broker, session, r, v))
        }
        Some(RequestKind::DescribeQuorum(r)) => {
            Handled::Now(api::describe_quorum::handle(broker, session, r, v))
        }
        Some(RequestKind::ListTransactions(r)) => {
            Handled::Now(api::list_transactions::handle(broker, session, r, v))
        }
        // On a listener without SASL, or after authentication (KafkaApis'
        // answer): the exchange is security::authenticate's.
        Some(RequestKind::SaslHandshake(_)) => Handled::Now(ResponseKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(codes::ILLEGAL_SASL_STATE),
        )),
        Some(RequestKind::SaslAuthenticate(_)) => Handled::Now(ResponseKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(codes::ILLEGAL_SASL_STATE)
                .with_error_message(Some(api::str_bytes(
                    "SaslAuthenticate is not expected now: the connection is not in a SASL exchange",
                ))),
        )),
        Some(RequestKind::DescribeUserScramCredentials(r)) => {
            Handled::Now(api::scram_credentials::describe(broker, session, r))
        }
        Some(RequestKind::AlterUserScramCredentials(r)) => {
            api::scram_credentials::alter(broker, session, r)
        }
        // ACL admin; changes are stored (file, etcd) off the runtime.
        Some(RequestKind::DescribeAcls(r)) => {
            Handled::Now(api::describe_acls::handle(broker, session, r, v))
        }
        Some(RequestKind::CreateAcls(r)) => {
            let session = session.clone();
            off_runtime(
                broker,
                || ResponseKind::CreateAcls(Default::default()),
                move |b| api::create_acls::handle(b, &session, r, v),
            )
            .await
        }
        Some(RequestKind::DeleteAcls(r)) => {
            let session = session.clone();
            off_runtime(
                broker,
                || ResponseKind::DeleteAcls(Default::default()),
                move |b| api::delete_acls::handle(b, &session, r, v),
            )
            .await
        }
        // Replica management, features, delegation tokens, client metrics:
        // answered in kaas's model (one copy of each partition on the shared
        // volume, leaders agreed through etcd; fixed features; no tokens).
        Some(RequestKind::ElectLeaders(r)) => {
            let ok = cluster_allows(broker, session, req.api_key, Operation::Alter);
            let placement = api::placement::Placement::new(&broker.cluster, &broker.logs);
            Handled::Now(api::elect_leaders::handle(&placement, ok, r, v))
        }
        Some(RequestKind::AlterPartitionReassignments(r)) => {
            let ok = cluster_allows(broker, session, req.api_key, Operation::Alter);
            let placement = api::placement::Placement::new(&broker.cluster, &broker.logs);
            Handled::Now(api::alter_partition_reassignments::handle(&placement, ok, r))
        }
        Some(RequestKind::ListPartitionReassignments(r)) => {
            let ok = cluster_allows(broker, session, req.api_key, Operation::Describe);
            Handled::Now(api::list_partition_reassignments::handle(ok, r))
        }
        Some(RequestKind::AlterReplicaLogDirs(r)) => {
            let ok = cluster_allows(broker, session, req.api_key, Operation::Alter);
            let placement = api::placement::Placement::new(&broker.cluster, &broker.logs);
            let dir = std::fs::canonicalize(&broker.config.data_dir)
                .unwrap_or_else(|_| broker.config.data_dir.clone());
            let dir = dir.display().to_string();
            Handled::Now(api::alter_replica_log_dirs::handle(&placement, &dir, ok, r))
        }
        Some(RequestKind::UpdateFeatures(r)) => {
            let ok = cluster_allows(broker, session, req.api_key, Operation::Alter);
            let finalized =
                api::update_features::finalized(&broker.txn.policy_slot().features());
            Handled::Now(api::update_features::handle(&finalized, ok, r))
        }
        Some(RequestKind::ListConfigResources(_)) => {
            let ok = cluster_allows(broker, session, req.api_key, Operation::DescribeConfigs);
            Handled::Now(api::list_client_metrics_resources::handle(ok))
        }
        Some(RequestKind::CreateDelegationToken(r)) => {
            Handled::Now(api::delegation_tokens::create(session, &r))
        }
        Some(RequestKind::RenewDelegationToken(_)) => {
            Handled::Now(api::delegation_tokens::renew(session))
        }
        Some(RequestKind::ExpireDelegationToken(_)) => {
            Handled::Now(api::delegation_tokens::expire(session))
        }
        Some(RequestKind::DescribeDelegationToken(_)) => {
            Handled::Now(api::delegation_tokens::describe(session))
        }
        // Only the APIs of VERSIONS reach here; decode refused the rest.
        Some(_) => Handled::Nothing,
    }
}
