//! The dashboard's JSON (docs/operations.md, "Dashboard", lists every field): what it asks
//! the supervisor, and the shapes it answers with.
//!
//! - `/api/groups`: one page of the groups ([`ListOverview`]: paged by cursor in id order,
//!   filtered by an id substring and a state), with counts per state, and for each group on
//!   the page its last rebalance and flags (`insight.rs`);
//! - `/api/groups/<id>`: one group as DescribeGroups describes it (sent as the same
//!   [`AdminCall`] a client's request becomes, so the same authorization applies), its members,
//!   the assignment by topic, its rebalance journal and the diagnosis (`insight.rs`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use actix::Addr;
use futures_util::future::join_all;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use muster_coordinator::access::Access;
use muster_coordinator::actors::{
    AdminCall, Answer, GroupSummary, ListOverview, OverviewQuery, ReplySink, ReplyTo, Supervisor,
    Ticket, MAX_OVERVIEW_PAGE,
};
use muster_coordinator::engine::GroupState;
use muster_protocol::{
    DescribeGroupsRequest, DescribedGroup, DescribedMember, ErrorCode, Request, Response as Wire,
};
use serde::Serialize;
use tokio::sync::oneshot;

use super::http::{json, json_error, query_value};
use super::insight::{self, GroupInsight, RowInsight};

/// Groups per page when the query does not say.
const DEFAULT_PAGE: usize = 100;

/// The longest filter or cursor accepted (a group id is at most 255 bytes, protocol §4; a
/// cursor need not be an existing id).
const MAX_QUERY_TEXT: usize = 1024;

/// Members listed on a group's page; a larger group says how many it left out. 26 214 members
/// (the largest group) would be ~10 MB of JSON every refresh.
pub(super) const MAX_MEMBERS_SHOWN: usize = 1000;

#[derive(Serialize)]
struct ListView {
    /// Groups this principal may see on this node.
    total: usize,
    /// Of those, per state.
    states: Vec<StateCount>,
    /// Groups matching the filter and state.
    matching: usize,
    /// Matching groups before this page's first.
    offset: usize,
    limit: usize,
    more_after: bool,
    groups: Vec<GroupRow>,
}

#[derive(Serialize)]
struct StateCount {
    state: &'static str,
    groups: usize,
}

#[derive(Serialize)]
struct GroupRow {
    group_id: String,
    state: &'static str,
    members: u32,
    generation: i32,
    assignor: Option<String>,
    leader_id: Option<String>,
    state_for_ms: u64,
    #[serde(flatten)]
    insight: RowInsight,
}

impl GroupRow {
    fn new(s: GroupSummary, insight: RowInsight) -> Self {
        GroupRow {
            group_id: s.group_id,
            state: s.state.as_str(),
            members: s.members,
            generation: s.generation,
            assignor: s.assignor,
            leader_id: s.leader,
            state_for_ms: s.state_for_ms,
            insight,
        }
    }
}

/// Reads the list's query: `filter`, `state`, `after` / `before`, `limit`.
fn overview_query(query: &str) -> Result<OverviewQuery, String> {
    let text = |key: &str| -> Result<Option<String>, String> {
        match query_value(query, key) {
            Some(v) if v.len() > MAX_QUERY_TEXT => {
                Err(format!("{key} is longer than {MAX_QUERY_TEXT} bytes"))
            }
            Some(v) if v.is_empty() => Ok(None),
            other => Ok(other),
        }
    };
    let state = match text("state")? {
        None => None,
        Some(name) => Some(GroupState::parse(&name).ok_or_else(|| {
            format!(
                "state {name:?} is none of Empty, PreparingRebalance, CompletingRebalance, Stable"
            )
        })?),
    };
    let limit = match text("limit")? {
        None => DEFAULT_PAGE,
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_OVERVIEW_PAGE).contains(n))
            .ok_or_else(|| format!("limit must be 1 to {MAX_OVERVIEW_PAGE}"))?,
    };
    Ok(OverviewQuery {
        filter: text("filter")?.unwrap_or_default(),
        state,
        after: text("after")?,
        before: text("before")?,
        limit,
    })
}

/// `/api/groups`.
pub(super) async fn list(
    supervisor: &Addr<Supervisor>,
    access: Access,
    query: &str,
) -> Response<Full<Bytes>> {
    let query = match overview_query(query) {
        Ok(query) => query,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, &message),
    };
    let limit = query.limit;
    let Ok(page) = supervisor
        .send(ListOverview {
            access: access.clone(),
            query,
        })
        .await
    else {
        return json_error(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping");
    };
    // The page's groups only (at most MAX_OVERVIEW_PAGE), asked concurrently.
    let insights = join_all(
        page.groups
            .iter()
            .map(|g| insight::for_row(supervisor, &access, &g.group_id)),
    )
    .await;
    json(
        StatusCode::OK,
        &ListView {
            total: page.total,
            states: page
                .per_state
                .into_iter()
                .map(|(state, groups)| StateCount {
                    state: state.as_str(),
                    groups,
                })
                .collect(),
            matching: page.matching,
            offset: page.offset,
            limit,
            more_after: page.more_after,
            groups: page
                .groups
                .into_iter()
                .zip(insights)
                .map(|(summary, insight)| GroupRow::new(summary, insight))
                .collect(),
        },
    )
}

#[derive(Serialize)]
struct GroupView {
    group_id: String,
    state: String,
    generation: i32,
    assignor: Option<String>,
    /// Empty when the group has no leader.
    leader_id: String,
    /// Members in the group; `members` lists at most [`MAX_MEMBERS_SHOWN`] of them.
    members_total: usize,
    members: Vec<MemberView>,
    /// Who owns each assigned partition, by topic (from every member, listed or not).
    assignment: Vec<TopicOwners>,
    #[serde(flatten)]
    insight: GroupInsight,
}

