//! The admin requests of the consumer protocol (protocol-v1 §7) and the dry-run rebalance:
//! ConsumerGroupDescribe (one description per distinct id, from each group's actor) and
//! GroupSimulate (the group's actor runs its assignor on a copy). Both need `describe` on the
//! group, checked before anything else (`admin_access.rs`).

use actix::prelude::*;
use futures_util::future::join_all;
use muster_protocol::{
    ConsumerGroupDescribeResponse, DescribedConsumerGroup, ErrorCode, GroupSimulateRequest,
    GroupSimulateResponse, Response,
};

use super::Supervisor;
use crate::access::Access;
use crate::actors::admin_access;
use crate::actors::admin_limits::distinct;
use crate::actors::messages::{DescribeConsumer, Simulate};
use crate::config::encodable;
use crate::engine::GroupState;

/// The most members one ConsumerGroupDescribe answer describes (18 724).
pub const MAX_DESCRIBED_CONSUMER_MEMBERS: usize = encodable::<muster_protocol::ConsumerMember>();

impl Supervisor {
    /// ConsumerGroupDescribe: a group the principal may not describe is answered Dead with
    /// GROUP_AUTHORIZATION_FAILED; an unknown one (or a classic one) GROUP_ID_NOT_FOUND.
    pub(super) fn describe_consumer_groups(
        &self,
        group_ids: Vec<String>,
        access: &Access,
    ) -> ResponseFuture<Response> {
        let group_ids = distinct(group_ids);
        // As DescribeGroups: one answer describes at most as many members as encode (a
        // `ConsumerMember` is larger than a `DescribedMember`, so fewer: protocol §6.18).
        // Denied groups are not described, so their sizes do not count.
        let members: usize = group_ids
            .iter()
            .filter(|id| !admin_access::describe_group_denied(access, id))
            .filter_map(|id| self.groups.find(id))
            .map(|(_, e)| e.members as usize)
            .sum();
        let most = MAX_DESCRIBED_CONSUMER_MEMBERS;
        if members > most {
            let response = Response::error(
                ErrorCode::RequestLimitExceeded,
                format!(
                    "the groups named have {members} members; one ConsumerGroupDescribe answer \
                     describes at most {most}: ask for fewer groups, or use DescribeGroups"
                ),
            );
            return Box::pin(async move { response });
        }
        let reader = self.reader();
        let lookups: Vec<_> = group_ids
            .into_iter()
            .map(|group_id| {
                let denied = admin_access::describe_group_denied(access, &group_id);
                let refusal = if denied {
                    Some(ErrorCode::GroupAuthorizationFailed)
                } else {
                    self.refusal(&group_id)
                };
                let asked = self
                    .groups
                    .find(&group_id)
                    .filter(|_| refusal.is_none())
                    .map(|(_, e)| e.ask(&reader, DescribeConsumer, |g| g.describe_consumer()));
                async move {
                    if let Some(code) = refusal {
                        return dead(group_id, code);
                    }
                    match asked {
                        Some(asked) => asked
                            .await
                            .unwrap_or_else(|_| dead(group_id, ErrorCode::GroupIdNotFound)),
                        None => dead(group_id, ErrorCode::GroupIdNotFound),
                    }
                }
            })
            .collect();
        Box::pin(async move {
            Response::ConsumerGroupDescribe(ConsumerGroupDescribeResponse {
                groups: join_all(lookups).await,
            })
        })
    }

    /// GroupSimulate, through the group's actor.
    pub(super) fn simulate(
        &self,
        request: GroupSimulateRequest,
        access: &Access,
    ) -> ResponseFuture<Response> {
        let denied = admin_access::describe_group_denied(access, &request.group_id);
        let refusal = if denied {
            Some(ErrorCode::GroupAuthorizationFailed)
        } else {
            self.refusal(&request.group_id)
        };
        let catalog = &self.catalog;
        let reader = self.reader();
        let asked = self
            .groups
            .find(&request.group_id)
            .filter(|_| refusal.is_none())
            .map(|(_, e)| {
                let copy = request.clone();
                e.ask(&reader, Simulate(request), |g| {
                    g.simulate(&copy, catalog.as_ref())
                })
            });
        Box::pin(async move {
            let answer = match (refusal, asked) {
                (Some(code), _) => refused(code),
                (None, None) => refused(ErrorCode::GroupIdNotFound),
                (None, Some(asked)) => asked
                    .await
                    .unwrap_or_else(|_| refused(ErrorCode::GroupIdNotFound)),
            };
            Response::GroupSimulate(answer)
        })
    }
}

fn dead(group_id: String, code: ErrorCode) -> DescribedConsumerGroup {
    DescribedConsumerGroup {
        error_code: code.code(),
        group_id,
        state: GroupState::Dead.as_str().to_owned(),
        group_epoch: -1,
        assignment_epoch: -1,
        ..DescribedConsumerGroup::default()
    }
}

fn refused(code: ErrorCode) -> GroupSimulateResponse {
    GroupSimulateResponse {
        error_code: code.code(),
        ..GroupSimulateResponse::default()
    }
}

#[cfg(test)]
mod tests {
    use super::MAX_DESCRIBED_CONSUMER_MEMBERS;

    #[test]
    fn the_describe_limit_is_what_protocol_md_says() {
        assert_eq!(MAX_DESCRIBED_CONSUMER_MEMBERS, 18_724);
    }
}
