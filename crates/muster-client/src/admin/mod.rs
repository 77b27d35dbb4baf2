//! The admin API: topics (create, describe), groups (list by state, describe, delete, find
//! the coordinator, rebalance history, diagnosis), consumer-protocol groups (describe with
//! epochs and target assignments; protocol-v1 §7), dry-run rebalances (simulate), offsets
//! (fetch; set for an Empty group; their history, a point-in-time reset and the restore of
//! expired offsets: docs/offsets.md) and the cluster (describe).
//!
//! Per-item results (one per topic or group) are returned as they come for the batch calls,
//! and turned into a single `Result` by the one-item conveniences.
//!
//! Where each request goes (module `routed`): a group's requests (DescribeGroups,
//! ConsumerGroupDescribe, DeleteGroups, GroupSimulate, OffsetFetch, OffsetCommit,
//! OffsetHistory, OffsetReset, OffsetRestore) to that group's coordinator, found with
//! FindCoordinator, one request per coordinator for a batch; ListGroups to every node of the
//! cluster (DescribeCluster), merged; the rest (topics, the cluster, FindCoordinator) to any
//! bootstrap node that answers. Against a single `musterd` every request reaches that one
//! server, as before.

use std::collections::BTreeMap;

use muster_protocol::{
    ConsumerGroupDescribeRequest, CreateTopicsRequest, DeleteGroupsRequest, DescribeGroupsRequest,
    DescribeTopicsRequest, DescribedConsumerGroup, DescribedGroup, FindCoordinatorRequest,
    GroupDiagnosisRequest, GroupDiagnosisResponse, GroupHistoryRequest, GroupResult,
    GroupSimulateRequest, GroupSimulateResponse, ListedGroup, OffsetHistoryRequest,
    OffsetHistoryResponse, OffsetResetRequest, OffsetResetResponse, OffsetRestoreRequest,
    OffsetRestoreResponse, RebalanceRecord, Request, ResetTo, Response, TopicInfo, TopicPartitions,
    TopicResult,
};

use crate::client::Client;
use crate::cluster::{self, Cluster, Node};
use crate::connection::Connection;
use crate::error::ClientError;
use crate::offsets::{self, Committer};
use crate::partition::{OffsetAndMetadata, TopicPartition};

mod routed;

pub use muster_protocol::GroupState;
pub use routed::{GroupListing, NodeFailure, NodeGroup};

