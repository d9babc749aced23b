//! The server-side assignors of the consumer group protocol (KIP-848):
//! `uniform` (the default) and `range`, as `group.consumer.assignors` names
//! them. Pure functions from the members' subscriptions, the subscribed
//! topics' partition counts and the previous target assignment to the new
//! target assignment; the group ([`super::group`]) calls them when its
//! epoch moves past its assignment epoch.
//!
//! `uniform` is sticky: a partition stays with its previous owner unless the
//! owner no longer subscribes to its topic or holds more than its share, so
//! a member joining or leaving moves only the partitions that must move.
//! It balances heterogeneous subscriptions too: partitions of the topics
//! with the fewest subscribers are placed first, each on the least loaded
//! subscriber, then single partitions move from the most to the least loaded
//! member that subscribes to their topic while that narrows the gap by two or
//! more (each move strictly lowers the sum of squared loads, so it ends).
//!
//! `range` gives each subscriber of a topic a contiguous range of its
//! partitions, members in id order (instance id first for static members),
//! the first `partitions % members` getting one more, so members subscribed to
//! co-partitioned topics get the same partition numbers of each.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A topic's id (Metadata v10+).
pub type TopicId = [u8; 16];

/// Partitions per topic.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// The name `group.consumer.assignors` lists and members ask for.
pub const UNIFORM: &str = "uniform";
/// See [`UNIFORM`].
pub const RANGE: &str = "range";

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignorMember<'a> {
    pub id: &'a str,
    /// Sorts static members by instance id (stable across restarts).
    pub instance_id: Option<&'a str>,
    /// The subscribed topics that exist.
    pub topics: BTreeSet<TopicId>,
    /// Its previous target assignment.
    pub previous: Option<&'a Assignment>,
}

/// Runs the assignor `name` (unknown names run `uniform`; the group
/// validated the name against `group.consumer.assignors`).
pub fn assign(
    name: &str,
    members: &[AssignorMember<'_>],
    partitions: &BTreeMap<TopicId, i32>,
) -> HashMap<String, Assignment> {
    if name == RANGE {
        range(members, partitions)
    } else {
        uniform(members, partitions)
    }
}

/// Kafka's `uniform` semantics: balanced and sticky.
pub fn uniform(
    members: &[AssignorMember<'_>],
    partitions: &BTreeMap<TopicId, i32>,
) -> HashMap<String, Assignment> {
    let n = members.len();
    let mut load = vec![0usize; n];
    let mut owner: HashMap<(TopicId, i32), usize> = HashMap::new();
    let mut subscribers: BTreeMap<TopicId, Vec<usize>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for t in &m.topics {
            if partitions.contains_key(t) {
                subscribers.entry(*t).or_default().push(i);
            }
        }
    }
    // The total each member may keep: an equal share of what its topics
    // offer is not knowable before placing, so keep at most the ceiling of
    // the group-wide mean; balancing trims the rest.
    let total: usize = subscribers
        .keys()
        .map(|t| partitions.get(t).copied().unwrap_or(0).max(0) as usize)
        .sum();
    let cap = if n == 0 { 0 } else { total.div_ceil(n) };
    // 1. Keep what is still valid, up to the cap, oldest partitions first.
    for (i, m) in members.iter().enumerate() {
        let Some(prev) = m.previous else { continue };
        for (t, ps) in prev {
            let count = partitions.get(t).copied().unwrap_or(0);
            if !m.topics.contains(t) || count <= 0 {
                continue;
            }
            for &p in ps {
                if p < count && load[i] < cap && !owner.contains_key(&(*t, p)) {
                    owner.insert((*t, p), i);
                    load[i] += 1;
                }
            }
        }
    }
    // 2. Place the rest: topics with the fewest subscribers first, each
    //    partition on its least loaded subscriber (ties: member order).
    let mut topics: Vec<(&TopicId, &Vec<usize>)> = subscribers.iter().collect();
    topics.sort_by_key(|(t, subs)| (subs.len(), **t));
    for (t, subs) in &topics {
        let count = partitions.get(*t).copied().unwrap_or(0);
        for p in 0..count {
            if owner.contains_key(&(**t, p)) {
                continue;
            }
            if let Some(&best) = subs.iter().min_by_key(|&&i| (load[i], i)) {
                owner.insert((**t, p), best);
                load[best] += 1;
            }
        }
    }
    // 3. Balance: move one partition at a time from a member to a less
    //    loaded subscriber of its topic when the gap is two or more.
    let mut held: Vec<BTreeSet<(TopicId, i32)>> = vec![BTreeSet::new(); n];
    for (&(t, p), &i) in &owner {
        held[i].insert((t, p));
    }
    loop {
        let mut best: Option<(usize, usize, (TopicId, i32))> = None;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(load[i]), i));
        'find: for &from in &order {
            // Partitions taken last are given up first (they moved least
            // recently into place); iterate from the end.
            for &(t, p) in held[from].iter().rev() {
                let Some(subs) = subscribers.get(&t) else {
                    continue;
                };
                if let Some(&to) = subs
                    .iter()
                    .filter(|&&j| load[j] + 2 <= load[from])
                    .min_by_key(|&&j| (load[j], j))
                {
                    best = Some((from, to, (t, p)));
                    break 'find;
                }
            }
        }
        let Some((from, to, tp)) = best else { break };
        held[from].remove(&tp);
        held[to].insert(tp);
        load[from] -= 1;
        load[to] += 1;
    }
    collect(members, held)
}

