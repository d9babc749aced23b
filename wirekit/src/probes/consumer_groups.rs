//! KIP-848 consumer groups: ConsumerGroupHeartbeat (v0, and v1's regex
//! subscriptions) and ConsumerGroupDescribe, their errors, and how the
//! other group requests see such a group. Member ids are never observed
//! raw; epochs of a fresh group are (they start at 1 everywhere), and
//! assignments as partition numbers. Kafka 3.7 does not enable the
//! consumer protocol: the probes stop after observing its first answer
//! there.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::consumer_group_heartbeat_response::Assignment;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
};

use crate::client::Client;
use crate::ctx::{Ctx, s, topic};
use crate::kit::Probe;
use crate::probes::classic_groups::{Join, described, gid, protocols};

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "KG-01" => first_heartbeat_joins_and_assigns_every_partition,
        "KG-02" => two_members_split_the_partitions,
        "KG-03" => stale_or_future_epoch_is_fenced,
        "KG-04" => leave_with_epoch_minus_one,
        "KG-05" => unknown_member_id,
        "KG-06" => regex_subscription_v1,
        "KG-07" => consumer_group_describe_of_a_stable_group,
        "KG-08" => classic_join_into_a_consumer_group,
        "KG-09" => invalid_first_heartbeats,
        "KG-10" => list_and_describe_groups_see_a_consumer_group,
        "KG-11" => offset_commit_v9_checks_the_member_epoch,
        "KG-12" => delete_a_consumer_group,
        "KG-13" => subscription_change_reassigns,
        "KG-14" => static_member_leaves_and_rejoins,
        "KG-15" => consumer_heartbeat_into_a_classic_group,
        "KG-16" => heartbeat_v1_requires_a_member_id,
        "KG-17" => list_groups_v5_types_filter,
        "KG-18" => subscription_to_a_topic_created_later,
        "KG-19" => server_assignor_range,
        "KG-20" => describe_v1_member_type,
        "KG-21" => rejoin_with_epoch_zero_and_the_same_member_id,
        "KG-22" => offset_delete_of_a_subscribed_topic,
    ]
}

/// A member of a consumer group: its id and epoch, and what it owns.
#[derive(Debug, Clone, Default)]
struct Member {
    id: String,
    epoch: i32,
    owned: Vec<TopicPartitions>,
}

fn hb_req(group: &str, m: &Member) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(&m.id))
        .with_member_epoch(m.epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(Some(m.owned.clone()))
}

/// The first heartbeat (epoch 0) subscribing `topics`.
fn join_req(group: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(""))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| topic(t)).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

/// Sends a heartbeat; None (and a reconnect) when the broker closed the
/// connection instead of answering.
async fn call_hb(
    cl: &mut Client,
    addr: &str,
    req: &ConsumerGroupHeartbeatRequest,
    v: i16,
) -> anyhow::Result<Option<ConsumerGroupHeartbeatResponse>> {
    match cl.call(req, v).await {
        Ok(r) => Ok(Some(r)),
        Err(_) => {
            *cl = Client::connect(addr).await?;
            Ok(None)
        }
    }
}

/// Applies a heartbeat answer to the member: its id, epoch and (when the
/// answer carries one) its new assignment, taken as owned at once.
fn apply(m: &mut Member, r: &ConsumerGroupHeartbeatResponse) {
    if let Some(id) = &r.member_id {
        m.id = id.to_string();
    }
    m.epoch = r.member_epoch;
    if let Some(a) = &r.assignment {
        m.owned = owned(a);
    }
}

fn owned(a: &Assignment) -> Vec<TopicPartitions> {
    a.topic_partitions
        .iter()
        .map(|tp| {
            TopicPartitions::default()
                .with_topic_id(tp.topic_id)
                .with_partitions(tp.partitions.clone())
        })
        .collect()
}

/// The partitions a member owns, sorted.
fn parts(m: &Member) -> Vec<i32> {
    let mut v: Vec<i32> = m
        .owned
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    v.sort_unstable();
    v
}

