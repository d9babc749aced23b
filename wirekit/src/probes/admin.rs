//! Administration over the wire: topics (CreateTopics, DeleteTopics,
//! CreatePartitions, Metadata), configs (DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs), DeleteRecords, the cluster's self-description
//! (DescribeCluster, DescribeLogDirs), ACLs without an authorizer, client
//! quotas, SCRAM credentials, leader election and reassignment on a single
//! node, and DescribeProducers. Error codes named in comments: 3
//! UNKNOWN_TOPIC_OR_PARTITION, 17 INVALID_TOPIC_EXCEPTION, 36
//! TOPIC_ALREADY_EXISTS, 37 INVALID_PARTITIONS, 38 INVALID_REPLICATION_FACTOR,
//! 40 INVALID_CONFIG, 42 INVALID_REQUEST, 54 SECURITY_DISABLED.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::Request;

use crate::ctx::{Ctx, s, topic};
use crate::kit::Probe;
use crate::records::Batch;

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "AD-01" => create_topics_validate_only_creates_nothing,
        "AD-02" => create_existing_topic_is_topic_already_exists,
        "AD-03" => invalid_topic_names_are_invalid_topic_exception,
        "AD-04" => partition_count_zero_is_invalid_and_minus_one_is_the_default,
        "AD-05" => replication_factor_beyond_the_brokers_is_invalid,
        "AD-06" => unknown_or_bad_topic_configs_are_invalid_config,
        "AD-07" => the_same_topic_twice_in_one_request_is_invalid_request,
        "AD-08" => create_topics_answer_carries_partitions_and_replication,
        "AD-09" => delete_unknown_topic_is_unknown_topic,
        "AD-10" => deleted_topic_leaves_metadata,
        "AD-11" => create_partitions_grows_but_never_shrinks,
        "AD-12" => create_partitions_validate_only_and_unknown_topic,
        "AD-13" => describe_topic_configs_values_and_sources,
        "AD-14" => describe_configs_of_unknown_topic,
        "AD-15" => describe_broker_configs_shared_defaults,
        "AD-16" => alter_configs_replaces_the_whole_set,
        "AD-17" => incremental_set_and_delete,
        "AD-18" => incremental_append_and_subtract_on_list_configs,
        "AD-19" => incremental_invalid_values_and_validate_only,
        "AD-20" => delete_records_moves_the_log_start,
        "AD-21" => describe_cluster_v0_one_broker,
        "AD-22" => metadata_all_topics_and_named,
        "AD-23" => metadata_unknown_topic_without_auto_creation,
        "AD-24" => metadata_auto_creates_unknown_topic,
        "AD-25" => metadata_lists_internal_offsets_topic,
        "AD-26" => describe_log_dirs_lists_partitions,
        "AD-27" => acl_apis_without_an_authorizer,
        "AD-28" => client_quotas_round_trip,
        "AD-29" => describe_scram_credentials_without_users,
        "AD-30" => elect_leaders_on_a_single_node,
        "AD-31" => partition_reassignments_on_a_single_node,
        "AD-32" => describe_producers_fresh_and_after_a_write,
        "AD-33" => delete_topics_by_id,
        "AD-34" => describe_configs_synonyms,
        "AD-35" => create_topics_with_manual_assignments,
        "AD-36" => metadata_by_topic_id,
    ]
}

/// A topic entry of CreateTopics.
fn creatable(name: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic(name))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
        )
}

/// CreateTopics v5 of `topics`: each result's error code, in answer order.
async fn create(
    c: &mut Ctx,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> anyhow::Result<Vec<i16>> {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(topics);
    let r = c.call(&req, 5).await?;
    Ok(r.topics.iter().map(|t| t.error_code).collect())
}

/// CreateTopics v5 of one topic: its error code.
async fn create_one(
    c: &mut Ctx,
    name: &str,
    partitions: i32,
    rf: i16,
    configs: &[(&str, &str)],
) -> anyhow::Result<i16> {
    let codes = create(c, vec![creatable(name, partitions, rf, configs)], false).await?;
    codes
        .first()
        .copied()
        .context("CreateTopics answered no topic")
}

/// Metadata v9 of the named topics (None: all topics).
async fn metadata(
    c: &mut Ctx,
    names: Option<&[&str]>,
    auto_create: bool,
) -> anyhow::Result<MetadataResponse> {
    let req = MetadataRequest::default()
        .with_topics(names.map(|ns| {
            ns.iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic(n))))
                .collect()
        }))
        .with_allow_auto_topic_creation(auto_create);
    c.call(&req, 9).await
}

/// Metadata of one topic: (error, partition count).
async fn topic_state(c: &mut Ctx, name: &str) -> anyhow::Result<(i16, usize)> {
    let r = metadata(c, Some(&[name]), false).await?;
    let t = r.topics.first().context("Metadata answered no topic")?;
    Ok((t.error_code, t.partitions.len()))
}

/// DescribeConfigs v4 of one resource (2 topic, 4 broker).
async fn describe(
    c: &mut Ctx,
    resource_type: i8,
    name: &str,
    keys: Option<&[&str]>,
) -> anyhow::Result<DescribeConfigsResult> {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(keys.map(|ks| ks.iter().map(|k| s(k)).collect())),
    ]);
    let r = c.call(&req, 4).await?;
    r.results
        .into_iter()
        .next()
        .context("DescribeConfigs answered no resource")
}

/// One topic config: "value (source n)", or "absent".
async fn topic_config(c: &mut Ctx, t: &str, key: &str) -> anyhow::Result<String> {
    let r = describe(c, 2, t, Some(&[key])).await?;
    Ok(r.configs
        .iter()
        .find(|x| x.name.as_str() == key)
        .map_or_else(
            || "absent".to_owned(),
            |x| {
                format!(
                    "{} (source {})",
                    x.value.as_ref().map_or("null", |v| v.as_str()),
                    x.config_source
                )
            },
        ))
}

