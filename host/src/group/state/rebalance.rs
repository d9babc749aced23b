//! The rebalance itself: preparing it, completing the join phase, electing
//! the leader, choosing the protocol and starting the next generation.

use super::*;

impl ClassicGroup {
    pub(super) fn awaiting_join_count(&self) -> usize {
        self.members.values().filter(|m| m.awaiting_join()).count()
    }

    pub(super) fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(Member::awaiting_join)
    }

    pub(super) fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    pub(super) fn maybe_prepare_rebalance(&mut self, now: Now) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        ) {
            self.prepare_rebalance(now);
        }
    }

    /// Starts a join phase (Kafka's `prepareRebalance`).
    pub(super) fn prepare_rebalance(&mut self, now: Now) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_and_propagate_assignment_error(codes::REBALANCE_IN_PROGRESS, now);
        }
        self.sync_deadline = None;
        let timeout = self.max_rebalance_timeout();
        self.join_timer = Some(if self.state == GroupState::Empty {
            let delay = self.initial_delay;
            JoinTimer {
                deadline: now.at + delay,
                initial: Some(InitialDelay {
                    delay,
                    remaining: timeout.saturating_sub(delay),
                }),
            }
        } else {
            JoinTimer {
                deadline: now.at + timeout,
                initial: None,
            }
        });
        self.transition(GroupState::PreparingRebalance, now);
        tracing::info!(
            group = %self.id,
            generation = self.generation,
            members = self.members.len(),
            "preparing to rebalance"
        );
        self.try_complete_join(now);
    }

    /// Completes the join phase early once every member rejoined (not
    /// during the initial delay, which always runs its course).
    pub(super) fn try_complete_join(&mut self, now: Now) {
        let Some(timer) = self.join_timer else {
            return;
        };
        if self.state == GroupState::PreparingRebalance
            && timer.initial.is_none()
            && self.all_members_joined()
        {
            self.complete_join(now);
        }
    }

    /// The join phase ends (Kafka's `onCompleteJoin`).
    pub(super) fn complete_join(&mut self, now: Now) {
        self.join_timer = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %self.id, member = %id, "removing a member that did not rejoin in time");
            self.remove(id);
        }
        if self.state == GroupState::Dead {
            return;
        }
        if !self.elect_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined remain: wait again
            // (their sessions will remove them if they never come back).
            self.join_timer = Some(JoinTimer {
                deadline: now.at + self.max_rebalance_timeout(),
                initial: None,
            });
            return;
        }
        self.init_next_generation(now);
        if self.state == GroupState::Empty {
            tracing::info!(group = %self.id, generation = self.generation, "group is now empty");
            return;
        }
        tracing::info!(
            group = %self.id,
            generation = self.generation,
            protocol = self.protocol.as_deref().unwrap_or(""),
            members = self.members.len(),
            "group stabilised its membership"
        );
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let outcome = self.join_outcome_for(&id);
            if let Some(m) = self.members.get_mut(&id) {
                m.answer_join(outcome);
                m.touch(now.at);
                m.is_new = false;
            }
            self.pending_sync.insert(id);
        }
        self.sync_deadline = Some(now.at + self.max_rebalance_timeout());
    }

    /// Keeps the leader if it rejoined, else picks the oldest member that
    /// did. False when no member rejoined.
    pub(super) fn elect_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self.members.get(&leader).is_some_and(Member::awaiting_join) {
            return true;
        }
        match self
            .members
            .values()
            .filter(|m| m.awaiting_join())
            .min_by_key(|m| m.order)
        {
            Some(m) => {
                self.leader = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    pub(super) fn init_next_generation(&mut self, now: Now) {
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.subscribed = self.compute_subscribed();
            self.transition(GroupState::Empty, now);
        } else {
            self.protocol = self.select_protocol();
            self.subscribed = self.compute_subscribed();
            self.transition(GroupState::CompletingRebalance, now);
        }
        self.pending_sync.clear();
    }

    /// The protocol every member supports that most members prefer (each
    /// votes for its most preferred candidate); ties go to the one the
    /// oldest member's vote met first.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().min_by_key(|m| m.order)?;
        let candidates: HashSet<&str> = first
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut voters: Vec<&Member> = self.members.values().collect();
        voters.sort_by_key(|m| m.order);
        let mut tally: Vec<(&str, usize)> = Vec::new();
        for m in voters {
            if let Some(v) = m.vote(&candidates) {
                match tally.iter_mut().find(|(n, _)| *n == v) {
                    Some(t) => t.1 += 1,
                    None => tally.push((v, 1)),
                }
            }
        }
        let best = tally.iter().map(|(_, c)| *c).max()?;
        tally
            .into_iter()
            .find(|(_, c)| *c == best)
            .map(|(n, _)| n.to_string())
    }

    pub(super) fn compute_subscribed(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol.as_deref()?;
        let mut all = BTreeSet::new();
        for m in self.members.values() {
            all.extend(subscription::topics(&m.metadata(protocol))?);
        }
        Some(all)
    }

    /// Whether a member may be consuming `topic` (true when unknown).
    pub fn is_subscribed(&self, topic: &str) -> bool {
        self.subscribed.as_ref().is_none_or(|s| s.contains(topic))
    }

    /// The subscribed topics, if known.
    pub fn subscribed(&self) -> Option<&BTreeSet<String>> {
        self.subscribed.as_ref()
    }

    pub(super) fn join_outcome_for(&self, member_id: &str) -> JoinOutcome {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id {
            let protocol = self.protocol.clone().unwrap_or_default();
            let mut ms: Vec<&Member> = self.members.values().collect();
            ms.sort_by_key(|m| m.order);
            ms.into_iter()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinOutcome {
            error: codes::NONE,
            member_id: member_id.to_string(),
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader,
            members,
            skip_assignment: false,
        }
    }

    // ---- SyncGroup ------------------------------------------------------
}
