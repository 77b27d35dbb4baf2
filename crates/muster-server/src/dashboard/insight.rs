//! The rebalance journal and the "why" diagnosis as the dashboard shows them: asked of the
//! supervisor as the GroupHistory and GroupDiagnosis admin requests (protocol §6.20; what
//! `muster groups history` and `muster groups why` ask), turned into JSON whose times are
//! relative to the server's clock (`…_ms_ago`, `…_in_ms`), so a browser with a wrong clock still
//! reads them right.
//!
//! Both are optional in the pages: a server or group that cannot answer them (an older
//! coordinator, a group just deleted) leaves the journal and the diagnosis out and says why in
//! `insight_error`, and the rest of the page still shows.

use std::time::{SystemTime, UNIX_EPOCH};

use muster_coordinator::access::Access;
use muster_protocol::view::AssignedPartitions;
use muster_protocol::{
    ErrorCode, GroupDiagnosisRequest, GroupDiagnosisResponse, GroupHistoryRequest, RebalanceCause,
    RebalanceRecord, RebalanceWait, Request, Response as Wire, WaitingMember,
};
use serde::Serialize;

use super::ask::{ask, Backend};

/// Rebalances a group page shows (the journal keeps 50 by default).
const JOURNAL_SHOWN: u32 = 50;

#[derive(Serialize)]
pub(super) struct Cause {
    kind: String,
    member_id: Option<String>,
    client_id: Option<String>,
    host: Option<String>,
    detail: Option<String>,
}

fn cause(c: RebalanceCause) -> Cause {
    let some = |s: String| (!s.is_empty()).then_some(s);
    Cause {
        kind: c.kind,
        member_id: some(c.member_id),
        client_id: some(c.client_id),
        host: some(c.client_host),
        detail: c.detail,
    }
}

/// One journal entry (the CLI's `history --json` names, plus `ago_ms`).
#[derive(Serialize)]
pub(super) struct Rebalance {
    generation: i32,
    trigger: Cause,
    /// ms since the Unix epoch, server clock.
    started_at: u64,
    ago_ms: u64,
    barrier_ms: u64,
    sync_ms: Option<u64>,
    assignor: Option<String>,
    leader_id: String,
    members: u32,
    waited_for: Vec<Waited>,
    evicted: Vec<String>,
    joined: Vec<String>,
    left: Vec<String>,
    moved: Option<u32>,
    changes: Vec<Change>,
    omitted: u32,
}

#[derive(Serialize)]
struct Waited {
    member_id: String,
    rejoin_ms: Option<u64>,
}

#[derive(Serialize)]
struct Change {
    member_id: String,
    gained: Vec<AssignedPartitions>,
    revoked: Vec<AssignedPartitions>,
}

fn rebalance(r: RebalanceRecord, now_ms: u64) -> Rebalance {
    Rebalance {
        generation: r.generation_id,
        trigger: cause(r.trigger),
        started_at: r.started_at_ms,
        ago_ms: now_ms.saturating_sub(r.started_at_ms),
        barrier_ms: r.barrier_ms,
        sync_ms: r.sync_ms,
        assignor: r.assignor,
        leader_id: r.leader_id,
        members: r.members,
        waited_for: r
            .waited_for
            .into_iter()
            .map(|w| Waited {
                member_id: w.member_id,
                rejoin_ms: w.rejoin_ms,
            })
            .collect(),
        evicted: r.evicted,
        joined: r.joined,
        left: r.left,
        moved: r.moved,
        changes: r
            .changes
            .into_iter()
            .map(|c| Change {
                member_id: c.member_id,
                gained: AssignedPartitions::all(c.gained),
                revoked: AssignedPartitions::all(c.revoked),
            })
            .collect(),
        omitted: r.omitted,
    }
}

/// The diagnosis, times relative to the server's clock.
#[derive(Serialize)]
pub(super) struct Diagnosis {
    /// A rebalance is in progress and past half its timeout.
    stuck: bool,
    rebalance: Option<InProgress>,
    unowned: Vec<AssignedPartitions>,
    unowned_since_ms_ago: Option<u64>,
    storm: bool,
    rebalances_in_window: u32,
    storm_threshold: u32,
    storm_window_ms: u64,
}

#[derive(Serialize)]
struct InProgress {
    /// `join` or `sync`.
    phase: String,
    trigger: Cause,
    started_ms_ago: u64,
    /// How long this phase has waited.
    phase_for_ms: u64,
    /// When it gives up (negative: overdue, the next tick acts).
    deadline_in_ms: Option<i64>,
    stuck: bool,
    waiting_for: Vec<Waiting>,
    omitted: u32,
    pending_joins: u32,
}

#[derive(Serialize)]
struct Waiting {
    member_id: String,
    instance_id: Option<String>,
    client_id: String,
    host: String,
    last_heard_ms_ago: u64,
    leader: bool,
}

fn ms_until(now: u64, at: u64) -> i64 {
    i64::try_from(at).unwrap_or(i64::MAX) - i64::try_from(now).unwrap_or(i64::MAX)
}

fn waiting(w: WaitingMember, now: u64) -> Waiting {
    Waiting {
        member_id: w.member_id,
        instance_id: w.group_instance_id,
        client_id: w.client_id,
        host: w.client_host,
        last_heard_ms_ago: now.saturating_sub(w.last_heard_ms),
        leader: w.leader,
    }
}

