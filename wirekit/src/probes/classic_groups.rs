//! Classic consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), the
//! group administration requests (FindCoordinator, DescribeGroups,
//! ListGroups, DeleteGroups) and committed offsets (OffsetCommit,
//! OffsetFetch, OffsetDelete). Member ids are never observed raw: only
//! whether they are set, and equalities (leader = self, same member).
//! Generations are observed relative to the group's first one. A rebalance
//! with two members is driven by the probe itself on two connections: the
//! join that blocks until the other member rejoins is pipelined.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, ResponseHeader, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, HeaderVersion, Request};

use crate::client::Client;
use crate::ctx::{Ctx, s, topic};
use crate::kit::Probe;

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "CG-01" => find_coordinator_single_and_batched,
        "CG-02" => join_with_empty_member_id_requires_one_then_leads,
        "CG-03" => join_v3_assigns_a_member_id_directly,
        "CG-04" => second_member_rebalances_into_one_generation_one_leader,
        "CG-05" => sync_group_hands_each_member_its_own_assignment,
        "CG-06" => heartbeat_errors_by_generation_member_and_group,
        "CG-07" => heartbeat_while_completing_rebalance,
        "CG-08" => leave_group_batch_answers_per_member,
        "CG-09" => leave_of_one_member_rebalances_the_other,
        "CG-10" => session_timeout_expiry_removes_the_member,
        "CG-11" => rebalance_timeout_drops_a_member_that_does_not_rejoin,
        "CG-12" => static_member_rejoin_keeps_generation_and_assignment,
        "CG-13" => static_member_rejoin_fences_the_old_member_id,
        "CG-14" => inconsistent_protocol_type_and_names,
        "CG-15" => session_timeout_out_of_bounds,
        "CG-16" => describe_groups_through_the_states,
        "CG-17" => describe_groups_preparing_rebalance,
        "CG-18" => list_groups_with_states_filter,
        "CG-19" => delete_groups_non_empty_then_empty_then_unknown,
        "CG-20" => simple_commit_and_fetch_without_membership,
        "CG-21" => commit_generation_and_member_checks,
        "CG-22" => committed_metadata_round_trip_and_limit,
        "CG-23" => offsets_of_a_missing_topic_or_partition,
        "CG-24" => offset_fetch_all_partitions_of_a_group,
        "CG-25" => offset_fetch_v8_several_groups,
        "CG-26" => offset_delete_of_subscribed_and_unsubscribed_topics,
        "CG-27" => sync_group_errors,
        "CG-28" => join_with_an_unknown_member_id,
        "CG-29" => empty_group_id_is_invalid,
        "CG-30" => commit_during_a_rebalance,
        "CG-31" => protocol_choice_follows_every_member,
        "CG-32" => leave_group_v0_and_unknown_member,
        "CG-33" => leave_a_static_member_by_instance_id,
        "CG-34" => join_group_old_versions,
        "CG-35" => offset_fetch_old_version_and_require_stable,
        "CG-36" => static_member_heartbeat_with_a_wrong_instance,
        "CG-37" => delete_groups_v0_batch,
        "CG-38" => a_pending_member_is_not_described,
    ]
}

// ---- wire helpers ---------------------------------------------------------

/// A wire group id.
pub fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

/// ConsumerProtocolSubscription v0 of `topics` (no user data).
pub fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    b.freeze()
}

/// ConsumerProtocolAssignment v0 of partitions of one topic.
pub fn assignment(t: &str, partitions: &[i32]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(1);
    b.put_i16(t.len() as i16);
    b.put_slice(t.as_bytes());
    b.put_i32(partitions.len() as i32);
    for p in partitions {
        b.put_i32(*p);
    }
    b.put_i32(-1);
    b.freeze()
}

/// Protocols of the "consumer" type, each subscribing `topics`.
pub fn protocols(names: &[&str], topics: &[&str]) -> Vec<JoinGroupRequestProtocol> {
    names
        .iter()
        .map(|n| {
            JoinGroupRequestProtocol::default()
                .with_name(s(n))
                .with_metadata(subscription(topics))
        })
        .collect()
}

/// How one member joins.
#[derive(Debug, Clone)]
pub struct Join {
    pub group: String,
    pub member: String,
    pub instance: Option<String>,
    pub session_ms: i32,
    pub rebalance_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<JoinGroupRequestProtocol>,
}

impl Join {
    /// A dynamic "consumer" member with protocols "range" and "roundrobin"
    /// (in that order) subscribing `t`.
    pub fn new(group: &str, t: &str) -> Join {
        Join {
            group: group.to_owned(),
            member: String::new(),
            instance: None,
            session_ms: 10_000,
            rebalance_ms: 10_000,
            protocol_type: "consumer".to_owned(),
            protocols: protocols(&["range", "roundrobin"], &[t]),
        }
    }

    pub fn request(&self) -> JoinGroupRequest {
        JoinGroupRequest::default()
            .with_group_id(gid(&self.group))
            .with_session_timeout_ms(self.session_ms)
            .with_rebalance_timeout_ms(self.rebalance_ms)
            .with_member_id(s(&self.member))
            .with_group_instance_id(self.instance.as_deref().map(s))
            .with_protocol_type(s(&self.protocol_type))
            .with_protocols(self.protocols.clone())
    }
}

/// Sends a request without waiting; its correlation id.
pub async fn send<R: Request>(cl: &mut Client, req: &R, version: i16) -> anyhow::Result<i32> {
    let (id, frame) = cl.frame(req, version)?;
    cl.send_raw(&frame).await?;
    Ok(id)
}

/// Reads the response to a request sent with `send`.
pub async fn recv<R: Request>(
    cl: &mut Client,
    id: i32,
    version: i16,
) -> anyhow::Result<R::Response> {
    let mut frame = cl
        .read_frame()
        .await
        .context("the broker closed the connection or did not answer")?;
    let header = ResponseHeader::decode(
        &mut frame,
        <R::Response as HeaderVersion>::header_version(version),
    )?;
    ensure!(
        header.correlation_id == id,
        "response for correlation id {} where {id} was expected",
        header.correlation_id
    );
    let body = R::Response::decode(&mut frame, version)?;
    if frame.remaining() != 0 {
        bail!("{} bytes left after the response body", frame.remaining());
    }
    Ok(body)
}

/// JoinGroup v9 as a client does: with an empty member id, answers
/// MEMBER_ID_REQUIRED first and joins again with the given id.
pub async fn join(cl: &mut Client, j: &Join) -> anyhow::Result<JoinGroupResponse> {
    let r = cl.call(&j.request(), 9).await?;
    if r.error_code != 79 {
        return Ok(r);
    }
    let mut again = j.clone();
    again.member = r.member_id.to_string();
    cl.call(&again.request(), 9).await
}

/// SyncGroup v5 of a "consumer"/"range" member.
pub fn sync_req(
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, Bytes)],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(a.clone())
                })
                .collect(),
        )
}

pub async fn sync(
    cl: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, Bytes)],
) -> anyhow::Result<SyncGroupResponse> {
    cl.call(&sync_req(group, generation, member, assignments), 5)
        .await
}

/// Heartbeat v4: its error.
pub async fn heartbeat(
    cl: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
) -> anyhow::Result<i16> {
    let req = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(s(member));
    Ok(cl.call(&req, 4).await?.error_code)
}

