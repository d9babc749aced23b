//! JoinGroup on a group's state machine: new, existing and static
//! members, the checks a join must pass, and parking a join until the
//! rebalance completes.

use super::*;

impl ClassicGroup {
    /// Handles a JoinGroup. `new_id` makes a member id from the client id
    /// (or the instance id of a static member).
    pub fn join(
        &mut self,
        req: JoinRequest,
        now: Now,
        new_id: &mut dyn FnMut(&str) -> String,
    ) -> Reply<JoinOutcome> {
        let reply = if !self.accepts_joining(&req.member_id) {
            if self.members.contains_key(&req.member_id) {
                self.remove_member_and_update(&req.member_id, now);
            }
            Reply::Now(JoinOutcome::error("", codes::GROUP_MAX_SIZE_REACHED))
        } else if req.member_id.is_empty() {
            self.join_new(req, now, new_id)
        } else {
            self.join_existing(req, now)
        };
        if self.state == GroupState::PreparingRebalance {
            self.try_complete_join(now);
        }
        reply
    }

    pub(super) fn accepts_joining(&self, member_id: &str) -> bool {
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                self.members
                    .get(member_id)
                    .is_some_and(Member::awaiting_join)
                    || self.awaiting_join_count() < self.max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members.contains_key(member_id) || self.members.len() < self.max_size
            }
        }
    }

    pub(super) fn join_new(
        &mut self,
        req: JoinRequest,
        now: Now,
        new_id: &mut dyn FnMut(&str) -> String,
    ) -> Reply<JoinOutcome> {
        if self.state == GroupState::Dead {
            return Reply::Now(JoinOutcome::error("", codes::COORDINATOR_NOT_AVAILABLE));
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinOutcome::error("", codes::INCONSISTENT_GROUP_PROTOCOL));
        }
        let member_id = new_id(req.instance_id.as_deref().unwrap_or(&req.client_id));
        match req.instance_id.clone() {
            Some(instance) => match self.static_members.get(&instance).cloned() {
                Some(old) => self.replace_static_member(&old, member_id, req, now),
                None => self.add_member_and_rebalance(member_id, req, now),
            },
            None if req.require_known_member_id => {
                self.pending_members
                    .insert(member_id.clone(), now.at + req.session_timeout);
                Reply::Now(JoinOutcome::error(&member_id, codes::MEMBER_ID_REQUIRED))
            }
            None => self.add_member_and_rebalance(member_id, req, now),
        }
    }

    pub(super) fn join_existing(&mut self, req: JoinRequest, now: Now) -> Reply<JoinOutcome> {
        let id = req.member_id.clone();
        if self.state == GroupState::Dead {
            return Reply::Now(JoinOutcome::error(&id, codes::COORDINATOR_NOT_AVAILABLE));
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinOutcome::error(&id, codes::INCONSISTENT_GROUP_PROTOCOL));
        }
        if self.pending_members.contains_key(&id) {
            if req.instance_id.is_some() {
                // Kafka throws here (a pending id is never static); answer
                // as its IllegalStateException surfaces.
                return Reply::Now(JoinOutcome::error(&id, codes::UNKNOWN_SERVER_ERROR));
            }
            self.pending_members.remove(&id);
            return self.add_member_and_rebalance(id, req, now);
        }
        let instance_unknown = req
            .instance_id
            .as_ref()
            .is_some_and(|i| !self.static_members.contains_key(i));
        if self.static_member_fenced(req.instance_id.as_deref(), &id) {
            return Reply::Now(JoinOutcome::error(&id, codes::FENCED_INSTANCE_ID));
        }
        if !self.members.contains_key(&id) || instance_unknown {
            return Reply::Now(JoinOutcome::error(&id, codes::UNKNOWN_MEMBER_ID));
        }
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let matches = self
            .members
            .get(&id)
            .is_some_and(|m| m.matches(&req.protocols));
        match self.state {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(req, now),
            GroupState::CompletingRebalance => {
                if matches {
                    // It missed its JoinGroup answer: give it again.
                    Reply::Now(self.join_outcome_for(&id))
                } else {
                    self.update_member_and_rebalance(req, now)
                }
            }
            GroupState::Stable => {
                if is_leader || !matches {
                    // The leader rejoining forces a rebalance (it may have
                    // seen a change the metadata does not show).
                    self.update_member_and_rebalance(req, now)
                } else {
                    let mut o = self.join_outcome_for(&id);
                    o.members.clear();
                    Reply::Now(o)
                }
            }
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(JoinOutcome::error(&id, codes::UNKNOWN_MEMBER_ID))
            }
        }
    }

    pub(super) fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        req: JoinRequest,
        now: Now,
    ) -> Reply<JoinOutcome> {
        if self.state == GroupState::PreparingRebalance && self.generation == 0 {
            self.new_member_added = true;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member_id.clone());
        }
        let (tx, rx) = oneshot::channel();
        let order = self.next_order;
        self.next_order += 1;
        self.members.insert(
            member_id.clone(),
            Member {
                id: member_id,
                instance_id: req.instance_id,
                client_id: req.client_id,
                client_host: req.client_host,
                rebalance_timeout: req.rebalance_timeout,
                session_timeout: req.session_timeout,
                protocol_type: req.protocol_type,
                protocols: req.protocols,
                assignment: Bytes::new(),
                join_waiter: Some(Waiter::new(tx)),
                sync_waiter: None,
                outbox: self.outbox.clone(),
                is_new: true,
                deadline: now.at + NEW_MEMBER_JOIN_TIMEOUT,
                order,
            },
        );
        self.maybe_prepare_rebalance(now);
        Reply::Later(rx)
    }

    /// Records a rejoin's protocols and timeouts and parks its JoinGroup.
    pub(super) fn update_member_and_rebalance(
        &mut self,
        req: JoinRequest,
        now: Now,
    ) -> Reply<JoinOutcome> {
        let rx = self.park_join(&req);
        self.maybe_prepare_rebalance(now);
        rx
    }

    pub(super) fn park_join(&mut self, req: &JoinRequest) -> Reply<JoinOutcome> {
        let Some(m) = self.members.get_mut(&req.member_id) else {
            return Reply::Now(JoinOutcome::error(&req.member_id, codes::UNKNOWN_MEMBER_ID));
        };
        m.protocols = req.protocols.clone();
        m.rebalance_timeout = req.rebalance_timeout;
        m.session_timeout = req.session_timeout;
        let (tx, rx) = oneshot::channel();
        m.park_join(
            tx,
            JoinOutcome::error(&req.member_id, codes::UNKNOWN_MEMBER_ID),
        );
        Reply::Later(rx)
    }

    /// A known static member rejoined with a new member id: the old id is
    /// fenced and replaced. In a Stable group whose protocol would not
    /// change this needs no rebalance (KIP-345): the member gets the current
    /// generation and its old assignment at SyncGroup; a replaced leader is
    /// told to skip the assignment (KIP-814).
    pub(super) fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        req: JoinRequest,
        now: Now,
    ) -> Reply<JoinOutcome> {
        let Some(mut m) = self.members.remove(old_id) else {
            return self.add_member_and_rebalance(new_id, req, now);
        };
        m.answer_join(JoinOutcome::error(old_id, codes::FENCED_INSTANCE_ID));
        m.answer_sync(SyncOutcome::error(codes::FENCED_INSTANCE_ID));
        m.id = new_id.clone();
        m.touch(now.at);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        if let Some(instance) = &req.instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.clone());
        }
        self.members.insert(new_id.clone(), m);
        let mut req = req;
        req.member_id = new_id.clone();
        let reply = self.park_join(&req);
        match self.state {
            GroupState::Stable => {
                if self.select_protocol() == self.protocol {
                    // KIP-814: a replaced leader learns it leads (with the
                    // members) but must not assign.
                    let mut outcome = self.join_outcome_for(&new_id);
                    outcome.skip_assignment = self.leader.as_deref() == Some(new_id.as_str());
                    if let Some(m) = self.members.get_mut(&new_id) {
                        m.answer_join(outcome);
                    }
                } else {
                    self.maybe_prepare_rebalance(now);
                }
            }
            GroupState::CompletingRebalance => self.prepare_rebalance(now),
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => self.maybe_prepare_rebalance(now),
        }
        reply
    }

    pub(super) fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[(String, Bytes)],
    ) -> bool {
        if self.state == GroupState::Empty {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols
                    .iter()
                    .any(|(name, _)| self.members.values().all(|m| m.supports(name)))
        }
    }

    pub(super) fn static_member_fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        instance_id
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|current| current != member_id)
    }

    /// Kafka's `validateCurrentMember`: a given instance id must map to this
    /// member id (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID when
    /// unknown), and the member must exist.
    pub(super) fn validate_current_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Option<i16> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(current) if current != member_id => return Some(codes::FENCED_INSTANCE_ID),
                Some(_) => {}
                None => return Some(codes::UNKNOWN_MEMBER_ID),
            }
        }
        (!self.members.contains_key(member_id)).then_some(codes::UNKNOWN_MEMBER_ID)
    }
}
