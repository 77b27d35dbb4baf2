//! `muster groups history | why`: a group's rebalance journal and what it waits for now
//! (GroupHistory and GroupDiagnosis, protocol §6.20).
//!
//! `history --json` prints a JSON array, newest first; each entry has `generation`, `trigger`
//! (`kind`, and `member_id`, `client_id`, `client_host`, `detail`, null when not known),
//! `started_at` (ms since the Unix epoch), `barrier_ms`, `sync_ms`, `joined`, `left`, `moved`
//! (partitions that changed owner), and the rest of the entry.

use std::collections::BTreeMap;

use muster_client::protocol::{
    GroupDiagnosisResponse, MemberChange, RebalanceCause, RebalanceRecord, TopicPartitions,
    WaitingMember,
};
use serde::Serialize;

use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// A cause as JSON: empty strings become null.
#[derive(Debug, Serialize)]
pub struct Trigger {
    pub kind: String,
    pub member_id: Option<String>,
    pub client_id: Option<String>,
    pub client_host: Option<String>,
    pub detail: Option<String>,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl From<RebalanceCause> for Trigger {
    fn from(c: RebalanceCause) -> Self {
        Trigger {
            kind: c.kind,
            member_id: non_empty(c.member_id),
            client_id: non_empty(c.client_id),
            client_host: non_empty(c.client_host),
            detail: c.detail,
        }
    }
}

impl Trigger {
    fn human(&self) -> String {
        match &self.member_id {
            Some(m) => {
                let host = self.client_host.as_deref().unwrap_or("-");
                format!("{} {m} ({host})", self.kind)
            }
            None => match &self.detail {
                Some(d) => format!("{} ({d})", self.kind),
                None => self.kind.clone(),
            },
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Wait {
    pub member_id: String,
    /// How long after the barrier opened it rejoined; null: never.
    pub rejoin_ms: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Change {
    pub member_id: String,
    /// topic → partitions.
    pub gained: BTreeMap<String, Vec<i32>>,
    pub revoked: BTreeMap<String, Vec<i32>>,
}

fn by_topic(tps: Vec<TopicPartitions>) -> BTreeMap<String, Vec<i32>> {
    tps.into_iter()
        .map(|tp| (tp.topic, tp.partitions))
        .collect()
}

impl From<MemberChange> for Change {
    fn from(c: MemberChange) -> Self {
        Change {
            member_id: c.member_id,
            gained: by_topic(c.gained),
            revoked: by_topic(c.revoked),
        }
    }
}

/// One journal entry.
#[derive(Debug, Serialize)]
pub struct HistoryRow {
    pub generation: i32,
    pub trigger: Trigger,
    pub started_at: u64,
    pub barrier_ms: u64,
    /// null: the generation never got an assignment.
    pub sync_ms: Option<u64>,
    pub assignor: Option<String>,
    pub leader_id: Option<String>,
    pub members: u32,
    pub joined: Vec<String>,
    pub left: Vec<String>,
    pub evicted: Vec<String>,
    /// null: not known (no assignment came).
    pub moved: Option<u32>,
    pub waited_for: Vec<Wait>,
    pub changes: Vec<Change>,
    pub omitted: u32,
}

impl From<RebalanceRecord> for HistoryRow {
    fn from(r: RebalanceRecord) -> Self {
        HistoryRow {
            generation: r.generation_id,
            trigger: r.trigger.into(),
            started_at: r.started_at_ms,
            barrier_ms: r.barrier_ms,
            sync_ms: r.sync_ms,
            assignor: r.assignor,
            leader_id: non_empty(r.leader_id),
            members: r.members,
            joined: r.joined,
            left: r.left,
            evicted: r.evicted,
            moved: r.moved,
            waited_for: r
                .waited_for
                .into_iter()
                .map(|w| Wait {
                    member_id: w.member_id,
                    rejoin_ms: w.rejoin_ms,
                })
                .collect(),
            changes: r.changes.into_iter().map(Change::from).collect(),
            omitted: r.omitted,
        }
    }
}

/// `groups history`: the journal, newest first (a JSON array).
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct History {
    pub entries: Vec<HistoryRow>,
}

/// `2024-05-01T12:00:00Z` from ms since the Unix epoch (UTC, civil calendar).
pub fn timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

fn ids(list: &[String]) -> String {
    if list.is_empty() {
        "-".to_owned()
    } else {
        list.join(",")
    }
}

impl Report for History {
    fn human(&self) -> String {
        render::table(
            &[
                "GEN", "STARTED", "TRIGGER", "BARRIER", "SYNC", "MEMBERS", "JOINED", "LEFT",
                "MOVED",
            ],
            self.entries.iter().map(|e| {
                [
                    e.generation.to_string(),
                    timestamp(e.started_at),
                    e.trigger.human(),
                    render::millis(e.barrier_ms),
                    e.sync_ms.map_or("-".to_owned(), render::millis),
                    e.members.to_string(),
                    ids(&e.joined),
                    ids(&e.left),
                    e.moved.map_or("-".to_owned(), |m| m.to_string()),
                ]
            }),
        )
    }

    fn note(&self) -> Option<String> {
        self.entries
            .is_empty()
            .then(|| "no rebalances recorded".to_owned())
    }
}

pub async fn history(ctx: &Context, group: &str, limit: u32) -> Result<History, Failure> {
    let entries = ctx
        .admin
        .group_history(group, limit)
        .await
        .map_err(|e| ctx.fail(&format!("cannot read the history of group {group}"), &e))?;
    Ok(History {
        entries: entries.into_iter().map(HistoryRow::from).collect(),
    })
}

#[derive(Debug, Serialize)]
pub struct Waiting {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub last_heard: u64,
    pub leader: bool,
}

impl From<WaitingMember> for Waiting {
    fn from(m: WaitingMember) -> Self {
        Waiting {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            last_heard: m.last_heard_ms,
            leader: m.leader,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Rebalance {
    /// `join` or `sync`; `reconcile` for a consumer-protocol group (members still holding
    /// partitions another member waits for).
    pub phase: String,
    pub trigger: Trigger,
    pub started_at: u64,
    pub phase_since: u64,
    /// When the phase gives up on those it waits for.
    pub deadline: Option<u64>,
    pub stuck: bool,
    pub waiting_for: Vec<Waiting>,
    pub omitted: u32,
    pub pending_joins: u32,
}

/// `groups why`.
#[derive(Debug, Serialize)]
pub struct Why {
    pub group: String,
    pub state: String,
    pub generation: i32,
    pub now: u64,
    pub rebalance: Option<Rebalance>,
    /// topic → partitions no member owns (Stable groups).
    pub unowned: BTreeMap<String, Vec<i32>>,
    pub unowned_since: Option<u64>,
    pub storm: bool,
    pub rebalances_in_window: u32,
    pub storm_threshold: u32,
    pub storm_window_ms: u64,
}

fn why_from(group: &str, d: GroupDiagnosisResponse) -> Why {
    Why {
        group: group.to_owned(),
        state: d.state,
        generation: d.generation_id,
        now: d.now_ms,
        rebalance: d.rebalance.map(|r| Rebalance {
            phase: r.phase,
            trigger: r.trigger.into(),
            started_at: r.started_at_ms,
            phase_since: r.phase_since_ms,
            deadline: r.deadline_ms,
            stuck: r.stuck,
            waiting_for: r.waiting_for.into_iter().map(Waiting::from).collect(),
            omitted: r.omitted,
            pending_joins: r.pending_joins,
        }),
        unowned: by_topic(d.unowned),
        unowned_since: d.unowned_since_ms,
        storm: d.storm,
        rebalances_in_window: d.rebalances_in_window,
        storm_threshold: d.storm_threshold,
        storm_window_ms: d.storm_window_ms,
    }
}

impl Report for Why {
    fn human(&self) -> String {
        let ago = |t: u64| render::millis(self.now.saturating_sub(t));
        let mut out = format!(
            "group {} is {} at generation {}",
            self.group, self.state, self.generation
        );
        if let Some(r) = &self.rebalance {
            let (doing, what) = match r.phase.as_str() {
                "join" => ("rebalancing", "rejoin"),
                "reconcile" => (
                    "reconciling",
                    "let go of the partitions they were asked to revoke",
                ),
                _ => ("rebalancing", "sync"),
            };
            out.push_str(&format!(
                "\n{doing} ({}) for {}, phase {} for {}{}",
                r.trigger.human(),
                ago(r.started_at),
                r.phase,
                ago(r.phase_since),
                if r.stuck { " — STUCK" } else { "" }
            ));
            if let Some(deadline) = r.deadline {
                out.push_str(&format!(
                    "\ngives up in {} (then removes those that did not {what})",
                    render::millis(deadline.saturating_sub(self.now))
                ));
            }
            if r.waiting_for.is_empty() && r.pending_joins == 0 {
                out.push_str("\nwaiting for nobody");
            } else {
                out.push_str(&format!("\nwaiting for these members to {what}:\n"));
                out.push_str(&render::table(
                    &["MEMBER", "CLIENT", "HOST", "LAST HEARD", "LEADER"],
                    r.waiting_for.iter().map(|m| {
                        [
                            m.member_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            format!("{} ago", ago(m.last_heard)),
                            if m.leader { "yes" } else { "" }.to_owned(),
                        ]
                    }),
                ));
                if r.omitted > 0 {
                    out.push_str(&format!("\n… and {} more", r.omitted));
                }
                if r.pending_joins > 0 {
                    out.push_str(&format!(
                        "\nand {} new member id(s) not yet joined",
                        r.pending_joins
                    ));
                }
            }
        }
        if !self.unowned.is_empty() {
            let count: usize = self.unowned.values().map(Vec::len).sum();
            out.push_str(&format!(
                "\n{count} subscribed partition(s) owned by no member{}:",
                self.unowned_since
                    .map(|t| format!(" for {}", ago(t)))
                    .unwrap_or_default()
            ));
            for (topic, partitions) in &self.unowned {
                let list: Vec<String> = partitions.iter().map(i32::to_string).collect();
                out.push_str(&format!("\n  {topic}: {}", list.join(",")));
            }
        }
        if self.storm {
            out.push_str(&format!(
                "\nREBALANCE STORM: {} rebalances within {} (threshold {})",
                self.rebalances_in_window,
                render::millis(self.storm_window_ms),
                self.storm_threshold
            ));
        }
        if self.rebalance.is_none() && self.unowned.is_empty() && !self.storm {
            out.push_str("\nnothing is holding it up");
        }
        out
    }
}

pub async fn why(ctx: &Context, group: &str) -> Result<Why, Failure> {
    let d = ctx
        .admin
        .group_diagnosis(group)
        .await
        .map_err(|e| ctx.fail(&format!("cannot diagnose group {group}"), &e))?;
    Ok(why_from(group, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(timestamp(1_700_000_000_123), "2023-11-14T22:13:20Z");
    }

    /// A consumer-protocol group waits for members to let go, not to rejoin or sync.
    #[test]
    fn why_a_consumer_group_is_reconciling() {
        let d = GroupDiagnosisResponse {
            state: "Reconciling".into(),
            generation_id: 3,
            now_ms: 10_000,
            rebalance: Some(Box::new(muster_client::protocol::RebalanceWait {
                phase: "reconcile".into(),
                trigger: RebalanceCause {
                    kind: "member_joined".into(),
                    member_id: "m-2".into(),
                    client_host: "10.0.0.2".into(),
                    ..RebalanceCause::default()
                },
                started_at_ms: 8_000,
                phase_since_ms: 8_000,
                deadline_ms: Some(40_000),
                waiting_for: vec![WaitingMember {
                    member_id: "m-1".into(),
                    client_id: "app".into(),
                    client_host: "10.0.0.1".into(),
                    last_heard_ms: 9_500,
                    ..WaitingMember::default()
                }],
                ..muster_client::protocol::RebalanceWait::default()
            })),
            ..GroupDiagnosisResponse::default()
        };
        let text = why_from("billing", d).human();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "group billing is Reconciling at generation 3");
        assert_eq!(
            lines[1],
            "reconciling (member_joined m-2 (10.0.0.2)) for 2s, phase reconcile for 2s"
        );
        assert_eq!(
            lines[2],
            "gives up in 30s (then removes those that did not let go of the partitions they \
             were asked to revoke)"
        );
        assert_eq!(
            lines[3],
            "waiting for these members to let go of the partitions they were asked to revoke:"
        );
        assert!(lines[5].starts_with("m-1"), "{text}");
    }

    #[test]
    fn history_json_is_an_array_with_the_promised_fields() {
        let entry = RebalanceRecord {
            generation_id: 4,
            trigger: RebalanceCause {
                kind: "session_expired".into(),
                member_id: "m-2".into(),
                ..RebalanceCause::default()
            },
            moved: Some(3),
            joined: vec!["m-4".into()],
            ..RebalanceRecord::default()
        };
        let history = History {
            entries: vec![entry.into()],
        };
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&history).expect("encodes"))
                .expect("parses");
        let first = &json[0];
        assert_eq!(first["generation"], 4);
        assert_eq!(first["trigger"]["kind"], "session_expired");
        assert_eq!(first["trigger"]["member_id"], "m-2");
        assert_eq!(first["trigger"]["client_id"], serde_json::Value::Null);
        assert_eq!(first["moved"], 3);
        assert_eq!(first["joined"], serde_json::json!(["m-4"]));
        for key in ["started_at", "barrier_ms", "sync_ms", "left"] {
            assert!(first.get(key).is_some(), "{key}");
        }
    }
}
