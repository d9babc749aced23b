//! Metadata (key 3): the live brokers, the controller and every partition's
//! leader and leader epoch, as the cluster seam knows them (single-node
//! mode: this broker leads everything). Unknown topics are created with the default
//! partition count when the broker allows it and the client asks for it
//! (v4+ `allow_auto_topic_creation`; always for older versions).
//!
//! Auto-creation is bounded: at most
//! `max_auto_created_topics_per_request` topics per request; the other
//! unknown topics are answered LEADER_NOT_AVAILABLE, Kafka's answer for a
//! topic whose creation is under way, which clients retry, and the next
//! request creates the next ones. A creation the broker refuses (its
//! partition limit or open-file budget) is answered UNKNOWN_TOPIC_OR_PARTITION,
//! and the request tries no further creations.
//!
//! KIP-430's authorized operations (v8+) are filled in when the request
//! asks for them.
//!
//! Authorization: a request for all topics lists only those the
//! session may DESCRIBE (silently); a named topic without DESCRIBE is
//! answered TOPIC_AUTHORIZATION_FAILED whether or not it exists; creating
//! one needs CREATE on the cluster (probe) or on the topic.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, ResponseKind};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::codes;
use crate::log::{Topic, TopicMeta};
use crate::security::{Operation, ResourceType};

/// Whether answering `req` may create topics (file-system work the caller
/// runs off the async runtime).
pub fn may_create(broker: &Broker, req: &MetadataRequest, version: i16) -> bool {
    broker.config.auto_create_topics
        && (version < 4 || req.allow_auto_topic_creation)
        && req.topics.as_ref().is_some_and(|list| {
            list.iter().any(|t| {
                t.name
                    .as_ref()
                    .is_some_and(|n| known(broker, n.0.as_str()).is_none())
            })
        })
}

