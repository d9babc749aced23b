use super::*;

fn cfg(initial_ms: u64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay: Duration::from_millis(initial_ms),
        ..GroupConfig::default()
    }
}

fn at(base: Instant, ms: u64) -> Now {
    Now {
        at: base + Duration::from_millis(ms),
        wall_ms: ms as i64,
    }
}

fn req(member_id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(10),
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: false,
    }
}

fn ids() -> impl FnMut(&str) -> String {
    let mut n = 0;
    move |prefix: &str| {
        n += 1;
        format!("{prefix}-{n}")
    }
}

fn answered(r: Reply<JoinOutcome>) -> Option<JoinOutcome> {
    match r {
        Reply::Now(o) => Some(o),
        Reply::Later(mut rx) => rx.try_recv().ok(),
    }
}

#[test]
fn the_protocol_most_members_prefer_among_those_all_support_is_chosen() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", &cfg(0), at(t0, 0));
    let mut new_id = ids();
    let a = g.join(
        req("", &["sticky", "range", "roundrobin"]),
        at(t0, 0),
        &mut new_id,
    );
    let b = g.join(req("", &["roundrobin", "range"]), at(t0, 0), &mut new_id);
    let c = g.join(req("", &["range", "roundrobin"]), at(t0, 0), &mut new_id);
    // With no initial delay, the phase still ends by its timer: one
    // (zero) extension for the members that arrived, then completion.
    g.tick(at(t0, 1));
    g.tick(at(t0, 1));
    let outcomes: Vec<JoinOutcome> = [a, b, c].into_iter().filter_map(answered).collect();
    assert_eq!(outcomes.len(), 3);
    // "sticky" is not supported by all; votes: a→range, b→roundrobin,
    // c→range.
    assert!(
        outcomes
            .iter()
            .all(|o| o.protocol.as_deref() == Some("range"))
    );
    let leader = outcomes
        .iter()
        .find(|o| !o.members.is_empty())
        .expect("a leader");
    assert_eq!(leader.member_id, "c-1", "the first member leads");
    assert_eq!(leader.members[1].metadata, Bytes::from("meta-range"));
}

#[test]
fn the_initial_delay_is_extended_while_new_members_arrive() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", &cfg(100), at(t0, 0));
    let mut new_id = ids();
    let mut a = g.join(req("", &["range"]), at(t0, 0), &mut new_id);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    // A second member arrives during the delay: another delay follows.
    let _b = g.join(req("", &["range"]), at(t0, 50), &mut new_id);
    g.tick(at(t0, 100));
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(g.next_deadline(), Some(t0 + Duration::from_millis(200)));
    if let Reply::Later(rx) = &mut a {
        assert!(rx.try_recv().is_err(), "still waiting");
    }
    g.tick(at(t0, 200));
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    assert_eq!((g.generation(), g.member_count()), (1, 2));
    assert!(answered(a).is_some_and(|o| o.error == codes::NONE));
}

#[test]
fn a_join_while_completing_answers_parked_syncs_with_rebalance_in_progress() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", &cfg(0), at(t0, 0));
    let mut new_id = ids();
    let a = g.join(req("", &["range"]), at(t0, 0), &mut new_id);
    let b = g.join(req("", &["range"]), at(t0, 0), &mut new_id);
    g.tick(at(t0, 0));
    g.tick(at(t0, 0));
    let (a, b) = (answered(a).expect("a"), answered(b).expect("b"));
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let follower = if a.members.is_empty() { &a } else { &b };
    let parked = g.sync(
        SyncRequest {
            generation: follower.generation,
            member_id: follower.member_id.clone(),
            instance_id: None,
            protocol_type: None,
            protocol: None,
            assignments: Vec::new(),
        },
        at(t0, 1),
    );
    let Reply::Later(mut rx) = parked else {
        panic!("a follower's SyncGroup waits for the leader's");
    };
    assert!(rx.try_recv().is_err());
    let _c = g.join(req("", &["range"]), at(t0, 2), &mut new_id);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(
        rx.try_recv().expect("answered").error,
        codes::REBALANCE_IN_PROGRESS
    );
    assert_eq!(
        g.heartbeat(&a.member_id, None, a.generation, at(t0, 3)),
        codes::REBALANCE_IN_PROGRESS
    );
}

#[test]
fn an_empty_group_takes_a_commit_from_outside_group_management_whatever_member_id_it_names() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", &cfg(0), at(t0, 0));
    assert_eq!(g.state(), GroupState::Empty);
    // librdkafka's KIP-848 consumer names its own member id even when it
    // assigns partitions itself; Kafka takes the commit (generation -1).
    assert_eq!(g.validate_commit(-1, "self-named", None, at(t0, 1)), Ok(()));
    assert_eq!(g.validate_commit(-1, "", None, at(t0, 1)), Ok(()));
    // A generation names group management: the member must be current.
    assert_eq!(
        g.validate_commit(1, "self-named", None, at(t0, 1)),
        Err(codes::UNKNOWN_MEMBER_ID)
    );
    // A group with members takes no commit from outside.
    let mut new_id = ids();
    let _a = g.join(req("", &["range"]), at(t0, 2), &mut new_id);
    assert_ne!(g.state(), GroupState::Empty);
    assert_eq!(
        g.validate_commit(-1, "self-named", None, at(t0, 3)),
        Err(codes::UNKNOWN_MEMBER_ID)
    );
}

#[test]
fn a_txn_commit_with_a_generation_names_a_current_member() {
    // Kafka 3.7: a generation (≥ 0), member id or instance id makes it a
    // member's commit, so an unknown member comes before the generation.
    let base = Instant::now();
    let mut g = ClassicGroup::new("g", &cfg(0), at(base, 0));
    let now = at(base, 1);
    assert_eq!(
        g.validate_txn_commit(3, "", None, now),
        Err(codes::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        g.validate_txn_commit(3, "ghost", None, now),
        Err(codes::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(g.validate_txn_commit(-1, "", None, now), Ok(()));
}
