//! DescribeClientQuotas (API 48, v0–1): the configured quotas of every
//! entity a filter matches (`quota::entity::Filter`: exact, default and
//! specified components; strict: no other component). Needs
//! DESCRIBE_CONFIGS on the cluster.

use std::sync::Arc;

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::quota::entity::Filter;
use crate::security::Operation;

fn failed(code: i16, message: &str) -> ResponseKind {
    ResponseKind::DescribeClientQuotas(
        DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message)))
            .with_entries(None),
    )
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeClientQuotasRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeClientQuotas);
    if !checks.cluster(Operation::DescribeConfigs) {
        return failed(
            codes::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        );
    }
    let components: Vec<_> = req
        .components
        .iter()
        .map(|c| (c.entity_type.as_str(), c.match_type, c._match.as_deref()))
        .collect();
    let filter = match Filter::parse(&components, req.strict) {
        Ok(f) => f,
        Err((code, message)) => return failed(code, &message),
    };
    let table = broker.quotas.table();
    let entries = table
        .iter()
        .filter(|(e, _)| filter.matches(e))
        .map(|(e, quotas)| {
            EntryData::default()
                .with_entity(
                    e.components()
                        .into_iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(str_bytes(t))
                                .with_entity_name(n.map(str_bytes))
                        })
                        .collect(),
                )
                .with_values(
                    quotas
                        .iter()
                        .map(|(k, v)| ValueData::default().with_key(str_bytes(k)).with_value(*v))
                        .collect(),
                )
        })
        .collect();
    ResponseKind::DescribeClientQuotas(
        DescribeClientQuotasResponse::default().with_entries(Some(entries)),
    )
}
