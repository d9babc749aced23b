//! Topic administration through the seam: CreateTopics, DeleteTopics,
//! CreatePartitions, AlterConfigs and IncrementalAlterConfigs and
//! Metadata's auto-creation call these, and they work
//! from any admin. Single-node mode changes the local log; cluster mode
//! agrees the change in etcd, and each partition's leader then opens (or
//! removes) its files. Blocking: callers run off the async runtime.
//!
//! It touches the log's topic list and the cluster view, handed in as
//! [`TopicAdmin`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Cluster;
use crate::log::{CreateError, LogManager, TopicMeta};

/// What topic administration changes: the local log, the cluster view
/// (etcd in cluster mode) and the partition limit (`--max-partitions`).
#[derive(Debug, Clone, Copy)]
pub struct TopicAdmin<'a> {
    pub logs: &'a LogManager,
    pub cluster: &'a Cluster,
    pub max_partitions: usize,
    /// The replication factor a creation's -1 stands for
    /// (`--default-replication-factor`).
    pub default_replication_factor: i16,
}

/// How a creation places its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replication {
    /// A replication factor (-1: the broker default), placed by kaas.
    Factor(i16),
    /// Each partition's replicas, in partition order, preferred leader
    /// first (CreateTopics' `assignments`).
    Assigned(Vec<Vec<i32>>),
}

fn refused((code, message): super::replicas::Refusal) -> CreateError {
    if code == crate::codes::INVALID_REPLICATION_FACTOR {
        CreateError::InvalidReplicationFactor(message)
    } else {
        CreateError::InvalidReplicaAssignment(message)
    }
}

/// The replication factor and stored replica sets of a new topic of
/// `partitions` partitions on the `live` brokers, or why it cannot have
/// them. A replication factor of 1 without an assignment stores no sets:
/// such partitions float ([`super::replicas`]).
fn place(
    admin: TopicAdmin<'_>,
    name: &str,
    first: i32,
    partitions: i32,
    replication: &Replication,
    live: &[i32],
) -> Result<(i16, Vec<Vec<i32>>), CreateError> {
    use super::replicas;
    match replication {
        Replication::Assigned(all) => {
            let rf = replicas::check_assignments(live, all).map_err(refused)?;
            Ok((i16::try_from(rf).unwrap_or(i16::MAX), all.clone()))
        }
        Replication::Factor(asked) => {
            let rf = replicas::check_factor(*asked, admin.default_replication_factor, live.len())
                .map_err(refused)?;
            let sets = if rf > 1 {
                (first..first + partitions)
                    .map(|p| replicas::chain(live, name, p, rf))
                    .collect()
            } else {
                Vec::new()
            };
            Ok((i16::try_from(rf).unwrap_or(i16::MAX), sets))
        }
    }
}

/// How long a creation waits for its partitions to have leaders before it
/// answers (clients retry LEADER_NOT_AVAILABLE after that anyway).
const SETTLE: Duration = Duration::from_secs(5);

fn block_on<T>(f: impl std::future::Future<Output = T>) -> Result<T, CreateError> {
    let h = tokio::runtime::Handle::try_current()
        .map_err(|e| CreateError::Io(std::io::Error::other(e)))?;
    Ok(h.block_on(f))
}

fn etcd_err(e: impl std::fmt::Display) -> CreateError {
    CreateError::Io(std::io::Error::other(format!("etcd: {e}")))
}

/// Partitions of every topic of the cluster.
fn partitions_in(view: &super::etcd::View) -> usize {
    view.topics
        .values()
        .map(|m| usize::try_from(m.partitions).unwrap_or(0))
        .sum()
}

