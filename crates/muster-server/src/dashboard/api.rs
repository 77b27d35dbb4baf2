//! The dashboard's JSON (docs/operations.md, "Dashboard", lists every field): what it asks
//! the supervisor, and the shapes it answers with.
//!
//! - `/api/groups`: one page of the groups ([`ListOverview`]: paged by cursor in id order,
//!   filtered by an id substring and a state), with counts per state, and for each group on
//!   the page its last rebalance and flags (`insight.rs`);
//! - `/api/groups/<id>`: one group as DescribeGroups describes it (sent as the same
//!   [`AdminCall`] a client's request becomes, so the same authorization applies), its members,
//!   the assignment by topic, its rebalance journal and the diagnosis (`insight.rs`), and for a
//!   consumer-protocol group its epochs and targets (`consumer.rs`).

use futures_util::future::join_all;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use muster_coordinator::access::Access;
use muster_coordinator::actors::{GroupSummary, ListOverview, OverviewQuery, MAX_OVERVIEW_PAGE};
use muster_coordinator::engine::GroupState;
use muster_protocol::view::MemberRow;
use muster_protocol::{
    DescribeGroupsRequest, DescribedGroup, ErrorCode, Request, Response as Wire,
};
use serde::Serialize;

use super::ask::{ask, Backend};
use super::consumer::{self, ConsumerView};
use super::http::{json, json_error, query_value};
use super::insight::{self, GroupInsight, RowInsight};

/// Groups per page when the query does not say.
const DEFAULT_PAGE: usize = 100;

/// The longest filter or cursor accepted (a group id is at most 255 bytes, protocol §6.2; a
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
    /// Partitions in the expiry quarantine, and when the first is dropped for good.
    quarantined: u32,
    quarantine_drop_at_ms: Option<u64>,
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
            quarantined: s.quarantined,
            quarantine_drop_at_ms: s.quarantine_drop_at_ms,
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
                "state {name:?} is none of Empty, PreparingRebalance, CompletingRebalance, \
                 Assigning, Reconciling, Stable"
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
pub(super) async fn list(backend: &Backend, access: Access, query: &str) -> Response<Full<Bytes>> {
    let query = match overview_query(query) {
        Ok(query) => query,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, &message),
    };
    let limit = query.limit;
    let Ok(page) = backend
        .supervisor
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
            .map(|g| insight::for_row(backend, &access, &g.group_id)),
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
    /// A consumer-protocol group's epochs and targets (`consumer.rs`); `null` for a classic one.
    consumer: Option<ConsumerView>,
}

/// A member as `muster groups describe --json` shows it, and whether it leads.
#[derive(Serialize)]
struct MemberView {
    #[serde(flatten)]
    row: MemberRow,
    leader: bool,
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

fn group_view(
    g: DescribedGroup,
    insight: GroupInsight,
    consumer: Option<ConsumerView>,
) -> GroupView {
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
            .map(|m| MemberView {
                leader: m.member_id == g.leader_id,
                row: m.into(),
            })
            .collect(),
        group_id: g.group_id,
        state: g.state,
        generation: g.generation_id,
        assignor: g.assignor,
        leader_id: g.leader_id,
        members_total,
        assignment,
        insight,
        consumer,
    }
}

/// `/api/groups/<id>`.
pub(super) async fn group(
    backend: &Backend,
    access: Access,
    group_id: String,
) -> Response<Full<Bytes>> {
    let request = Request::DescribeGroups(DescribeGroupsRequest {
        group_ids: vec![group_id],
    });
    let described = match ask(backend, request, access.clone()).await {
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
            let insight = insight::for_group(backend, &access, &described.group_id).await;
            let consumer = consumer::for_group(backend, &access, &described.group_id).await;
            json(StatusCode::OK, &group_view(described, insight, consumer))
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