/// Joins `group` subscribing `topics` on the probe's connection, records
/// the first answer's error (`label`), and heartbeats until the member
/// owns `want` partitions. None when the broker refused the join.
async fn join_until(
    c: &mut Ctx,
    label: &str,
    group: &str,
    topics: &[&str],
    want: usize,
) -> anyhow::Result<Option<Member>> {
    let addr = c.addr.clone();
    let r = call_hb(&mut c.client, &addr, &join_req(group, topics), 0).await?;
    let Some(r) = r else {
        c.see(format!("{label} join"), "connection closed");
        return Ok(None);
    };
    c.see(format!("{label} join error"), r.error_code);
    if r.error_code != 0 {
        return Ok(None);
    }
    let mut m = Member::default();
    apply(&mut m, &r);
    c.see(format!("{label} member id set"), !m.id.is_empty());
    c.see(format!("{label} epoch > 0"), m.epoch > 0);
    c.see(
        format!("{label} heartbeat interval > 0"),
        r.heartbeat_interval_ms > 0,
    );
    let g = group.to_owned();
    let m = c
        .wait_until(Duration::from_secs(10), "the assignment", async |c| {
            if parts(&m).len() == want {
                return Ok(Some(m.clone()));
            }
            let r = c.client.call(&hb_req(&g, &m), 0).await?;
            ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
            apply(&mut m, &r);
            Ok(None)
        })
        .await?;
    Ok(Some(m))
}

/// Topic names by topic id (Metadata v12).
async fn topic_names(c: &mut Ctx, names: &[&str]) -> anyhow::Result<Vec<([u8; 16], String)>> {
    let req = MetadataRequest::default()
        .with_topics(Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic(n))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(false);
    let r = c.call(&req, 12).await?;
    Ok(r.topics
        .iter()
        .map(|t| {
            (
                *t.topic_id.as_bytes(),
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
            )
        })
        .collect())
}

/// "name:[partitions]" of each owned topic, names relative to the probe's.
fn named(m: &Member, names: &[([u8; 16], String)], short: &[(&str, &str)]) -> String {
    let mut v: Vec<String> = m
        .owned
        .iter()
        .map(|tp| {
            let name = names
                .iter()
                .find(|(id, _)| id == tp.topic_id.as_bytes())
                .and_then(|(_, n)| {
                    short
                        .iter()
                        .find(|(full, _)| full == n)
                        .map(|(_, s)| (*s).to_owned())
                })
                .unwrap_or_else(|| "unknown topic id".to_owned());
            let mut p = tp.partitions.clone();
            p.sort_unstable();
            format!("{name}:{p:?}")
        })
        .collect();
    v.sort();
    v.join(" ")
}

async fn first_heartbeat_joins_and_assigns_every_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 3, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 3).await? else {
        return Ok(());
    };
    let names = topic_names(c, &[&t]).await?;
    c.see("assignment", named(&m, &names, &[(&t, "t")]));
    c.see("epoch after assignment > 0", m.epoch > 0);
    let r = c.client.call(&hb_req(&group, &m), 0).await?;
    c.see(
        "steady heartbeat",
        format!(
            "error={} same epoch={} assignment={}",
            r.error_code,
            r.member_epoch == m.epoch,
            r.assignment.is_some()
        ),
    );
    Ok(())
}

async fn two_members_split_the_partitions(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 4, &[]).await?;
    let Some(mut a) = join_until(c, "A", &group, &[&t], 4).await? else {
        return Ok(());
    };
    let mut b_cl = c.connect().await?;
    let r = b_cl.call(&join_req(&group, &[&t]), 0).await?;
    c.see("B join error", r.error_code);
    let mut b = Member::default();
    apply(&mut b, &r);
    c.see("B epoch > 0", b.epoch > 0);
    let g = group.clone();
    let (a, b) = c
        .wait_until(Duration::from_secs(15), "the partitions split", async |c| {
            let (mut a2, mut b2) = (a.clone(), b.clone());
            let ra = c.client.call(&hb_req(&g, &a2), 0).await?;
            ensure!(ra.error_code == 0, "A heartbeat: error {}", ra.error_code);
            apply(&mut a2, &ra);
            let rb = b_cl.call(&hb_req(&g, &b2), 0).await?;
            ensure!(rb.error_code == 0, "B heartbeat: error {}", rb.error_code);
            apply(&mut b2, &rb);
            a = a2.clone();
            b = b2.clone();
            let done = parts(&a2).len() == 2 && parts(&b2).len() == 2 && a2.epoch == b2.epoch;
            Ok(done.then_some((a2, b2)))
        })
        .await?;
    let mut all = parts(&a);
    all.extend(parts(&b));
    all.sort_unstable();
    c.see("A owns", parts(&a).len());
    c.see("B owns", parts(&b).len());
    c.see("together", format!("{all:?}"));
    let d = describe(c, &group).await?;
    c.see("described", d);
    Ok(())
}