/// Creates a topic (or checks that it could be, with `validate_only`)
/// with `partitions` partitions (with an assignment: one per entry) and
/// the replicas `replication` asks for, on the live brokers.
pub fn create_topic(
    admin: TopicAdmin<'_>,
    name: &str,
    partitions: i32,
    replication: &Replication,
    overrides: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<TopicMeta, CreateError> {
    let partitions = match replication {
        Replication::Assigned(all) => i32::try_from(all.len()).unwrap_or(i32::MAX),
        Replication::Factor(_) => partitions,
    };
    let live = admin.cluster.live_ids();
    let Some(etcd) = admin.cluster.etcd() else {
        // One broker: the only replica set there is, this broker's.
        place(admin, name, 0, partitions, replication, &live)?;
        let t = admin
            .logs
            .create_topic(name, partitions, overrides, validate_only)?;
        return Ok(TopicMeta::new(
            &t.name,
            t.partition_count,
            hex::encode(t.id),
            t.overrides.clone(),
        ));
    };
    let view = etcd.view();
    if view.topics.contains_key(name) {
        return Err(CreateError::Exists(name.into()));
    }
    let existing = partitions_in(&view);
    let mut meta = admin
        .logs
        .plan_topic(name, partitions, &overrides, existing)?;
    (meta.replication_factor, meta.replicas) =
        place(admin, name, 0, partitions, replication, &live)?;
    if validate_only {
        return Ok(meta);
    }
    if !block_on(etcd.create_topic(&meta))?.map_err(etcd_err)? {
        return Err(CreateError::Exists(name.into()));
    }
    settle(admin, |v| {
        (0..meta.partitions).all(|p| {
            v.leaders
                .contains_key(&super::Unit::Partition(name.into(), p))
        })
    });
    Ok(meta)
}

/// Waits (up to [`SETTLE`]) until the view satisfies `done`, then brings
/// the local topic list up to date with it.
fn settle(admin: TopicAdmin<'_>, done: impl Fn(&super::etcd::View) -> bool) {
    let Some(etcd) = admin.cluster.etcd() else {
        return;
    };
    let until = Instant::now() + SETTLE;
    let _ = block_on(async {
        while !done(&etcd.view()) && Instant::now() < until {
            etcd.changed_or(Duration::from_millis(100)).await;
        }
    });
    admin.logs.sync_topics(&etcd.view().topics);
}

/// Deletes a topic; false if it did not exist.
pub fn delete_topic(admin: TopicAdmin<'_>, name: &str) -> std::io::Result<bool> {
    let Some(etcd) = admin.cluster.etcd() else {
        return admin.logs.delete_topic(name);
    };
    let deleted = block_on(etcd.delete_topic(name))
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    if deleted {
        settle(admin, |v| !v.topics.contains_key(name));
    }
    Ok(deleted)
}

/// Why partitions could not be added (a Kafka error code and a message).
pub type Refusal = (i16, String);

/// Grows a topic to `count` partitions; `assignments`, if given, are the
/// new partitions' replicas (checked as a creation's, with the topic's
/// replication factor).
pub fn create_partitions(
    admin: TopicAdmin<'_>,
    name: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> Result<(), Refusal> {
    use crate::codes;
    let current = match admin.cluster.etcd() {
        None => admin.logs.topic(name).map(|t| (t.partition_count, 1)),
        Some(etcd) => etcd
            .view()
            .topics
            .get(name)
            .map(|m| (m.partitions, m.replication_factor)),
    };
    let Some((current, rf)) = current else {
        return Err((
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("topic {name} does not exist"),
        ));
    };
    if count <= current {
        return Err((
            codes::INVALID_PARTITIONS,
            format!("topic {name} has {current} partitions; the new count {count} must be larger"),
        ));
    }
    if count > 10_000 {
        return Err((
            codes::INVALID_PARTITIONS,
            format!("{count} partitions is over the limit of 10000"),
        ));
    }
    let added = usize::try_from(count - current).unwrap_or(0);
    let live = admin.cluster.live_ids();
    if let Some(all) = &assignments {
        if all.len() != added {
            return Err((
                codes::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                    all.len()
                ),
            ));
        }
        let rf = usize::try_from(rf).unwrap_or(1);
        for replicas in all {
            super::replicas::check_assignment(&live, replicas, Some(rf))?;
        }
    }
    let total = match admin.cluster.etcd() {
        None => admin.logs.partition_count(),
        Some(etcd) => partitions_in(&etcd.view()),
    };
    if total.saturating_add(added) > admin.max_partitions {
        return Err((
            codes::POLICY_VIOLATION,
            format!(
                "{added} more partitions would take the cluster past its limit of {} ({total} exist; --max-partitions)",
                admin.max_partitions
            ),
        ));
    }
    if validate_only {
        return Ok(());
    }
    let storage = |e: String| (codes::KAFKA_STORAGE_ERROR, e);
    match admin.cluster.etcd() {
        None => admin
            .logs
            .add_partitions(name, count)
            .map_err(|e| storage(e.to_string())),
        Some(etcd) => {
            let Some(meta) = etcd.view().topics.get(name).cloned() else {
                return Err((
                    codes::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("topic {name} is gone"),
                ));
            };
            let mut grown = meta.clone();
            grown.partitions = count;
            let replication = match assignments {
                Some(all) => Replication::Assigned(all),
                None => Replication::Factor(meta.replication_factor),
            };
            let (_, added_sets) = place(admin, name, current, count - current, &replication, &live)
                .map_err(|e| match e {
                    CreateError::InvalidReplicationFactor(m) => {
                        (codes::INVALID_REPLICATION_FACTOR, m)
                    }
                    other => (codes::INVALID_REPLICA_ASSIGNMENT, other.to_string()),
                })?;
            if !added_sets.is_empty() {
                // Partitions before these keep theirs (or float: empty).
                grown
                    .replicas
                    .resize(usize::try_from(current).unwrap_or(0), Vec::new());
                grown.replicas.extend(added_sets);
            }
            let ok = block_on(etcd.replace_topic(&meta, &grown))
                .map_err(|e| storage(e.to_string()))?
                .map_err(|e| storage(e.to_string()))?;
            if !ok {
                return Err((
                    codes::REASSIGNMENT_IN_PROGRESS,
                    format!("topic {name} changed meanwhile; try again"),
                ));
            }
            settle(admin, |v| {
                (0..count).all(|p| {
                    v.leaders
                        .contains_key(&super::Unit::Partition(name.into(), p))
                })
            });
            Ok(())
        }
    }
}

/// Changes topic `name`'s config overrides to what `change` makes of the
/// current ones (the whole set: AlterConfigs replaces it, the incremental
/// form edits it), validated as a creation validates them; with
/// `validate_only`, nothing more. Single-node mode writes the topic's
/// metadata file and applies the change; cluster mode agrees it in etcd
/// against the record it was computed from (a concurrent change is
/// retried on the new record), and every broker applies it as it syncs.
pub fn alter_topic_configs(
    admin: TopicAdmin<'_>,
    name: &str,
    change: impl Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Refusal>,
    validate_only: bool,
) -> Result<(), Refusal> {
    use crate::codes;
    let unknown = || {
        (
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("topic {name} does not exist"),
        )
    };
    let invalid = |e: String| (codes::INVALID_CONFIG, e);
    let storage = |e: String| (codes::KAFKA_STORAGE_ERROR, e);
    let Some(etcd) = admin.cluster.etcd() else {
        let t = admin.logs.topic(name).ok_or_else(unknown)?;
        let new = change(&t.overrides)?;
        if validate_only {
            return admin.logs.check_configs(&new).map(|_| ()).map_err(invalid);
        }
        if new == t.overrides {
            return Ok(());
        }
        // alter_topic_configs validates: InvalidInput carries Kafka's message.
        return admin.logs.alter_topic_configs(name, new).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidInput {
                invalid(e.to_string())
            } else {
                storage(e.to_string())
            }
        });
    };
    for _ in 0..5 {
        let meta = etcd.view().topics.get(name).cloned().ok_or_else(unknown)?;
        let new = change(&meta.configs)?;
        admin.logs.check_configs(&new).map_err(invalid)?;
        if validate_only || new == meta.configs {
            return Ok(());
        }
        let mut changed = meta.clone();
        changed.configs = new;
        if block_on(etcd.replace_topic(&meta, &changed))
            .map_err(|e| storage(e.to_string()))?
            .map_err(|e| storage(e.to_string()))?
        {
            settle(admin, |v| v.topics.get(name) == Some(&changed));
            return Ok(());
        }
        // Changed meanwhile (another admin): recompute on the new record.
        block_on(etcd.changed_or(Duration::from_millis(100)))
            .map_err(|e| storage(e.to_string()))?;
    }
    Err((
        codes::REASSIGNMENT_IN_PROGRESS,
        format!("topic {name} kept changing; try again"),
    ))
}