/// A topic config once a change has applied: Kafka applies config changes
/// through its metadata log, so a DescribeConfigs right after a successful
/// alter may still see the old value. Polls (at most 5 s) until it reads
/// `want`, then returns what it reads (another value is an observation).
async fn settled(c: &mut Ctx, t: &str, key: &str, want: &str) -> anyhow::Result<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let v = topic_config(c, t, key).await?;
        if v == want || std::time::Instant::now() >= deadline {
            return Ok(v);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calls `req`; an error (the broker closed the connection, or an answer
/// that does not decode) is recorded as "closed" and the connection renewed.
async fn call_or_closed<R: Request>(
    c: &mut Ctx,
    req: &R,
    version: i16,
) -> anyhow::Result<Option<R::Response>> {
    match c.call(req, version).await {
        Ok(r) => Ok(Some(r)),
        Err(_) => {
            c.reconnect().await?;
            Ok(None)
        }
    }
}

/// A node id of the cluster (not observed: only sent back).
async fn some_node(c: &mut Ctx) -> anyhow::Result<i32> {
    let r = metadata(c, Some(&[]), false).await?;
    Ok(r.brokers
        .first()
        .context("Metadata lists no broker")?
        .node_id
        .0)
}

async fn create_topics_validate_only_creates_nothing(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let codes = create(
        c,
        vec![creatable(&t, 3, 1, &[("cleanup.policy", "compact")])],
        true,
    )
    .await?;
    c.see("validate_only error", format!("{codes:?}"));
    let (code, _) = topic_state(c, &t).await?;
    c.see("metadata after validate_only", code);
    let codes = create(
        c,
        vec![creatable(&t, 3, 1, &[("cleanup.policy", "nonsense")])],
        true,
    )
    .await?;
    c.see("validate_only bad config", format!("{codes:?}"));
    let codes = create(c, vec![creatable(&t, 0, 1, &[])], true).await?;
    c.see("validate_only zero partitions", format!("{codes:?}"));
    Ok(())
}

async fn create_existing_topic_is_topic_already_exists(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let v = create_one(c, &t, 1, 1, &[]).await?;
    c.see("again", v);
    let v = create_one(c, &t, 4, 1, &[]).await?;
    c.see("again with other partitions", v);
    let codes = create(c, vec![creatable(&t, 1, 1, &[])], true).await?;
    c.see("again validate_only", format!("{codes:?}"));
    Ok(())
}

async fn invalid_topic_names_are_invalid_topic_exception(c: &mut Ctx) -> anyhow::Result<()> {
    let base = c.name("n");
    let long_ok = format!("{base}{}", "x".repeat(249 - base.len()));
    let too_long = format!("{long_ok}x");
    let cases = [
        ("space", format!("{base} x")),
        ("slash", format!("{base}/x")),
        ("colon", format!("{base}:x")),
        ("dot", ".".to_owned()),
        ("dotdot", "..".to_owned()),
        ("empty", String::new()),
        ("250 chars", too_long),
        ("249 chars", long_ok),
        ("dots and dashes", format!("{base}.a_b-c")),
    ];
    for (what, name) in cases {
        let code = create_one(c, &name, 1, 1, &[]).await?;
        c.see(format!("name {what}"), code);
    }
    Ok(())
}

async fn partition_count_zero_is_invalid_and_minus_one_is_the_default(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let t = c.name("t");
    let v = create_one(c, &t, 0, 1, &[]).await?;
    c.see("partitions 0", v);
    let v = create_one(c, &t, -2, 1, &[]).await?;
    c.see("partitions -2", v);
    let d = c.name("d");
    let v = create_one(c, &d, -1, -1, &[]).await?;
    c.see("partitions -1 rf -1", v);
    c.wait_until(Duration::from_secs(10), "default topic listed", async |c| {
        let (code, n) = topic_state(c, &d).await?;
        Ok((code == 0 && n > 0).then_some(()))
    })
    .await?;
    let (code, n) = topic_state(c, &d).await?;
    c.see(
        "default topic metadata",
        format!("error={code} partitions={n}"),
    );
    Ok(())
}

async fn replication_factor_beyond_the_brokers_is_invalid(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let v = create_one(c, &t, 1, 3, &[]).await?;
    c.see("rf 3", v);
    let v = create_one(c, &t, 1, 0, &[]).await?;
    c.see("rf 0", v);
    let v = create_one(c, &t, 1, -2, &[]).await?;
    c.see("rf -2", v);
    let codes = create(c, vec![creatable(&t, 1, 2, &[])], true).await?;
    c.see("rf 2 validate_only", format!("{codes:?}"));
    let v = topic_state(c, &t).await?.0;
    c.see("metadata after", v);
    Ok(())
}

async fn unknown_or_bad_topic_configs_are_invalid_config(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let cases: [(&str, &str, &str); 5] = [
        ("unknown key", "no.such.config", "1"),
        ("cleanup.policy bogus", "cleanup.policy", "bogus"),
        ("retention.ms not a number", "retention.ms", "abc"),
        ("min.insync.replicas 0", "min.insync.replicas", "0"),
        ("compression.type bogus", "compression.type", "bogus"),
    ];
    for (what, k, v) in cases {
        let v = create_one(c, &t, 1, 1, &[(k, v)]).await?;
        c.see(what, v);
    }
    let v = topic_state(c, &t).await?.0;
    c.see("metadata after", v);
    Ok(())
}

async fn the_same_topic_twice_in_one_request_is_invalid_request(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    let other = c.name("o");
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            creatable(&t, 1, 1, &[]),
            creatable(&t, 2, 1, &[]),
            creatable(&other, 1, 1, &[]),
        ]);
    let r = c.call(&req, 5).await?;
    let codes_of = |n: &str| {
        r.topics
            .iter()
            .filter(|x| x.name.0.as_str() == n)
            .map(|x| x.error_code)
            .collect::<Vec<_>>()
    };
    c.see("results", r.topics.len());
    c.see("duplicated name's results", format!("{:?}", codes_of(&t)));
    c.see("other name's results", format!("{:?}", codes_of(&other)));
    let v = topic_state(c, &t).await?.0;
    c.see("duplicate's metadata", v);
    c.wait_until(
        Duration::from_secs(10),
        "the other topic listed",
        async |c| Ok((topic_state(c, &other).await?.0 == 0).then_some(())),
    )
    .await?;
    c.see("other topic created", true);
    Ok(())
}