async fn stale_or_future_epoch_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t1 = c.name("t1");
    let t2 = c.name("t2");
    c.create_topic(&t1, 1, &[]).await?;
    c.create_topic(&t2, 1, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t1], 1).await? else {
        return Ok(());
    };
    // A second epoch: subscribe a second topic until it is assigned; the
    // epoch the member had before its last change is its previous one.
    let req = hb_req(&group, &m).with_subscribed_topic_names(Some(vec![topic(&t1), topic(&t2)]));
    let r = c.client.call(&req, 0).await?;
    ensure!(r.error_code == 0, "resubscribe: error {}", r.error_code);
    let mut m2 = m.clone();
    let mut previous = m.epoch;
    if r.member_epoch != m2.epoch {
        previous = m2.epoch;
    }
    apply(&mut m2, &r);
    let g = group.clone();
    let (m2, previous) = c
        .wait_until(
            Duration::from_secs(10),
            "the second assignment",
            async |c| {
                if parts(&m2).len() == 2 && m2.epoch != m.epoch {
                    return Ok(Some((m2.clone(), previous)));
                }
                let r = c.client.call(&hb_req(&g, &m2), 0).await?;
                ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
                if r.member_epoch != m2.epoch {
                    previous = m2.epoch;
                }
                apply(&mut m2, &r);
                Ok(None)
            },
        )
        .await?;
    let mut older = m2.clone();
    older.epoch = previous;
    let r = c.client.call(&hb_req(&group, &older), 0).await?;
    c.see(
        "previous epoch with the current partitions",
        format!(
            "error={} epoch is current={}",
            r.error_code,
            r.member_epoch == m2.epoch
        ),
    );
    let mut future = m2.clone();
    future.epoch = m2.epoch + 5;
    let r = c.client.call(&hb_req(&group, &future), 0).await?;
    c.see(
        "newer epoch",
        format!(
            "error={} message set={}",
            r.error_code,
            r.error_message.is_some()
        ),
    );
    let r = c.client.call(&hb_req(&group, &m2), 0).await?;
    c.see("current epoch after the fenced one", r.error_code);
    Ok(())
}

async fn leave_with_epoch_minus_one(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let mut leaving = m.clone();
    leaving.epoch = -1;
    let r = c.client.call(&hb_req(&group, &leaving), 0).await?;
    c.see(
        "leave",
        format!(
            "error={} epoch={} same member={}",
            r.error_code,
            r.member_epoch,
            r.member_id.as_ref().is_some_and(|x| x.as_str() == m.id)
        ),
    );
    let r = c.client.call(&hb_req(&group, &m), 0).await?;
    c.see("heartbeat after leaving", r.error_code);
    let r = c.client.call(&hb_req(&group, &leaving), 0).await?;
    c.see(
        "leave again",
        format!("error={} epoch={}", r.error_code, r.member_epoch),
    );
    let d = describe(c, &group).await?;
    c.see("described", d);
    Ok(())
}

async fn unknown_member_id(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let other = Member {
        id: "nobody-0000000000000000".into(),
        epoch: m.epoch,
        owned: Vec::new(),
    };
    let r = c.client.call(&hb_req(&group, &other), 0).await?;
    c.see("unknown member in a live group", r.error_code);
    let r = c
        .client
        .call(&hb_req(&c.name("nogroup"), &other), 0)
        .await?;
    c.see("unknown member in an unknown group", r.error_code);
    let mut leaving = other.clone();
    leaving.epoch = -1;
    let r = c.client.call(&hb_req(&group, &leaving), 0).await?;
    c.see("unknown member leaves", r.error_code);
    Ok(())
}