/// Changes the cluster-wide dynamic broker defaults to what `change` makes
/// of the current ones (by Kafka's broker names), validated as Kafka
/// validates them; with `validate_only`, nothing more. Single-node mode
/// writes them to the data directory and applies them; cluster mode agrees
/// them in etcd against the record they were computed from, and every
/// broker applies them as it syncs.
pub fn alter_broker_defaults(
    admin: TopicAdmin<'_>,
    change: impl Fn(
        &crate::log::config::broker_defaults::Layer,
    ) -> Result<crate::log::config::broker_defaults::Layer, Refusal>,
    validate_only: bool,
) -> Result<(), Refusal> {
    use crate::codes;
    let invalid = |e: String| (codes::INVALID_CONFIG, e);
    let storage = |e: String| (codes::KAFKA_STORAGE_ERROR, e);
    let Some(etcd) = admin.cluster.etcd() else {
        let new = change(&admin.logs.dynamic_defaults())?;
        admin.logs.check_dynamic_defaults(&new).map_err(invalid)?;
        if validate_only {
            return Ok(());
        }
        return admin.logs.set_dynamic_defaults(new).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidInput {
                invalid(e.to_string())
            } else {
                storage(e.to_string())
            }
        });
    };
    for _ in 0..5 {
        let old = etcd.view().broker_defaults.clone();
        let new = change(&old.clone().unwrap_or_default())?;
        admin.logs.check_dynamic_defaults(&new).map_err(invalid)?;
        if validate_only || old.as_ref() == Some(&new) {
            return Ok(());
        }
        if block_on(etcd.replace_broker_defaults(old.as_ref(), &new))
            .map_err(|e| storage(e.to_string()))?
            .map_err(|e| storage(e.to_string()))?
        {
            let until = Instant::now() + SETTLE;
            let _ = block_on(async {
                while etcd.view().broker_defaults.as_ref() != Some(&new) && Instant::now() < until {
                    etcd.changed_or(Duration::from_millis(100)).await;
                }
            });
            admin.logs.apply_dynamic_defaults(&new);
            return Ok(());
        }
        block_on(etcd.changed_or(Duration::from_millis(100)))
            .map_err(|e| storage(e.to_string()))?;
    }
    Err((
        codes::REASSIGNMENT_IN_PROGRESS,
        "the broker defaults kept changing; try again".into(),
    ))
}