async fn create_topics_answer_carries_partitions_and_replication(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let t = c.name("t");
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![creatable(
            &t,
            3,
            1,
            &[("cleanup.policy", "compact"), ("retention.ms", "12345")],
        )]);
    let r = c.call(&req, 5).await?;
    let x = r.topics.first().context("CreateTopics answered no topic")?;
    c.see("error", x.error_code);
    c.see("name echoed", x.name.0.as_str() == t);
    c.see("partitions", x.num_partitions);
    c.see("replication factor", x.replication_factor);
    c.see("topic config error", x.topic_config_error_code);
    let configs = x.configs.as_deref().unwrap_or_default();
    c.see("configs listed", !configs.is_empty());
    for key in ["cleanup.policy", "retention.ms"] {
        let v = configs.iter().find(|k| k.name.as_str() == key).map_or_else(
            || "absent".to_owned(),
            |k| {
                format!(
                    "{} (source {})",
                    k.value.as_ref().map_or("null", |v| v.as_str()),
                    k.config_source
                )
            },
        );
        c.see(format!("config {key}"), v);
    }
    Ok(())
}

async fn delete_topics(c: &mut Ctx, names: &[&str]) -> anyhow::Result<Vec<i16>> {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(names.iter().map(|n| topic(n)).collect::<Vec<TopicName>>());
    let r = c.call(&req, 4).await?;
    Ok(r.responses.iter().map(|x| x.error_code).collect())
}

async fn delete_unknown_topic_is_unknown_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("never");
    let v = format!("{:?}", delete_topics(c, &[&t]).await?);
    c.see("delete unknown", v);
    Ok(())
}

async fn deleted_topic_leaves_metadata(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let v = format!("{:?}", delete_topics(c, &[&t]).await?);
    c.see("delete", v);
    let code = c
        .wait_until(
            Duration::from_secs(10),
            "topic gone from metadata",
            async |c| {
                let (code, _) = topic_state(c, &t).await?;
                Ok((code != 0).then_some(code))
            },
        )
        .await?;
    c.see("metadata after delete", code);
    let v = format!("{:?}", delete_topics(c, &[&t]).await?);
    c.see("delete again", v);
    Ok(())
}

async fn create_partitions(
    c: &mut Ctx,
    t: &str,
    count: i32,
    validate_only: bool,
) -> anyhow::Result<i16> {
    let req = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(topic(t))
                .with_count(count)
                .with_assignments(None),
        ]);
    let r = c.call(&req, 2).await?;
    Ok(r.results
        .first()
        .context("CreatePartitions answered no topic")?
        .error_code)
}

async fn create_partitions_grows_but_never_shrinks(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let v = create_partitions(c, &t, 3, false).await?;
    c.see("1 -> 3", v);
    c.wait_for_leaders(&t, 3).await?;
    let v = topic_state(c, &t).await?.1;
    c.see("partitions now", v);
    let v = create_partitions(c, &t, 2, false).await?;
    c.see("3 -> 2", v);
    let v = create_partitions(c, &t, 3, false).await?;
    c.see("3 -> 3", v);
    let v = topic_state(c, &t).await?.1;
    c.see("partitions after", v);
    Ok(())
}

async fn create_partitions_validate_only_and_unknown_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let v = create_partitions(c, &t, 5, true).await?;
    c.see("validate_only 2 -> 5", v);
    let v = topic_state(c, &t).await?.1;
    c.see("partitions after validate_only", v);
    let v = create_partitions(c, &t, 1, true).await?;
    c.see("validate_only 2 -> 1", v);
    let u = c.name("never");
    let v = create_partitions(c, &u, 2, false).await?;
    c.see("unknown topic", v);
    Ok(())
}

async fn describe_topic_configs_values_and_sources(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(
        &t,
        1,
        &[("cleanup.policy", "compact"), ("retention.ms", "3600000")],
    )
    .await?;
    let keys = [
        "cleanup.policy",
        "retention.ms",
        "max.message.bytes",
        "min.insync.replicas",
        "compression.type",
        "message.timestamp.type",
        "min.compaction.lag.ms",
        "unclean.leader.election.enable",
    ];
    let r = describe(c, 2, &t, Some(&keys)).await?;
    c.see("error", r.error_code);
    c.see("resource name echoed", r.resource_name.as_str() == t);
    for k in keys {
        let v = r.configs.iter().find(|x| x.name.as_str() == k).map_or_else(
            || "absent".to_owned(),
            |x| {
                format!(
                    "{} (source {}, read_only {}, sensitive {})",
                    x.value.as_ref().map_or("null", |v| v.as_str()),
                    x.config_source,
                    x.read_only,
                    x.is_sensitive
                )
            },
        );
        c.see(format!("config {k}"), v);
    }
    let all = describe(c, 2, &t, None).await?;
    c.see("all keys: error", all.error_code);
    c.see("all keys: more than 20", all.configs.len() > 20);
    Ok(())
}

