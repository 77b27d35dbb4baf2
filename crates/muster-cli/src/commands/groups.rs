//! `muster groups list | describe | delete`.
//!
//! `list` asks every node of the cluster (a single server: itself) and merges the answers;
//! `describe` and `delete` go to the group's coordinator (the client routes them).
//!
//! `describe` asks ConsumerGroupDescribe first: a consumer-protocol group is described from
//! its answer (module `consumer`); a group it does not know (GROUP_ID_NOT_FOUND: a classic
//! group, or none), or a server too old to know the request (INVALID_REQUEST), is described
//! with DescribeGroups. DescribeGroups answers an unknown group as `Dead` with no members
//! (Kafka does the same), so `describe` reports that as not found; DeleteGroups answers
//! `GROUP_ID_NOT_FOUND`.

use muster_client::admin::{GroupListing, NodeGroup};
use muster_client::protocol::view::MemberRow;
use muster_client::protocol::DescribedGroup;
use muster_client::{ErrorCode, GroupState};
use serde::Serialize;

use super::consumer::ConsumerGroupDescription;
use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// `groups list`: `{"groups": [{"group", "state", "members"}]}`, sorted by group id. In a
/// cluster of several nodes each group also has `"node"` (the id of the node that listed it,
/// its coordinator), and nodes that could not be asked are listed in `"unreachable":
/// [{"node_id", "address", "error"}]` (absent when there are none).
#[derive(Debug, Serialize)]
pub struct GroupList {
    pub groups: Vec<ListedRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<UnreachableNode>,
}

#[derive(Debug, Serialize)]
pub struct ListedRow {
    pub group: String,
    pub state: String,
    pub members: u32,
    /// The node that listed the group; only with several nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct UnreachableNode {
    pub node_id: String,
    pub address: String,
    pub error: String,
}

impl ListedRow {
    fn new(listed: NodeGroup, with_node: bool) -> Self {
        ListedRow {
            group: listed.group.group_id,
            state: listed.group.state,
            members: listed.group.members,
            node: with_node.then_some(listed.node.node_id),
        }
    }
}

impl Report for GroupList {
    fn human(&self) -> String {
        if self.groups.is_empty() {
            return String::new();
        }
        if self.groups.iter().any(|g| g.node.is_some()) {
            return render::table(
                &["GROUP", "STATE", "MEMBERS", "NODE"],
                self.groups.iter().map(|g| {
                    [
                        g.group.clone(),
                        g.state.clone(),
                        g.members.to_string(),
                        render::or_dash(g.node.as_deref()),
                    ]
                }),
            );
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

/// The groups of every node that answered, and, if some node could not be asked, the
/// failure to end with once they are printed (the first node's error decides the status).
pub async fn list(
    ctx: &Context,
    states: &[GroupState],
) -> Result<(GroupList, Option<Failure>), Failure> {
    let listing = ctx
        .admin
        .list_groups_by_node(states)
        .await
        .map_err(|e| ctx.fail("cannot list groups", &e))?;
    Ok(group_list(listing))
}

fn group_list(listing: GroupListing) -> (GroupList, Option<Failure>) {
    let with_node = listing.nodes.len() > 1;
    let mut groups: Vec<ListedRow> = listing
        .groups
        .into_iter()
        .map(|g| ListedRow::new(g, with_node))
        .collect();
    groups.sort_by(|a, b| (&a.group, &a.node).cmp(&(&b.group, &b.node)));
    let failure = listing.failed.first().map(|first| {
        let what = format!(
            "cannot list the groups of {} of {} nodes; node {}",
            listing.failed.len(),
            listing.nodes.len(),
            first.node.node_id
        );
        Failure::client(&what, &first.node.address(), &first.error)
    });
    let unreachable = listing
        .failed
        .into_iter()
        .map(|f| UnreachableNode {
            address: f.node.address(),
            node_id: f.node.node_id,
            error: f.error.to_string(),
        })
        .collect();
    (
        GroupList {
            groups,
            unreachable,
        },
        failure,
    )
}

/// `groups describe`: a classic group or a consumer-protocol group, told apart in JSON by
/// `"protocol"`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Description {
    Classic(GroupDescription),
    Consumer(ConsumerGroupDescription),
}

impl Report for Description {
    fn human(&self) -> String {
        match self {
            Description::Classic(d) => d.human(),
            Description::Consumer(d) => d.human(),
        }
    }
}

/// `groups describe` of a classic group: the group, then its members sorted by member id.
#[derive(Debug, Serialize)]
pub struct GroupDescription {
    pub group: String,
    /// Always `"classic"` (a consumer-protocol group's description says `"consumer"`).
    pub protocol: &'static str,
    pub state: String,
    pub generation: i32,
    /// The assignor the group chose; `null` before its first rebalance.
    pub assignor: Option<String>,
    /// The leader's member id; `null` without a leader.
    pub leader: Option<String>,
    /// `muster_protocol::view::MemberRow`, the dashboard's member fields too.
    pub members: Vec<MemberRow>,
}

impl From<DescribedGroup> for GroupDescription {
    fn from(g: DescribedGroup) -> Self {
        let mut members: Vec<MemberRow> = g.members.into_iter().map(MemberRow::from).collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        GroupDescription {
            group: g.group_id,
            protocol: "classic",
            state: g.state,
            generation: g.generation_id,
            assignor: g.assignor.filter(|a| !a.is_empty()),
            leader: Some(g.leader_id).filter(|l| !l.is_empty()),
            members,
        }
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
                    render::assignment_cell(&m.assignment),
                    render::millis(u64::from(m.session_timeout_ms)),
                    format!("{} ago", render::millis(m.last_seen_ms_ago)),
                    if m.holding_rebalance { "yes" } else { "no" }.to_owned(),
                ]
            }),
        );
        format!("{head}\n\n{members}")
    }
}