/// LeaveGroup v5 of `members`: (top-level error, per-member errors).
pub async fn leave(
    cl: &mut Client,
    group: &str,
    members: &[&str],
) -> anyhow::Result<(i16, Vec<i16>)> {
    let req = LeaveGroupRequest::default()
        .with_group_id(gid(group))
        .with_members(
            members
                .iter()
                .map(|m| MemberIdentity::default().with_member_id(s(m)))
                .collect(),
        );
    let r = cl.call(&req, 5).await?;
    Ok((
        r.error_code,
        r.members.iter().map(|m| m.error_code).collect(),
    ))
}

/// DescribeGroups v5 of one group.
pub async fn describe(cl: &mut Client, group: &str) -> anyhow::Result<DescribedGroup> {
    let req = DescribeGroupsRequest::default().with_groups(vec![gid(group)]);
    let r = cl.call(&req, 5).await?;
    r.groups
        .into_iter()
        .next()
        .context("DescribeGroups answered no group")
}

/// "error=E state=S type=T protocol=P members=N" of a described group.
pub fn described(g: &DescribedGroup) -> String {
    format!(
        "error={} state={} type={} protocol={} members={}",
        g.error_code,
        g.group_state.as_str(),
        g.protocol_type.as_str(),
        g.protocol_data.as_str(),
        g.members.len()
    )
}

/// One stable member (joined, leader, synced with its own assignment).
#[derive(Debug, Clone)]
pub struct Stable {
    pub group: String,
    pub topic: String,
    pub member: String,
    pub generation: i32,
}

/// A fresh topic (one partition) and a group with one stable member on
/// the probe's connection.
pub async fn stable_one(c: &mut Ctx) -> anyhow::Result<Stable> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    stable_member(c, &group, &t).await
}

pub async fn stable_member(c: &mut Ctx, group: &str, t: &str) -> anyhow::Result<Stable> {
    let r = join(&mut c.client, &Join::new(group, t)).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let member = r.member_id.to_string();
    let a = assignment(t, &[0]);
    let sr = sync(
        &mut c.client,
        group,
        r.generation_id,
        &member,
        &[(&member, a)],
    )
    .await?;
    ensure!(sr.error_code == 0, "SyncGroup: error {}", sr.error_code);
    Ok(Stable {
        group: group.to_owned(),
        topic: t.to_owned(),
        member,
        generation: r.generation_id,
    })
}

/// Two members after a rebalance: A (the first, on the probe's
/// connection) and B (on `b_cl`), both joined in one generation, not synced.
#[derive(Debug)]
pub struct Two {
    pub first: Stable,
    pub a_join: JoinGroupResponse,
    pub b_join: JoinGroupResponse,
    /// A's heartbeat while B's join waits.
    pub a_heartbeat_during: i16,
}

pub async fn two_members(
    c: &mut Ctx,
    b_cl: &mut Client,
    b_protocols: Option<Vec<JoinGroupRequestProtocol>>,
) -> anyhow::Result<Two> {
    let first = stable_one(c).await?;
    let mut jb = Join::new(&first.group, &first.topic);
    if let Some(p) = b_protocols {
        jb.protocols = p;
    }
    let r = b_cl.call(&jb.request(), 9).await?;
    ensure!(
        r.error_code == 79,
        "B's first JoinGroup: error {}",
        r.error_code
    );
    jb.member = r.member_id.to_string();
    let b_id = send(b_cl, &jb.request(), 9).await?;
    // B's join is pending once A's heartbeat says so.
    let a_hb = c
        .wait_until(
            Duration::from_secs(5),
            "A's heartbeat sees the rebalance",
            async |c| {
                let e =
                    heartbeat(&mut c.client, &first.group, first.generation, &first.member).await?;
                Ok((e != 0).then_some(e))
            },
        )
        .await?;
    let mut ja = Join::new(&first.group, &first.topic);
    ja.member = first.member.clone();
    ja.protocols = protocols(&["range", "roundrobin"], &[&first.topic]);
    let a_join = c.client.call(&ja.request(), 9).await?;
    let b_join = recv::<JoinGroupRequest>(b_cl, b_id, 9).await?;
    Ok(Two {
        first,
        a_join,
        b_join,
        a_heartbeat_during: a_hb,
    })
}

/// OffsetCommit v8 of (topic, partition, offset, metadata).
pub async fn commit(
    cl: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64, Option<&str>)],
) -> anyhow::Result<Vec<i16>> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (t, p, o, m) in offsets {
        let part = OffsetCommitRequestPartition::default()
            .with_partition_index(*p)
            .with_committed_offset(*o)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(m.map(s));
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(part),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(topic(t))
                    .with_partitions(vec![part]),
            ),
        }
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_retention_time_ms(-1)
        .with_topics(topics);
    let r = cl.call(&req, 8).await?;
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect())
}

/// OffsetFetch v7 of one topic's partitions (None = all of the group):
/// (group error, [(topic, partition, offset, metadata, error)]).
pub async fn fetch_offsets(
    cl: &mut Client,
    group: &str,
    t: Option<(&str, &[i32])>,
) -> anyhow::Result<(i16, Vec<String>)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(gid(group))
        .with_topics(t.map(|(t, ps)| {
            vec![
                OffsetFetchRequestTopic::default()
                    .with_name(topic(t))
                    .with_partition_indexes(ps.to_vec()),
            ]
        }));
    let r = cl.call(&req, 7).await?;
    let mut out = Vec::new();
    for t in &r.topics {
        for p in &t.partitions {
            out.push(format!(
                "{}/{} offset={} metadata={:?} error={}",
                if t.name.0.as_str().ends_with("-t") {
                    "t"
                } else {
                    "other"
                },
                p.partition_index,
                p.committed_offset,
                p.metadata.as_ref().map(|m| m.to_string()),
                p.error_code
            ));
        }
    }
    out.sort();
    Ok((r.error_code, out))
}

// ---- probes -----------------------------------------------------------------

async fn find_coordinator_single_and_batched(c: &mut Ctx) -> anyhow::Result<()> {
    let g1 = c.name("g1");
    let g2 = c.name("g2");
    let req = FindCoordinatorRequest::default()
        .with_key(s(&g1))
        .with_key_type(0);
    let r = c.call(&req, 3).await?;
    c.see("v3 error", r.error_code);
    c.see("v3 node id >= 0", r.node_id.0 >= 0);
    c.see("v3 host set", !r.host.is_empty());
    c.see("v3 port > 0", r.port > 0);
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s(&g1), s(&g2)]);
    let r = c.call(&req, 4).await?;
    c.see("v4 coordinators", r.coordinators.len());
    for (i, k) in r.coordinators.iter().enumerate() {
        c.see(
            format!("v4 [{i}] key is g{}", i + 1),
            k.key.as_str() == [&g1, &g2][i.min(1)].as_str(),
        );
        c.see(format!("v4 [{i}] error"), k.error_code);
        c.see(
            format!("v4 [{i}] same node as v3"),
            k.node_id == r.coordinators[0].node_id,
        );
    }
    Ok(())
}

async fn join_with_empty_member_id_requires_one_then_leads(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut j = Join::new(&group, &t);
    j.protocols = protocols(&["range", "roundrobin"], &[&t]);
    let r = c.call(&j.request(), 9).await?;
    c.see("first join error", r.error_code);
    c.see("first join member id set", !r.member_id.is_empty());
    c.see("first join generation", r.generation_id);
    c.see("first join leader set", !r.leader.is_empty());
    c.see("first join members", r.members.len());
    j.member = r.member_id.to_string();
    let r = c.call(&j.request(), 9).await?;
    c.see("join error", r.error_code);
    c.see("same member id", r.member_id.as_str() == j.member);
    c.see("generation", r.generation_id);
    c.see("leader is self", r.leader == r.member_id);
    c.see(
        "protocol type",
        format!("{:?}", r.protocol_type.as_ref().map(|x| x.to_string())),
    );
    c.see(
        "protocol name",
        format!("{:?}", r.protocol_name.as_ref().map(|x| x.to_string())),
    );
    c.see("skip assignment", r.skip_assignment);
    c.see("members", r.members.len());
    let m = r.members.first();
    c.see(
        "member listed is self",
        m.is_some_and(|m| m.member_id == r.member_id),
    );
    c.see(
        "member metadata echoed",
        m.is_some_and(|m| m.metadata == subscription(&[&t])),
    );
    Ok(())
}