async fn describe_configs_of_unknown_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("never");
    let r = describe(c, 2, &t, None).await?;
    c.see("error", r.error_code);
    c.see("configs", r.configs.len());
    let r = describe(c, 2, "", None).await?;
    c.see("empty name: error", r.error_code);
    Ok(())
}

async fn describe_broker_configs_shared_defaults(c: &mut Ctx) -> anyhow::Result<()> {
    let node = some_node(c).await?;
    let keys = [
        "log.retention.hours",
        "num.partitions",
        "default.replication.factor",
        "message.max.bytes",
        "auto.create.topics.enable",
        "log.cleanup.policy",
    ];
    let r = describe(c, 4, &node.to_string(), Some(&keys)).await?;
    c.see("error", r.error_code);
    for k in keys {
        let v = r.configs.iter().find(|x| x.name.as_str() == k).map_or_else(
            || "absent".to_owned(),
            |x| x.value.as_ref().map_or("null", |v| v.as_str()).to_owned(),
        );
        c.see(format!("broker {k}"), v);
    }
    Ok(())
}

async fn alter_configs(
    c: &mut Ctx,
    t: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> anyhow::Result<i16> {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let req = AlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(t))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_value(Some(s(v)))
                        })
                        .collect(),
                ),
        ]);
    let r = c.call(&req, 1).await?;
    Ok(r.responses
        .first()
        .context("AlterConfigs answered no resource")?
        .error_code)
}

async fn alter_configs_replaces_the_whole_set(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[("cleanup.policy", "compact")])
        .await?;
    let v = alter_configs(c, &t, &[("retention.ms", "7200000")], false).await?;
    c.see("set retention.ms", v);
    let v = settled(c, &t, "retention.ms", "7200000 (source 1)").await?;
    c.see("retention.ms", v);
    let v = settled(c, &t, "cleanup.policy", "delete (source 5)").await?;
    c.see("cleanup.policy (dropped by replace)", v);
    let v = alter_configs(c, &t, &[("retention.ms", "abc")], false).await?;
    c.see("invalid value", v);
    let v = alter_configs(c, &t, &[("no.such.config", "1")], false).await?;
    c.see("unknown key", v);
    let v = alter_configs(c, &t, &[("retention.ms", "1000")], true).await?;
    c.see("validate_only", v);
    let v = topic_config(c, &t, "retention.ms").await?;
    c.see("retention.ms after", v);
    let u = c.name("never");
    let v = alter_configs(c, &u, &[("retention.ms", "1000")], false).await?;
    c.see("unknown topic", v);
    let v = alter_configs(c, &t, &[], false).await?;
    c.see("empty set", v);
    let v = settled(c, &t, "retention.ms", "604800000 (source 5)").await?;
    c.see("retention.ms after empty set", v);
    Ok(())
}

/// IncrementalAlterConfigs v0 of one topic: ops (name, op, value); its error.
async fn incremental(
    c: &mut Ctx,
    t: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> anyhow::Result<i16> {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(t))
                .with_configs(
                    ops.iter()
                        .map(|(k, op, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_config_operation(*op)
                                .with_value(v.map(s))
                        })
                        .collect(),
                ),
        ]);
    let r = c.call(&req, 0).await?;
    Ok(r.responses
        .first()
        .context("IncrementalAlterConfigs answered no resource")?
        .error_code)
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn incremental_set_and_delete(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[("cleanup.policy", "compact")])
        .await?;
    let v = incremental(c, &t, &[("retention.ms", SET, Some("7200000"))], false).await?;
    c.see("set retention.ms", v);
    let v = settled(c, &t, "retention.ms", "7200000 (source 1)").await?;
    c.see("retention.ms", v);
    let v = topic_config(c, &t, "cleanup.policy").await?;
    c.see("cleanup.policy kept", v);
    let v = incremental(c, &t, &[("retention.ms", DELETE, None)], false).await?;
    c.see("delete retention.ms", v);
    let v = settled(c, &t, "retention.ms", "604800000 (source 5)").await?;
    c.see("retention.ms after delete", v);
    let v = incremental(c, &t, &[("segment.ms", DELETE, None)], false).await?;
    c.see("delete unset key", v);
    let v = incremental(c, &t, &[("retention.ms", 9, Some("1"))], false).await?;
    c.see("unknown op 9", v);
    Ok(())
}

async fn incremental_append_and_subtract_on_list_configs(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[("cleanup.policy", "delete")])
        .await?;
    let v = incremental(c, &t, &[("cleanup.policy", APPEND, Some("compact"))], false).await?;
    c.see("append compact", v);
    let v = settled(c, &t, "cleanup.policy", "delete,compact (source 1)").await?;
    c.see("after append", v);
    let v = incremental(c, &t, &[("cleanup.policy", APPEND, Some("compact"))], false).await?;
    c.see("append compact again", v);
    let v = settled(c, &t, "cleanup.policy", "delete,compact (source 1)").await?;
    c.see("after second append", v);
    let v = incremental(
        c,
        &t,
        &[("cleanup.policy", SUBTRACT, Some("delete"))],
        false,
    )
    .await?;
    c.see("subtract delete", v);
    let v = settled(c, &t, "cleanup.policy", "compact (source 1)").await?;
    c.see("after subtract", v);
    let v = incremental(
        c,
        &t,
        &[("cleanup.policy", SUBTRACT, Some("delete"))],
        false,
    )
    .await?;
    c.see("subtract absent", v);
    let v = settled(c, &t, "cleanup.policy", "compact (source 1)").await?;
    c.see("after subtract absent", v);
    let v = incremental(c, &t, &[("retention.ms", APPEND, Some("5"))], false).await?;
    c.see("append to a non-list", v);
    Ok(())
}

