//! AlterClientQuotas (API 49, v0–1): sets or removes quotas of entities,
//! with Kafka 3.7's checks (`quota::entity::{parse_entity, check_ops}`),
//! each entry answered on its own; validate_only checks and writes
//! nothing. Needs ALTER_CONFIGS on the cluster. The whole new table is
//! written durably before the answer: single node to
//! `<data dir>/__configs/client-quotas.json` (`quota::store`), cluster
//! mode to etcd (`cluster::admin::alter_client_quotas`), where every
//! broker's reconcile loop picks it up.

use std::sync::Arc;

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, ResponseKind,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::quota::QuotaTable;
use crate::quota::entity::{Entity, Op, Refusal, check_ops, parse_entity};
use crate::security::Operation;

/// One request entry, parsed: its entity (or why not) and its ops.
type Parsed = (Result<Entity, Refusal>, Vec<Op>);

/// Applies every valid entry to `table`; what to answer for each.
fn change(table: &QuotaTable, entries: &[Parsed]) -> (QuotaTable, Vec<Result<(), Refusal>>) {
    let mut new = table.clone();
    let mut seen = std::collections::BTreeSet::new();
    let said = entries
        .iter()
        .map(|(entity, ops)| {
            let entity = entity.clone()?;
            check_ops(&entity, ops)?;
            if !seen.insert(entity.clone()) {
                return Err((
                    codes::INVALID_REQUEST,
                    format!("Ignoring duplicate entity {entity}"),
                ));
            }
            new.apply(&entity, ops);
            Ok(())
        })
        .collect();
    (new, said)
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: AlterClientQuotasRequest,
    _version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::AlterClientQuotas);
    let allowed = checks.cluster(Operation::AlterConfigs);
    let parsed: Vec<Parsed> = req
        .entries
        .iter()
        .map(|e| {
            let comps: Vec<_> = e
                .entity
                .iter()
                .map(|c| (c.entity_type.as_str(), c.entity_name.as_deref()))
                .collect();
            let ops = e
                .ops
                .iter()
                .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
                .collect();
            (parse_entity(&comps), ops)
        })
        .collect();
    let results: Vec<Result<(), Refusal>> = if !allowed {
        parsed
            .iter()
            .map(|_| {
                Err((
                    codes::CLUSTER_AUTHORIZATION_FAILED,
                    "Cluster authorization failed.".into(),
                ))
            })
            .collect()
    } else {
        let quotas = &broker.quotas;
        let _one = quotas.alter_lock.lock().unwrap_or_else(|p| p.into_inner());
        let outcome = match broker.cluster.etcd() {
            Some(etcd) => crate::cluster::admin::alter_client_quotas(
                etcd,
                |t| change(t, &parsed),
                |t| quotas.replace(t.clone()),
                req.validate_only,
            ),
            None => {
                let (new, said) = change(&quotas.table(), &parsed);
                if req.validate_only || new == *quotas.table() {
                    Ok(said)
                } else {
                    let path = crate::quota::store::file_path(&broker.config.data_dir);
                    match crate::quota::store::save(&path, &new) {
                        Ok(()) => {
                            quotas.replace(new);
                            Ok(said)
                        }
                        Err(e) => Err((
                            codes::KAFKA_STORAGE_ERROR,
                            format!("writing the client quotas: {e}"),
                        )),
                    }
                }
            }
        };
        match outcome {
            Ok(said) => said,
            Err(r) => parsed.iter().map(|_| Err(r.clone())).collect(),
        }
    };
    let entries = req
        .entries
        .iter()
        .zip(results)
        .map(|(e, r)| {
            let (code, message) = match r {
                Ok(()) => (codes::NONE, None),
                Err((c, m)) => (c, Some(str_bytes(&m))),
            };
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(
                    e.entity
                        .iter()
                        .map(|c| {
                            EntityData::default()
                                .with_entity_type(c.entity_type.clone())
                                .with_entity_name(c.entity_name.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::AlterClientQuotas(AlterClientQuotasResponse::default().with_entries(entries))
}