/// A topic as the cluster knows it.
fn known(broker: &Broker, name: &str) -> Option<TopicMeta> {
    match broker.cluster.topics() {
        Some(all) => all.get(name).cloned(),
        None => broker.logs.topic(name).map(|t| {
            TopicMeta::new(
                &t.name,
                t.partition_count,
                String::new(),
                Default::default(),
            )
        }),
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: MetadataRequest,
    version: i16,
) -> ResponseKind {
    let node = BrokerId(broker.config.node_id);
    let mut checks = super::Checks::new(broker, session, ApiKey::Metadata);
    let topic_operations = version >= 8 && req.include_topic_authorized_operations;
    let cluster_operations =
        (8..=10).contains(&version) && req.include_cluster_authorized_operations;
    let mut topics: Vec<MetadataResponseTopic> = match req.topics {
        None => match broker.cluster.topics() {
            Some(all) => all
                .values()
                .filter(|m| checks.probe(Operation::Describe, ResourceType::Topic, &m.name))
                .map(|m| describe_meta(broker, m))
                .collect(),
            None => broker
                .logs
                .topics()
                .iter()
                .filter(|t| checks.probe(Operation::Describe, ResourceType::Topic, &t.name))
                .map(|t| describe(t, node))
                .collect(),
        },
        Some(list) => {
            let mut auto = AutoCreate::default();
            // v12: a request naming any topic id is answered by id alone,
            // its names ignored (KIP-516, as Kafka does).
            let by_ids = version >= 12 && list.iter().any(|t| !t.topic_id.is_nil());
            let described = list
                .into_iter()
                .filter(|rt| !by_ids || !rt.topic_id.is_nil())
                .map(|rt| {
                    // v10+: a topic may be named by its id alone (KIP-516;
                    // consumers of KIP-848 assignments ask this way).
                    let by_id = || topic_name_of_id(broker, rt.topic_id.as_bytes());
                    let name = if by_ids {
                        by_id()
                    } else {
                        rt.name.map(|n| n.0.to_string()).or_else(by_id)
                    };
                    let Some(name) = name else {
                        return MetadataResponseTopic::default()
                            .with_name(None)
                            .with_topic_id(rt.topic_id)
                            .with_error_code(codes::UNKNOWN_TOPIC_ID);
                    };
                    if !checks.topic(Operation::Describe, &name) {
                        return unknown(&name, codes::TOPIC_AUTHORIZATION_FAILED);
                    }
                    if let Some(m) = broker
                        .cluster
                        .topics()
                        .and_then(|all| all.get(&name).cloned())
                    {
                        return describe_meta(broker, &m);
                    }
                    if broker.cluster.is_local()
                        && let Some(t) = broker.logs.topic(&name)
                    {
                        return describe(&t, node);
                    }
                    if by_ids {
                        // Deleted since its id was looked up.
                        return MetadataResponseTopic::default()
                            .with_name(None)
                            .with_topic_id(rt.topic_id)
                            .with_error_code(codes::UNKNOWN_TOPIC_ID);
                    }
                    let allow = version < 4 || req.allow_auto_topic_creation;
                    if !crate::log::valid_topic_name(&name) {
                        return unknown(&name, codes::INVALID_TOPIC_EXCEPTION);
                    }
                    if broker.config.auto_create_topics && allow {
                        if !checks.cluster_probe(Operation::Create)
                            && !checks.topic(Operation::Create, &name)
                        {
                            return unknown(&name, codes::TOPIC_AUTHORIZATION_FAILED);
                        }
                        return auto.create(broker, &name, node);
                    }
                    unknown(&name, codes::UNKNOWN_TOPIC_OR_PARTITION)
                })
                .collect();
            auto.report();
            described
        }
    };
    let brokers = super::advertised_brokers(broker, session)
        .into_iter()
        .map(|(id, host, port)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(&host))
                .with_port(port)
        })
        .collect();
    // KIP-430: what the caller may do with each topic it may describe, and
    // with the cluster (0 when it may not describe the cluster), when asked.
    if topic_operations {
        for t in &mut topics {
            if t.error_code == codes::NONE
                && let Some(name) = &t.name
            {
                t.topic_authorized_operations = checks.operations(ResourceType::Topic, name);
            }
        }
    }
    let mut resp = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(&broker.config.cluster_id)))
        .with_controller_id(BrokerId(broker.cluster.controller_id()))
        .with_topics(topics);
    if cluster_operations {
        resp.cluster_authorized_operations = checks.cluster_operations();
    }
    fit_to_version(&mut resp, version);
    ResponseKind::Metadata(resp)
}

/// Auto-creation within one request.
#[derive(Debug, Default)]
struct AutoCreate {
    created: usize,
    /// Unknown topics left for a later request (the per-request bound).
    deferred: usize,
    /// Why the broker refused a creation; none is tried after it.
    refused: Option<String>,
    /// Topics not created because of that refusal.
    not_created: usize,
}

impl AutoCreate {
    fn create(&mut self, broker: &Broker, name: &str, node: BrokerId) -> MetadataResponseTopic {
        if self.refused.is_some() {
            self.not_created += 1;
            return unknown(name, codes::UNKNOWN_TOPIC_OR_PARTITION);
        }
        if self.created >= broker.config.max_auto_created_topics_per_request {
            self.deferred += 1;
            return unknown(name, codes::LEADER_NOT_AVAILABLE);
        }
        match crate::cluster::admin::create_topic(
            broker.topic_admin(),
            name,
            broker.config.default_partitions,
            &crate::cluster::admin::Replication::Factor(-1),
            Default::default(),
            false,
        ) {
            Ok(m) => {
                self.created += 1;
                if !broker.cluster.is_local() {
                    return describe_meta(broker, &m);
                }
                return match broker.logs.topic(name) {
                    Some(t) => describe(&t, node),
                    None => unknown(name, codes::LEADER_NOT_AVAILABLE),
                };
            }
            Err(crate::log::CreateError::Exists(_)) => {
                if let Some(m) = broker
                    .cluster
                    .topics()
                    .and_then(|all| all.get(name).cloned())
                {
                    return describe_meta(broker, &m);
                }
                return match broker.logs.topic(name) {
                    Some(t) => describe(&t, node),
                    // Another request is creating it.
                    None => unknown(name, codes::LEADER_NOT_AVAILABLE),
                };
            }
            Err(
                e @ (crate::log::CreateError::PartitionLimit { .. }
                | crate::log::CreateError::FdBudget(_)),
            ) => {
                self.refused = Some(e.to_string());
                self.not_created += 1;
            }
            Err(e) => tracing::warn!(topic = %name, error = %e, "auto-create failed"),
        }
        unknown(name, codes::UNKNOWN_TOPIC_OR_PARTITION)
    }

