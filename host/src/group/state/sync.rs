//! SyncGroup: the leader's assignment received and handed to every member.

use super::*;

impl ClassicGroup {
    /// Handles a SyncGroup.
    pub fn sync(&mut self, req: SyncRequest, now: Now) -> Reply<SyncOutcome> {
        let fail = |code| Reply::Now(SyncOutcome::error(code));
        if self.state == GroupState::Dead {
            return fail(codes::COORDINATOR_NOT_AVAILABLE);
        }
        if let Some(e) = self.validate_current_member(&req.member_id, req.instance_id.as_deref()) {
            return fail(e);
        }
        if req.generation != self.generation {
            return fail(codes::ILLEGAL_GENERATION);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|t| self.protocol_type.as_ref() != Some(t))
            || req
                .protocol
                .as_ref()
                .is_some_and(|p| self.protocol.as_ref() != Some(p))
        {
            return fail(codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        match self.state {
            GroupState::Empty => fail(codes::UNKNOWN_MEMBER_ID),
            GroupState::PreparingRebalance => fail(codes::REBALANCE_IN_PROGRESS),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.park_sync(tx, SyncOutcome::error(codes::UNKNOWN_MEMBER_ID));
                }
                self.sync_received(&req.member_id);
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    tracing::info!(
                        group = %self.id,
                        generation = self.generation,
                        members = self.members.len(),
                        "assignment received from the leader"
                    );
                    let given: HashMap<String, Bytes> = req.assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.get(&m.id).cloned().unwrap_or_default();
                    }
                    self.propagate_assignment(codes::NONE, now);
                    self.transition(GroupState::Stable, now);
                }
                Reply::Later(rx)
            }
            GroupState::Stable => {
                self.sync_received(&req.member_id);
                let Some(m) = self.members.get_mut(&req.member_id) else {
                    return fail(codes::UNKNOWN_MEMBER_ID);
                };
                m.touch(now.at);
                Reply::Now(SyncOutcome {
                    error: codes::NONE,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    assignment: m.assignment.clone(),
                })
            }
            GroupState::Dead => fail(codes::COORDINATOR_NOT_AVAILABLE),
        }
    }

    pub(super) fn sync_received(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
    }

    /// Answers every parked SyncGroup (with its assignment, or `error`).
    pub(super) fn propagate_assignment(&mut self, error: i16, now: Now) {
        let (protocol_type, protocol) = if error == codes::NONE {
            (self.protocol_type.clone(), self.protocol.clone())
        } else {
            (None, None)
        };
        for m in self.members.values_mut() {
            let outcome = SyncOutcome {
                error,
                protocol_type: protocol_type.clone(),
                protocol: protocol.clone(),
                assignment: m.assignment.clone(),
            };
            if m.answer_sync(outcome) {
                m.touch(now.at);
            }
        }
    }

    pub(super) fn reset_and_propagate_assignment_error(&mut self, error: i16, now: Now) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate_assignment(error, now);
    }

    // ---- Heartbeat, LeaveGroup, offset commits ------------------------------
}