async fn regex_subscription_v1(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t1 = c.name("rx-a");
    let t2 = c.name("rx-b");
    c.create_topic(&t1, 1, &[]).await?;
    c.create_topic(&t2, 2, &[]).await?;
    let regex = format!("{}-rx-.*", c.name(""));
    let regex = regex.replacen("--rx", "-rx", 1);
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(&group))
        .with_member_id(s("wirekit-member-0000000001"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_regex(Some(s(&regex)))
        .with_topic_partitions(Some(Vec::new()));
    let addr = c.addr.clone();
    let Some(r) = call_hb(&mut c.client, &addr, &req, 1).await? else {
        c.see("v1 join", "connection closed");
        return Ok(());
    };
    c.see("v1 join error", r.error_code);
    if r.error_code != 0 {
        return Ok(());
    }
    let mut m = Member::default();
    apply(&mut m, &r);
    c.see("member id kept", m.id == "wirekit-member-0000000001");
    let g = group.clone();
    let m = c
        .wait_until(
            Duration::from_secs(20),
            "the regex's assignment",
            async |c| {
                if parts(&m).len() == 3 {
                    return Ok(Some(m.clone()));
                }
                let r = c.client.call(&hb_req(&g, &m), 1).await?;
                ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
                apply(&mut m, &r);
                Ok(None)
            },
        )
        .await?;
    let names = topic_names(c, &[&t1, &t2]).await?;
    c.see(
        "assignment",
        named(&m, &names, &[(&t1, "rx-a"), (&t2, "rx-b")]),
    );
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(&group)]);
    let d = c.call(&req, 0).await?;
    let regex_seen = d
        .groups
        .first()
        .and_then(|g| g.members.first())
        .and_then(|m| m.subscribed_topic_regex.as_ref())
        .is_some_and(|r| r.as_str() == regex);
    c.see("described regex", regex_seen);
    Ok(())
}

/// ConsumerGroupDescribe v0 of one group, as a line.
async fn describe(c: &mut Ctx, group: &str) -> anyhow::Result<String> {
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(group)]);
    let r = c.call(&req, 0).await?;
    let g = r
        .groups
        .first()
        .context("ConsumerGroupDescribe answered no group")?;
    Ok(format!(
        "error={} state={} epoch>0={} assignment epoch=epoch:{} members={}",
        g.error_code,
        g.group_state.as_str(),
        g.group_epoch > 0,
        g.assignment_epoch == g.group_epoch,
        g.members.len()
    ))
}

async fn consumer_group_describe_of_a_stable_group(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 2).await? else {
        return Ok(());
    };
    let req = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![gid(&group), gid(&c.name("nogroup"))])
        .with_include_authorized_operations(true);
    let r = c.call(&req, 0).await?;
    c.see("groups", r.groups.len());
    // Kafka 4 answers the groups in no fixed order.
    let Some(g) = r.groups.iter().find(|g| g.group_id.0.as_str() == group) else {
        return Ok(());
    };
    c.see(
        "group",
        format!(
            "error={} state={} epoch={} assignment epoch={} assignor={}",
            g.error_code,
            g.group_state.as_str(),
            g.group_epoch > 0,
            g.assignment_epoch == g.group_epoch,
            g.assignor_name.as_str()
        ),
    );
    c.see(
        "authorized operations set",
        g.authorized_operations != i32::MIN,
    );
    c.see("members", g.members.len());
    if let Some(x) = g.members.first() {
        c.see("member is ours", x.member_id.as_str() == m.id);
        c.see(
            "member epoch = group epoch",
            x.member_epoch == g.group_epoch,
        );
        c.see("member client id", x.client_id.as_str());
        c.see("member client host set", !x.client_host.is_empty());
        c.see(
            "member subscribed",
            format!(
                "{:?}",
                x.subscribed_topic_names
                    .iter()
                    .map(|n| n.0.as_str() == t)
                    .collect::<Vec<_>>()
            ),
        );
        c.see(
            "member regex",
            format!(
                "{:?}",
                x.subscribed_topic_regex.as_ref().map(|r| r.to_string())
            ),
        );
        c.see(
            "member instance",
            format!("{:?}", x.instance_id.as_ref().map(|r| r.to_string())),
        );
        let ps = |a: &kafka_protocol::messages::consumer_group_describe_response::Assignment| {
            let mut v: Vec<String> = a
                .topic_partitions
                .iter()
                .map(|tp| {
                    let mut p = tp.partitions.clone();
                    p.sort_unstable();
                    format!(
                        "{}:{p:?}",
                        if tp.topic_name.0.as_str() == t {
                            "t"
                        } else {
                            "other"
                        }
                    )
                })
                .collect();
            v.sort();
            v.join(" ")
        };
        c.see("member assignment", ps(&x.assignment));
        c.see("member target assignment", ps(&x.target_assignment));
    }
    if let Some(u) = r.groups.iter().find(|g| g.group_id.0.as_str() != group) {
        c.see(
            "unknown group",
            format!(
                "error={} state={:?} message set={}",
                u.error_code,
                u.group_state.as_str(),
                u.error_message.is_some()
            ),
        );
    }
    Ok(())
}

