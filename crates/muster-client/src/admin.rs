//! The admin API on a connection: topics (create, describe), groups (list by state,
//! describe, delete, find the coordinator, rebalance history, diagnosis), offsets (fetch; set
//! for an Empty group) and the cluster (describe).
//!
//! Each call is one request. Per-item results (one per topic or group) are returned as they
//! come for the batch calls, and turned into a single `Result` by the one-item conveniences.

use std::collections::BTreeMap;

use muster_protocol::{
    CreateTopicsRequest, DeleteGroupsRequest, DescribeClusterRequest, DescribeGroupsRequest,
    DescribeTopicsRequest, DescribedGroup, FindCoordinatorRequest, GroupDiagnosisRequest,
    GroupDiagnosisResponse, GroupHistoryRequest, GroupResult, ListGroupsRequest, ListedGroup,
    RebalanceRecord, Response, TopicInfo, TopicResult,
};

use crate::cluster::{self, Cluster, Node};
use crate::connection::Connection;
use crate::error::ClientError;
use crate::offsets::{self, Committer};
use crate::partition::{OffsetAndMetadata, TopicPartition};

pub use muster_protocol::GroupState;

/// Administrative requests over a [`Connection`].
#[derive(Debug, Clone)]
pub struct Admin {
    connection: Connection,
}

