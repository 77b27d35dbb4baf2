//! Classic members inside a consumer group (protocol-v1 §7 migration; Kafka 4's
//! `classicGroupJoinToConsumerGroup` and its siblings): after an online upgrade, members that
//! still speak JoinGroup, SyncGroup, Heartbeat and LeaveGroup get their assignment from the
//! server's assignor. There is no barrier: a JoinGroup reconciles the member one step (its
//! `owned_partitions` say what it still holds) and is answered at once with the member's epoch
//! as the generation, the member as its own leader with `skip_assignment` (so it computes
//! nothing); SyncGroup hands it its partitions; Heartbeat answers REBALANCE_IN_PROGRESS while
//! the member is not at the target, so that it rejoins.

use std::sync::Arc;

use muster_protocol::error_answers::{join_error, sync_error};
use muster_protocol::{
    ErrorCode, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, LeaveResult, Response, SyncGroupRequest, SyncGroupResponse,
};
use uuid::Uuid;

use super::group::{to_wire, ClassicMember, ConsumerMember};
use super::journal::kind;
use crate::engine::effects::{Grant, Grants};
use crate::engine::{ClientInfo, Ctx, Effects, Group, MemberClient, Millis};

impl<R> Group<R> {
    /// JoinGroup of a classic member in a consumer group.
    pub(in crate::engine) fn classic_join_to_consumer(
        &mut self,
        cx: Ctx<'_>,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        grants: &mut Grants,
        out: &mut Effects<R>,
    ) -> Response {
        if req.assignors.is_empty() {
            return join_error(ErrorCode::InconsistentGroupProtocol, &req.member_id);
        }
        let member_id = match self.classic_member_for(cx, &req, client, fresh, grants, out) {
            Ok(id) => id,
            Err(code) => return join_error(code, &req.member_id),
        };
        let Some(part) = self.consumer.as_deref_mut() else {
            return join_error(ErrorCode::UnknownServerError, &req.member_id);
        };
        let Some(member) = part.members.get_mut(&*member_id) else {
            return join_error(ErrorCode::UnknownMemberId, &req.member_id);
        };
        member.last_heard = cx.now;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.classic = Some(Box::new(ClassicMember::from_join(&req)));
        let mut topics = req.topics.clone();
        topics.sort_unstable();
        topics.dedup();
        let changed = member.subscribed_topics != topics;
        if changed {
            member.subscribed_topics = topics;
        }
        out.persist = true;
        if changed {
            let detail = Some("subscription changed".to_owned());
            let cause = self.consumer_cause(kind::METADATA_CHANGED, Some(&member_id), detail);
            self.bump_group_epoch(cx, cause, out);
        }
        self.reconcile_member(cx, &member_id, Some(&req.owned_partitions), changed, out);
        let Some(member) = self
            .consumer
            .as_deref()
            .and_then(|p| p.members.get(&*member_id))
        else {
            return join_error(ErrorCode::UnknownMemberId, &req.member_id);
        };
        Response::JoinGroup(JoinGroupResponse {
            error_code: ErrorCode::None.code(),
            generation_id: member.assignment.epoch,
            assignor: member.classic.as_deref().and_then(ClassicMember::protocol),
            leader_id: member_id.to_string(),
            member_id: member_id.to_string(),
            // The server assigns: the member computes nothing (KIP-814).
            skip_assignment: true,
            members: Vec::new(),
            topics: Vec::new(),
        })
    }