async fn join_v3_assigns_a_member_id_directly(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    let j = Join::new(&group, &t);
    let r = c.call(&j.request(), 3).await?;
    c.see("v3 join error", r.error_code);
    c.see("v3 member id set", !r.member_id.is_empty());
    c.see("v3 leader is self", r.leader == r.member_id);
    c.see("v3 generation", r.generation_id);
    c.see(
        "v3 protocol name",
        format!("{:?}", r.protocol_name.as_ref().map(|x| x.to_string())),
    );
    let d = describe(&mut c.client, &group).await?;
    c.see("described", described(&d));
    Ok(())
}

async fn second_member_rebalances_into_one_generation_one_leader(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let mut b = c.connect().await?;
    let two = two_members(c, &mut b, None).await?;
    let (a, bj) = (&two.a_join, &two.b_join);
    c.see("A heartbeat while B joins", two.a_heartbeat_during);
    c.see("A join error", a.error_code);
    c.see("B join error", bj.error_code);
    c.see("same generation", a.generation_id == bj.generation_id);
    c.see("generation - first", a.generation_id - two.first.generation);
    c.see("same leader", a.leader == bj.leader);
    c.see("leader is A", a.leader.as_str() == two.first.member);
    c.see(
        "A keeps its member id",
        a.member_id.as_str() == two.first.member,
    );
    c.see("A (leader) members", a.members.len());
    c.see("B (follower) members", bj.members.len());
    c.see(
        "B listed",
        a.members.iter().any(|m| m.member_id == bj.member_id),
    );
    c.see(
        "protocol A",
        format!("{:?}", a.protocol_name.as_ref().map(|x| x.to_string())),
    );
    c.see(
        "protocol B",
        format!("{:?}", bj.protocol_name.as_ref().map(|x| x.to_string())),
    );
    Ok(())
}

async fn sync_group_hands_each_member_its_own_assignment(c: &mut Ctx) -> anyhow::Result<()> {
    let mut b = c.connect().await?;
    let two = two_members(c, &mut b, None).await?;
    let (g, t) = (two.first.group.clone(), two.first.topic.clone());
    let generation = two.a_join.generation_id;
    let (am, bm) = (
        two.a_join.member_id.to_string(),
        two.b_join.member_id.to_string(),
    );
    // B syncs first (it waits for the leader's assignments).
    let b_id = send(&mut b, &sync_req(&g, generation, &bm, &[]), 5).await?;
    let d = describe(&mut c.client, &g).await?;
    c.see("before the leader's sync", described(&d));
    let aa = assignment(&t, &[0]);
    let ba = assignment(&t, &[]);
    let ra = sync(
        &mut c.client,
        &g,
        generation,
        &am,
        &[(&am, aa.clone()), (&bm, ba.clone())],
    )
    .await?;
    let rb = recv::<SyncGroupRequest>(&mut b, b_id, 5).await?;
    c.see("A sync error", ra.error_code);
    c.see("B sync error", rb.error_code);
    c.see("A got its assignment", ra.assignment == aa);
    c.see("B got its assignment", rb.assignment == ba);
    c.see(
        "A sync protocol",
        format!(
            "{:?}/{:?}",
            ra.protocol_type.map(|x| x.to_string()),
            ra.protocol_name.map(|x| x.to_string())
        ),
    );
    let seen = heartbeat(&mut c.client, &g, generation, &am).await?;
    c.see("A heartbeat", seen);
    c.see("B heartbeat", heartbeat(&mut b, &g, generation, &bm).await?);
    let d = describe(&mut c.client, &g).await?;
    c.see("after sync", described(&d));
    let mine = |id: &str| {
        d.members
            .iter()
            .find(|m| m.member_id.as_str() == id)
            .map(|m| m.member_assignment.clone())
    };
    c.see("described A assignment", mine(&am) == Some(aa));
    c.see("described B assignment", mine(&bm) == Some(ba));
    c.see(
        "described client ids",
        d.members
            .iter()
            .all(|m| m.client_id.as_str() == "kaas-probe"),
    );
    c.see(
        "described client hosts set",
        d.members.iter().all(|m| !m.client_host.is_empty()),
    );
    Ok(())
}

async fn heartbeat_errors_by_generation_member_and_group(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let (g, m, generation) = (st.group.clone(), st.member.clone(), st.generation);
    let seen = heartbeat(&mut c.client, &g, generation, &m).await?;
    c.see("current", seen);
    let seen = heartbeat(&mut c.client, &g, generation - 1, &m).await?;
    c.see("older generation", seen);
    let seen = heartbeat(&mut c.client, &g, generation + 1, &m).await?;
    c.see("newer generation", seen);
    let seen = heartbeat(&mut c.client, &g, generation, "nobody-0000").await?;
    c.see("unknown member", seen);
    let seen = heartbeat(&mut c.client, &g, generation, "").await?;
    c.see("empty member", seen);
    let unknown = c.name("nogroup");
    let seen = heartbeat(&mut c.client, &unknown, 1, "nobody-0000").await?;
    c.see("unknown group", seen);
    Ok(())
}

async fn heartbeat_while_completing_rebalance(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let r = join(&mut c.client, &Join::new(&group, &t)).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let m = r.member_id.to_string();
    let d = describe(&mut c.client, &group).await?;
    c.see("after join", described(&d));
    let seen = heartbeat(&mut c.client, &group, r.generation_id, &m).await?;
    c.see("heartbeat before sync", seen);
    let sr = sync(
        &mut c.client,
        &group,
        r.generation_id,
        &m,
        &[(&m, assignment(&t, &[0]))],
    )
    .await?;
    c.see("sync", sr.error_code);
    let seen = heartbeat(&mut c.client, &group, r.generation_id, &m).await?;
    c.see("heartbeat after sync", seen);
    Ok(())
}

async fn leave_group_batch_answers_per_member(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let (top, each) = leave(&mut c.client, &st.group, &[&st.member, "nobody-0000"]).await?;
    c.see("leave error", top);
    c.see("leave members", format!("{each:?}"));
    let d = describe(&mut c.client, &st.group).await?;
    c.see("after leave", described(&d));
    let seen = heartbeat(&mut c.client, &st.group, st.generation, &st.member).await?;
    c.see("left member heartbeat", seen);
    let (top, each) = leave(&mut c.client, &st.group, &[&st.member]).await?;
    c.see("leave again", format!("error={top} members={each:?}"));
    let unknown = c.name("nogroup");
    let (top, each) = leave(&mut c.client, &unknown, &["nobody-0000"]).await?;
    c.see(
        "leave unknown group",
        format!("error={top} members={each:?}"),
    );
    Ok(())
}