async fn incremental_invalid_values_and_validate_only(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let v = incremental(c, &t, &[("retention.ms", SET, Some("abc"))], false).await?;
    c.see("invalid value", v);
    let v = incremental(c, &t, &[("no.such.config", SET, Some("1"))], false).await?;
    c.see("unknown key", v);
    let v = incremental(c, &t, &[("cleanup.policy", SET, Some("bogus"))], false).await?;
    c.see("bad cleanup.policy", v);
    let v = incremental(c, &t, &[("retention.ms", SET, Some("1000"))], true).await?;
    c.see("validate_only", v);
    let v = topic_config(c, &t, "retention.ms").await?;
    c.see("retention.ms after validate_only", v);
    let u = c.name("never");
    let v = incremental(c, &u, &[("retention.ms", SET, Some("1000"))], false).await?;
    c.see("unknown topic", v);
    let twice = incremental(
        c,
        &t,
        &[
            ("retention.ms", SET, Some("1000")),
            ("retention.ms", SET, Some("2000")),
        ],
        false,
    )
    .await?;
    c.see("same key twice", twice);
    Ok(())
}

/// Writes `n` records to partition 0 of `t` as a new idempotent producer.
async fn write(c: &mut Ctx, t: &str, n: usize) -> anyhow::Result<i64> {
    let (pid, epoch) = c.idempotent_producer().await?;
    let batch = Batch::values(n).idempotent(pid, epoch, 0).encode()?;
    // A partition just created may not be led yet (NOT_LEADER_OR_FOLLOWER).
    let code = c
        .wait_until(
            Duration::from_secs(10),
            "a leader takes the write",
            async |c| {
                let p = c.produce(t, 0, batch.clone(), 7).await?;
                Ok((p.error_code != 6).then_some(p.error_code))
            },
        )
        .await?;
    ensure!(code == 0, "produce: error {code}");
    Ok(pid)
}

async fn delete_records(c: &mut Ctx, t: &str, offset: i64) -> anyhow::Result<(i16, i64)> {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(offset),
                ]),
        ]);
    let r = c.call(&req, 2).await?;
    let p = r
        .topics
        .first()
        .and_then(|x| x.partitions.first())
        .context("DeleteRecords answered no partition")?;
    Ok((p.error_code, p.low_watermark))
}

async fn delete_records_moves_the_log_start(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    write(c, &t, 5).await?;
    let (code, low) = delete_records(c, &t, 2).await?;
    c.see("delete before 2", format!("error={code} low={low}"));
    let (code, low) = delete_records(c, &t, 1).await?;
    c.see(
        "delete before 1 (below start)",
        format!("error={code} low={low}"),
    );
    let (code, _) = delete_records(c, &t, 6).await?;
    c.see("delete before 6 (above hw)", code);
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see(
        "fetch 0",
        format!("error={} log_start={}", f.error_code, f.log_start_offset),
    );
    let f = c.fetch(&t, 0, 2, 0).await?;
    c.see(
        "fetch 2",
        format!(
            "error={} log_start={} hw={}",
            f.error_code, f.log_start_offset, f.high_watermark
        ),
    );
    let (code, low) = delete_records(c, &t, -1).await?;
    c.see("delete before -1 (hw)", format!("error={code} low={low}"));
    let u = c.name("never");
    let v = delete_records(c, &u, 0).await?.0;
    c.see("unknown topic", v);
    Ok(())
}

async fn describe_cluster_v0_one_broker(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::DescribeClusterRequest;
    let r = c.call(&DescribeClusterRequest::default(), 0).await?;
    c.see("error", r.error_code);
    c.see("brokers", r.brokers.len());
    c.see("cluster id set", !r.cluster_id.is_empty());
    c.see(
        "controller is a listed broker",
        r.brokers.iter().any(|b| b.broker_id == r.controller_id),
    );
    c.see("authorized operations", r.cluster_authorized_operations);
    Ok(())
}

async fn metadata_all_topics_and_named(c: &mut Ctx) -> anyhow::Result<()> {
    let a = c.name("a");
    let b = c.name("b");
    c.create_topic(&a, 2, &[]).await?;
    c.create_topic(&b, 1, &[]).await?;
    let all = metadata(c, None, false).await?;
    let listed = |r: &MetadataResponse, n: &str| {
        r.topics
            .iter()
            .any(|t| t.name.as_ref().is_some_and(|x| x.0.as_str() == n))
    };
    c.see("all: lists a", listed(&all, &a));
    c.see("all: lists b", listed(&all, &b));
    c.see("all: brokers", all.brokers.len());
    let named = metadata(c, Some(&[&a]), false).await?;
    c.see("named: topics", named.topics.len());
    c.see("named: lists b", listed(&named, &b));
    let t = named.topics.first().context("no topic")?;
    let mut parts: Vec<_> = t
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.replica_nodes.len(),
                p.isr_nodes.len(),
            )
        })
        .collect();
    parts.sort_unstable();
    c.see(
        "named: partitions (index, error, replicas, isr)",
        format!("{parts:?}"),
    );
    c.see("named: internal", t.is_internal);
    c.see(
        "named: leaders listed as brokers",
        t.partitions
            .iter()
            .all(|p| named.brokers.iter().any(|b| b.node_id == p.leader_id)),
    );
    let none = metadata(c, Some(&[]), false).await?;
    c.see("empty list: topics", none.topics.len());
    Ok(())
}

async fn metadata_unknown_topic_without_auto_creation(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("never");
    let r = metadata(c, Some(&[&t]), false).await?;
    let x = r.topics.first().context("no topic")?;
    c.see("error", x.error_code);
    c.see("partitions", x.partitions.len());
    let v = topic_state(c, &t).await?.0;
    c.see("still unknown", v);
    let r = metadata(c, Some(&["bad name!"]), true).await?;
    c.see(
        "invalid name with auto-creation",
        r.topics.first().map_or(-1, |x| x.error_code),
    );
    Ok(())
}