#[derive(Serialize)]
struct MemberView {
    member_id: String,
    instance_id: Option<String>,
    client_id: String,
    host: String,
    topics: Vec<String>,
    assignment: Vec<Partitions>,
    session_timeout_ms: u32,
    last_seen_ms_ago: u64,
    /// A rebalance is in progress and waits for this member's JoinGroup.
    holding_rebalance: bool,
    leader: bool,
}

#[derive(Serialize)]
pub(super) struct Partitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

#[derive(Serialize)]
struct TopicOwners {
    topic: String,
    partitions: Vec<Owner>,
}

#[derive(Serialize)]
struct Owner {
    partition: i32,
    member_id: String,
}

fn member_view(m: DescribedMember, leader_id: &str) -> MemberView {
    MemberView {
        leader: m.member_id == leader_id,
        member_id: m.member_id,
        instance_id: m.group_instance_id,
        client_id: m.client_id,
        host: m.client_host,
        topics: m.topics,
        assignment: m
            .assignment
            .into_iter()
            .map(|tp| Partitions {
                topic: tp.topic,
                partitions: tp.partitions,
            })
            .collect(),
        session_timeout_ms: m.session_timeout_ms,
        last_seen_ms_ago: m.last_seen_ms_ago,
        holding_rebalance: m.holding_rebalance,
    }
}

fn group_view(g: DescribedGroup, insight: GroupInsight) -> GroupView {
    let mut owners: Vec<(String, i32, String)> = g
        .members
        .iter()
        .flat_map(|m| {
            m.assignment.iter().flat_map(move |tp| {
                tp.partitions
                    .iter()
                    .map(move |&p| (tp.topic.clone(), p, m.member_id.clone()))
            })
        })
        .collect();
    owners.sort_unstable();
    let mut assignment: Vec<TopicOwners> = Vec::new();
    for (topic, partition, member_id) in owners {
        match assignment.last_mut() {
            Some(last) if last.topic == topic => last.partitions.push(Owner {
                partition,
                member_id,
            }),
            _ => assignment.push(TopicOwners {
                topic,
                partitions: vec![Owner {
                    partition,
                    member_id,
                }],
            }),
        }
    }
    let members_total = g.members.len();
    let mut members = g.members;
    members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
    members.truncate(MAX_MEMBERS_SHOWN);
    GroupView {
        members: members
            .into_iter()
            .map(|m| member_view(m, &g.leader_id))
            .collect(),
        group_id: g.group_id,
        state: g.state,
        generation: g.generation_id,
        assignor: g.assignor,
        leader_id: g.leader_id,
        members_total,
        assignment,
        insight,
    }
}

/// `/api/groups/<id>`.
pub(super) async fn group(
    supervisor: &Addr<Supervisor>,
    access: Access,
    group_id: String,
) -> Response<Full<Bytes>> {
    let request = Request::DescribeGroups(DescribeGroupsRequest {
        group_ids: vec![group_id],
    });
    let described = match ask(supervisor, request, access.clone()).await {
        Ok(Wire::DescribeGroups(mut r)) if r.groups.len() == 1 => r.groups.remove(0),
        Ok(Wire::Error(e)) => return json_error(StatusCode::SERVICE_UNAVAILABLE, &e.message),
        Ok(other) => {
            return json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("unexpected answer {}", other.name()),
            )
        }
        Err(message) => return json_error(StatusCode::SERVICE_UNAVAILABLE, message),
    };
    match ErrorCode::from_code(described.error_code) {
        Some(ErrorCode::None) if described.state != GroupState::Dead.as_str() => {
            let insight = insight::for_group(supervisor, &access, &described.group_id).await;
            json(StatusCode::OK, &group_view(described, insight))
        }
        Some(ErrorCode::None) => json_error(StatusCode::NOT_FOUND, "no such group"),
        Some(ErrorCode::GroupAuthorizationFailed) => json_error(
            StatusCode::FORBIDDEN,
            "this principal may not describe the group",
        ),
        code => json_error(
            StatusCode::BAD_REQUEST,
            &format!(
                "the group cannot be described here: {}",
                code.map_or("unknown error", ErrorCode::name)
            ),
        ),
    }
}

/// The one answer to one [`AdminCall`], handed to whoever awaits it.
#[derive(Debug)]
struct OneAnswer(Mutex<Option<oneshot::Sender<Wire>>>);

impl ReplySink for OneAnswer {
    fn send(&self, answer: Answer) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sender) = sender {
            let _ = sender.send(answer.response);
        }
    }

    fn send_all(&self, answers: Vec<Answer>) {
        for answer in answers {
            self.send(answer);
        }
    }
}

/// Asks the supervisor an admin request as a client's connection would, with `access`.
pub(super) async fn ask(
    supervisor: &Addr<Supervisor>,
    request: Request,
    access: Access,
) -> Result<Wire, &'static str> {
    let (sender, answer) = oneshot::channel();
    let ticket = Ticket {
        correlation_id: 0,
        request_tag: request.tag(),
        arrived: Instant::now(),
    };
    let reply = ReplyTo::new(Arc::new(OneAnswer(Mutex::new(Some(sender)))), ticket);
    supervisor
        .try_send(AdminCall {
            request,
            reply,
            access,
        })
        .map_err(|_| "the server is stopping")?;
    answer.await.map_err(|_| "the server is stopping")
}