    /// One log line per request, not one per topic.
    fn report(&self) {
        if let Some(reason) = &self.refused {
            tracing::warn!(
                created = self.created,
                not_created = self.not_created,
                %reason,
                "auto-creation refused"
            );
        } else if self.deferred > 0 {
            tracing::debug!(
                created = self.created,
                deferred = self.deferred,
                "auto-creation bounded for this request"
            );
        }
    }
}

fn unknown(name: &str, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(code)
}

/// Cluster mode: a topic as etcd has it, each partition with its live
/// leader and epoch (LEADER_NOT_AVAILABLE while it has none).
fn describe_meta(broker: &Broker, m: &TopicMeta) -> MetadataResponseTopic {
    let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect::<Vec<_>>();
    let partitions = (0..m.partitions)
        .map(|p| {
            let (leader, set) = broker.cluster.replica_set(m, p);
            let r = MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_replica_nodes(ids(set.replicas))
                .with_isr_nodes(ids(set.isr))
                .with_offline_replicas(ids(set.offline));
            match leader {
                Some(l) => r
                    .with_leader_id(BrokerId(l.node))
                    .with_leader_epoch(l.epoch),
                None => r
                    .with_error_code(codes::LEADER_NOT_AVAILABLE)
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1),
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&m.name)))
        .with_topic_id(uuid::Uuid::from_bytes(crate::log::parse_id(&m.id)))
        .with_is_internal(false)
        .with_partitions(partitions)
}

fn describe(t: &Topic, node: BrokerId) -> MetadataResponseTopic {
    let partitions = t
        .open_partitions()
        .iter()
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p.id)
                .with_leader_id(node)
                .with_leader_epoch(p.leader_epoch())
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_topic_id(uuid::Uuid::from_bytes(t.id))
        .with_is_internal(false)
        .with_partitions(partitions)
}

/// The name of the topic with this id (cluster metadata first, then the
/// local log), if any. The nil id names nothing.
fn topic_name_of_id(broker: &Broker, id: &[u8; 16]) -> Option<String> {
    if *id == [0u8; 16] {
        return None;
    }
    if let Some(all) = broker.cluster.topics() {
        return all
            .values()
            .find(|m| crate::log::parse_id(&m.id) == *id)
            .map(|m| m.name.clone());
    }
    broker
        .topic_ids
        .topic(&broker.logs, id)
        .map(|t| t.name.clone())
}

/// Resets fields this version of the response does not carry (the codec
/// refuses to encode a non-default value in a version without the field).
fn fit_to_version(resp: &mut MetadataResponse, version: i16) {
    if version < 1 {
        resp.controller_id = BrokerId(-1);
    }
    if version < 2 {
        resp.cluster_id = None;
    }
    for t in &mut resp.topics {
        if version < 10 {
            t.topic_id = uuid::Uuid::nil();
        }
        for p in &mut t.partitions {
            if version < 7 {
                p.leader_epoch = -1;
            }
            if version < 5 {
                p.offline_replicas = Vec::new();
            }
        }
    }
}