impl Admin {
    pub fn new(connection: Connection) -> Self {
        Admin { connection }
    }

    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Creates topics, or raises their partition counts; one result per topic.
    pub async fn create_topics(
        &self,
        topics: Vec<TopicInfo>,
    ) -> Result<Vec<TopicResult>, ClientError> {
        match self.connection.send(CreateTopicsRequest { topics }).await? {
            Response::CreateTopics(answer) => Ok(answer.results),
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// Creates `topic` with `partitions` partitions, or raises its count to that.
    pub async fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), ClientError> {
        let results = self
            .create_topics(vec![TopicInfo {
                topic: topic.to_owned(),
                partitions,
            }])
            .await?;
        let result = results
            .iter()
            .find(|r| r.topic == topic)
            .ok_or(ClientError::Unexpected("CreateTopics without this topic"))?;
        ClientError::check(result.error_code, || format!("CreateTopics {topic}"))
    }

    /// Creates `topic` with `partitions` partitions unless it exists (whatever its count).
    /// Returns the topic's partition count.
    pub async fn ensure_topic(&self, topic: &str, partitions: i32) -> Result<i32, ClientError> {
        if let Some(existing) = self.describe_topic(topic).await? {
            return Ok(existing.partitions);
        }
        self.create_topic(topic, partitions).await?;
        Ok(partitions)
    }

    /// The catalog entries of `topics` (`None`: every topic). Unknown topics are left out.
    pub async fn describe_topics(
        &self,
        topics: Option<&[&str]>,
    ) -> Result<Vec<TopicInfo>, ClientError> {
        let request = DescribeTopicsRequest {
            topics: topics.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        };
        match self.connection.send(request).await? {
            Response::DescribeTopics(answer) => {
                ClientError::check(answer.error_code, || "DescribeTopics".to_owned())?;
                Ok(answer.topics)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// One topic's catalog entry, if it exists.
    pub async fn describe_topic(&self, topic: &str) -> Result<Option<TopicInfo>, ClientError> {
        Ok(self
            .describe_topics(Some(&[topic]))
            .await?
            .into_iter()
            .find(|t| t.topic == topic))
    }

    /// The groups in any of `states` (`[]`: all groups).
    pub async fn list_groups(
        &self,
        states: &[GroupState],
    ) -> Result<Vec<ListedGroup>, ClientError> {
        let request = ListGroupsRequest {
            states: states.iter().map(|s| s.as_str().to_owned()).collect(),
        };
        match self.connection.send(request).await? {
            Response::ListGroups(answer) => {
                ClientError::check(answer.error_code, || "ListGroups".to_owned())?;
                Ok(answer.groups)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// One description per requested group (an unknown group is described as `Dead`).
    pub async fn describe_groups(
        &self,
        group_ids: &[&str],
    ) -> Result<Vec<DescribedGroup>, ClientError> {
        let request = DescribeGroupsRequest {
            group_ids: group_ids.iter().map(|s| (*s).to_owned()).collect(),
        };
        match self.connection.send(request).await? {
            Response::DescribeGroups(answer) => Ok(answer.groups),
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// One group's description; a per-group error code becomes the error.
    pub async fn describe_group(&self, group_id: &str) -> Result<DescribedGroup, ClientError> {
        let group = self
            .describe_groups(&[group_id])
            .await?
            .into_iter()
            .find(|g| g.group_id == group_id)
            .ok_or(ClientError::Unexpected("DescribeGroups without this group"))?;
        ClientError::check(group.error_code, || format!("DescribeGroups {group_id}"))?;
        Ok(group)
    }

    /// Deletes groups (only Empty ones; their offsets go too); one result per group.
    pub async fn delete_groups(&self, group_ids: &[&str]) -> Result<Vec<GroupResult>, ClientError> {
        let request = DeleteGroupsRequest {
            group_ids: group_ids.iter().map(|s| (*s).to_owned()).collect(),
        };
        match self.connection.send(request).await? {
            Response::DeleteGroups(answer) => Ok(answer.results),
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// Deletes one group: `NON_EMPTY_GROUP` and `GROUP_ID_NOT_FOUND` become errors.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), ClientError> {
        let results = self.delete_groups(&[group_id]).await?;
        let result = results
            .iter()
            .find(|r| r.group_id == group_id)
            .ok_or(ClientError::Unexpected("DeleteGroups without this group"))?;
        ClientError::check(result.error_code, || format!("DeleteGroups {group_id}"))
    }

    /// The group's rebalance journal (protocol §6.20), newest first: at most `limit` entries
    /// (0: every entry the server keeps). Needs `describe` on the group; GROUP_ID_NOT_FOUND,
    /// GROUP_AUTHORIZATION_FAILED and, in a cluster, NOT_COORDINATOR become errors.
    pub async fn group_history(
        &self,
        group_id: &str,
        limit: u32,
    ) -> Result<Vec<RebalanceRecord>, ClientError> {
        let request = GroupHistoryRequest {
            group_id: group_id.to_owned(),
            limit,
        };
        match self.connection.send(request).await? {
            Response::GroupHistory(answer) => {
                ClientError::check(answer.error_code, || format!("GroupHistory {group_id}"))?;
                Ok(answer.rebalances)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// What the group waits for right now (protocol §6.20): the members a rebalance in
    /// progress waits for, partitions nobody owns, a rebalance storm. Errors as
    /// [`Admin::group_history`].
    pub async fn group_diagnosis(
        &self,
        group_id: &str,
    ) -> Result<GroupDiagnosisResponse, ClientError> {
        let request = GroupDiagnosisRequest {
            group_id: group_id.to_owned(),
        };
        match self.connection.send(request).await? {
            Response::GroupDiagnosis(answer) => {
                ClientError::check(answer.error_code, || format!("GroupDiagnosis {group_id}"))?;
                Ok(answer)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// The node that coordinates `group_id`, and where to reach it (a single server names
    /// itself). INVALID_GROUP_ID and, in a cluster, COORDINATOR_NOT_AVAILABLE (retriable)
    /// become errors. Any authenticated principal may ask.
    pub async fn find_coordinator(&self, group_id: &str) -> Result<Node, ClientError> {
        let request = FindCoordinatorRequest {
            key: group_id.to_owned(),
        };
        let response = self.connection.send(request).await?;
        cluster::parse_find_coordinator(group_id, response)
    }

    /// The cluster's name, shard count and live nodes with the shards each owns. Any
    /// authenticated principal may ask.
    pub async fn describe_cluster(&self) -> Result<Cluster, ClientError> {
        let response = self.connection.send(DescribeClusterRequest {}).await?;
        cluster::parse_describe_cluster(response)
    }

    /// The group's committed offsets for `partitions` (`None`: all). Partitions with nothing
    /// committed are absent.
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, ClientError> {
        let response = self
            .connection
            .send(offsets::fetch_request(group_id, partitions))
            .await?;
        offsets::parse_fetch(group_id, response)
    }

    /// Sets offsets of a group that has no members (OffsetCommit with generation -1 and an
    /// empty member id). The server refuses it (`UNKNOWN_MEMBER_ID`) unless the group is
    /// Empty or absent (an absent group is created, Empty).
    pub async fn set_offsets<O: Into<OffsetAndMetadata>>(
        &self,
        group_id: &str,
        offsets: impl IntoIterator<Item = (TopicPartition, O)>,
    ) -> Result<(), ClientError> {
        let committer = Committer {
            group_id: group_id.to_owned(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        };
        let offsets = offsets.into_iter().map(|(tp, o)| (tp, o.into())).collect();
        let response = self
            .connection
            .send(offsets::commit_request(committer, offsets))
            .await?;
        offsets::check_commit(group_id, response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_state_names_round_trip() {
        for state in GroupState::ALL {
            assert_eq!(state.as_str().parse::<GroupState>().ok(), Some(state));
            assert_eq!(state.to_string(), state.as_str());
        }
        assert!("stable".parse::<GroupState>().is_err());
    }
}