async fn classic_join_into_a_consumer_group(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let Some(_m) = join_until(c, "first", &group, &[&t], 2).await? else {
        return Ok(());
    };
    let mut b = c.connect().await?;
    let mut j = Join::new(&group, &t);
    j.protocol_type = "connect".to_owned();
    let r = b.call(&j.request(), 9).await?;
    c.see("classic join of another protocol type", r.error_code);
    let mut j = Join::new(&group, &t);
    let r = b.call(&j.request(), 9).await?;
    c.see(
        "classic consumer join",
        format!(
            "error={} member id set={}",
            r.error_code,
            !r.member_id.is_empty()
        ),
    );
    if r.error_code == 79 {
        j.member = r.member_id.to_string();
        j.rebalance_ms = 1000;
        let r = b.call(&j.request(), 9).await?;
        c.see(
            "classic consumer join with id",
            format!(
                "error={} protocol={:?}",
                r.error_code,
                r.protocol_name.map(|x| x.to_string())
            ),
        );
    }
    Ok(())
}

async fn invalid_first_heartbeats(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let addr = c.addr.clone();
    let variants: Vec<(&str, ConsumerGroupHeartbeatRequest)> = vec![
        (
            "no subscription",
            join_req(&group, &[&t]).with_subscribed_topic_names(None),
        ),
        (
            "no rebalance timeout",
            join_req(&group, &[&t]).with_rebalance_timeout_ms(-1),
        ),
        (
            "no owned partitions",
            join_req(&group, &[&t]).with_topic_partitions(None),
        ),
        ("empty group id", join_req("", &[&t])),
        (
            "unknown assignor",
            join_req(&group, &[&t]).with_server_assignor(Some(s("no-such-assignor"))),
        ),
        (
            "negative epoch -3",
            join_req(&group, &[&t]).with_member_epoch(-3),
        ),
        (
            "leave with an empty member id",
            join_req(&group, &[&t]).with_member_epoch(-1),
        ),
    ];
    for (label, req) in variants {
        match call_hb(&mut c.client, &addr, &req, 0).await? {
            Some(r) => c.see(
                label,
                format!(
                    "error={} message set={}",
                    r.error_code,
                    r.error_message.is_some()
                ),
            ),
            None => c.see(label, "connection closed"),
        }
    }
    Ok(())
}

async fn list_and_describe_groups_see_a_consumer_group(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(_m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let r = c.call(&ListGroupsRequest::default(), 4).await?;
    let mine: Vec<String> = r
        .groups
        .iter()
        .filter(|g| g.group_id.0.as_str() == group)
        .map(|g| {
            format!(
                "type={:?} state={}",
                g.protocol_type.as_str(),
                g.group_state.as_str()
            )
        })
        .collect();
    c.see("ListGroups v4", format!("{mine:?}"));
    let req = ListGroupsRequest::default().with_states_filter(vec![s("Stable")]);
    let r = c.call(&req, 4).await?;
    c.see(
        "ListGroups v4 Stable",
        r.groups.iter().any(|g| g.group_id.0.as_str() == group),
    );
    let req = DescribeGroupsRequest::default().with_groups(vec![gid(&group)]);
    let r = c.call(&req, 5).await?;
    if let Some(g) = r.groups.first() {
        c.see("DescribeGroups v5", described(g));
    }
    Ok(())
}

async fn offset_commit_v9_checks_the_member_epoch(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let commit = |member: &str, epoch: i32, offset: i64| {
        OffsetCommitRequest::default()
            .with_group_id(gid(&group))
            .with_generation_id_or_member_epoch(epoch)
            .with_member_id(s(member))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(topic(&t))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1),
                    ]),
            ])
    };
    let code = |r: kafka_protocol::messages::OffsetCommitResponse| {
        r.topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.error_code)
    };
    let seen = code(c.call(&commit(&m.id, m.epoch, 10), 9).await?);
    c.see("current epoch", seen);
    let seen = code(c.call(&commit(&m.id, m.epoch - 1, 11), 9).await?);
    c.see("stale epoch", seen);
    let seen = code(c.call(&commit(&m.id, m.epoch + 1, 12), 9).await?);
    c.see("future epoch", seen);
    let seen = code(c.call(&commit("nobody-0000", m.epoch, 13), 9).await?);
    c.see("unknown member", seen);
    let seen = code(c.call(&commit("", -1, 14), 9).await?);
    c.see("epoch -1 without member", seen);
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(gid(&group))
            .with_member_id(Some(s(&m.id)))
            .with_member_epoch(m.epoch)
            .with_topics(Some(vec![
                OffsetFetchRequestTopics::default()
                    .with_name(topic(&t))
                    .with_partition_indexes(vec![0]),
            ])),
    ]);
    let r = c.call(&req, 9).await?;
    let g = r.groups.first();
    c.see(
        "fetch v9 with the member",
        format!(
            "error={} offsets={:?}",
            g.map_or(-1, |g| g.error_code),
            g.map(|g| g
                .topics
                .iter()
                .flat_map(|t| t
                    .partitions
                    .iter()
                    .map(|p| (p.committed_offset, p.error_code)))
                .collect::<Vec<_>>())
        ),
    );
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(gid(&group))
            .with_member_id(Some(s(&m.id)))
            .with_member_epoch(m.epoch - 1)
            .with_topics(None),
    ]);
    let r = c.call(&req, 9).await?;
    c.see(
        "fetch v9 with a stale epoch",
        r.groups.first().map_or(-1, |g| g.error_code),
    );
    // Last: a broker that takes it moves the committed offset.
    let seen = code(c.call(&commit(&m.id, m.epoch, 15), 8).await?);
    c.see("v8 with the epoch as generation", seen);
    Ok(())
}

