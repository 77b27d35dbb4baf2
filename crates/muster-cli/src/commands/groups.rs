//! `muster groups list | describe | delete`.
//!
//! DescribeGroups answers an unknown group as `Dead` with no members (Kafka does the same), so
//! `describe` reports that as not found; DeleteGroups answers `GROUP_ID_NOT_FOUND`.

use muster_client::protocol::{DescribedGroup, DescribedMember, ListedGroup};
use muster_client::{GroupState, TopicPartitions};
use serde::Serialize;

use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// `groups list`: `{"groups": [{"group", "state", "members"}]}`, sorted by group id.
#[derive(Debug, Serialize)]
pub struct GroupList {
    pub groups: Vec<ListedRow>,
}

#[derive(Debug, Serialize)]
pub struct ListedRow {
    pub group: String,
    pub state: String,
    pub members: u32,
}

impl From<ListedGroup> for ListedRow {
    fn from(g: ListedGroup) -> Self {
        ListedRow {
            group: g.group_id,
            state: g.state,
            members: g.members,
        }
    }
}

impl Report for GroupList {
    fn human(&self) -> String {
        if self.groups.is_empty() {
            return String::new();
        }
        render::table(
            &["GROUP", "STATE", "MEMBERS"],
            self.groups
                .iter()
                .map(|g| [g.group.clone(), g.state.clone(), g.members.to_string()]),
        )
    }

    fn note(&self) -> Option<String> {
        self.groups.is_empty().then(|| "no groups".to_owned())
    }
}

pub async fn list(ctx: &Context, states: &[GroupState]) -> Result<GroupList, Failure> {
    let mut groups: Vec<ListedRow> = ctx
        .admin
        .list_groups(states)
        .await
        .map_err(|e| ctx.fail("cannot list groups", &e))?
        .into_iter()
        .map(ListedRow::from)
        .collect();
    groups.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(GroupList { groups })
}

/// `groups describe`: the group, then its members sorted by member id.
#[derive(Debug, Serialize)]
pub struct GroupDescription {
    pub group: String,
    pub state: String,
    pub generation: i32,
    /// The assignor the group chose; `null` before its first rebalance.
    pub assignor: Option<String>,
    /// The leader's member id; `null` without a leader.
    pub leader: Option<String>,
    pub members: Vec<MemberRow>,
}

#[derive(Debug, Serialize)]
pub struct MemberRow {
    pub member_id: String,
    /// The static membership id; `null` for a dynamic member.
    pub instance_id: Option<String>,
    pub client_id: String,
    /// The member's address as the server saw it.
    pub host: String,
    /// The member's subscription.
    pub topics: Vec<String>,
    pub assignment: Vec<AssignedPartitions>,
    pub session_timeout_ms: u32,
    pub last_seen_ms_ago: u64,
    /// A rebalance is in progress and waits for this member.
    pub holding_rebalance: bool,
}

#[derive(Debug, Serialize)]
pub struct AssignedPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

impl From<DescribedMember> for MemberRow {
    fn from(m: DescribedMember) -> Self {
        MemberRow {
            member_id: m.member_id,
            instance_id: m.group_instance_id,
            client_id: m.client_id,
            host: m.client_host,
            topics: m.topics,
            assignment: m
                .assignment
                .into_iter()
                .map(|TopicPartitions { topic, partitions }| AssignedPartitions {
                    topic,
                    partitions,
                })
                .collect(),
            session_timeout_ms: m.session_timeout_ms,
            last_seen_ms_ago: m.last_seen_ms_ago,
            holding_rebalance: m.holding_rebalance,
        }
    }
}

impl From<DescribedGroup> for GroupDescription {
    fn from(g: DescribedGroup) -> Self {
        let mut members: Vec<MemberRow> = g.members.into_iter().map(MemberRow::from).collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        GroupDescription {
            group: g.group_id,
            state: g.state,
            generation: g.generation_id,
            assignor: g.assignor.filter(|a| !a.is_empty()),
            leader: Some(g.leader_id).filter(|l| !l.is_empty()),
            members,
        }
    }
}

/// `orders:0,1,2 audit:4`, or `-` for nothing.
pub fn assignment_cell(assignment: &[AssignedPartitions]) -> String {
    let cells: Vec<String> = assignment
        .iter()
        .filter(|a| !a.partitions.is_empty())
        .map(|a| {
            let partitions: Vec<String> = a.partitions.iter().map(i32::to_string).collect();
            format!("{}:{}", a.topic, partitions.join(","))
        })
        .collect();
    if cells.is_empty() {
        "-".to_owned()
    } else {
        cells.join(" ")
    }
}

