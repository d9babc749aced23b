//! One member of a consumer-protocol group (KIP-848) and the reconciliation
//! of its current assignment towards its target: Kafka's member states
//! (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS) and the rule that a
//! partition is given to a member only once no other member owns it, and
//! taken from a member by asking it to revoke it first, so no partition is
//! ever owned by two members at once.
//!
//! Pure data and pure functions: the group ([`super::group`]) holds the
//! members, says which partitions other members still own, and journals
//! what changed.

use std::collections::BTreeSet;

use super::assignor::{Assignment, TopicId};

/// Kafka's member states, with their record values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At the target epoch and owning all of its target that was free.
    Stable = 0,
    /// Waiting for the member to revoke partitions (it stays at its epoch).
    UnrevokedPartitions = 1,
    /// At the target epoch, waiting for partitions other members still own.
    UnreleasedPartitions = 2,
}

impl MemberState {
    pub fn from_code(c: u8) -> Option<MemberState> {
        match c {
            0 => Some(MemberState::Stable),
            1 => Some(MemberState::UnrevokedPartitions),
            2 => Some(MemberState::UnreleasedPartitions),
            _ => None,
        }
    }

    /// The name ConsumerGroupDescribe does not show but logs and tests use.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// The epoch a static member that left temporarily carries (its assignment
/// is kept for its session timeout).
pub const LEFT_STATIC_EPOCH: i32 = -2;

/// What a member subscribes to and how it asked to be treated: changed only
/// by its heartbeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topic_names: BTreeSet<String>,
    /// A regular expression over topic names (empty: none).
    pub topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
}

/// Where a member is in reconciliation: changed by the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// What it owns (or will own once it acts on the last answer).
    pub assigned: Assignment,
    /// What it must give up before it moves to the next epoch.
    pub pending_revocation: Assignment,
}