async fn delete_a_consumer_group(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let del = DeleteGroupsRequest::default().with_groups_names(vec![gid(&group)]);
    let r = c.call(&del, 2).await?;
    c.see(
        "with a member",
        r.results.first().map_or(-1, |x| x.error_code),
    );
    let mut leaving = m.clone();
    leaving.epoch = -1;
    c.client.call(&hb_req(&group, &leaving), 0).await?;
    let r = c.call(&del, 2).await?;
    c.see(
        "after the member left",
        r.results.first().map_or(-1, |x| x.error_code),
    );
    let d = describe(c, &group).await?;
    c.see("described", d);
    Ok(())
}

async fn subscription_change_reassigns(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t1 = c.name("t1");
    let t2 = c.name("t2");
    c.create_topic(&t1, 1, &[]).await?;
    c.create_topic(&t2, 2, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t1], 1).await? else {
        return Ok(());
    };
    let req = hb_req(&group, &m).with_subscribed_topic_names(Some(vec![topic(&t1), topic(&t2)]));
    let r = c.client.call(&req, 0).await?;
    c.see("resubscribe", format!("error={}", r.error_code));
    let mut m2 = m.clone();
    apply(&mut m2, &r);
    let g = group.clone();
    let m2 = c
        .wait_until(Duration::from_secs(10), "the new assignment", async |c| {
            if parts(&m2).len() == 3 {
                return Ok(Some(m2.clone()));
            }
            let r = c.client.call(&hb_req(&g, &m2), 0).await?;
            ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
            apply(&mut m2, &r);
            Ok(None)
        })
        .await?;
    let names = topic_names(c, &[&t1, &t2]).await?;
    c.see(
        "assignment",
        named(&m2, &names, &[(&t1, "t1"), (&t2, "t2")]),
    );
    c.see("epoch increased", m2.epoch > m.epoch);
    Ok(())
}

async fn static_member_leaves_and_rejoins(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let addr = c.addr.clone();
    let req = join_req(&group, &[&t]).with_instance_id(Some(s("instance-1")));
    let Some(r) = call_hb(&mut c.client, &addr, &req, 0).await? else {
        c.see("static join", "connection closed");
        return Ok(());
    };
    c.see("static join error", r.error_code);
    if r.error_code != 0 {
        return Ok(());
    }
    let mut m = Member::default();
    apply(&mut m, &r);
    let g = group.clone();
    let m = c
        .wait_until(Duration::from_secs(10), "the assignment", async |c| {
            if parts(&m).len() == 2 {
                return Ok(Some(m.clone()));
            }
            let r = c
                .client
                .call(&hb_req(&g, &m).with_instance_id(Some(s("instance-1"))), 0)
                .await?;
            ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
            apply(&mut m, &r);
            Ok(None)
        })
        .await?;
    let mut b = c.connect().await?;
    let r = b.call(&req, 0).await?;
    c.see("same instance while active", r.error_code);
    let mut leaving = m.clone();
    leaving.epoch = -2;
    let r = c
        .client
        .call(
            &hb_req(&group, &leaving).with_instance_id(Some(s("instance-1"))),
            0,
        )
        .await?;
    c.see(
        "temporary leave",
        format!("error={} epoch={}", r.error_code, r.member_epoch),
    );
    let r = b.call(&req, 0).await?;
    c.see("rejoin error", r.error_code);
    c.see("rejoin epoch - before", r.member_epoch - m.epoch);
    c.see(
        "rejoin same member id",
        r.member_id.as_ref().is_some_and(|x| x.as_str() == m.id),
    );
    let same = r.assignment.as_ref().map(|a| {
        let mut p: Vec<i32> = a
            .topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect();
        p.sort_unstable();
        p
    });
    c.see("rejoin assignment", format!("{same:?}"));
    Ok(())
}

