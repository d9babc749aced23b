//! One file per Kafka API: parse (already decoded), apply, respond.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delegation_tokens;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leader_epoch;
pub mod leave_group;
pub mod list_client_metrics_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod min_isr;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod placement;
pub mod produce;
pub mod scram_credentials;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod update_features;
pub mod write_txn_markers;

pub(crate) use crate::names::{str_bytes, topic_name};

/// One request's authorization checks: each distinct
/// (operation, resource) is decided once, so a request naming many
/// partitions of a topic asks the authorizer (and audits a denial) once.
/// With the authorizer disabled every check is `true` at no cost.
pub(crate) struct Checks<'a> {
    authz: &'a crate::security::Authorizer,
    session: &'a crate::security::Session,
    api: kafka_protocol::messages::ApiKey,
    seen: std::collections::HashMap<(Operation, ResourceType, String), bool>,
}

use crate::security::{Operation, ResourceType};

impl<'a> Checks<'a> {
    pub(crate) fn new(
        broker: &'a crate::broker::Broker,
        session: &'a crate::security::Session,
        api: kafka_protocol::messages::ApiKey,
    ) -> Self {
        Checks {
            authz: &broker.authz,
            session,
            api,
            seen: Default::default(),
        }
    }

    /// The decisive check (a denial is audited).
    pub(crate) fn allows(&mut self, op: Operation, rt: ResourceType, name: &str) -> bool {
        if !self.authz.is_enabled() {
            return true;
        }
        let key = (op, rt, name.to_owned());
        if let Some(&v) = self.seen.get(&key) {
            return v;
        }
        let v = self.authz.authorize(self.session, self.api, op, rt, name);
        self.seen.insert(key, v);
        v
    }

    /// A check whose denial is not audited (Kafka's logIfDenied=false).
    pub(crate) fn probe(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        !self.authz.is_enabled() || self.authz.probe(self.session, op, rt, name)
    }

    /// `op` on the Cluster resource, decisive.
    pub(crate) fn cluster(&mut self, op: Operation) -> bool {
        self.allows(
            op,
            ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME,
        )
    }

    /// `op` on the Cluster resource, as a probe.
    pub(crate) fn cluster_probe(&self, op: Operation) -> bool {
        self.probe(
            op,
            ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME,
        )
    }

    /// `op` on a topic, decisive.
    pub(crate) fn topic(&mut self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::Topic, name)
    }

    /// `op` on a group, decisive.
    pub(crate) fn group(&mut self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::Group, name)
    }

    /// `op` on a transactional id, decisive.
    pub(crate) fn txn(&mut self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::TransactionalId, name)
    }

    /// KIP-430's authorized operations of a resource: the bits of every
    /// operation the caller may perform on it (probes, not audited).
    pub(crate) fn operations(&self, rt: ResourceType, name: &str) -> i32 {
        self.authz.authorized_operations(self.session, rt, name)
    }

    /// KIP-430's operations on the cluster: those the caller may perform
    /// if it may DESCRIBE the cluster (decisive), else 0, as Kafka 3.7
    /// computes them.
    pub(crate) fn cluster_operations(&mut self) -> i32 {
        if self.cluster(Operation::Describe) {
            self.operations(ResourceType::Cluster, crate::security::acl::CLUSTER_NAME)
        } else {
            0
        }
    }

    /// Whether checks are enforced at all.
    pub(crate) fn authz_enabled(&self) -> bool {
        self.authz.is_enabled()
    }
}

/// Every live broker as (id, host, port), at the address of the listener
/// `session` came in on (Metadata and DescribeCluster list them alike).
pub(crate) fn advertised_brokers(
    broker: &crate::broker::Broker,
    session: &crate::security::Session,
) -> Vec<(i32, String, i32)> {
    broker
        .cluster
        .brokers()
        .iter()
        .map(|b| {
            let (host, port) = b.endpoint(&session.listener);
            (b.id, host, port)
        })
        .collect()
}

/// Whether `producer_id` may be used by `session`: true
/// when the authorizer is disabled, or the id is bound to the session's
/// principal; a refusal is audited. Cluster mode: a miss reads the other
/// brokers' bindings first.
pub(crate) async fn owns_producer_id(
    broker: &crate::broker::Broker,
    session: &crate::security::Session,
    api: &str,
    producer_id: i64,
) -> bool {
    let Some(owners) = &broker.pid_owners else {
        return true;
    };
    owners
        .refresh_on_miss(&[producer_id], &session.principal)
        .await;
    match owners.owner(producer_id, &session.principal) {
        crate::security::pid_owners::Owner::Mine => true,
        other => {
            crate::security::pid_owners::audit_refusal(&session.principal, api, producer_id, other);
            false
        }
    }
}
