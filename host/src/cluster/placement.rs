//! Placement: which live broker should lead each unit (a topic partition or
//! a group-coordinator shard). A pure function of the live broker ids and the
//! unit, so every broker computes the same answer from the same view without
//! talking to the others.
//!
//! A topic's partitions go round-robin over the live brokers, starting at a
//! broker picked by a hash of the topic name, so each topic is balanced on
//! its own and different topics do not all start on the lowest id. Group
//! shards go round-robin from the first broker, transaction shards from
//! the second. When a broker leaves, its
//! units are spread over the survivors; when it comes back, the same
//! function gives it its share back.
//!
//! A partition with a stored replica set (a manual assignment, or a
//! replication factor above 1: [`super::replicas`]) is led by the first
//! live broker of its set, so the first of an assignment is the preferred
//! leader; when none of its set is live, by the broker the hash picks (on
//! a shared volume any broker can lead it).

use super::keys::Unit;

/// The broker that should lead `unit`, among `live` (sorted, distinct);
/// None when no broker is live.
pub fn leader_for(live: &[i32], unit: &Unit) -> Option<i32> {
    if live.is_empty() {
        return None;
    }
    let n = live.len() as u64;
    let slot = match unit {
        Unit::Partition(topic, p) => fnv1a(topic.as_bytes()).wrapping_add(*p as u64) % n,
        Unit::GroupShard(s) => u64::from(*s) % n,
        // Shifted by one, so a group and a transaction that share a shard
        // number do not always share a coordinator.
        Unit::TxnShard(s) => (u64::from(*s) + 1) % n,
    };
    live.get(slot as usize).copied()
}

/// The broker that should lead `unit` given its stored replica set
/// `stored` (empty: none, [`leader_for`] decides).
pub fn preferred_leader(live: &[i32], unit: &Unit, stored: &[i32]) -> Option<i32> {
    stored
        .iter()
        .copied()
        .find(|b| live.contains(b))
        .or_else(|| leader_for(live, unit))
}

/// FNV-1a, 64-bit: stable across builds and platforms (std's hasher is not).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(t: &str, p: i32) -> Unit {
        Unit::Partition(t.into(), p)
    }

    #[test]
    fn placement_is_balanced_per_topic() {
        let live = [1, 2, 3];
        let mut count = std::collections::BTreeMap::new();
        for p in 0..12 {
            *count
                .entry(leader_for(&live, &part("orders", p)).unwrap())
                .or_insert(0) += 1;
        }
        assert_eq!(count.values().copied().collect::<Vec<_>>(), vec![4, 4, 4]);
    }

    #[test]
    fn a_dead_brokers_units_move_to_survivors_and_come_back() {
        let all = [1, 2, 3];
        let survivors = [1, 3];
        for p in 0..9 {
            let u = part("t", p);
            let before = leader_for(&all, &u).unwrap();
            let during = leader_for(&survivors, &u).unwrap();
            assert!(during != 2, "no unit stays on the dead broker");
            assert_eq!(leader_for(&all, &u).unwrap(), before, "deterministic");
        }
        assert_eq!(leader_for(&[], &part("t", 0)), None);
        assert_eq!(leader_for(&[7], &Unit::GroupShard(49)), Some(7));
    }

    #[test]
    fn the_first_live_broker_of_a_stored_set_leads() {
        let u = part("t", 0);
        assert_eq!(preferred_leader(&[1, 2, 3], &u, &[3, 1]), Some(3));
        assert_eq!(preferred_leader(&[1, 2], &u, &[3, 1]), Some(1));
        assert_eq!(
            preferred_leader(&[1, 2], &u, &[3]),
            leader_for(&[1, 2], &u),
            "no stored replica live: the hash decides"
        );
        assert_eq!(
            preferred_leader(&[1, 2, 3], &u, &[]),
            leader_for(&[1, 2, 3], &u)
        );
    }
}