async fn consumer_heartbeat_into_a_classic_group(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut cl = c.connect().await?;
    let mut j = Join::new(&group, &t);
    j.protocol_type = "connect".to_owned();
    j.protocols = protocols(&["default"], &[]);
    let r = crate::probes::classic_groups::join(&mut cl, &j).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let addr = c.addr.clone();
    match call_hb(&mut c.client, &addr, &join_req(&group, &[&t]), 0).await? {
        Some(r) => c.see(
            "into a non-consumer classic group",
            format!(
                "error={} message set={}",
                r.error_code,
                r.error_message.is_some()
            ),
        ),
        None => c.see("into a non-consumer classic group", "connection closed"),
    }
    Ok(())
}

async fn heartbeat_v1_requires_a_member_id(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let addr = c.addr.clone();
    match call_hb(&mut c.client, &addr, &join_req(&group, &[&t]), 1).await? {
        Some(r) => c.see(
            "v1 with an empty member id",
            format!(
                "error={} message set={}",
                r.error_code,
                r.error_message.is_some()
            ),
        ),
        None => c.see("v1 with an empty member id", "connection closed"),
    }
    let req = join_req(&group, &[&t]).with_member_id(s("wirekit-member-0000000002"));
    match call_hb(&mut c.client, &addr, &req, 1).await? {
        Some(r) => c.see(
            "v1 with a client member id",
            format!(
                "error={} same id={}",
                r.error_code,
                r.member_id
                    .is_some_and(|x| x.as_str() == "wirekit-member-0000000002")
            ),
        ),
        None => c.see("v1 with a client member id", "connection closed"),
    }
    Ok(())
}

async fn list_groups_v5_types_filter(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(_m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let classic = c.name("classic");
    crate::probes::classic_groups::stable_member(c, &classic, &t).await?;
    for (label, types) in [
        ("no filter", vec![]),
        ("consumer", vec!["consumer"]),
        ("classic", vec!["classic"]),
        ("Consumer", vec!["Consumer"]),
        ("share", vec!["share"]),
    ] {
        let req =
            ListGroupsRequest::default().with_types_filter(types.iter().map(|x| s(x)).collect());
        let r = match c.call(&req, 5).await {
            Ok(r) => r,
            Err(_) => {
                c.see(label, "no answer");
                c.reconnect().await?;
                continue;
            }
        };
        let mut mine: Vec<String> = r
            .groups
            .iter()
            .filter(|g| g.group_id.0.as_str() == group || g.group_id.0.as_str() == classic)
            .map(|g| {
                format!(
                    "{} type={} protocol={:?} state={}",
                    if g.group_id.0.as_str() == group {
                        "consumer group"
                    } else {
                        "classic group"
                    },
                    g.group_type.as_str(),
                    g.protocol_type.as_str(),
                    g.group_state.as_str()
                )
            })
            .collect();
        mine.sort();
        c.see(label, format!("error={} {mine:?}", r.error_code));
    }
    Ok(())
}

async fn subscription_to_a_topic_created_later(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("later");
    let Some(m) = join_until(c, "first", &group, &[&t], 0).await? else {
        return Ok(());
    };
    let r = c.client.call(&hb_req(&group, &m), 0).await?;
    let mut m2 = m.clone();
    apply(&mut m2, &r);
    c.see(
        "before the topic exists",
        format!("error={} partitions={}", r.error_code, parts(&m2).len()),
    );
    let md = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic(&t))),
        ]))
        .with_allow_auto_topic_creation(false);
    let r = c.call(&md, 12).await?;
    c.see(
        "topic auto-created by the subscription",
        r.topics.first().is_some_and(|x| x.error_code == 0),
    );
    c.create_topic(&t, 2, &[]).await?;
    let g = group.clone();
    let m2 = c
        .wait_until(
            Duration::from_secs(10),
            "the assignment of the new topic",
            async |c| {
                if parts(&m2).len() == 2 {
                    return Ok(Some(m2.clone()));
                }
                let r = c.client.call(&hb_req(&g, &m2), 0).await?;
                ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
                apply(&mut m2, &r);
                Ok(None)
            },
        )
        .await?;
    c.see("after creation", format!("{:?}", parts(&m2)));
    Ok(())
}