impl Progress {
    /// A member that has just joined.
    pub fn joining() -> Progress {
        Progress {
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

/// A member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub sub: Subscription,
    pub progress: Progress,
}

impl Member {
    pub fn epoch(&self) -> i32 {
        self.progress.epoch
    }

    /// At `target_epoch` with nothing to wait for.
    pub fn reconciled_to(&self, target_epoch: i32) -> bool {
        self.progress.state == MemberState::Stable && self.progress.epoch == target_epoch
    }
}

/// Whether the partitions a member reports owning include any of `of`
/// (None: it did not report them, so it is assumed to still own them).
pub fn owns_any(owned: Option<&Assignment>, of: &Assignment) -> bool {
    let Some(owned) = owned else { return true };
    owned.iter().any(|(t, ps)| {
        of.get(t)
            .is_some_and(|pending| ps.iter().any(|p| pending.contains(p)))
    })
}

/// Whether every partition in `owned` is in `of` (None: unknown, false).
pub fn is_subset(owned: Option<&Assignment>, of: &Assignment) -> bool {
    let Some(owned) = owned else { return false };
    owned
        .iter()
        .all(|(t, ps)| ps.is_empty() || of.get(t).is_some_and(|have| ps.is_subset(have)))
}

/// The member's next progress towards `target` at `target_epoch`.
/// `owned_elsewhere(topic, partition)` says whether another member still
/// owns a partition; `owned` is what the member reported in this heartbeat.
pub fn reconcile(
    current: &Progress,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    owned_elsewhere: &dyn Fn(&TopicId, i32) -> bool,
) -> Progress {
    match current.state {
        MemberState::Stable if current.epoch == target_epoch => return current.clone(),
        MemberState::UnrevokedPartitions if owns_any(owned, &current.pending_revocation) => {
            return current.clone();
        }
        _ => {}
    }
    let mut assigned = Assignment::new();
    let mut revoke = Assignment::new();
    let mut to_assign = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<&TopicId> = target.keys().chain(current.assigned.keys()).collect();
    for t in topics {
        let want = target.get(t).cloned().unwrap_or_default();
        let have = current.assigned.get(t).cloned().unwrap_or_default();
        let keep: BTreeSet<i32> = have.intersection(&want).copied().collect();
        let drop: BTreeSet<i32> = have.difference(&keep).copied().collect();
        let mut add: BTreeSet<i32> = want.difference(&keep).copied().collect();
        let before = add.len();
        add.retain(|&p| !owned_elsewhere(t, p));
        unreleased |= add.len() != before;
        if !keep.is_empty() {
            assigned.insert(*t, keep);
        }
        if !drop.is_empty() {
            revoke.insert(*t, drop);
        }
        if !add.is_empty() {
            to_assign.insert(*t, add);
        }
    }
    if !revoke.is_empty() && owns_any(owned, &revoke) {
        // Revoke first; the member keeps its epoch until it has.
        return Progress {
            epoch: current.epoch,
            previous_epoch: current.epoch,
            state: MemberState::UnrevokedPartitions,
            assigned,
            pending_revocation: revoke,
        };
    }
    for (t, ps) in to_assign {
        assigned.entry(t).or_default().extend(ps);
    }
    // Kafka's rule: the previous epoch is the one the member held before
    // this step, even when the step keeps it.
    Progress {
        epoch: target_epoch,
        previous_epoch: current.epoch,
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned,
        pending_revocation: Assignment::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> TopicId {
        [n; 16]
    }

    fn a(parts: &[(u8, &[i32])]) -> Assignment {
        parts
            .iter()
            .map(|(tp, ps)| (t(*tp), ps.iter().copied().collect()))
            .collect()
    }

    fn nobody(_: &TopicId, _: i32) -> bool {
        false
    }

    #[test]
    fn a_new_member_gets_free_partitions_and_the_target_epoch() {
        let next = reconcile(
            &Progress::joining(),
            3,
            &a(&[(1, &[0, 1])]),
            Some(&a(&[])),
            &nobody,
        );
        assert_eq!(next.epoch, 3);
        assert_eq!(next.previous_epoch, 0);
        assert_eq!(next.state, MemberState::Stable);
        assert_eq!(next.assigned, a(&[(1, &[0, 1])]));
    }

    #[test]
    fn partitions_another_member_still_owns_wait() {
        let owned_by_other = |_: &TopicId, p: i32| p == 1;
        let next = reconcile(
            &Progress::joining(),
            3,
            &a(&[(1, &[0, 1])]),
            Some(&a(&[])),
            &owned_by_other,
        );
        assert_eq!(next.state, MemberState::UnreleasedPartitions);
        assert_eq!(next.epoch, 3);
        assert_eq!(next.assigned, a(&[(1, &[0])]));
        // Once released, the next heartbeat gets it.
        let later = reconcile(
            &next,
            3,
            &a(&[(1, &[0, 1])]),
            Some(&a(&[(1, &[0])])),
            &nobody,
        );
        assert_eq!(later.state, MemberState::Stable);
        assert_eq!(later.assigned, a(&[(1, &[0, 1])]));
    }

    #[test]
    fn partitions_leaving_a_member_are_revoked_before_the_epoch_moves() {
        let stable = Progress {
            epoch: 3,
            previous_epoch: 2,
            state: MemberState::Stable,
            assigned: a(&[(1, &[0, 1, 2])]),
            pending_revocation: Assignment::new(),
        };
        let target = a(&[(1, &[0, 3])]);
        let owned = a(&[(1, &[0, 1, 2])]);
        let next = reconcile(&stable, 4, &target, Some(&owned), &nobody);
        assert_eq!(next.state, MemberState::UnrevokedPartitions);
        assert_eq!(next.epoch, 3, "the epoch waits for the revocation");
        assert_eq!(next.assigned, a(&[(1, &[0])]));
        assert_eq!(next.pending_revocation, a(&[(1, &[1, 2])]));
        // Still owns 2: no progress.
        let same = reconcile(&next, 4, &target, Some(&a(&[(1, &[0, 2])])), &nobody);
        assert_eq!(same, next);
        // Not reported: assumed still owned.
        assert_eq!(reconcile(&next, 4, &target, None, &nobody), next);
        // Revoked: the member moves to epoch 4 and gets partition 3.
        let done = reconcile(&next, 4, &target, Some(&a(&[(1, &[0])])), &nobody);
        assert_eq!((done.epoch, done.previous_epoch), (4, 3));
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!(done.assigned, a(&[(1, &[0, 3])]));
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn a_member_that_already_dropped_the_partitions_skips_revocation() {
        let stable = Progress {
            epoch: 3,
            previous_epoch: 2,
            state: MemberState::Stable,
            assigned: a(&[(1, &[0, 1])]),
            pending_revocation: Assignment::new(),
        };
        let next = reconcile(
            &stable,
            4,
            &a(&[(1, &[0])]),
            Some(&a(&[(1, &[0])])),
            &nobody,
        );
        assert_eq!(next.state, MemberState::Stable);
        assert_eq!(next.epoch, 4);
    }

    #[test]
    fn subset_and_owns_any() {
        let of = a(&[(1, &[0, 1])]);
        assert!(is_subset(Some(&a(&[(1, &[1])])), &of));
        assert!(!is_subset(Some(&a(&[(1, &[2])])), &of));
        assert!(!is_subset(None, &of));
        assert!(owns_any(Some(&a(&[(1, &[1, 5])])), &of));
        assert!(!owns_any(Some(&a(&[(2, &[1])])), &of));
        assert!(owns_any(None, &of));
    }
}
