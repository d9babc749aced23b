//! Replicas on a shared volume: what a partition's replica set and ISR are,
//! and the checks a replication factor or a manual assignment must pass.
//! Pure functions of the live broker ids and the topic record, so every
//! broker answers alike.
//!
//! Every broker reads and writes the one copy on the shared volume, so
//! durability is the volume's: a "replica" here is a broker that leads the
//! partition or would take it over, and every live replica is in sync by
//! construction. A partition's replicas are the set stored in its topic
//! record (a manual assignment, or for a replication factor above 1 the
//! placement chain computed at creation), in that order; the ISR is the
//! live ones, leader first, and a dead replica stays in the set (offline)
//! until it comes back, as on Kafka. A replication-factor-1 topic created
//! without an assignment stores no set: its one replica is whoever leads
//! it, and placement moves it freely over the live brokers.

use super::keys::Unit;
use super::placement;
use crate::codes;

/// A partition's replicas as Metadata reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaSet {
    /// The stored set (or the floating partition's chain), in order.
    pub replicas: Vec<i32>,
    /// The live replicas, leader first.
    pub isr: Vec<i32>,
    /// The stored replicas not live now.
    pub offline: Vec<i32>,
}

/// Why a replication factor or an assignment was refused: a Kafka error
/// code and Kafka's message.
pub type Refusal = (i16, String);

/// `rf` brokers of `live` for partition `p` of `topic`, in placement
/// order: the broker placement picks, then the one it would pick were that
/// one gone, and so on (the brokers that would take the partition over).
pub fn chain(live: &[i32], topic: &str, p: i32, rf: usize) -> Vec<i32> {
    let unit = Unit::Partition(topic.into(), p);
    let mut left = live.to_vec();
    let mut out = Vec::with_capacity(rf.min(live.len()));
    while out.len() < rf {
        let Some(next) = placement::leader_for(&left, &unit) else {
            break;
        };
        out.push(next);
        left.retain(|b| *b != next);
    }
    out
}

/// The replica set of partition `p` of `topic`: `stored` is its stored
/// set (empty: it floats), `rf` the topic's replication factor, `leader`
/// the live broker leading it, if any.
pub fn replica_set(
    live: &[i32],
    topic: &str,
    p: i32,
    stored: &[i32],
    rf: usize,
    leader: Option<i32>,
) -> ReplicaSet {
    let mut replicas = if stored.is_empty() {
        let mut c = chain(live, topic, p, rf.max(1));
        if let Some(l) = leader {
            c.retain(|b| *b != l);
            c.insert(0, l);
            c.truncate(rf.max(1));
        }
        c
    } else {
        stored.to_vec()
    };
    // Led from outside its set (no stored replica was live; any broker
    // can lead from the shared volume): the leader is reported first.
    if let Some(l) = leader.filter(|l| !replicas.contains(l)) {
        replicas.insert(0, l);
    }
    let mut isr: Vec<i32> = leader.into_iter().collect();
    isr.extend(
        replicas
            .iter()
            .copied()
            .filter(|r| Some(*r) != leader && live.contains(r)),
    );
    let offline = replicas
        .iter()
        .copied()
        .filter(|r| !live.contains(r) && Some(*r) != leader)
        .collect();
    ReplicaSet {
        replicas,
        isr,
        offline,
    }
}

/// The replication factor a CreateTopics asks for (-1: `default`),
/// checked against the `live` brokers as Kafka's controller checks it.
pub fn check_factor(asked: i16, default: i16, live: usize) -> Result<usize, Refusal> {
    if asked == 0 || asked < -1 {
        return Err((
            codes::INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.".into(),
        ));
    }
    let rf = if asked == -1 { default } else { asked };
    let n = usize::try_from(rf).unwrap_or(0);
    if n == 0 || n > live {
        return Err((
            codes::INVALID_REPLICATION_FACTOR,
            format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor \
                 of {rf} cannot be reached because only {live} broker(s) are registered."
            ),
        ));
    }
    Ok(n)
}

/// One partition's manual assignment, checked as Kafka 3.7's controller
/// checks it: not empty, only `registered` brokers, none twice, and
/// `expected` replicas when earlier partitions (or the topic) fix it.
pub fn check_assignment(
    registered: &[i32],
    replicas: &[i32],
    expected: Option<usize>,
) -> Result<(), Refusal> {
    let refuse = |m: String| Err((codes::INVALID_REPLICA_ASSIGNMENT, m));
    if replicas.is_empty() {
        return refuse("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for b in sorted {
        if !registered.contains(&b) {
            return refuse(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ));
        }
        if previous == Some(b) {
            return refuse(format!(
                "The manual partition assignment includes the broker {b} more than once."
            ));
        }
        previous = Some(b);
    }
    if let Some(n) = expected
        && replicas.len() != n
    {
        return refuse(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this \
             is not consistent with previous partitions, which have {n} replica(s).",
            replicas.len()
        ));
    }
    Ok(())
}

