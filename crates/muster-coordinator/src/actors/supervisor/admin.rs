//! The admin requests (protocol §6.15, §6.16, §6.20): each is checked against the request
//! limits, then answered here (DescribeGroups, ListGroups, DeleteGroups), by the catalog
//! (`catalog.rs`: CreateTopics, DescribeTopics), or by the group it names (GroupHistory,
//! GroupDiagnosis, through `insight.rs`). Who may see or change what is `admin_access.rs`'s.

use actix::prelude::*;
use futures_util::future::join_all;
use muster_protocol::{
    DeleteGroupsResponse, DescribeGroupsResponse, DescribedGroup, ErrorCode, GroupResult,
    ListGroupsResponse, ListedGroup, Request, Response,
};

use super::Supervisor;
use crate::access::Access;
use crate::actors::admin_access::{self, may_describe_group};
use crate::actors::admin_limits::{self, distinct, state_bit};
use crate::actors::insight;
use crate::actors::messages::{AdminCall, Delete, Describe};
use crate::config::{MAX_ENCODABLE_GROUP_SIZE, MAX_LISTED_GROUPS};
use crate::engine::GroupState;

impl Supervisor {
    /// DescribeGroups: one description per *distinct* requested id, in the order first named
    /// (protocol §6.15): a repeated id would cost a full description each time. A group the
    /// principal may not describe is answered as dead with GROUP_AUTHORIZATION_FAILED before
    /// anything else is looked at (`admin_access.rs`).
    fn describe_groups(&self, group_ids: Vec<String>, access: &Access) -> ResponseFuture<Response> {
        let group_ids: Vec<(String, bool)> = distinct(group_ids)
            .into_iter()
            .map(|id| {
                let denied = admin_access::describe_group_denied(access, &id);
                (id, denied)
            })
            .collect();
        // Every member described costs a description in memory and on the wire: one answer
        // describes at most as many members as one group may hold (protocol §6.18). Denied
        // groups are not described, so their sizes do not count (nor show through this).
        let members: usize = group_ids
            .iter()
            .filter(|(_, denied)| !denied)
            .filter_map(|(id, _)| self.groups.find(id))
            .map(|(_, e)| e.members as usize)
            .sum();
        if members > MAX_ENCODABLE_GROUP_SIZE {
            let response = Response::error(
                ErrorCode::RequestLimitExceeded,
                format!(
                    "the groups named have {members} members; one DescribeGroups answer \
                     describes at most {MAX_ENCODABLE_GROUP_SIZE}: ask for fewer groups"
                ),
            );
            return Box::pin(async move { response });
        }
        let now = self.clock.now();
        let reader = self.reader();
        let lookups: Vec<_> = group_ids
            .into_iter()
            .map(|(group_id, denied)| {
                let refusal = self.admin_refusal(&group_id, denied);
                let asked = match refusal {
                    Some(_) => None,
                    None => self
                        .groups
                        .find(&group_id)
                        .map(|(_, e)| e.ask(&reader, Describe, |g| g.describe(now))),
                };
                async move {
                    if let Some(code) = refusal {
                        return dead_group(group_id, code);
                    }
                    match asked {
                        Some(asked) => match asked.await {
                            Ok(described) => described,
                            Err(_) => dead_group(group_id, ErrorCode::None),
                        },
                        None => dead_group(group_id, ErrorCode::None),
                    }
                }
            })
            .collect();
        Box::pin(async move {
            Response::DescribeGroups(DescribeGroupsResponse {
                groups: join_all(lookups).await,
            })
        })
    }

    /// ListGroups: the groups the principal may describe (`admin_access.rs`).
    fn list_groups(&self, states: &[String], access: &Access) -> Response {
        // The filter is a set of the five states (one bit each): O(groups + filter), however
        // many (or repeated) states the request names. Unknown names match nothing.
        let wanted = states
            .iter()
            .filter_map(|s| GroupState::parse(s.trim()))
            .fold(0u8, |mask, s| mask | state_bit(s));
        let filtered = !states.is_empty();
        let mut groups: Vec<ListedGroup> = self
            .groups
            .values()
            .filter(|e| e.state != GroupState::Dead)
            .filter(|e| !filtered || wanted & state_bit(e.state) != 0)
            .filter(|e| may_describe_group(access, &e.group_id))
            .map(|e| ListedGroup {
                group_id: e.group_id.to_string(),
                state: e.state.as_str().to_owned(),
                members: e.members,
            })
            .collect();
        if groups.len() > MAX_LISTED_GROUPS {
            // The answer would not encode (nor decode in a client): say so, instead of an
            // UNKNOWN_SERVER_ERROR from the encoder (protocol §6.18).
            return Response::error(
                ErrorCode::RequestLimitExceeded,
                format!(
                    "{} groups match; one ListGroups answer lists at most {MAX_LISTED_GROUPS}: \
                     filter by state",
                    groups.len()
                ),
            );
        }
        groups.sort_unstable_by(|a, b| a.group_id.cmp(&b.group_id));
        Response::ListGroups(ListGroupsResponse {
            error_code: ErrorCode::None.code(),
            groups,
        })
    }

