//! `muster groups simulate`: a dry-run rebalance (GroupSimulate, docs/protocol.md), asked of
//! the group's coordinator. The server runs the group's assignor on a copy of the group with
//! the changes asked for (members removed, members added, topics grown); nothing changes in
//! the group. The report shows per member what it would keep, lose and gain, and how many
//! partitions would stop (change owner or lose their owner).
//!
//! A refusal (a classic group whose assignor runs in its members, a member that is not in the
//! group, a partition count below the topic's) is one line with the server's own reason.

use muster_client::admin::simulate_context;
use muster_client::protocol::view::AssignedPartitions;
use muster_client::protocol::{GroupSimulateResponse, SimulatedMember};
use muster_client::{ClientError, TopicInfo};
use serde::Serialize;

use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// `groups simulate`: `{"group", "assignor", "stopped_partitions", "members": [{"member_id",
/// "change", "kept", "lost", "gained"}]}`, members sorted by member id.
#[derive(Debug, Serialize)]
pub struct Simulation {
    pub group: String,
    /// The assignor the simulation ran.
    pub assignor: String,
    /// Partitions that would stop: change owner, or lose their owner.
    pub stopped_partitions: u32,
    pub members: Vec<SimulatedRow>,
}

/// One member in a simulation.
#[derive(Debug, Serialize)]
pub struct SimulatedRow {
    /// A member's id; an added member is named `new-1`, `new-2`, ….
    pub member_id: String,
    /// `staying`, `added` or `removed`.
    pub change: String,
    pub kept: Vec<AssignedPartitions>,
    pub lost: Vec<AssignedPartitions>,
    pub gained: Vec<AssignedPartitions>,
}

impl From<SimulatedMember> for SimulatedRow {
    fn from(m: SimulatedMember) -> Self {
        SimulatedRow {
            member_id: m.member_id,
            change: m.change,
            kept: AssignedPartitions::all(m.kept),
            lost: AssignedPartitions::all(m.lost),
            gained: AssignedPartitions::all(m.gained),
        }
    }
}

impl Simulation {
    fn new(group: &str, answer: GroupSimulateResponse) -> Self {
        let mut members: Vec<SimulatedRow> =
            answer.members.into_iter().map(SimulatedRow::from).collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        Simulation {
            group: group.to_owned(),
            assignor: answer.assignor,
            stopped_partitions: answer.stopped_partitions,
            members,
        }
    }
}

fn count(partitions: &[AssignedPartitions]) -> usize {
    partitions.iter().map(|a| a.partitions.len()).sum()
}

impl Report for Simulation {
    fn human(&self) -> String {
        let head = render::fields(&[
            ("GROUP", self.group.clone()),
            ("ASSIGNOR", render::or_dash(Some(&self.assignor))),
            (
                "WOULD STOP",
                format!("{} partitions", self.stopped_partitions),
            ),
        ]);
        if self.members.is_empty() {
            return head;
        }
        let members = render::table(
            &["MEMBER ID", "CHANGE", "KEPT", "LOST", "GAINED"],
            self.members.iter().map(|m| {
                let cell = |ps: &[AssignedPartitions]| match count(ps) {
                    0 => "-".to_owned(),
                    n => format!("{n}: {}", render::assignment_cell(ps)),
                };
                [
                    m.member_id.clone(),
                    m.change.clone(),
                    cell(&m.kept),
                    cell(&m.lost),
                    cell(&m.gained),
                ]
            }),
        );
        format!("{head}\n\n{members}")
    }
}

/// `TOPIC=COUNT` of `--partitions`.
pub fn parse_topic_count(value: &str) -> Result<TopicInfo, String> {
    let (topic, partitions) = value
        .rsplit_once('=')
        .ok_or_else(|| format!("{value:?} is not TOPIC=COUNT"))?;
    if topic.is_empty() {
        return Err(format!("{value:?} has no topic"));
    }
    let partitions: i32 = partitions
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{partitions:?} is not a partition count (1 or more)"))?;
    Ok(TopicInfo {
        topic: topic.to_owned(),
        partitions,
    })
}