async fn leave_of_one_member_rebalances_the_other(c: &mut Ctx) -> anyhow::Result<()> {
    let mut b = c.connect().await?;
    let two = two_members(c, &mut b, None).await?;
    let g = two.first.group.clone();
    let t = two.first.topic.clone();
    let generation = two.a_join.generation_id;
    let (am, bm) = (
        two.a_join.member_id.to_string(),
        two.b_join.member_id.to_string(),
    );
    let b_id = send(&mut b, &sync_req(&g, generation, &bm, &[]), 5).await?;
    sync(
        &mut c.client,
        &g,
        generation,
        &am,
        &[(&am, assignment(&t, &[0])), (&bm, assignment(&t, &[]))],
    )
    .await?;
    recv::<SyncGroupRequest>(&mut b, b_id, 5).await?;
    let (top, each) = leave(&mut b, &g, &[&bm]).await?;
    c.see("B leaves", format!("error={top} members={each:?}"));
    let seen = heartbeat(&mut c.client, &g, generation, &am).await?;
    c.see("A heartbeat after B left", seen);
    let d = describe(&mut c.client, &g).await?;
    c.see("after B left", described(&d));
    let mut ja = Join::new(&g, &t);
    ja.member = am.clone();
    let r = c.client.call(&ja.request(), 9).await?;
    c.see(
        "A rejoins",
        format!(
            "error={} generation+={} members={} leader is A={}",
            r.error_code,
            r.generation_id - generation,
            r.members.len(),
            r.leader.as_str() == am
        ),
    );
    Ok(())
}

async fn session_timeout_expiry_removes_the_member(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut j = Join::new(&group, &t);
    j.session_ms = 1000;
    let r = join(&mut c.client, &j).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let m = r.member_id.to_string();
    let sr = sync(
        &mut c.client,
        &group,
        r.generation_id,
        &m,
        &[(&m, assignment(&t, &[0]))],
    )
    .await?;
    ensure!(sr.error_code == 0, "SyncGroup: error {}", sr.error_code);
    let d = describe(&mut c.client, &group).await?;
    c.see("while heartbeating", described(&d));
    let d = c
        .wait_until(Duration::from_secs(10), "the session expires", async |c| {
            let d = describe(&mut c.client, &group).await?;
            Ok(d.members.is_empty().then_some(d))
        })
        .await?;
    c.see("after expiry", described(&d));
    let seen = heartbeat(&mut c.client, &group, r.generation_id, &m).await?;
    c.see("expired member heartbeat", seen);
    let sr = sync(&mut c.client, &group, r.generation_id, &m, &[]).await?;
    c.see("expired member sync", sr.error_code);
    Ok(())
}

async fn rebalance_timeout_drops_a_member_that_does_not_rejoin(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut ja = Join::new(&group, &t);
    ja.rebalance_ms = 1000;
    ja.session_ms = 10_000;
    let r = join(&mut c.client, &ja).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let am = r.member_id.to_string();
    let generation = r.generation_id;
    sync(
        &mut c.client,
        &group,
        generation,
        &am,
        &[(&am, assignment(&t, &[0]))],
    )
    .await?;
    let mut b = c.connect().await?;
    let mut jb = Join::new(&group, &t);
    jb.rebalance_ms = 1000;
    let rb = b.call(&jb.request(), 9).await?;
    ensure!(
        rb.error_code == 79,
        "B's first join: error {}",
        rb.error_code
    );
    jb.member = rb.member_id.to_string();
    let started = std::time::Instant::now();
    // A never rejoins: B's join completes once the rebalance times out.
    let rb = b.call(&jb.request(), 9).await?;
    c.see("B join error", rb.error_code);
    c.see("B generation - first", rb.generation_id - generation);
    c.see("B is leader", rb.leader == rb.member_id);
    c.see("B members", rb.members.len());
    c.see(
        "waited at least 0.5 s",
        started.elapsed() >= Duration::from_millis(500),
    );
    let seen = heartbeat(&mut c.client, &group, generation, &am).await?;
    c.see("A heartbeat", seen);
    Ok(())
}

async fn static_member_rejoin_keeps_generation_and_assignment(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut j = Join::new(&group, &t);
    j.instance = Some("instance-1".to_owned());
    let r = c.call(&j.request(), 9).await?;
    c.see("static first join error", r.error_code);
    c.see("static first join leader is self", r.leader == r.member_id);
    let m1 = r.member_id.to_string();
    let generation = r.generation_id;
    let a = assignment(&t, &[0]);
    let mut sreq = sync_req(&group, generation, &m1, &[(&m1, a.clone())]);
    sreq.group_instance_id = Some(s("instance-1"));
    let sr = c.call(&sreq, 5).await?;
    c.see("static sync error", sr.error_code);
    // The same instance restarts: an empty member id.
    let mut b = c.connect().await?;
    let r2 = b.call(&j.request(), 9).await?;
    c.see("rejoin error", r2.error_code);
    c.see(
        "rejoin new member id",
        !r2.member_id.is_empty() && r2.member_id.as_str() != m1,
    );
    c.see("rejoin generation - first", r2.generation_id - generation);
    c.see("rejoin leader is self", r2.leader == r2.member_id);
    c.see("rejoin skip assignment", r2.skip_assignment);
    c.see("rejoin members", r2.members.len());
    c.see(
        "rejoin protocol",
        format!("{:?}", r2.protocol_name.as_ref().map(|x| x.to_string())),
    );
    let m2 = r2.member_id.to_string();
    let mut sreq = sync_req(&group, r2.generation_id, &m2, &[]);
    sreq.group_instance_id = Some(s("instance-1"));
    let sr = b.call(&sreq, 5).await?;
    c.see("rejoin sync error", sr.error_code);
    c.see("rejoin keeps its assignment", sr.assignment == a);
    let d = describe(&mut b, &group).await?;
    c.see("described", described(&d));
    c.see(
        "described instance",
        format!(
            "{:?}",
            d.members
                .first()
                .and_then(|m| m.group_instance_id.as_ref().map(|x| x.to_string()))
        ),
    );
    Ok(())
}

async fn static_member_rejoin_fences_the_old_member_id(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut j = Join::new(&group, &t);
    j.instance = Some("instance-1".to_owned());
    let r = c.call(&j.request(), 9).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let m1 = r.member_id.to_string();
    let generation = r.generation_id;
    let mut sreq = sync_req(&group, generation, &m1, &[(&m1, assignment(&t, &[0]))]);
    sreq.group_instance_id = Some(s("instance-1"));
    c.call(&sreq, 5).await?;
    let mut b = c.connect().await?;
    let r2 = b.call(&j.request(), 9).await?;
    ensure!(r2.error_code == 0, "rejoin: error {}", r2.error_code);
    let hb = HeartbeatRequest::default()
        .with_group_id(gid(&group))
        .with_generation_id(generation)
        .with_member_id(s(&m1))
        .with_group_instance_id(Some(s("instance-1")));
    let seen = c.call(&hb, 4).await?.error_code;
    c.see("old member id heartbeat", seen);
    let seen = heartbeat(&mut c.client, &group, generation, &m1).await?;
    c.see("old member id heartbeat without instance", seen);
    let mut sreq = sync_req(&group, generation, &m1, &[]);
    sreq.group_instance_id = Some(s("instance-1"));
    let seen = c.call(&sreq, 5).await?.error_code;
    c.see("old member id sync", seen);
    let mut old = j.clone();
    old.member = m1.clone();
    let seen = c.call(&old.request(), 9).await?.error_code;
    c.see("old member id join", seen);
    let req = LeaveGroupRequest::default()
        .with_group_id(gid(&group))
        .with_members(vec![
            MemberIdentity::default()
                .with_member_id(s(&m1))
                .with_group_instance_id(Some(s("instance-1"))),
        ]);
    let lr = c.call(&req, 5).await?;
    c.see(
        "old member id leave",
        format!(
            "error={} members={:?}",
            lr.error_code,
            lr.members.iter().map(|m| m.error_code).collect::<Vec<_>>()
        ),
    );
    let d = describe(&mut c.client, &group).await?;
    c.see("described", described(&d));
    Ok(())
}