async fn server_assignor_range(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let addr = c.addr.clone();
    let req = join_req(&group, &[&t]).with_server_assignor(Some(s("range")));
    let Some(r) = call_hb(&mut c.client, &addr, &req, 0).await? else {
        c.see("join", "connection closed");
        return Ok(());
    };
    c.see("join error", r.error_code);
    if r.error_code != 0 {
        return Ok(());
    }
    let mut m = Member::default();
    apply(&mut m, &r);
    let g = group.clone();
    let m = c
        .wait_until(Duration::from_secs(10), "the assignment", async |c| {
            if parts(&m).len() == 2 {
                return Ok(Some(m.clone()));
            }
            let r = c.client.call(&hb_req(&g, &m), 0).await?;
            ensure!(r.error_code == 0, "heartbeat: error {}", r.error_code);
            apply(&mut m, &r);
            Ok(None)
        })
        .await?;
    c.see("assigned", format!("{:?}", parts(&m)));
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(&group)]);
    let d = c.call(&req, 0).await?;
    c.see(
        "assignor",
        d.groups
            .first()
            .map_or(String::new(), |g| g.assignor_name.to_string()),
    );
    Ok(())
}

async fn describe_v1_member_type(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let Some(_m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(&group)]);
    let d = c.call(&req, 1).await?;
    let g = d.groups.first();
    c.see("error", g.map_or(-1, |g| g.error_code));
    c.see(
        "member types",
        format!(
            "{:?}",
            g.map(|g| g.members.iter().map(|m| m.member_type).collect::<Vec<_>>())
        ),
    );
    let classic = c.name("classic");
    crate::probes::classic_groups::stable_member(c, &classic, &t).await?;
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(&classic)]);
    let d = c.call(&req, 1).await?;
    let g = d.groups.first();
    c.see(
        "a classic group",
        format!(
            "error={} message set={}",
            g.map_or(-1, |g| g.error_code),
            g.is_some_and(|g| g.error_message.is_some())
        ),
    );
    Ok(())
}

async fn rejoin_with_epoch_zero_and_the_same_member_id(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 2).await? else {
        return Ok(());
    };
    // As a client that lost its state: epoch 0, its member id, owns nothing.
    let req = join_req(&group, &[&t]).with_member_id(s(&m.id));
    let r = c.client.call(&req, 0).await?;
    c.see(
        "rejoin",
        format!(
            "error={} same member={} epoch > 0={}",
            r.error_code,
            r.member_id.as_ref().is_some_and(|x| x.as_str() == m.id),
            r.member_epoch > 0
        ),
    );
    let d = describe(c, &group).await?;
    c.see("described", d);
    Ok(())
}

async fn offset_delete_of_a_subscribed_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    let other = c.name("other");
    c.create_topic(&t, 1, &[]).await?;
    c.create_topic(&other, 1, &[]).await?;
    let Some(m) = join_until(c, "first", &group, &[&t], 1).await? else {
        return Ok(());
    };
    for (name, offset) in [(&t, 3i64), (&other, 4)] {
        let req = OffsetCommitRequest::default()
            .with_group_id(gid(&group))
            .with_generation_id_or_member_epoch(m.epoch)
            .with_member_id(s(&m.id))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(topic(name))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1),
                    ]),
            ]);
        let r = c.call(&req, 9).await?;
        let code = r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.error_code);
        ensure!(code == 0, "OffsetCommit: error {code}");
    }
    for (label, name) in [("subscribed topic", &t), ("unsubscribed topic", &other)] {
        let req = OffsetDeleteRequest::default()
            .with_group_id(gid(&group))
            .with_topics(vec![
                OffsetDeleteRequestTopic::default()
                    .with_name(topic(name))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0),
                    ]),
            ]);
        let r = c.call(&req, 0).await?;
        c.see(
            label,
            format!(
                "error={} partitions={:?}",
                r.error_code,
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect::<Vec<_>>()
            ),
        );
    }
    Ok(())
}