/// A whole topic's manual assignment: every partition checked, all of the
/// same size; the replication factor it sets.
pub fn check_assignments(registered: &[i32], all: &[Vec<i32>]) -> Result<usize, Refusal> {
    let mut expected = None;
    for replicas in all {
        check_assignment(registered, replicas, expected)?;
        expected = Some(replicas.len());
    }
    expected.ok_or_else(|| {
        (
            codes::INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_starts_at_the_placed_leader_and_follows_who_would_take_over() {
        let live = [1, 2, 3];
        for p in 0..6 {
            let c = chain(&live, "orders", p, 3);
            let u = Unit::Partition("orders".into(), p);
            assert_eq!(c.len(), 3);
            assert_eq!(Some(c[0]), placement::leader_for(&live, &u));
            let without_leader: Vec<i32> = live.iter().copied().filter(|b| *b != c[0]).collect();
            assert_eq!(Some(c[1]), placement::leader_for(&without_leader, &u));
            let mut sorted = c.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![1, 2, 3], "each broker once");
        }
        assert_eq!(chain(&[1, 2], "t", 0, 3).len(), 2, "no more than are live");
    }

    #[test]
    fn a_dead_replica_stays_in_the_set_and_leaves_the_isr() {
        let s = replica_set(&[1, 3], "t", 0, &[2, 3, 1], 3, Some(3));
        assert_eq!(s.replicas, vec![2, 3, 1]);
        assert_eq!(s.isr, vec![3, 1], "leader first, then the live ones");
        assert_eq!(s.offline, vec![2]);
        let all = replica_set(&[1, 2, 3], "t", 0, &[2, 3, 1], 3, Some(2));
        assert_eq!(all.isr, vec![2, 3, 1]);
        assert!(all.offline.is_empty());
    }

    #[test]
    fn a_partition_led_from_outside_its_set_reports_the_leader_first() {
        let s = replica_set(&[1, 3], "t", 0, &[2], 1, Some(3));
        assert_eq!(s.replicas, vec![3, 2]);
        assert_eq!(s.isr, vec![3]);
        assert_eq!(s.offline, vec![2]);
    }

    #[test]
    fn a_floating_partition_is_its_leader_then_the_chain() {
        let s = replica_set(&[1, 2, 3], "t", 0, &[], 1, Some(2));
        assert_eq!(s.replicas, vec![2]);
        assert_eq!(s.isr, vec![2]);
        let none = replica_set(&[1, 2, 3], "t", 0, &[], 1, None);
        assert_eq!(none.replicas, chain(&[1, 2, 3], "t", 0, 1));
    }

    #[test]
    fn replication_factors_are_refused_with_kafkas_messages() {
        assert_eq!(check_factor(-1, 1, 1), Ok(1));
        assert_eq!(check_factor(3, 1, 3), Ok(3));
        assert_eq!(
            check_factor(3, 1, 1),
            Err((
                codes::INVALID_REPLICATION_FACTOR,
                "Unable to replicate the partition 3 time(s): The target replication factor of 3 \
                 cannot be reached because only 1 broker(s) are registered."
                    .into()
            ))
        );
        assert_eq!(
            check_factor(-1, 2, 1).unwrap_err().1,
            "Unable to replicate the partition 2 time(s): The target replication factor of 2 \
             cannot be reached because only 1 broker(s) are registered."
        );
        for bad in [0, -2] {
            assert_eq!(
                check_factor(bad, 1, 3).unwrap_err().1,
                "Replication factor must be larger than 0, or -1 to use the default value."
            );
        }
    }

    #[test]
    fn manual_assignments_are_refused_with_kafkas_messages() {
        let live = [1, 2, 3];
        assert_eq!(check_assignments(&live, &[vec![2, 1], vec![3, 2]]), Ok(2));
        let msg = |all: &[Vec<i32>]| {
            let (code, m) = check_assignments(&live, all).unwrap_err();
            assert_eq!(code, codes::INVALID_REPLICA_ASSIGNMENT);
            m
        };
        assert_eq!(
            msg(&[vec![1, 7]]),
            "The manual partition assignment includes broker 7, but no such broker is registered."
        );
        assert_eq!(
            msg(&[vec![2, 2]]),
            "The manual partition assignment includes the broker 2 more than once."
        );
        assert_eq!(
            msg(&[vec![1, 2], vec![3]]),
            "The manual partition assignment includes a partition with 1 replica(s), but this is \
             not consistent with previous partitions, which have 2 replica(s)."
        );
        assert_eq!(
            msg(&[vec![]]),
            "The manual partition assignment includes an empty replica list."
        );
    }
}