async fn metadata_auto_creates_unknown_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("auto");
    let r = metadata(c, Some(&[&t]), true).await?;
    let first = r.topics.first().context("no topic")?.error_code;
    c.see("first answer", first);
    c.wait_until(
        Duration::from_secs(10),
        "auto-created topic listed",
        async |c| {
            let (code, n) = topic_state(c, &t).await?;
            Ok((code == 0 && n > 0).then_some(()))
        },
    )
    .await?;
    let (code, n) = topic_state(c, &t).await?;
    c.see("later", format!("error={code} partitions={n}"));
    Ok(())
}

async fn metadata_lists_internal_offsets_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let all = metadata(c, None, false).await?;
    let off = all.topics.iter().find(|t| {
        t.name
            .as_ref()
            .is_some_and(|n| n.0.as_str() == "__consumer_offsets")
    });
    c.see("all: __consumer_offsets listed", off.is_some());
    c.see(
        "all: __consumer_offsets internal",
        off.is_some_and(|t| t.is_internal),
    );
    let named = metadata(c, Some(&["__consumer_offsets"]), false).await?;
    let t = named.topics.first().context("no topic")?;
    c.see("named: error", t.error_code);
    c.see("named: internal", t.is_internal);
    c.see("named: has partitions", !t.partitions.is_empty());
    Ok(())
}

async fn describe_log_dirs_lists_partitions(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::DescribeLogDirsRequest;
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    write(c, &t, 3).await?;
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default()
            .with_topic(topic(&t))
            .with_partitions(vec![0, 1]),
    ]));
    // A partition's log may appear a moment after its creation: wait (at
    // most 5 s) until both are listed.
    let mut r = c.call(&req, 2).await?;
    for _ in 0..100 {
        let listed: usize = r
            .results
            .iter()
            .flat_map(|d| d.topics.iter().filter(|x| x.name.0.as_str() == t))
            .map(|x| x.partitions.len())
            .sum();
        if listed >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        r = c.call(&req, 2).await?;
    }
    c.see("dirs", r.results.len());
    for d in &r.results {
        c.see("dir error", d.error_code);
        let mut parts: Vec<_> = d
            .topics
            .iter()
            .filter(|x| x.name.0.as_str() == t)
            .flat_map(|x| {
                x.partitions.iter().map(|p| {
                    (
                        p.partition_index,
                        p.partition_size > 0,
                        p.offset_lag,
                        p.is_future_key,
                    )
                })
            })
            .collect();
        parts.sort_unstable();
        c.see(
            "partitions (index, size > 0, lag, future)",
            format!("{parts:?}"),
        );
        c.see(
            "other topics",
            d.topics.iter().filter(|x| x.name.0.as_str() != t).count(),
        );
    }
    Ok(())
}

async fn acl_apis_without_an_authorizer(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
    let t = c.name("t");
    // Any resource (1), any pattern (1), any operation (1), any permission (1).
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    match call_or_closed(c, &req, 2).await? {
        Some(r) => {
            c.see("describe", r.error_code);
            c.see("describe: message set", r.error_message.is_some());
            c.see("describe: resources", r.resources.len());
        }
        None => c.see("describe", "closed"),
    }
    // Allow (3) Read (3) on a literal (3) topic (2).
    let req = CreateAclsRequest::default().with_creations(vec![
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s(&t))
            .with_resource_pattern_type(3)
            .with_principal(s("User:wirekit"))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3),
    ]);
    match call_or_closed(c, &req, 2).await? {
        Some(r) => c.see(
            "create",
            format!(
                "{:?}",
                r.results.iter().map(|x| x.error_code).collect::<Vec<_>>()
            ),
        ),
        None => c.see("create", "closed"),
    }
    let req = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(s(&t)))
            .with_pattern_type_filter(3)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    match call_or_closed(c, &req, 2).await? {
        Some(r) => c.see(
            "delete",
            format!(
                "{:?}",
                r.filter_results
                    .iter()
                    .map(|x| x.error_code)
                    .collect::<Vec<_>>()
            ),
        ),
        None => c.see("delete", "closed"),
    }
    Ok(())
}

async fn client_quotas_round_trip(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    use kafka_protocol::messages::{
        AlterClientQuotasRequest, DescribeClientQuotasRequest, alter_client_quotas_request as acq,
    };
    let client = c.name("client");
    let entity = || {
        vec![
            acq::EntityData::default()
                .with_entity_type(s("client-id"))
                .with_entity_name(Some(s(&client))),
        ]
    };
    let alter = |ops: Vec<acq::OpData>, validate_only: bool| {
        AlterClientQuotasRequest::default()
            .with_validate_only(validate_only)
            .with_entries(vec![
                acq::EntryData::default()
                    .with_entity(entity())
                    .with_ops(ops),
            ])
    };
    let set = acq::OpData::default()
        .with_key(s("producer_byte_rate"))
        .with_value(1024.0);
    let describe = DescribeClientQuotasRequest::default()
        .with_strict(true)
        .with_components(vec![
            // match_type 0: exactly this name.
            ComponentData::default()
                .with_entity_type(s("client-id"))
                .with_match_type(0)
                .with_match(Some(s(&client))),
        ]);
    let shown = async |c: &mut Ctx| -> anyhow::Result<String> {
        let r = c.call(&describe, 1).await?;
        let entries = r.entries.unwrap_or_default();
        let mut vals: Vec<String> = entries
            .iter()
            .flat_map(|e| {
                e.values
                    .iter()
                    .map(|v| format!("{}={}", v.key.as_str(), v.value))
            })
            .collect();
        vals.sort();
        Ok(format!(
            "error={} entries={} values={vals:?}",
            r.error_code,
            entries.len()
        ))
    };
    let codes = |r: kafka_protocol::messages::AlterClientQuotasResponse| {
        format!(
            "{:?}",
            r.entries.iter().map(|e| e.error_code).collect::<Vec<_>>()
        )
    };
    let r = c.call(&alter(vec![set.clone()], true), 1).await?;
    c.see("validate_only set", codes(r));
    let v = shown(c).await?;
    c.see("after validate_only", v);
    let r = c.call(&alter(vec![set.clone()], false), 1).await?;
    c.see("set", codes(r));
    let v = c
        .wait_until(Duration::from_secs(10), "quota visible", async |c| {
            let v = shown(c).await?;
            Ok(v.contains("producer_byte_rate").then_some(v))
        })
        .await?;
    c.see("after set", v);
    let bad = acq::OpData::default()
        .with_key(s("no_such_quota"))
        .with_value(1.0);
    let r = c.call(&alter(vec![bad], false), 1).await?;
    c.see("unknown key", codes(r));
    let remove = acq::OpData::default()
        .with_key(s("producer_byte_rate"))
        .with_remove(true);
    let r = c.call(&alter(vec![remove], false), 1).await?;
    c.see("remove", codes(r));
    let v = c
        .wait_until(Duration::from_secs(10), "quota gone", async |c| {
            let v = shown(c).await?;
            Ok((!v.contains("producer_byte_rate")).then_some(v))
        })
        .await?;
    c.see("after remove", v);
    Ok(())
}