fn in_progress(r: RebalanceWait, now: u64) -> InProgress {
    InProgress {
        phase: r.phase,
        trigger: cause(r.trigger),
        started_ms_ago: now.saturating_sub(r.started_at_ms),
        phase_for_ms: now.saturating_sub(r.phase_since_ms),
        deadline_in_ms: r.deadline_ms.map(|at| ms_until(now, at)),
        stuck: r.stuck,
        waiting_for: r.waiting_for.into_iter().map(|w| waiting(w, now)).collect(),
        omitted: r.omitted,
        pending_joins: r.pending_joins,
    }
}

fn diagnosis(d: GroupDiagnosisResponse) -> Diagnosis {
    let now = d.now_ms;
    let rebalance = d.rebalance.map(|r| in_progress(*r, now));
    Diagnosis {
        stuck: rebalance.as_ref().is_some_and(|r| r.stuck),
        rebalance,
        unowned: AssignedPartitions::all(d.unowned),
        unowned_since_ms_ago: d.unowned_since_ms.map(|at| now.saturating_sub(at)),
        storm: d.storm,
        rebalances_in_window: d.rebalances_in_window,
        storm_threshold: d.storm_threshold,
        storm_window_ms: d.storm_window_ms,
    }
}

/// Why an answer holds no journal or diagnosis.
fn refused(what: &str, response: Result<Wire, &'static str>) -> String {
    match response {
        Ok(Wire::Error(e)) => format!("{what}: {}", e.message),
        Ok(other) => format!(
            "{what}: {}",
            ErrorCode::from_code(other.error_code()).map_or("unknown error", ErrorCode::name)
        ),
        Err(e) => format!("{what}: {e}"),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A group's journal (newest first, at most `limit`), or why there is none.
pub(super) async fn journal(
    backend: &Backend,
    access: Access,
    group_id: String,
    limit: u32,
) -> Result<Vec<Rebalance>, String> {
    let request = Request::GroupHistory(GroupHistoryRequest { group_id, limit });
    match ask(backend, request, access).await {
        Ok(Wire::GroupHistory(r)) if r.error_code == ErrorCode::None.code() => {
            let now = now_ms();
            Ok(r.rebalances
                .into_iter()
                .map(|record| rebalance(record, now))
                .collect())
        }
        other => Err(refused("no rebalance journal", other)),
    }
}

/// A group's diagnosis, or why there is none.
pub(super) async fn why(
    backend: &Backend,
    access: Access,
    group_id: String,
) -> Result<Diagnosis, String> {
    let request = Request::GroupDiagnosis(GroupDiagnosisRequest { group_id });
    match ask(backend, request, access).await {
        Ok(Wire::GroupDiagnosis(d)) if d.error_code == ErrorCode::None.code() => Ok(diagnosis(d)),
        other => Err(refused("no diagnosis", other)),
    }
}

/// What the group page adds to the description.
#[derive(Serialize, Default)]
pub(super) struct GroupInsight {
    pub journal: Option<Vec<Rebalance>>,
    pub diagnosis: Option<Diagnosis>,
    /// Why `journal` or `diagnosis` is missing.
    pub insight_error: Option<String>,
}

pub(super) async fn for_group(backend: &Backend, access: &Access, group_id: &str) -> GroupInsight {
    let (journal, diagnosis) = tokio::join!(
        journal(backend, access.clone(), group_id.to_owned(), JOURNAL_SHOWN),
        why(backend, access.clone(), group_id.to_owned()),
    );
    let errors: Vec<String> = [journal.as_ref().err(), diagnosis.as_ref().err()]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    GroupInsight {
        journal: journal.ok(),
        diagnosis: diagnosis.ok(),
        insight_error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

/// What a row of the list adds: the last rebalance and the flags.
#[derive(Serialize, Default)]
pub(super) struct RowInsight {
    pub last_rebalance: Option<LastRebalance>,
    pub stuck: bool,
    pub storm: bool,
    pub unowned: bool,
}

#[derive(Serialize)]
pub(super) struct LastRebalance {
    generation: i32,
    trigger: Cause,
    ago_ms: u64,
    barrier_ms: u64,
    sync_ms: Option<u64>,
    moved: Option<u32>,
}

pub(super) async fn for_row(backend: &Backend, access: &Access, group_id: &str) -> RowInsight {
    let (journal, diagnosis) = tokio::join!(
        journal(backend, access.clone(), group_id.to_owned(), 1),
        why(backend, access.clone(), group_id.to_owned()),
    );
    let last_rebalance = journal
        .ok()
        .and_then(|j| j.into_iter().next())
        .map(|r| LastRebalance {
            generation: r.generation,
            trigger: r.trigger,
            ago_ms: r.ago_ms,
            barrier_ms: r.barrier_ms,
            sync_ms: r.sync_ms,
            moved: r.moved,
        });
    let diagnosis = diagnosis.ok();
    RowInsight {
        last_rebalance,
        stuck: diagnosis.as_ref().is_some_and(|d| d.stuck),
        storm: diagnosis.as_ref().is_some_and(|d| d.storm),
        unowned: diagnosis.as_ref().is_some_and(|d| !d.unowned.is_empty()),
    }
}