/// Administrative requests, through a [`Client`] (or one [`Connection`]).
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    /// `client`: a [`Client`] (a bootstrap list) or a [`Connection`].
    pub fn new(client: impl Into<Client>) -> Self {
        Admin {
            client: client.into(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client's first connection (to the bootstrap node it reached first).
    pub fn connection(&self) -> &Connection {
        self.client.primary()
    }

    /// Sends a request any node answers to a bootstrap node that answers.
    async fn send_any(&self, request: impl Into<Request>) -> Result<Response, ClientError> {
        Ok(self.client.send_any(request).await?.0)
    }

    /// Creates topics, or raises their partition counts; one result per topic.
    pub async fn create_topics(
        &self,
        topics: Vec<TopicInfo>,
    ) -> Result<Vec<TopicResult>, ClientError> {
        match self.send_any(CreateTopicsRequest { topics }).await? {
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
        match self.send_any(request).await? {
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

    /// The groups in any of `states` (`[]`: all groups) on every node of the cluster. Fails
    /// if a node cannot be reached or refuses (use [`Admin::list_groups_by_node`] to get the
    /// other nodes' groups anyway).
    pub async fn list_groups(
        &self,
        states: &[GroupState],
    ) -> Result<Vec<ListedGroup>, ClientError> {
        let listing = self.list_groups_by_node(states).await?;
        if let Some(failed) = listing.failed.into_iter().next() {
            return Err(failed.error);
        }
        Ok(listing.groups.into_iter().map(|g| g.group).collect())
    }

    /// ListGroups at every node of the cluster (as DescribeCluster names them), each group
    /// with the node that listed it, and the nodes that could not be asked with why. Fails
    /// only if no bootstrap node describes the cluster.
    pub async fn list_groups_by_node(
        &self,
        states: &[GroupState],
    ) -> Result<GroupListing, ClientError> {
        routed::list_everywhere(&self.client, states).await
    }

    /// One description per requested group (an unknown group is described as `Dead`), each
    /// asked of the group's coordinator.
    pub async fn describe_groups(
        &self,
        group_ids: &[&str],
    ) -> Result<Vec<DescribedGroup>, ClientError> {
        routed::per_coordinator(
            &self.client,
            group_ids,
            |group_ids| DescribeGroupsRequest { group_ids }.into(),
            |response| match response {
                Response::DescribeGroups(answer) => Ok(answer.groups),
                other => Err(ClientError::Unexpected(other.name())),
            },
            |g: &DescribedGroup| (&g.group_id, g.error_code),
        )
        .await
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

    /// One ConsumerGroupDescribe description per requested group (protocol-v1 §7): the group
    /// and assignment epochs, the server assignor, and per member its epoch, subscription,
    /// current assignment and target assignment. Each is asked of the group's coordinator. A
    /// group that is not a consumer-protocol group (a classic group, or an unknown one) comes
    /// back `Dead` with GROUP_ID_NOT_FOUND in its `error_code`, as Kafka 4 answers; a group the
    /// principal may not describe with GROUP_AUTHORIZATION_FAILED.
    pub async fn describe_consumer_groups(
        &self,
        group_ids: &[&str],
    ) -> Result<Vec<DescribedConsumerGroup>, ClientError> {
        routed::per_coordinator(
            &self.client,
            group_ids,
            |group_ids| ConsumerGroupDescribeRequest { group_ids }.into(),
            |response| match response {
                Response::ConsumerGroupDescribe(answer) => Ok(answer.groups),
                other => Err(ClientError::Unexpected(other.name())),
            },
            |g: &DescribedConsumerGroup| (&g.group_id, g.error_code),
        )
        .await
    }

    /// One consumer-protocol group's description; a per-group error code becomes the error
    /// (GROUP_ID_NOT_FOUND: no such group, or a classic one).
    pub async fn describe_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<DescribedConsumerGroup, ClientError> {
        let group = self
            .describe_consumer_groups(&[group_id])
            .await?
            .into_iter()
            .find(|g| g.group_id == group_id)
            .ok_or(ClientError::Unexpected(
                "ConsumerGroupDescribe without this group",
            ))?;
        ClientError::check(group.error_code, || {
            format!("ConsumerGroupDescribe {group_id}")
        })?;
        Ok(group)
    }

    /// A dry-run rebalance of `group_id` (GroupSimulate, docs/protocol.md): what the group's
    /// assignor would do if the members `remove` left, `add` new members joined (each
    /// subscribed to every topic the group subscribes to) and the topics of `partitions` had
    /// those partition counts, all at once. Per member (staying, added as `new-1`, `new-2`,
    /// …, or removed) the partitions it would keep, lose and gain, and how many partitions
    /// would stop. Nothing changes in the group.
    ///
    /// The server computes consumer-protocol groups and classic groups whose assignor is
    /// `range` or `roundrobin`. A refusal becomes [`ClientError::Protocol`] whose context is
    /// `GroupSimulate {group_id}`, followed by `: ` and the server's `error_message` when it
    /// sent one: INVALID_REQUEST (another classic assignor), UNKNOWN_MEMBER_ID (a member to
    /// remove is not in the group), INVALID_PARTITIONS (a count below the topic's),
    /// GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED; in a cluster the coordinator codes are
    /// followed as for the other group requests.
    pub async fn simulate(
        &self,
        group_id: &str,
        remove: &[&str],
        add: u32,
        partitions: Vec<TopicInfo>,
    ) -> Result<GroupSimulateResponse, ClientError> {
        let request = GroupSimulateRequest {
            group_id: group_id.to_owned(),
            remove_members: remove.iter().map(|m| (*m).to_owned()).collect(),
            add_members: add,
            partitions,
        };
        match routed::group_call(&self.client, group_id, request.into()).await? {
            Response::GroupSimulate(answer) => {
                ClientError::check(answer.error_code, || {
                    simulate_context(group_id, answer.error_message.as_deref())
                })?;
                Ok(answer)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// Deletes groups (only Empty ones; their offsets go too); one result per group, each
    /// from the group's coordinator.
    pub async fn delete_groups(&self, group_ids: &[&str]) -> Result<Vec<GroupResult>, ClientError> {
        routed::per_coordinator(
            &self.client,
            group_ids,
            |group_ids| DeleteGroupsRequest { group_ids }.into(),
            |response| match response {
                Response::DeleteGroups(answer) => Ok(answer.results),
                other => Err(ClientError::Unexpected(other.name())),
            },
            |r: &GroupResult| (&r.group_id, r.error_code),
        )
        .await
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
        match routed::group_call(&self.client, group_id, request.into()).await? {
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
        match routed::group_call(&self.client, group_id, request.into()).await? {
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
        let response = self.send_any(request).await?;
        cluster::parse_find_coordinator(group_id, response)
    }

    /// The cluster's name, shard count and live nodes with the shards each owns. Any
    /// authenticated principal may ask.
    pub async fn describe_cluster(&self) -> Result<Cluster, ClientError> {
        Ok(self.client.describe_cluster().await?.0)
    }

    /// The group's committed offsets for `partitions` (`None`: all). Partitions with nothing
    /// committed are absent.
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, ClientError> {
        let request = offsets::fetch_request(group_id, partitions);
        let response = routed::group_call(&self.client, group_id, request.into()).await?;
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
        let request = offsets::commit_request(committer, offsets);
        let response = routed::group_call(&self.client, group_id, request.into()).await?;
        offsets::check_commit(group_id, response)
    }

    /// The group's offset history (OffsetHistory, docs/offsets.md): per partition, its last
    /// commits, resets and restores, newest first, with who wrote each and when. `topic`
    /// `None`: every topic; `partition` `None`: every partition (of `topic`, or of every
    /// topic); `limit`: at most this many entries per partition (0: every one the server
    /// keeps). The answer's `omitted` counts entries left out at the server's cap.
    ///
    /// Needs `read` on the group (and on each topic: a topic the principal may not read is
    /// answered with TOPIC_AUTHORIZATION_FAILED on its partitions). GROUP_ID_NOT_FOUND for a
    /// group the coordinator does not have.
    pub async fn offset_history(
        &self,
        group_id: &str,
        topic: Option<&str>,
        partition: Option<i32>,
        limit: u32,
    ) -> Result<OffsetHistoryResponse, ClientError> {
        let request = OffsetHistoryRequest {
            group_id: group_id.to_owned(),
            topic: topic.map(str::to_owned),
            partition,
            limit,
        };
        match routed::group_call(&self.client, group_id, request.into()).await? {
            Response::OffsetHistory(answer) => {
                ClientError::check(answer.error_code, || format!("OffsetHistory {group_id}"))?;
                Ok(answer)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// Resets the committed offsets of a group that has no members (OffsetReset,
    /// docs/offsets.md): to the offset each partition had at a time, to the oldest recorded,
    /// by a shift, or to an offset ([`ResetTo`]). `topics`: which partitions (empty: every
    /// partition the group has an offset or history for; a topic with no partitions listed:
    /// all of that topic's). `execute` `false`: a dry run (the answer says what would change;
    /// nothing does). Executed, the answer's `recorded_at_ms` is the time its history entries
    /// carry: a reset to `recorded_at_ms - 1` undoes it.
    ///
    /// A refusal becomes [`ClientError::Protocol`] whose context is `OffsetReset {group_id}`,
    /// followed by `: ` and the server's `error_message` ([`server_message`] reads it back):
    /// NON_EMPTY_GROUP (it names the members), INVALID_REQUEST (a partition the history
    /// cannot answer for: nothing was reset), GROUP_AUTHORIZATION_FAILED (executing needs
    /// `read` and `delete` on the group; a dry run needs `read`), GROUP_ID_NOT_FOUND. A
    /// partition of a topic the principal may not read is left alone, with
    /// TOPIC_AUTHORIZATION_FAILED in its `error_code`; the others are reset.
    pub async fn reset_offsets(
        &self,
        group_id: &str,
        to: ResetTo,
        topics: Vec<TopicPartitions>,
        execute: bool,
    ) -> Result<OffsetResetResponse, ClientError> {
        let request = OffsetResetRequest {
            group_id: group_id.to_owned(),
            to,
            topics,
            execute,
        };
        match routed::group_call(&self.client, group_id, request.into()).await? {
            Response::OffsetReset(answer) => {
                ClientError::check(answer.error_code, || {
                    refusal_context("OffsetReset", group_id, answer.error_message.as_deref())
                })?;
                Ok(answer)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// The group's offsets in the expiry quarantine (OffsetRestore, docs/offsets.md): offsets
    /// past retention are held there for `offsets_quarantine_minutes` before they are dropped.
    /// `execute` `false`: only list them (with when the oldest entered, and when the first
    /// will be dropped; 0 for an empty quarantine); `true`: bring them back whole, committed
    /// anew (the answer lists what was restored). Listing needs `read` on the group,
    /// restoring `read` and `delete`. Refusals as [`Admin::reset_offsets`], with the context
    /// `OffsetRestore {group_id}`.
    pub async fn restore_offsets(
        &self,
        group_id: &str,
        execute: bool,
    ) -> Result<OffsetRestoreResponse, ClientError> {
        let request = OffsetRestoreRequest {
            group_id: group_id.to_owned(),
            execute,
        };
        match routed::group_call(&self.client, group_id, request.into()).await? {
            Response::OffsetRestore(answer) => {
                ClientError::check(answer.error_code, || {
                    refusal_context("OffsetRestore", group_id, answer.error_message.as_deref())
                })?;
                Ok(answer)
            }
            other => Err(ClientError::Unexpected(other.name())),
        }
    }
}

/// The context of a refused admin request that says why: `{request} {group_id}`, and
/// `: {message}` when the server sent a message ([`Admin::reset_offsets`],
/// [`Admin::restore_offsets`], [`Admin::simulate`]).
pub fn refusal_context(request: &str, group_id: &str, message: Option<&str>) -> String {
    match message.filter(|m| !m.is_empty()) {
        Some(message) => format!("{request} {group_id}: {message}"),
        None => format!("{request} {group_id}"),
    }
}

/// The server's message in an error made with [`refusal_context`] for `request` and
/// `group_id`, if it sent one.
pub fn server_message<'a>(err: &'a ClientError, request: &str, group_id: &str) -> Option<&'a str> {
    match err {
        ClientError::Protocol { context, .. } => context
            .strip_prefix(&refusal_context(request, group_id, None))
            .and_then(|rest| rest.strip_prefix(": ")),
        _ => None,
    }
}

/// The context of a refused GroupSimulate: `GroupSimulate {group_id}`, and `: {message}` when
/// the server said why ([`Admin::simulate`]).
pub fn simulate_context(group_id: &str, message: Option<&str>) -> String {
    refusal_context("GroupSimulate", group_id, message)
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

    /// The context of a refused GroupSimulate: the CLI reads the server's reason after it.
    #[test]
    fn a_refused_simulation_carries_the_servers_reason() {
        assert_eq!(
            simulate_context("g", Some("the group has no member m")),
            "GroupSimulate g: the group has no member m"
        );
        assert_eq!(simulate_context("g", None), "GroupSimulate g");
        assert_eq!(simulate_context("g", Some("")), "GroupSimulate g");
    }

    #[test]
    fn a_refused_reset_gives_back_the_servers_message() {
        let context = refusal_context(
            "OffsetReset",
            "g",
            Some("group g is Stable with 1 member(s): m"),
        );
        let err = ClientError::protocol(68, context);
        assert_eq!(
            server_message(&err, "OffsetReset", "g"),
            Some("group g is Stable with 1 member(s): m")
        );
        assert_eq!(server_message(&err, "OffsetRestore", "g"), None);
        let bare = ClientError::protocol(68, refusal_context("OffsetReset", "g", None));
        assert_eq!(server_message(&bare, "OffsetReset", "g"), None);
    }
}