async fn describe_scram_credentials_without_users(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::DescribeUserScramCredentialsRequest;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    let user = c.name("nobody");
    let req = DescribeUserScramCredentialsRequest::default()
        .with_users(Some(vec![UserName::default().with_name(s(&user))]));
    match call_or_closed(c, &req, 0).await? {
        Some(r) => {
            c.see("named: error", r.error_code);
            c.see(
                "named: results",
                format!(
                    "{:?}",
                    r.results
                        .iter()
                        .map(|x| (
                            x.user.as_str() == user,
                            x.error_code,
                            x.credential_infos.len()
                        ))
                        .collect::<Vec<_>>()
                ),
            );
        }
        None => c.see("named", "closed"),
    }
    let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        UserName::default().with_name(s(&user)),
        UserName::default().with_name(s(&user)),
    ]));
    match call_or_closed(c, &req, 0).await? {
        Some(r) => {
            c.see("duplicate: error", r.error_code);
            c.see(
                "duplicate: results",
                format!(
                    "{:?}",
                    r.results.iter().map(|x| x.error_code).collect::<Vec<_>>()
                ),
            );
        }
        None => c.see("duplicate", "closed"),
    }
    Ok(())
}

async fn elect_leaders_on_a_single_node(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::ElectLeadersRequest;
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let u = c.name("never");
    for (what, name) in [("preferred", &t), ("unknown topic", &u)] {
        let req = ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(10_000)
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic(topic(name))
                    .with_partitions(vec![0]),
            ]));
        match call_or_closed(c, &req, 1).await? {
            Some(r) => {
                let codes: Vec<_> = r
                    .replica_election_results
                    .iter()
                    .flat_map(|x| x.partition_result.iter().map(|p| p.error_code))
                    .collect();
                c.see(what, format!("error={} partitions={codes:?}", r.error_code));
            }
            None => c.see(what, "closed"),
        }
    }
    Ok(())
}

async fn partition_reassignments_on_a_single_node(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{
        AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest,
    };
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let node = some_node(c).await?;
    let req = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(None);
    match call_or_closed(c, &req, 0).await? {
        Some(r) => c.see(
            "list",
            format!(
                "error={} ours={}",
                r.error_code,
                r.topics.iter().filter(|x| x.name.0.as_str() == t).count()
            ),
        ),
        None => c.see("list", "closed"),
    }
    for (what, replicas) in [
        ("same replica", Some(vec![BrokerId(node)])),
        ("cancel none", None),
        ("absent broker", Some(vec![BrokerId(node + 1000)])),
    ] {
        let req = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![
                ReassignableTopic::default()
                    .with_name(topic(&t))
                    .with_partitions(vec![
                        ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(replicas),
                    ]),
            ]);
        match call_or_closed(c, &req, 0).await? {
            Some(r) => {
                let codes: Vec<_> = r
                    .responses
                    .iter()
                    .flat_map(|x| x.partitions.iter().map(|p| p.error_code))
                    .collect();
                c.see(what, format!("error={} partitions={codes:?}", r.error_code));
            }
            None => c.see(what, "closed"),
        }
    }
    Ok(())
}

async fn describe_producers_fresh_and_after_a_write(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::DescribeProducersRequest;
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(topic(&t))
            .with_partition_indexes(vec![0, 5]),
    ]);
    let show = async |c: &mut Ctx, pid: i64| -> anyhow::Result<Vec<String>> {
        let r = c.call(&req, 0).await?;
        let mut out: Vec<String> = r
            .topics
            .iter()
            .flat_map(|x| {
                x.partitions.iter().map(|p| {
                    let prods: Vec<_> = p
                        .active_producers
                        .iter()
                        .map(|a| {
                            format!(
                                "ours={} epoch={} last_seq={} txn_start={}",
                                a.producer_id.0 == pid,
                                a.producer_epoch,
                                a.last_sequence,
                                a.current_txn_start_offset
                            )
                        })
                        .collect();
                    format!(
                        "p{} error={} producers={prods:?}",
                        p.partition_index, p.error_code
                    )
                })
            })
            .collect();
        out.sort();
        Ok(out)
    };
    // A partition just created may not be led yet (NOT_LEADER_OR_FOLLOWER).
    let fresh = c
        .wait_until(Duration::from_secs(10), "partition 0 led", async |c| {
            let lines = show(c, -1).await?;
            Ok((!lines.iter().any(|l| l.starts_with("p0 error=6"))).then_some(lines))
        })
        .await?;
    for (i, line) in fresh.into_iter().enumerate() {
        c.see(format!("fresh {i}"), line);
    }
    let pid = write(c, &t, 3).await?;
    for (i, line) in show(c, pid).await?.into_iter().enumerate() {
        c.see(format!("after write {i}"), line);
    }
    Ok(())
}