async fn inconsistent_protocol_type_and_names(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let mut b = c.connect().await?;
    let mut j = Join::new(&st.group, &st.topic);
    j.protocol_type = "connect".to_owned();
    let r = b.call(&j.request(), 9).await?;
    c.see("other protocol type", r.error_code);
    let mut j = Join::new(&st.group, &st.topic);
    j.protocols = protocols(&["sticky-only"], &[&st.topic]);
    let r = b.call(&j.request(), 9).await?;
    c.see("no common protocol", r.error_code);
    let fresh = c.name("g2");
    let mut j = Join::new(&fresh, &st.topic);
    j.protocols = Vec::new();
    let r = b.call(&j.request(), 9).await?;
    c.see("no protocols on a new group", r.error_code);
    let mut j = Join::new(&fresh, &st.topic);
    j.protocol_type = String::new();
    let r = b.call(&j.request(), 9).await?;
    c.see("empty protocol type on a new group", r.error_code);
    let d = describe(&mut c.client, &st.group).await?;
    c.see("group unchanged", described(&d));
    Ok(())
}

async fn session_timeout_out_of_bounds(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    let mut j = Join::new(&group, &t);
    j.session_ms = 999;
    let r = c.call(&j.request(), 9).await?;
    c.see("999 ms", r.error_code);
    j.session_ms = 1000;
    let r = c.call(&j.request(), 9).await?;
    c.see("1000 ms", r.error_code);
    j.session_ms = 2_000_000;
    let r = c.call(&j.request(), 9).await?;
    c.see("2000000 ms", r.error_code);
    j.session_ms = 1_800_000;
    let r = c.call(&j.request(), 9).await?;
    c.see("1800000 ms", r.error_code);
    Ok(())
}

async fn describe_groups_through_the_states(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let d = describe(&mut c.client, &group).await?;
    c.see("unknown group", described(&d));
    c.see("unknown group id echoed", d.group_id.0.as_str() == group);
    let r = join(&mut c.client, &Join::new(&group, &t)).await?;
    let m = r.member_id.to_string();
    let d = describe(&mut c.client, &group).await?;
    c.see("joined", described(&d));
    c.see(
        "joined member metadata",
        d.members
            .first()
            .is_some_and(|x| x.member_metadata == subscription(&[&t])),
    );
    c.see(
        "joined member assignment empty",
        d.members
            .first()
            .is_some_and(|x| x.member_assignment.is_empty()),
    );
    sync(
        &mut c.client,
        &group,
        r.generation_id,
        &m,
        &[(&m, assignment(&t, &[0]))],
    )
    .await?;
    let d = describe(&mut c.client, &group).await?;
    c.see("synced", described(&d));
    leave(&mut c.client, &group, &[&m]).await?;
    let d = describe(&mut c.client, &group).await?;
    c.see("left", described(&d));
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![gid(&group), gid(&c.name("nogroup"))])
        .with_include_authorized_operations(true);
    let r = c.call(&req, 5).await?;
    c.see("two groups", r.groups.len());
    // Kafka 4 answers the groups in no fixed order.
    for g in &r.groups {
        let label = if g.group_id.0.as_str() == group {
            "ours"
        } else {
            "unknown"
        };
        c.see(format!("{label} of two"), described(g));
    }
    let ours = r.groups.iter().find(|g| g.group_id.0.as_str() == group);
    c.see(
        "ours authorized operations set",
        ours.is_some_and(|g| g.authorized_operations != i32::MIN),
    );
    Ok(())
}

async fn describe_groups_preparing_rebalance(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let mut b = c.connect().await?;
    let mut jb = Join::new(&st.group, &st.topic);
    let r = b.call(&jb.request(), 9).await?;
    ensure!(r.error_code == 79, "B's first join: error {}", r.error_code);
    jb.member = r.member_id.to_string();
    let b_id = send(&mut b, &jb.request(), 9).await?;
    let group = st.group.clone();
    let d = c
        .wait_until(Duration::from_secs(5), "the rebalance starts", async |c| {
            let d = describe(&mut c.client, &group).await?;
            Ok((d.group_state.as_str() != "Stable").then_some(d))
        })
        .await?;
    c.see("while B joins", described(&d));
    let mut ja = Join::new(&st.group, &st.topic);
    ja.member = st.member.clone();
    let r = c.client.call(&ja.request(), 9).await?;
    let rb = recv::<JoinGroupRequest>(&mut b, b_id, 9).await?;
    c.see("joins", format!("A={} B={}", r.error_code, rb.error_code));
    let d = describe(&mut c.client, &group).await?;
    c.see("after both joined", described(&d));
    Ok(())
}

async fn list_groups_with_states_filter(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let simple = c.name("simple");
    commit(&mut c.client, &simple, -1, "", &[(&st.topic, 0, 1, None)]).await?;
    let mine = [st.group.clone(), simple.clone()];
    for (label, states) in [
        ("no filter", vec![]),
        ("Stable", vec!["Stable"]),
        ("Empty", vec!["Empty"]),
        ("stable lowercase", vec!["stable"]),
        ("Dead", vec!["Dead"]),
    ] {
        let req =
            ListGroupsRequest::default().with_states_filter(states.iter().map(|x| s(x)).collect());
        let r = c.call(&req, 4).await?;
        let mut seen: Vec<String> = r
            .groups
            .iter()
            .filter(|g| mine.iter().any(|m| m.as_str() == g.group_id.0.as_str()))
            .map(|g| {
                format!(
                    "{} type={:?} state={}",
                    if g.group_id.0.as_str() == st.group {
                        "member group"
                    } else {
                        "simple group"
                    },
                    g.protocol_type.as_str(),
                    g.group_state.as_str()
                )
            })
            .collect();
        seen.sort();
        c.see(format!("{label} error"), r.error_code);
        c.see(format!("{label} groups"), format!("{seen:?}"));
    }
    let r = c.call(&ListGroupsRequest::default(), 2).await?;
    c.see(
        "v2 lists the member group",
        r.groups.iter().any(|g| g.group_id.0.as_str() == st.group),
    );
    Ok(())
}

async fn delete_groups_non_empty_then_empty_then_unknown(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let unknown = c.name("nogroup");
    let del = |names: Vec<String>| {
        DeleteGroupsRequest::default().with_groups_names(names.iter().map(|n| gid(n)).collect())
    };
    let r = c
        .call(&del(vec![st.group.clone(), unknown.clone()]), 2)
        .await?;
    let mut codes: Vec<_> = r
        .results
        .iter()
        .map(|x| (x.group_id.0.as_str() == st.group, x.error_code))
        .collect();
    codes.sort_unstable();
    c.see("non-empty and unknown", format!("{codes:?}"));
    commit(
        &mut c.client,
        &st.group,
        st.generation,
        &st.member,
        &[(&st.topic, 0, 5, None)],
    )
    .await?;
    leave(&mut c.client, &st.group, &[&st.member]).await?;
    let r = c.call(&del(vec![st.group.clone()]), 2).await?;
    c.see(
        "after leaving",
        r.results.first().map_or(-1, |x| x.error_code),
    );
    let d = describe(&mut c.client, &st.group).await?;
    c.see("described after delete", described(&d));
    let (e, offs) = fetch_offsets(&mut c.client, &st.group, Some((&st.topic, &[0]))).await?;
    c.see("offsets after delete", format!("error={e} {offs:?}"));
    let r = c.call(&del(vec![st.group.clone()]), 2).await?;
    c.see(
        "deleted again",
        r.results.first().map_or(-1, |x| x.error_code),
    );
    let simple = c.name("simple");
    commit(&mut c.client, &simple, -1, "", &[(&st.topic, 0, 3, None)]).await?;
    let r = c.call(&del(vec![simple.clone()]), 2).await?;
    c.see(
        "offsets-only group",
        r.results.first().map_or(-1, |x| x.error_code),
    );
    Ok(())
}