/// What the server said about a refused simulation, if anything (the part of the error's
/// context after [`simulate_context`]'s prefix).
fn server_reason<'a>(group: &str, err: &'a ClientError) -> Option<&'a str> {
    match err {
        ClientError::Protocol { context, .. } => context
            .strip_prefix(&simulate_context(group, None))
            .and_then(|rest| rest.strip_prefix(": ")),
        _ => None,
    }
}

pub async fn simulate(
    ctx: &Context,
    group: &str,
    remove: &[String],
    add: u32,
    partitions: &[TopicInfo],
) -> Result<Simulation, Failure> {
    let remove: Vec<&str> = remove.iter().map(String::as_str).collect();
    let answer = ctx
        .admin
        .simulate(group, &remove, add, partitions.to_vec())
        .await
        .map_err(|err| {
            let what = format!("cannot simulate a rebalance of group {group:?}");
            match (err.code(), server_reason(group, &err)) {
                (Some(code), reason) => Failure::server(&what, code, reason),
                (None, _) => ctx.fail(&what, &err),
            }
        })?;
    Ok(Simulation::new(group, answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Status;
    use muster_client::TopicPartitions;

    fn tps(topic: &str, partitions: &[i32]) -> Vec<TopicPartitions> {
        vec![TopicPartitions {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }]
    }

    fn answer() -> GroupSimulateResponse {
        GroupSimulateResponse {
            error_code: 0,
            error_message: None,
            assignor: "uniform".into(),
            members: vec![
                SimulatedMember {
                    member_id: "new-1".into(),
                    change: "added".into(),
                    kept: vec![],
                    lost: vec![],
                    gained: tps("orders", &[2, 5]),
                },
                SimulatedMember {
                    member_id: "a".into(),
                    change: "staying".into(),
                    kept: tps("orders", &[0, 1]),
                    lost: tps("orders", &[2]),
                    gained: vec![],
                },
            ],
            stopped_partitions: 2,
        }
    }

    #[test]
    fn a_simulation_reads_as_a_head_and_a_member_table() {
        let text = Simulation::new("billing", answer()).human();
        assert_eq!(
            text,
            "GROUP       billing\n\
             ASSIGNOR    uniform\n\
             WOULD STOP  2 partitions\n\
             \n\
             MEMBER ID  CHANGE   KEPT           LOST         GAINED\n\
             a          staying  2: orders:0,1  1: orders:2  -\n\
             new-1      added    -              -            2: orders:2,5"
        );
    }

    #[test]
    fn the_json_has_the_documented_fields() {
        let json = serde_json::to_value(Simulation::new("billing", answer())).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "group": "billing",
                "assignor": "uniform",
                "stopped_partitions": 2,
                "members": [
                    {"member_id": "a", "change": "staying",
                     "kept": [{"topic": "orders", "partitions": [0, 1]}],
                     "lost": [{"topic": "orders", "partitions": [2]}], "gained": []},
                    {"member_id": "new-1", "change": "added", "kept": [], "lost": [],
                     "gained": [{"topic": "orders", "partitions": [2, 5]}]},
                ]
            })
        );
    }

    #[test]
    fn topic_counts_parse() {
        let parsed = parse_topic_count("orders=12").expect("parses");
        assert_eq!((parsed.topic.as_str(), parsed.partitions), ("orders", 12));
        for bad in [
            "orders",
            "=3",
            "orders=",
            "orders=0",
            "orders=-1",
            "orders=x",
        ] {
            assert!(parse_topic_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_refusal_shows_the_servers_reason() {
        let err = ClientError::protocol(
            42,
            simulate_context("g", Some("the assignor runs in its members")),
        );
        assert_eq!(
            server_reason("g", &err),
            Some("the assignor runs in its members")
        );
        let failure = Failure::server("x", 42, server_reason("g", &err));
        assert_eq!(failure.status, Status::Refused);
        assert_eq!(
            failure.message,
            "x: INVALID_REQUEST (42): the assignor runs in its members"
        );
        let bare = ClientError::protocol(69, simulate_context("g", None));
        assert_eq!(server_reason("g", &bare), None);
    }
}
