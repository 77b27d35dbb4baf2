//! Where the admin API's group requests go in a cluster: one group's request to its
//! coordinator ([`group_call`]), a batch over groups split into one request per coordinator
//! ([`per_coordinator`]), and ListGroups at every node, merged ([`list_everywhere`]).
//!
//! A group whose coordinator moves or fails meanwhile (a coordinator error code, a transport
//! failure) is looked up and asked again, with the connection settings' backoff, within the
//! request timeout. A group that has no coordinator to name (FindCoordinator refuses it, e.g.
//! an invalid group id) is asked of the client's first node, which answers it with its error
//! code as a single server always did.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::join_all;
use muster_protocol::{ErrorCode, ListGroupsRequest, ListedGroup, Request, Response};
use tokio::time::Instant;

use super::GroupState;
use crate::client::{coordinator_lost, Client};
use crate::cluster::Node;
use crate::connection::Connection;
use crate::error::{ClientError, ErrorCodeExt};

/// A group as a node listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    pub node: Node,
    pub group: ListedGroup,
}

/// A node whose groups could not be listed, and why.
#[derive(Debug, Clone)]
pub struct NodeFailure {
    pub node: Node,
    pub error: ClientError,
}

/// ListGroups across a cluster ([`crate::Admin::list_groups_by_node`]).
#[derive(Debug, Clone)]
pub struct GroupListing {
    /// The cluster's nodes, as DescribeCluster named them.
    pub nodes: Vec<Node>,
    /// The groups of every node that answered, sorted by group id, then node id.
    pub groups: Vec<NodeGroup>,
    /// The nodes that could not be reached or refused, in the order of `nodes`.
    pub failed: Vec<NodeFailure>,
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// The connection for a group: its coordinator's, or (no coordinator to name) the first one.
async fn coordinator_of(client: &Client, group_id: &str) -> Result<Connection, ClientError> {
    match client.find_coordinator(group_id).await {
        Ok((_, connection)) => Ok(connection),
        Err(err) if err.is_retriable() => Err(err),
        Err(_) => Ok(client.primary().clone()),
    }
}

/// Sends one group's `request` to the group's coordinator (module docs).
pub(super) async fn group_call(
    client: &Client,
    group_id: &str,
    request: Request,
) -> Result<Response, ClientError> {
    let deadline = Instant::now() + client.connection_config().request_timeout;
    let backoff = client.connection_config().backoff;
    let mut attempt = 0;
    loop {
        let result = match coordinator_of(client, group_id).await {
            Ok(connection) => {
                connection
                    .send_once(request.clone(), remaining(deadline))
                    .await
            }
            Err(err) => Err(err),
        };
        if !coordinator_lost(&result) && !answered_coordinator_error(&result) {
            return result;
        }
        let delay = backoff.next_delay(attempt);
        attempt += 1;
        if Instant::now() + delay >= deadline {
            return result;
        }
        tokio::time::sleep(delay).await;
    }
}

/// An answer whose top-level code is a coordinator error ([`Response::error_code`]: it also
/// reads the answers `coordinator_lost` does not know, such as GroupSimulate's).
fn answered_coordinator_error(result: &Result<Response, ClientError>) -> bool {
    result.as_ref().is_ok_and(|response| {
        ErrorCode::from_code(response.error_code()).is_some_and(|c| c.is_coordinator_error())
    })
}

/// Sends a request about many groups as one request per coordinator (`request` builds one
/// from its groups' ids, `parse` reads the items of its answer, `key` gives an item's group id
/// and error code) and returns the items in the order of `group_ids` (duplicates once; an item
/// an answer leaves out stays out). Fails if a group got no answer at all in time.
pub(super) async fn per_coordinator<T>(
    client: &Client,
    group_ids: &[&str],
    request: impl Fn(Vec<String>) -> Request,
    parse: impl Fn(Response) -> Result<Vec<T>, ClientError>,
    key: impl Fn(&T) -> (&String, i16),
) -> Result<Vec<T>, ClientError> {
    let deadline = Instant::now() + client.connection_config().request_timeout;
    let backoff = client.connection_config().backoff;
    let mut wanted: Vec<String> = Vec::with_capacity(group_ids.len());
    for id in group_ids {
        if !wanted.iter().any(|w| w == id) {
            wanted.push((*id).to_owned());
        }
    }
    let mut answers: HashMap<String, T> = HashMap::new();
    let mut pending = wanted.clone();
    let mut attempt = 0;
    loop {
        let mut last_error = None;
        let mut retry: Vec<String> = Vec::new();
        let lookups = join_all(pending.iter().map(|g| coordinator_of(client, g))).await;
        let mut batches: Vec<(Connection, Vec<String>)> = Vec::new();
        for (group, lookup) in pending.drain(..).zip(lookups) {
            let connection = match lookup {
                Ok(connection) => connection,
                Err(err) => {
                    last_error = Some(err);
                    retry.push(group);
                    continue;
                }
            };
            let addr = &connection.config().addr;
            match batches.iter_mut().find(|(c, _)| &c.config().addr == addr) {
                Some((_, groups)) => groups.push(group),
                None => batches.push((connection, vec![group])),
            }
        }
        let (request, parse) = (&request, &parse);
        let sent = join_all(batches.into_iter().map(|(connection, groups)| async move {
            let result = connection
                .send_once(request(groups.clone()), remaining(deadline))
                .await
                .and_then(parse);
            (groups, result)
        }))
        .await;
        for (groups, result) in sent {
            match result {
                Ok(items) => {
                    for item in items {
                        let (id, code) = key(&item);
                        let id = id.clone();
                        if ErrorCode::from_code(code).is_some_and(|c| c.is_coordinator_error()) {
                            retry.push(id.clone());
                        }
                        // Kept even when the coordinator moved: the answer if time runs out.
                        answers.insert(id, item);
                    }
                }
                Err(err) if err.is_retriable() => {
                    retry.extend(groups);
                    last_error = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        if retry.is_empty() {
            break;
        }
        let delay = backoff.next_delay(attempt);
        attempt += 1;
        if Instant::now() + delay >= deadline {
            if retry.iter().any(|g| !answers.contains_key(g)) {
                return Err(last_error.unwrap_or(ClientError::Disconnected));
            }
            break;
        }
        tokio::time::sleep(delay).await;
        retry.dedup();
        pending = retry;
    }
    Ok(wanted.iter().filter_map(|id| answers.remove(id)).collect())
}

/// ListGroups at every node DescribeCluster names (a cluster of one: the node that answered).
pub(super) async fn list_everywhere(
    client: &Client,
    states: &[GroupState],
) -> Result<GroupListing, ClientError> {
    let (cluster, asked) = client.describe_cluster().await?;
    let asked_addr = asked.config().addr.clone();
    let alone = cluster.nodes.len() == 1;
    let request = ListGroupsRequest {
        states: states.iter().map(|s| s.as_str().to_owned()).collect(),
    };
    let timeout = client.connection_config().request_timeout;
    let asks = cluster.nodes.iter().map(|n| {
        let (request, asked, asked_addr) = (&request, &asked, asked_addr.as_str());
        async move {
            let connection = client
                .node_connection(&n.node, asked_addr, asked, Some(alone))
                .await?;
            match connection.send_once(request.clone(), timeout).await? {
                Response::ListGroups(answer) => {
                    ClientError::check(answer.error_code, || {
                        format!("ListGroups at node {}", n.node)
                    })?;
                    Ok(answer.groups)
                }
                other => Err(ClientError::Unexpected(other.name())),
            }
        }
    });
    let results = join_all(asks).await;
    let mut listing = GroupListing {
        nodes: cluster.nodes.iter().map(|n| n.node.clone()).collect(),
        groups: Vec::new(),
        failed: Vec::new(),
    };
    for (n, result) in cluster.nodes.into_iter().zip(results) {
        match result {
            Ok(groups) => listing
                .groups
                .extend(groups.into_iter().map(|group| NodeGroup {
                    node: n.node.clone(),
                    group,
                })),
            Err(error) => listing.failed.push(NodeFailure {
                node: n.node,
                error,
            }),
        }
    }
    listing.groups.sort_by(|a, b| {
        (&a.group.group_id, &a.node.node_id).cmp(&(&b.group.group_id, &b.node.node_id))
    });
    Ok(listing)
}

#[cfg(test)]
mod tests {
    use muster_protocol::{GroupSimulateResponse, HeartbeatResponse};

    use super::*;

    #[test]
    fn any_answers_coordinator_code_sends_it_to_find_the_coordinator_again() {
        let simulate = |code: ErrorCode| {
            Ok(Response::GroupSimulate(GroupSimulateResponse {
                error_code: code.code(),
                ..GroupSimulateResponse::default()
            }))
        };
        assert!(answered_coordinator_error(&simulate(
            ErrorCode::NotCoordinator
        )));
        assert!(answered_coordinator_error(&simulate(
            ErrorCode::CoordinatorLoadInProgress
        )));
        assert!(!answered_coordinator_error(&simulate(ErrorCode::None)));
        assert!(!answered_coordinator_error(&simulate(
            ErrorCode::GroupIdNotFound
        )));
        let heartbeat = Ok(Response::Heartbeat(HeartbeatResponse {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
        }));
        assert!(answered_coordinator_error(&heartbeat));
        assert!(!answered_coordinator_error(&Err(ClientError::Disconnected)));
    }
}