async fn simple_commit_and_fetch_without_membership(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    let e = commit(&mut c.client, &group, -1, "", &[(&t, 0, 42, Some("m"))]).await?;
    c.see("commit", format!("{e:?}"));
    let (e, offs) = fetch_offsets(&mut c.client, &group, Some((&t, &[0, 1]))).await?;
    c.see("fetch error", e);
    c.see("fetch", format!("{offs:?}"));
    let e = commit(&mut c.client, &group, -1, "", &[(&t, 0, 7, None)]).await?;
    c.see("commit lower", format!("{e:?}"));
    let (_, offs) = fetch_offsets(&mut c.client, &group, Some((&t, &[0]))).await?;
    c.see("fetch after lower", format!("{offs:?}"));
    let d = describe(&mut c.client, &group).await?;
    c.see("described", described(&d));
    let unknown = c.name("nogroup");
    let (e, offs) = fetch_offsets(&mut c.client, &unknown, Some((&t, &[0]))).await?;
    c.see("unknown group fetch", format!("error={e} {offs:?}"));
    Ok(())
}

async fn commit_generation_and_member_checks(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let (g, t, m, generation) = (
        st.group.clone(),
        st.topic.clone(),
        st.member.clone(),
        st.generation,
    );
    let one = |o: i64| [(t.as_str(), 0, o, None::<&str>)];
    let seen = format!(
        "{:?}",
        commit(&mut c.client, &g, generation, &m, &one(1)).await?
    );
    c.see("current generation", seen);
    let seen = format!(
        "{:?}",
        commit(&mut c.client, &g, generation - 1, &m, &one(2)).await?
    );
    c.see("stale generation", seen);
    let seen = format!(
        "{:?}",
        commit(&mut c.client, &g, generation + 1, &m, &one(3)).await?
    );
    c.see("future generation", seen);
    let seen = format!(
        "{:?}",
        commit(&mut c.client, &g, generation, "nobody-0000", &one(4)).await?
    );
    c.see("unknown member", seen);
    let seen = format!("{:?}", commit(&mut c.client, &g, -1, "", &one(5)).await?);
    c.see("generation -1 into a live group", seen);
    let seen = format!("{:?}", commit(&mut c.client, &g, -1, &m, &one(6)).await?);
    c.see("generation -1 with member", seen);
    let (_, offs) = fetch_offsets(&mut c.client, &g, Some((&t, &[0]))).await?;
    c.see("committed", format!("{offs:?}"));
    Ok(())
}

async fn committed_metadata_round_trip_and_limit(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 3, &[]).await?;
    let big = "x".repeat(5000);
    let e = commit(
        &mut c.client,
        &group,
        -1,
        "",
        &[
            (&t, 0, 1, Some("hello, wörld")),
            (&t, 1, 2, None),
            (&t, 2, 3, Some("")),
        ],
    )
    .await?;
    c.see("commit", format!("{e:?}"));
    let (_, offs) = fetch_offsets(&mut c.client, &group, Some((&t, &[0, 1, 2]))).await?;
    c.see("fetch", format!("{offs:?}"));
    let e = commit(&mut c.client, &group, -1, "", &[(&t, 0, 9, Some(&big))]).await?;
    c.see("5000-byte metadata", format!("{e:?}"));
    let (_, offs) = fetch_offsets(&mut c.client, &group, Some((&t, &[0]))).await?;
    c.see("after the refused commit", format!("{offs:?}"));
    Ok(())
}

async fn offsets_of_a_missing_topic_or_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let missing = c.name("missing");
    let e = commit(&mut c.client, &group, -1, "", &[(&missing, 0, 1, None)]).await?;
    c.see("commit missing topic", format!("{e:?}"));
    let e = commit(&mut c.client, &group, -1, "", &[(&t, 5, 1, None)]).await?;
    c.see("commit missing partition", format!("{e:?}"));
    let e = commit(&mut c.client, &group, -1, "", &[(&t, 0, -5, None)]).await?;
    c.see("commit negative offset", format!("{e:?}"));
    let (e, offs) = fetch_offsets(&mut c.client, &group, Some((&missing, &[0]))).await?;
    c.see("fetch missing topic", format!("error={e} {offs:?}"));
    let (e, offs) = fetch_offsets(&mut c.client, &group, Some((&t, &[5]))).await?;
    c.see("fetch missing partition", format!("error={e} {offs:?}"));
    Ok(())
}

async fn offset_fetch_all_partitions_of_a_group(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 3, &[]).await?;
    let (e, offs) = fetch_offsets(&mut c.client, &group, None).await?;
    c.see("before any commit", format!("error={e} {offs:?}"));
    commit(
        &mut c.client,
        &group,
        -1,
        "",
        &[(&t, 0, 10, None), (&t, 2, 30, Some("z"))],
    )
    .await?;
    let (e, offs) = fetch_offsets(&mut c.client, &group, None).await?;
    c.see("all", format!("error={e} {offs:?}"));
    Ok(())
}

async fn offset_fetch_v8_several_groups(c: &mut Ctx) -> anyhow::Result<()> {
    let g1 = c.name("g1");
    let g2 = c.name("g2");
    let g3 = c.name("nogroup");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    commit(&mut c.client, &g1, -1, "", &[(&t, 0, 11, None)]).await?;
    commit(&mut c.client, &g2, -1, "", &[(&t, 1, 22, None)]).await?;
    let parts = |all: bool| {
        (!all).then(|| {
            vec![
                OffsetFetchRequestTopics::default()
                    .with_name(topic(&t))
                    .with_partition_indexes(vec![0, 1]),
            ]
        })
    };
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(gid(&g1))
            .with_topics(parts(false)),
        OffsetFetchRequestGroup::default()
            .with_group_id(gid(&g2))
            .with_topics(parts(true)),
        OffsetFetchRequestGroup::default()
            .with_group_id(gid(&g3))
            .with_topics(parts(false)),
    ]);
    let r = c.call(&req, 8).await?;
    c.see("groups", r.groups.len());
    for (label, name) in [("g1", &g1), ("g2 (all)", &g2), ("unknown", &g3)] {
        let Some(g) = r
            .groups
            .iter()
            .find(|g| g.group_id.0.as_str() == name.as_str())
        else {
            c.see(label, "missing");
            continue;
        };
        let mut offs: Vec<String> = g
            .topics
            .iter()
            .flat_map(|x| {
                x.partitions.iter().map(|p| {
                    format!(
                        "{}={} e{}",
                        p.partition_index, p.committed_offset, p.error_code
                    )
                })
            })
            .collect();
        offs.sort();
        c.see(label, format!("error={} {offs:?}", g.error_code));
    }
    Ok(())
}