pub async fn describe(ctx: &Context, group: &str) -> Result<Description, Failure> {
    let what = format!("cannot describe group {group:?}");
    match ctx.admin.describe_consumer_group(group).await {
        Ok(described) => return Ok(Description::Consumer(described.into())),
        Err(err) if not_a_consumer_group(&err) => {}
        Err(err) => return Err(ctx.fail(&what, &err)),
    }
    describe_classic(ctx, group, &what)
        .await
        .map(Description::Classic)
}

/// ConsumerGroupDescribe's answer for a classic or unknown group, or an older server's for a
/// request it does not know.
fn not_a_consumer_group(err: &muster_client::ClientError) -> bool {
    matches!(
        err.error_code(),
        Some(ErrorCode::GroupIdNotFound | ErrorCode::InvalidRequest)
    )
}

async fn describe_classic(
    ctx: &Context,
    group: &str,
    what: &str,
) -> Result<GroupDescription, Failure> {
    let described = ctx
        .admin
        .describe_group(group)
        .await
        .map_err(|e| ctx.fail(what, &e))?;
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
    use muster_client::protocol::{DescribedMember, ListedGroup};
    use muster_client::{ClientError, Node, TopicPartitions};

    fn node(id: &str, port: u16) -> Node {
        Node {
            node_id: id.into(),
            host: "10.0.0.1".into(),
            port,
        }
    }

    fn listed(node: &Node, group: &str) -> NodeGroup {
        NodeGroup {
            node: node.clone(),
            group: ListedGroup {
                group_id: group.into(),
                state: "Stable".into(),
                members: 2,
            },
        }
    }

    #[test]
    fn one_node_lists_as_before() {
        let a = node("a", 1);
        let (list, failure) = group_list(GroupListing {
            nodes: vec![a.clone()],
            groups: vec![listed(&a, "g2"), listed(&a, "g1")],
            failed: vec![],
        });
        assert!(failure.is_none());
        assert_eq!(
            list.human(),
            "GROUP  STATE   MEMBERS\ng1     Stable  2\ng2     Stable  2"
        );
        assert_eq!(
            serde_json::to_value(&list).expect("serializes"),
            serde_json::json!({"groups": [
                {"group": "g1", "state": "Stable", "members": 2},
                {"group": "g2", "state": "Stable", "members": 2},
            ]})
        );
    }

    #[test]
    fn several_nodes_show_where_each_group_is_and_who_did_not_answer() {
        let (a, b, c) = (node("a", 1), node("b", 2), node("c", 3));
        let (list, failure) = group_list(GroupListing {
            nodes: vec![a.clone(), b.clone(), c.clone()],
            groups: vec![listed(&b, "g2"), listed(&a, "g1")],
            failed: vec![muster_client::admin::NodeFailure {
                node: c,
                error: ClientError::Disconnected,
            }],
        });
        assert_eq!(
            list.human(),
            "GROUP  STATE   MEMBERS  NODE\ng1     Stable  2        a\ng2     Stable  2        b"
        );
        let json = serde_json::to_value(&list).expect("serializes");
        assert_eq!(json["groups"][1]["node"], "b");
        assert_eq!(json["unreachable"][0]["node_id"], "c");
        assert_eq!(json["unreachable"][0]["address"], "10.0.0.1:3");
        let failure = failure.expect("a node failed");
        assert_eq!(failure.status, crate::exit::Status::Unreachable);
        assert_eq!(
            failure.message,
            "cannot list the groups of 1 of 3 nodes; node c: server 10.0.0.1:3 closed the connection"
        );
    }

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
}