/// Cluster mode: replaces the client quotas by `change(current)` with a
/// compare-and-swap in etcd (retried when another broker changed them
/// meanwhile), waits (bounded) until this broker's view has the new table,
/// and hands it to `apply`; validate_only (or no change) writes nothing.
/// Returns what `change` said of each entry.
pub fn alter_client_quotas<T>(
    etcd: &std::sync::Arc<super::etcd::Etcd>,
    change: impl Fn(&crate::quota::QuotaTable) -> (crate::quota::QuotaTable, T),
    apply: impl Fn(&crate::quota::QuotaTable),
    validate_only: bool,
) -> Result<T, Refusal> {
    use crate::codes;
    let storage = |e: String| (codes::KAFKA_STORAGE_ERROR, e);
    for _ in 0..5 {
        let old = etcd.view().client_quotas.clone();
        let (new, said) = change(&old.clone().unwrap_or_default());
        if validate_only || old.as_ref().unwrap_or(&Default::default()) == &new {
            return Ok(said);
        }
        if block_on(etcd.replace_client_quotas(old.as_ref(), &new))
            .map_err(|e| storage(e.to_string()))?
            .map_err(|e| storage(e.to_string()))?
        {
            let until = Instant::now() + SETTLE;
            let _ = block_on(async {
                while etcd.view().client_quotas.as_ref() != Some(&new) && Instant::now() < until {
                    etcd.changed_or(Duration::from_millis(100)).await;
                }
            });
            apply(&new);
            return Ok(said);
        }
        block_on(etcd.changed_or(Duration::from_millis(100)))
            .map_err(|e| storage(e.to_string()))?;
    }
    Err((
        codes::REASSIGNMENT_IN_PROGRESS,
        "the client quotas kept changing; try again".into(),
    ))
}