async fn offset_delete_of_subscribed_and_unsubscribed_topics(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let other = c.name("other");
    c.create_topic(&other, 1, &[]).await?;
    commit(
        &mut c.client,
        &st.group,
        st.generation,
        &st.member,
        &[(&st.topic, 0, 5, None), (&other, 0, 6, None)],
    )
    .await?;
    let del = |g: &str, t: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(gid(g))
            .with_topics(vec![
                OffsetDeleteRequestTopic::default()
                    .with_name(topic(t))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0),
                    ]),
            ])
    };
    let res = |r: &kafka_protocol::messages::OffsetDeleteResponse| {
        format!(
            "error={} partitions={:?}",
            r.error_code,
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect::<Vec<_>>()
        )
    };
    let r = c.call(&del(&st.group, &st.topic), 0).await?;
    c.see("subscribed topic", res(&r));
    let r = c.call(&del(&st.group, &other), 0).await?;
    c.see("unsubscribed topic", res(&r));
    let (_, offs) = fetch_offsets(&mut c.client, &st.group, None).await?;
    c.see("remaining", format!("{offs:?}"));
    leave(&mut c.client, &st.group, &[&st.member]).await?;
    let r = c.call(&del(&st.group, &st.topic), 0).await?;
    c.see("after leaving", res(&r));
    let (_, offs) = fetch_offsets(&mut c.client, &st.group, None).await?;
    c.see("remaining after leaving", format!("{offs:?}"));
    let r = c.call(&del(&c.name("nogroup"), &st.topic), 0).await?;
    c.see("unknown group", res(&r));
    Ok(())
}

async fn sync_group_errors(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let (g, m, generation) = (st.group.clone(), st.member.clone(), st.generation);
    let seen = sync(&mut c.client, &g, generation, &m, &[])
        .await?
        .error_code;
    c.see("current", seen);
    let seen = sync(&mut c.client, &g, generation - 1, &m, &[])
        .await?
        .error_code;
    c.see("stale generation", seen);
    let seen = sync(&mut c.client, &g, generation, "nobody-0000", &[])
        .await?
        .error_code;
    c.see("unknown member", seen);
    let mut req = sync_req(&g, generation, &m, &[]);
    req.protocol_type = Some(s("connect"));
    let seen = c.call(&req, 5).await?.error_code;
    c.see("other protocol type", seen);
    let mut req = sync_req(&g, generation, &m, &[]);
    req.protocol_name = Some(s("roundrobin"));
    let seen = c.call(&req, 5).await?.error_code;
    c.see("other protocol name", seen);
    let unknown = c.name("nogroup");
    let seen = sync(&mut c.client, &unknown, 1, "nobody-0000", &[])
        .await?
        .error_code;
    c.see("unknown group", seen);
    let r = sync(&mut c.client, &g, generation, &m, &[]).await?;
    c.see(
        "resync keeps the assignment",
        r.assignment == assignment(&st.topic, &[0]),
    );
    Ok(())
}

async fn join_with_an_unknown_member_id(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let mut j = Join::new(&st.group, &st.topic);
    j.member = "nobody-0000".to_owned();
    let seen = c.call(&j.request(), 9).await?.error_code;
    c.see("unknown member id into a live group", seen);
    let mut j = Join::new(&c.name("fresh"), &st.topic);
    j.member = "nobody-0000".to_owned();
    let seen = c.call(&j.request(), 9).await?.error_code;
    c.see("unknown member id into a new group", seen);
    let d = describe(&mut c.client, &st.group).await?;
    c.see("group unchanged", described(&d));
    // A known member joining again with the same protocols while Stable.
    let mut j = Join::new(&st.group, &st.topic);
    j.member = st.member.clone();
    let r = c.call(&j.request(), 9).await?;
    c.see(
        "known member rejoin",
        format!(
            "error={} generation+={} leader is self={}",
            r.error_code,
            r.generation_id - st.generation,
            r.leader == r.member_id
        ),
    );
    Ok(())
}

async fn empty_group_id_is_invalid(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let j = Join::new("", &t);
    let seen = c.call(&j.request(), 9).await?.error_code;
    c.see("join", seen);
    let seen = heartbeat(&mut c.client, "", 1, "m").await?;
    c.see("heartbeat", seen);
    let seen = sync(&mut c.client, "", 1, "m", &[]).await?.error_code;
    c.see("sync", seen);
    let e = commit(&mut c.client, "", -1, "", &[(&t, 0, 1, None)]).await?;
    c.see("commit", format!("{e:?}"));
    let d = describe(&mut c.client, "").await?;
    c.see("describe", described(&d));
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("")]);
    let r = c.call(&req, 4).await?;
    c.see(
        "find coordinator",
        r.coordinators.first().map_or(-1, |x| x.error_code),
    );
    Ok(())
}

async fn commit_during_a_rebalance(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let r = join(&mut c.client, &Join::new(&group, &t)).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let m = r.member_id.to_string();
    let e = commit(
        &mut c.client,
        &group,
        r.generation_id,
        &m,
        &[(&t, 0, 1, None)],
    )
    .await?;
    c.see("commit before sync", format!("{e:?}"));
    sync(
        &mut c.client,
        &group,
        r.generation_id,
        &m,
        &[(&m, assignment(&t, &[0]))],
    )
    .await?;
    let mut b = c.connect().await?;
    let mut jb = Join::new(&group, &t);
    let rb = b.call(&jb.request(), 9).await?;
    ensure!(
        rb.error_code == 79,
        "B's first join: error {}",
        rb.error_code
    );
    jb.member = rb.member_id.to_string();
    let b_id = send(&mut b, &jb.request(), 9).await?;
    let generation = r.generation_id;
    let g2 = group.clone();
    c.wait_until(Duration::from_secs(5), "the rebalance starts", async |c| {
        let d = describe(&mut c.client, &g2).await?;
        Ok((d.group_state.as_str() == "PreparingRebalance").then_some(()))
    })
    .await?;
    let e = commit(&mut c.client, &group, generation, &m, &[(&t, 0, 2, None)]).await?;
    c.see("commit while preparing", format!("{e:?}"));
    let mut ja = Join::new(&group, &t);
    ja.member = m.clone();
    c.call(&ja.request(), 9).await?;
    recv::<JoinGroupRequest>(&mut b, b_id, 9).await?;
    let e = commit(&mut c.client, &group, generation, &m, &[(&t, 0, 3, None)]).await?;
    c.see("old generation while completing", format!("{e:?}"));
    let e = commit(
        &mut c.client,
        &group,
        generation + 1,
        &m,
        &[(&t, 0, 4, None)],
    )
    .await?;
    c.see("new generation while completing", format!("{e:?}"));
    let (_, offs) = fetch_offsets(&mut c.client, &group, Some((&t, &[0]))).await?;
    c.see("committed", format!("{offs:?}"));
    Ok(())
}

async fn protocol_choice_follows_every_member(c: &mut Ctx) -> anyhow::Result<()> {
    let mut b = c.connect().await?;
    let t = c.name("t");
    let two = two_members(c, &mut b, Some(protocols(&["roundrobin"], &[&t]))).await?;
    c.see(
        "A",
        format!(
            "error={} protocol={:?}",
            two.a_join.error_code,
            two.a_join.protocol_name.as_ref().map(|x| x.to_string())
        ),
    );
    c.see(
        "B",
        format!(
            "error={} protocol={:?}",
            two.b_join.error_code,
            two.b_join.protocol_name.as_ref().map(|x| x.to_string())
        ),
    );
    c.see("A members", two.a_join.members.len());
    Ok(())
}