    /// The member a classic JoinGroup is for: a known classic member, a static member's new
    /// incarnation, or a new member (which gets its id at once: there is no barrier for a
    /// pending id to wait at).
    fn classic_member_for(
        &mut self,
        cx: Ctx<'_>,
        req: &JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        grants: &mut Grants,
        out: &mut Effects<R>,
    ) -> Result<Arc<str>, ErrorCode> {
        let full = self.config.is_full(self.member_count());
        let Some(part) = self.consumer.as_deref_mut() else {
            return Err(ErrorCode::UnknownServerError);
        };
        if !req.member_id.is_empty() {
            return match part.members.get_key_value(req.member_id.as_str()) {
                Some((_, m)) if m.classic.is_none() => Err(ErrorCode::InconsistentGroupProtocol),
                Some((_, m))
                    if req.group_instance_id.is_some()
                        && m.instance_id != req.group_instance_id =>
                {
                    Err(ErrorCode::FencedInstanceId)
                }
                Some((id, _)) => Ok(Arc::clone(id)),
                None => Err(ErrorCode::UnknownMemberId),
            };
        }
        let id: Arc<str> = format!("{}-{fresh}", client.client_id).into();
        if let Some(instance) = &req.group_instance_id {
            if let Some(old_id) = part.statics.get(instance).cloned() {
                // A static member's new incarnation takes over its epoch and partitions.
                let client = MemberClient::from(client);
                if !part.take_over(instance, &old_id, &id, client, cx.now, &mut self.tenure) {
                    return Err(ErrorCode::UnknownServerError);
                }
                out.persist = true;
                return Ok(id);
            }
        }
        if full {
            return Err(ErrorCode::GroupMaxSizeReached);
        }
        let charge = match (client.charge(), grants.member_unit) {
            (Some(_), Grant::Refused) => return Err(ErrorCode::QuotaExceeded),
            (Some(principal), Grant::Granted) => {
                grants.member_unit = Grant::NotAsked;
                Some(principal.clone())
            }
            _ => None,
        };
        let mut member = ConsumerMember::new(Arc::clone(&id), MemberClient::from(client), cx.now);
        member.charge = charge;
        member.instance_id = req.group_instance_id.clone();
        member.classic = Some(Box::new(ClassicMember::from_join(req)));
        member.subscribed_topics = req.topics.clone();
        member.subscribed_topics.sort_unstable();
        member.subscribed_topics.dedup();
        if let Some(instance) = &req.group_instance_id {
            part.statics.insert(instance.clone(), Arc::clone(&id));
        }
        part.members.insert(Arc::clone(&id), Box::new(member));
        let cause = self.consumer_cause(kind::MEMBER_JOINED, Some(&id), None);
        self.bump_group_epoch(cx, cause, out);
        Ok(id)
    }

    /// The classic member `member_id` checks out (instance id included).
    fn classic_member(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<&mut ConsumerMember, ErrorCode> {
        let part = self
            .consumer
            .as_deref_mut()
            .ok_or(ErrorCode::UnknownMemberId)?;
        let member = part
            .members
            .get_mut(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if member.classic.is_none() {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        if instance.is_some() && member.instance_id.as_deref() != instance {
            return Err(ErrorCode::FencedInstanceId);
        }
        Ok(member)
    }

    /// SyncGroup of a classic member in a consumer group: its partitions now.
    pub(in crate::engine) fn classic_sync_to_consumer(
        &mut self,
        now: Millis,
        req: &SyncGroupRequest,
    ) -> Response {
        let member = match self.classic_member(&req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m,
            Err(code) => return sync_error(code),
        };
        member.last_heard = now;
        if req.generation_id != member.assignment.epoch {
            return sync_error(ErrorCode::IllegalGeneration);
        }
        Response::SyncGroup(SyncGroupResponse {
            error_code: ErrorCode::None.code(),
            assignor: member.classic.as_deref().and_then(ClassicMember::protocol),
            partitions: to_wire(&member.assignment.assigned),
            user_data: Vec::new(),
        })
    }

    /// Heartbeat of a classic member in a consumer group: REBALANCE_IN_PROGRESS while it is
    /// not at the target (it rejoins to move on).
    pub(in crate::engine) fn classic_heartbeat_to_consumer(
        &mut self,
        now: Millis,
        req: &HeartbeatRequest,
    ) -> ErrorCode {
        let target_epoch = self.consumer.as_deref().map_or(0, |p| p.assignment_epoch);
        let member = match self.classic_member(&req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m,
            Err(code) => return code,
        };
        member.last_heard = now;
        if req.generation_id != member.assignment.epoch {
            ErrorCode::IllegalGeneration
        } else if !member.at_target(target_epoch) {
            ErrorCode::RebalanceInProgress
        } else {
            ErrorCode::None
        }
    }

    /// LeaveGroup in a consumer group: each named classic member goes (by member id, or a
    /// static member by its instance id).
    pub(in crate::engine) fn classic_leave_from_consumer(
        &mut self,
        cx: Ctx<'_>,
        req: LeaveGroupRequest,
        out: &mut Effects<R>,
    ) -> LeaveGroupResponse {
        let mut members = Vec::with_capacity(req.members.len());
        for leaving in req.members {
            let found = self
                .consumer
                .as_deref()
                .map_or(Err(ErrorCode::UnknownMemberId), |p| {
                    p.leaving(&leaving.member_id, leaving.group_instance_id.as_deref())
                });
            let code = match found {
                Ok(id) => {
                    self.remove_consumer_member(cx, &id, kind::MEMBER_LEFT, out);
                    ErrorCode::None
                }
                Err(code) => code,
            };
            members.push(LeaveResult {
                member_id: leaving.member_id,
                group_instance_id: leaving.group_instance_id,
                error_code: code.code(),
            });
        }
        LeaveGroupResponse {
            error_code: ErrorCode::None.code(),
            members,
        }
    }
}
