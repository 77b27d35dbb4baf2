//! The shapes of JoinGroup and SyncGroup answers (protocol §6.6: only the leader gets
//! the member list and the topics), successful or not, in one place.

// The error shapes are the wire's own; re-imported here, where the engine's files look for
// every answer shape.
pub(super) use muster_protocol::error_answers::{join_error, sync_error};
use muster_protocol::{JoinGroupResponse, JoinedMember, Response, SyncGroupResponse, TopicInfo};

use super::{Ctx, Group, Member, TopicLookup, NONE};

impl<R> Group<R> {
    /// The JoinGroup answer for the current generation. The leader gets the member list.
    pub(super) fn join_response(
        &self,
        member_id: &str,
        with_members: bool,
        skip_assignment: bool,
        cx: Ctx<'_>,
    ) -> Response {
        let (members, topics) = if with_members {
            (self.joined_members(), self.subscribed_topics(cx.topics))
        } else {
            (Vec::new(), Vec::new())
        };
        Response::JoinGroup(JoinGroupResponse {
            error_code: NONE,
            generation_id: self.generation,
            assignor: self.assignor.clone(),
            leader_id: self.leader.as_deref().unwrap_or_default().to_owned(),
            member_id: member_id.to_owned(),
            skip_assignment,
            members,
            topics,
        })
    }

    pub(super) fn joined_members(&self) -> Vec<JoinedMember> {
        let assignor = self.assignor.as_deref().unwrap_or_default();
        let mut list: Vec<JoinedMember> = self
            .members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                topics: m.topics.to_vec(),
                user_data: m.user_data_for(assignor),
                owned_partitions: m.owned_partitions.to_vec(),
            })
            .collect();
        list.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        list
    }

    pub(super) fn subscribed_topics(&self, catalog: &dyn TopicLookup) -> Vec<TopicInfo> {
        let mut names: Vec<&str> = self
            .members
            .values()
            .flat_map(|m| m.topics.iter().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter_map(|t| {
                catalog.partitions(t).map(|partitions| TopicInfo {
                    topic: t.to_owned(),
                    partitions,
                })
            })
            .collect()
    }
}

/// The SyncGroup answer carrying `m`'s assignment.
pub(super) fn sync_response<R>(assignor: &Option<String>, m: &Member<R>) -> Response {
    Response::SyncGroup(SyncGroupResponse {
        error_code: NONE,
        assignor: assignor.clone(),
        partitions: m.assignment.to_vec(),
        user_data: m.assignment_user_data.to_vec(),
    })
}