async fn leave_group_v0_and_unknown_member(c: &mut Ctx) -> anyhow::Result<()> {
    let st = stable_one(c).await?;
    let v0 = |m: &str| {
        LeaveGroupRequest::default()
            .with_group_id(gid(&st.group))
            .with_member_id(s(m))
    };
    let seen = c.call(&v0("nobody-0000"), 0).await?.error_code;
    c.see("v0 unknown member", seen);
    let seen = c.call(&v0(&st.member), 0).await?.error_code;
    c.see("v0 member", seen);
    let d = describe(&mut c.client, &st.group).await?;
    c.see("after leave", described(&d));
    let seen = c.call(&v0(&st.member), 0).await?.error_code;
    c.see("v0 again", seen);
    let unknown = c.name("nogroup");
    let req = LeaveGroupRequest::default()
        .with_group_id(gid(&unknown))
        .with_member_id(s("nobody-0000"));
    let seen = c.call(&req, 0).await?.error_code;
    c.see("v0 unknown group", seen);
    Ok(())
}

async fn leave_a_static_member_by_instance_id(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut j = Join::new(&group, &t);
    j.instance = Some("instance-1".to_owned());
    let r = c.call(&j.request(), 9).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let m = r.member_id.to_string();
    let mut sreq = sync_req(&group, r.generation_id, &m, &[(&m, assignment(&t, &[0]))]);
    sreq.group_instance_id = Some(s("instance-1"));
    c.call(&sreq, 5).await?;
    let leave_one = |member: &str, instance: &str| {
        LeaveGroupRequest::default()
            .with_group_id(gid(&group))
            .with_members(vec![
                MemberIdentity::default()
                    .with_member_id(s(member))
                    .with_group_instance_id(Some(s(instance))),
            ])
    };
    let answer = |r: kafka_protocol::messages::LeaveGroupResponse| {
        format!(
            "error={} members={:?}",
            r.error_code,
            r.members.iter().map(|m| m.error_code).collect::<Vec<_>>()
        )
    };
    let seen = answer(c.call(&leave_one("", "instance-9"), 5).await?);
    c.see("unknown instance", seen);
    let seen = answer(c.call(&leave_one("nobody-0000", "instance-1"), 5).await?);
    c.see("instance with another member id", seen);
    let d = describe(&mut c.client, &group).await?;
    c.see("after the refused leaves", described(&d));
    let seen = answer(c.call(&leave_one("", "instance-1"), 5).await?);
    c.see("instance without member id", seen);
    let d = describe(&mut c.client, &group).await?;
    c.see("after the leave", described(&d));
    Ok(())
}

async fn join_group_old_versions(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    for v in [0i16, 1, 2, 4, 5, 6, 7, 8] {
        let group = c.name(&format!("v{v}"));
        let j = Join::new(&group, &t);
        let r = c.call(&j.request(), v).await?;
        let mut line = format!(
            "error={} member set={} leader is self={}",
            r.error_code,
            !r.member_id.is_empty(),
            r.leader == r.member_id
        );
        if r.error_code == 79 {
            let mut again = j.clone();
            again.member = r.member_id.to_string();
            let r = c.call(&again.request(), v).await?;
            line.push_str(&format!(
                "; with id error={} leader is self={} members={}",
                r.error_code,
                r.leader == r.member_id,
                r.members.len()
            ));
        }
        c.see(format!("v{v}"), line);
    }
    Ok(())
}

async fn offset_fetch_old_version_and_require_stable(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 2, &[]).await?;
    commit(&mut c.client, &group, -1, "", &[(&t, 0, 8, Some("v"))]).await?;
    let req = |stable: bool| {
        OffsetFetchRequest::default()
            .with_group_id(gid(&group))
            .with_require_stable(stable)
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(topic(&t))
                    .with_partition_indexes(vec![0, 1]),
            ]))
    };
    for (label, v, stable) in [
        ("v1", 1i16, false),
        ("v5", 5, false),
        ("v7 require stable", 7, true),
    ] {
        let r = c.call(&req(stable), v).await?;
        let mut offs: Vec<String> = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    format!(
                        "{}={} {:?} e{}",
                        p.partition_index,
                        p.committed_offset,
                        p.metadata.as_ref().map(|m| m.to_string()),
                        p.error_code
                    )
                })
            })
            .collect();
        offs.sort();
        c.see(label, format!("error={} {offs:?}", r.error_code));
    }
    Ok(())
}

async fn static_member_heartbeat_with_a_wrong_instance(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let mut j = Join::new(&group, &t);
    j.instance = Some("instance-1".to_owned());
    let r = c.call(&j.request(), 9).await?;
    ensure!(r.error_code == 0, "JoinGroup: error {}", r.error_code);
    let m = r.member_id.to_string();
    let generation = r.generation_id;
    let mut sreq = sync_req(&group, generation, &m, &[(&m, assignment(&t, &[0]))]);
    sreq.group_instance_id = Some(s("instance-1"));
    c.call(&sreq, 5).await?;
    let hb = |instance: Option<&str>| {
        HeartbeatRequest::default()
            .with_group_id(gid(&group))
            .with_generation_id(generation)
            .with_member_id(s(&m))
            .with_group_instance_id(instance.map(s))
    };
    let seen = c.call(&hb(Some("instance-1")), 4).await?.error_code;
    c.see("own instance", seen);
    let seen = c.call(&hb(None), 4).await?.error_code;
    c.see("no instance", seen);
    let seen = c.call(&hb(Some("instance-2")), 4).await?.error_code;
    c.see("another instance", seen);
    let e = commit(&mut c.client, &group, generation, &m, &[(&t, 0, 1, None)]).await?;
    c.see("commit without instance", format!("{e:?}"));
    Ok(())
}

async fn delete_groups_v0_batch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_topic(&t, 1, &[]).await?;
    let a = c.name("a");
    let b = c.name("b");
    commit(&mut c.client, &a, -1, "", &[(&t, 0, 1, None)]).await?;
    commit(&mut c.client, &b, -1, "", &[(&t, 0, 2, None)]).await?;
    let req = DeleteGroupsRequest::default().with_groups_names(vec![gid(&a), gid(&b), gid(&a)]);
    let r = c.call(&req, 0).await?;
    let mut codes: Vec<String> = r
        .results
        .iter()
        .map(|x| {
            let who = if x.group_id.0.as_str() == a { "a" } else { "b" };
            format!("{who}={}", x.error_code)
        })
        .collect();
    codes.sort();
    c.see("a, b, a", format!("{codes:?}"));
    let (_, offs) = fetch_offsets(&mut c.client, &a, Some((&t, &[0]))).await?;
    c.see("a offsets", format!("{offs:?}"));
    Ok(())
}

async fn a_pending_member_is_not_described(c: &mut Ctx) -> anyhow::Result<()> {
    let group = c.name("g");
    let t = c.name("t");
    let j = Join::new(&group, &t);
    let r = c.call(&j.request(), 9).await?;
    c.see("first join", r.error_code);
    let d = describe(&mut c.client, &group).await?;
    // Only the members: whether the group itself shows as Empty or Dead
    // here varies on Kafka 4.x (its new coordinator shows a group created
    // without a record once some later write on its partition commits).
    c.see(
        "after MEMBER_ID_REQUIRED",
        format!("error={} members={}", d.error_code, d.members.len()),
    );
    let pending = r.member_id.to_string();
    let seen = heartbeat(&mut c.client, &group, 0, &pending).await?;
    c.see("pending member heartbeat", seen);
    let (top, each) = leave(&mut c.client, &group, &[&pending]).await?;
    c.see(
        "pending member leaves",
        format!("error={top} members={each:?}"),
    );
    let mut again = j.clone();
    again.member = pending;
    let r = c.call(&again.request(), 9).await?;
    c.see("join with the id after leaving", r.error_code);
    Ok(())
}