    /// DeleteGroups: one result per distinct requested id, in the order first named; a group
    /// the principal may not delete is GROUP_AUTHORIZATION_FAILED, whatever else is true of it.
    fn delete_groups(
        &mut self,
        group_ids: Vec<String>,
        access: &Access,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Response> {
        let deletions: Vec<_> = distinct(group_ids)
            .into_iter()
            .map(|group_id| {
                let denied = admin_access::delete_group_denied(access, &group_id);
                let refusal = self.admin_refusal(&group_id, denied);
                // A deletion is a write in the group's order: a parked group gets its actor.
                // Sent now, not when the future is first polled: a group actor may give its
                // engine up (park) once the supervisor has sent it everything it will.
                let target = match (refusal, self.groups.key_of(&group_id)) {
                    (None, Some(key)) => self.reach(key, ctx).map(|addr| (key, addr.send(Delete))),
                    _ => None,
                };
                async move {
                    if let Some(code) = refusal {
                        return (group_id, None, code);
                    }
                    match target {
                        None => (group_id, None, ErrorCode::GroupIdNotFound),
                        Some((key, deleted)) => {
                            let code = deleted.await.unwrap_or(ErrorCode::GroupIdNotFound);
                            (group_id, Some(key), code)
                        }
                    }
                }
            })
            .collect();
        Box::pin(
            join_all(deletions)
                .into_actor(self)
                .map(|outcomes, act, _| {
                    let results = outcomes
                        .into_iter()
                        .map(|(group_id, key, code)| {
                            if let (Some(key), ErrorCode::None) = (key, code) {
                                act.forget(key);
                            }
                            GroupResult {
                                group_id,
                                error_code: code.code(),
                            }
                        })
                        .collect();
                    Response::DeleteGroups(DeleteGroupsResponse { results })
                }),
        )
    }
}

impl Supervisor {
    /// Why an admin request may not touch `group_id`: the principal's denial first (it says
    /// nothing about the group), then whatever refuses the id here.
    fn admin_refusal(&self, group_id: &str, denied: bool) -> Option<ErrorCode> {
        if denied {
            Some(ErrorCode::GroupAuthorizationFailed)
        } else {
            self.refusal(group_id)
        }
    }
}

fn dead_group(group_id: String, code: ErrorCode) -> DescribedGroup {
    DescribedGroup {
        error_code: code.code(),
        group_id,
        state: GroupState::Dead.as_str().to_owned(),
        generation_id: -1,
        assignor: None,
        leader_id: String::new(),
        members: Vec::new(),
    }
}

impl Handler<AdminCall> for Supervisor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, call: AdminCall, ctx: &mut Self::Context) -> Self::Result {
        let over = admin_limits::check(&call.request, &self.config.limits);
        if let Some(response) = over {
            call.reply.send(response);
            return Box::pin(actix::fut::ready(()));
        }
        match call.request {
            Request::DescribeGroups(r) => {
                let reply = call.reply;
                Box::pin(
                    self.describe_groups(r.group_ids, &call.access)
                        .into_actor(self)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            Request::ListGroups(ref r) => {
                let response = self.list_groups(&r.states, &call.access);
                call.reply.send(response);
                Box::pin(actix::fut::ready(()))
            }
            Request::DeleteGroups(r) => {
                let reply = call.reply;
                Box::pin(
                    self.delete_groups(r.group_ids, &call.access, ctx)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            Request::CreateTopics(ref r) => {
                let topics = r.topics.clone();
                self.create_topics(call, topics, ctx);
                Box::pin(actix::fut::ready(()))
            }
            Request::DescribeTopics(ref r) => {
                let response = self.describe_topics(r.topics.as_deref(), &call.access);
                call.reply.send(response);
                Box::pin(actix::fut::ready(()))
            }
            Request::ConsumerGroupDescribe(r) => {
                let reply = call.reply;
                Box::pin(
                    self.describe_consumer_groups(r.group_ids, &call.access)
                        .into_actor(self)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            Request::GroupSimulate(r) => {
                let reply = call.reply;
                Box::pin(
                    self.simulate(r, &call.access)
                        .into_actor(self)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            Request::GroupHistory(_) | Request::GroupDiagnosis(_) => {
                let now = self.clock.now();
                let target = insight::target(&call.request, &call.access, |id| {
                    if let Some(code) = self.refusal(id) {
                        return Err(code);
                    }
                    let (_, entry) = self.groups.find(id).ok_or(ErrorCode::GroupIdNotFound)?;
                    Ok(insight::ask(&call.request, entry, &self.reader(), now))
                });
                let reply = call.reply;
                Box::pin(
                    insight::answer(call.request, target)
                        .into_actor(self)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            other => {
                call.reply.send(Response::error(
                    ErrorCode::InvalidRequest,
                    format!("{} is not an admin request", other.name()),
                ));
                Box::pin(actix::fut::ready(()))
            }
        }
    }
}