impl Report for GroupDescription {
    fn human(&self) -> String {
        let head = render::fields(&[
            ("GROUP", self.group.clone()),
            ("STATE", self.state.clone()),
            ("GENERATION", self.generation.to_string()),
            ("ASSIGNOR", render::or_dash(self.assignor.as_deref())),
            ("LEADER", render::or_dash(self.leader.as_deref())),
            ("MEMBERS", self.members.len().to_string()),
        ]);
        if self.members.is_empty() {
            return head;
        }
        let members = render::table(
            &[
                "MEMBER ID",
                "INSTANCE ID",
                "CLIENT ID",
                "HOST",
                "ASSIGNMENT",
                "SESSION TIMEOUT",
                "LAST SEEN",
                "HOLDING REBALANCE",
            ],
            self.members.iter().map(|m| {
                [
                    m.member_id.clone(),
                    render::or_dash(m.instance_id.as_deref()),
                    render::or_dash(Some(&m.client_id)),
                    render::or_dash(Some(&m.host)),
                    assignment_cell(&m.assignment),
                    render::millis(u64::from(m.session_timeout_ms)),
                    format!("{} ago", render::millis(m.last_seen_ms_ago)),
                    if m.holding_rebalance { "yes" } else { "no" }.to_owned(),
                ]
            }),
        );
        format!("{head}\n\n{members}")
    }
}

pub async fn describe(ctx: &Context, group: &str) -> Result<GroupDescription, Failure> {
    let what = format!("cannot describe group {group:?}");
    let described = ctx
        .admin
        .describe_group(group)
        .await
        .map_err(|e| ctx.fail(&what, &e))?;
    if is_absent(&described) {
        return Err(Failure::not_found(format!("group {group:?} not found")));
    }
    Ok(described.into())
}

/// Whether a description is the server's answer for a group it does not have.
pub fn is_absent(described: &DescribedGroup) -> bool {
    described.state == GroupState::Dead.as_str() && described.members.is_empty()
}

/// `groups delete`: `{"group", "deleted": true}`.
#[derive(Debug, Serialize)]
pub struct GroupDeleted {
    pub group: String,
    pub deleted: bool,
}

impl Report for GroupDeleted {
    fn human(&self) -> String {
        format!("deleted group {:?} and its committed offsets", self.group)
    }
}

pub async fn delete(ctx: &Context, group: &str) -> Result<GroupDeleted, Failure> {
    ctx.admin
        .delete_group(group)
        .await
        .map_err(|e| ctx.fail(&format!("cannot delete group {group:?}"), &e))?;
    Ok(GroupDeleted {
        group: group.to_owned(),
        deleted: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, holding: bool) -> DescribedMember {
        DescribedMember {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "app".into(),
            client_host: "127.0.0.1:5000".into(),
            topics: vec!["orders".into()],
            assignment: vec![TopicPartitions {
                topic: "orders".into(),
                partitions: vec![0, 1, 2],
            }],
            session_timeout_ms: 10_000,
            last_seen_ms_ago: 120,
            holding_rebalance: holding,
        }
    }

    #[test]
    fn a_description_reads_as_a_head_and_a_member_table() {
        let described = DescribedGroup {
            error_code: 0,
            group_id: "billing".into(),
            state: "Stable".into(),
            generation_id: 3,
            assignor: Some("range".into()),
            leader_id: "app-b".into(),
            members: vec![member("app-b", false), member("app-a", true)],
        };
        let text = GroupDescription::from(described).human();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "GROUP       billing");
        assert_eq!(lines[4], "LEADER      app-b");
        assert!(
            lines[7].starts_with("MEMBER ID  INSTANCE ID  CLIENT ID"),
            "{text}"
        );
        assert_eq!(
            lines[8],
            "app-a      -            app        127.0.0.1:5000  orders:0,1,2  10s              120ms ago  yes"
        );
    }

    #[test]
    fn unknown_groups_are_dead_and_memberless() {
        let dead = DescribedGroup {
            error_code: 0,
            group_id: "x".into(),
            state: "Dead".into(),
            generation_id: 0,
            assignor: None,
            leader_id: String::new(),
            members: vec![],
        };
        assert!(is_absent(&dead));
        let description = GroupDescription::from(dead);
        assert_eq!(description.leader, None);
    }

    #[test]
    fn assignments_read_compactly() {
        let assignment = vec![
            AssignedPartitions {
                topic: "orders".into(),
                partitions: vec![0, 1],
            },
            AssignedPartitions {
                topic: "audit".into(),
                partitions: vec![4],
            },
        ];
        assert_eq!(assignment_cell(&assignment), "orders:0,1 audit:4");
        assert_eq!(assignment_cell(&[]), "-");
    }
}