async fn delete_topics_by_id(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let r = metadata_v12(c, &t).await?;
    let x = r.topics.first().context("no topic")?;
    let id = x.topic_id;
    c.see("metadata v12 gives an id", !id.is_nil());
    let delete = async |c: &mut Ctx, state: DeleteTopicState| -> anyhow::Result<String> {
        let req = DeleteTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![state]);
        let r = c.call(&req, 6).await?;
        Ok(format!(
            "{:?}",
            r.responses
                .iter()
                .map(|x| (x.error_code, x.topic_id == id))
                .collect::<Vec<_>>()
        ))
    };
    let v = delete(
        c,
        DeleteTopicState::default()
            .with_name(Some(topic(&t)))
            .with_topic_id(id),
    )
    .await?;
    c.see("name and id both set (error, id echoed)", v);
    let v = delete(c, DeleteTopicState::default().with_topic_id(id)).await?;
    c.see("by id (error, id echoed)", v);
    let code = c
        .wait_until(Duration::from_secs(10), "topic gone", async |c| {
            let (code, _) = topic_state(c, &t).await?;
            Ok((code != 0).then_some(code))
        })
        .await?;
    c.see("metadata after", code);
    let v = delete(c, DeleteTopicState::default().with_topic_id(id)).await?;
    c.see("same id again (error, id echoed)", v);
    let v = delete(c, DeleteTopicState::default()).await?;
    c.see("neither name nor id", v);
    Ok(())
}

/// Metadata v12 of one topic by name.
async fn metadata_v12(c: &mut Ctx, name: &str) -> anyhow::Result<MetadataResponse> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic(name))),
        ]))
        .with_allow_auto_topic_creation(false);
    c.call(&req, 12).await
}

async fn describe_configs_synonyms(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[("retention.ms", "3600000")])
        .await?;
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(&t))
                .with_configuration_keys(Some(vec![s("retention.ms"), s("cleanup.policy")])),
        ]);
    let r = c.call(&req, 4).await?;
    let x = r.results.first().context("no resource")?;
    c.see("error", x.error_code);
    let mut configs: Vec<_> = x.configs.iter().collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    for k in configs {
        let syn: Vec<_> = k
            .synonyms
            .iter()
            .map(|y| {
                format!(
                    "{}={} ({})",
                    y.name.as_str(),
                    y.value.as_ref().map_or("null", |v| v.as_str()),
                    y.source
                )
            })
            .collect();
        c.see(format!("{} synonyms", k.name.as_str()), format!("{syn:?}"));
        c.see(format!("{} type", k.name.as_str()), k.config_type);
    }
    Ok(())
}

async fn create_topics_with_manual_assignments(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
    let node = some_node(c).await?;
    let assign = |n: &[(i32, i32)]| {
        n.iter()
            .map(|&(p, b)| {
                CreatableReplicaAssignment::default()
                    .with_partition_index(p)
                    .with_broker_ids(vec![BrokerId(b)])
            })
            .collect::<Vec<_>>()
    };
    let t = c.name("t");
    let codes = create(
        c,
        vec![creatable(&t, -1, -1, &[]).with_assignments(assign(&[(0, node), (1, node)]))],
        false,
    )
    .await?;
    c.see("two partitions on the node", format!("{codes:?}"));
    c.wait_for_leaders(&t, 2).await?;
    let v = topic_state(c, &t).await?;
    c.see("metadata", format!("{v:?}"));
    let u = c.name("u");
    let codes = create(
        c,
        vec![creatable(&u, 2, -1, &[]).with_assignments(assign(&[(0, node), (1, node)]))],
        false,
    )
    .await?;
    c.see("assignments with a partition count", format!("{codes:?}"));
    let codes = create(
        c,
        vec![creatable(&u, -1, -1, &[]).with_assignments(assign(&[(0, node + 1000)]))],
        false,
    )
    .await?;
    c.see("an absent broker", format!("{codes:?}"));
    let codes = create(
        c,
        vec![creatable(&u, -1, -1, &[]).with_assignments(assign(&[(0, node), (2, node)]))],
        false,
    )
    .await?;
    c.see("partition indexes with a hole", format!("{codes:?}"));
    let v = topic_state(c, &u).await?.0;
    c.see("refused topic's metadata", v);
    Ok(())
}

async fn metadata_by_topic_id(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let r = metadata_v12(c, &t).await?;
    let id = r.topics.first().context("no topic")?.topic_id;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_topic_id(id),
        ]))
        .with_allow_auto_topic_creation(false);
    let r = c.call(&req, 12).await?;
    let x = r.topics.first().context("no topic")?;
    c.see(
        "by id",
        format!(
            "error={} name matches={} partitions={}",
            x.error_code,
            x.name.as_ref().is_some_and(|n| n.0.as_str() == t),
            x.partitions.len()
        ),
    );
    let code = delete_topics(c, &[&t]).await?;
    c.see("delete", format!("{code:?}"));
    let code = c
        .wait_until(Duration::from_secs(10), "topic gone", async |c| {
            let (code, _) = topic_state(c, &t).await?;
            Ok((code != 0).then_some(code))
        })
        .await?;
    c.see("by name after delete", code);
    let r = c.call(&req, 12).await?;
    let x = r.topics.first().context("no topic")?;
    c.see(
        "by id after delete",
        format!("error={} name null={}", x.error_code, x.name.is_none()),
    );
    Ok(())
}