/// Kafka's `range` semantics: contiguous ranges per topic.
pub fn range(
    members: &[AssignorMember<'_>],
    partitions: &BTreeMap<TopicId, i32>,
) -> HashMap<String, Assignment> {
    let mut held: Vec<BTreeSet<(TopicId, i32)>> = vec![BTreeSet::new(); members.len()];
    for (t, &count) in partitions {
        let mut subs: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].topics.contains(t))
            .collect();
        if subs.is_empty() || count <= 0 {
            continue;
        }
        subs.sort_by_key(|&i| {
            (
                members[i].instance_id.unwrap_or(members[i].id),
                members[i].id,
            )
        });
        let (each, extra) = (count as usize / subs.len(), count as usize % subs.len());
        let mut next = 0i32;
        for (k, &i) in subs.iter().enumerate() {
            let take = each + usize::from(k < extra);
            for p in next..next + take as i32 {
                held[i].insert((*t, p));
            }
            next += take as i32;
        }
    }
    collect(members, held)
}

fn collect(
    members: &[AssignorMember<'_>],
    held: Vec<BTreeSet<(TopicId, i32)>>,
) -> HashMap<String, Assignment> {
    members
        .iter()
        .zip(held)
        .map(|(m, tps)| {
            let mut a = Assignment::new();
            for (t, p) in tps {
                a.entry(t).or_default().insert(p);
            }
            (m.id.to_string(), a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: u8) -> TopicId {
        [n; 16]
    }

    fn member<'a>(id: &'a str, topics: &[u8], prev: Option<&'a Assignment>) -> AssignorMember<'a> {
        AssignorMember {
            id,
            instance_id: None,
            topics: topics.iter().map(|&t| tid(t)).collect(),
            previous: prev,
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    fn all_once(out: &HashMap<String, Assignment>, parts: &BTreeMap<TopicId, i32>) {
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "{t:?}/{p} assigned twice");
                }
            }
        }
        let want: usize = parts.values().map(|&c| c as usize).sum();
        assert_eq!(seen.len(), want, "every partition assigned exactly once");
    }

    #[test]
    fn uniform_spreads_partitions_within_one_of_each_other() {
        let parts = BTreeMap::from([(tid(1), 7), (tid(2), 3)]);
        let ms = [
            member("a", &[1, 2], None),
            member("b", &[1, 2], None),
            member("c", &[1, 2], None),
        ];
        let out = uniform(&ms, &parts);
        all_once(&out, &parts);
        let loads: Vec<usize> = ["a", "b", "c"].iter().map(|m| count(&out[*m])).collect();
        assert!(
            loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1,
            "{loads:?}"
        );
    }

    #[test]
    fn uniform_moves_only_what_a_joining_member_takes() {
        let parts = BTreeMap::from([(tid(1), 200)]);
        let names: Vec<String> = (0..10).map(|i| format!("m{i:02}")).collect();
        let mut prev: HashMap<String, Assignment> = HashMap::new();
        for k in 1..=names.len() {
            let ms: Vec<AssignorMember<'_>> = names[..k]
                .iter()
                .map(|n| member(n, &[1], prev.get(n)))
                .collect();
            let out = uniform(&ms, &parts);
            all_once(&out, &parts);
            let moved: usize = names[..k - 1]
                .iter()
                .map(|n| {
                    let before = prev.get(n).map(count).unwrap_or(0);
                    let kept = prev[n]
                        .get(&tid(1))
                        .map(|ps| ps.iter().filter(|p| out[n][&tid(1)].contains(p)).count())
                        .unwrap_or(0);
                    before - kept
                })
                .sum();
            // The new member takes floor(200 / k) or one more; nothing else moves.
            let taken = count(&out[&names[k - 1]]);
            let taken_from_others = if k == 1 { 0 } else { taken };
            assert_eq!(
                moved, taken_from_others,
                "join {k}: moved {moved}, the newcomer took {taken}"
            );
            assert!(taken == 200 / k || taken == 200 / k + 1);
            prev = out;
        }
    }

    #[test]
    fn uniform_gives_a_leaver_s_partitions_to_the_others_and_keeps_the_rest() {
        let parts = BTreeMap::from([(tid(1), 12)]);
        let ms = [
            member("a", &[1], None),
            member("b", &[1], None),
            member("c", &[1], None),
        ];
        let first = uniform(&ms, &parts);
        let ms = [
            member("a", &[1], first.get("a")),
            member("c", &[1], first.get("c")),
        ];
        let second = uniform(&ms, &parts);
        all_once(&second, &parts);
        for m in ["a", "c"] {
            assert!(
                first[m][&tid(1)].is_subset(&second[m][&tid(1)]),
                "{m} kept its partitions"
            );
            assert_eq!(count(&second[m]), 6);
        }
    }

    #[test]
    fn uniform_balances_heterogeneous_subscriptions() {
        // a and b share topic 1 (4 partitions); b alone has topic 2 (4):
        // a should get all of topic 1.
        let parts = BTreeMap::from([(tid(1), 4), (tid(2), 4)]);
        let ms = [member("a", &[1], None), member("b", &[1, 2], None)];
        let out = uniform(&ms, &parts);
        all_once(&out, &parts);
        assert_eq!(count(&out["a"]), 4);
        assert_eq!(count(&out["b"]), 4);
        assert!(out["b"].get(&tid(1)).is_none_or(BTreeSet::is_empty));
    }

    #[test]
    fn uniform_drops_unsubscribed_and_vanished_partitions() {
        let prev = Assignment::from([
            (tid(1), BTreeSet::from([0, 1, 5])),
            (tid(2), BTreeSet::from([0])),
        ]);
        // Topic 1 shrank to 2 partitions (deleted and recreated), topic 2 unsubscribed.
        let parts = BTreeMap::from([(tid(1), 2), (tid(2), 1)]);
        let ms = [member("a", &[1], Some(&prev))];
        let out = uniform(&ms, &parts);
        assert_eq!(
            out["a"],
            Assignment::from([(tid(1), BTreeSet::from([0, 1]))])
        );
    }

    #[test]
    fn range_gives_contiguous_ranges_and_co_partitions() {
        let parts = BTreeMap::from([(tid(1), 5), (tid(2), 5)]);
        let ms = [member("b", &[1, 2], None), member("a", &[1, 2], None)];
        let out = range(&ms, &parts);
        all_once(&out, &parts);
        assert_eq!(out["a"][&tid(1)], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"][&tid(1)], BTreeSet::from([3, 4]));
        assert_eq!(out["a"][&tid(1)], out["a"][&tid(2)]);
    }

    #[test]
    fn no_members_or_no_topics_assign_nothing() {
        let parts = BTreeMap::from([(tid(1), 3)]);
        assert!(uniform(&[], &parts).is_empty());
        let ms = [member("a", &[9], None)];
        assert_eq!(count(&uniform(&ms, &parts)["a"]), 0);
        assert_eq!(count(&range(&ms, &parts)["a"]), 0);
    }
}
