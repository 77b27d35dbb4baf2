//! `muster groups describe` of a consumer-protocol group (protocol-v1 §7): the report built
//! from ConsumerGroupDescribe, with the group and assignment epochs, the server assignor and,
//! per member, its epoch, subscription, current and target assignment, and what the CLI
//! derives from the two: the partitions it still has to give up (`revoking`: current minus
//! target) and those it waits for (`awaiting`: target minus current).
//!
//! Field names follow the classic description's (`muster_protocol::view::MemberRow`) where
//! the meaning is the same (`instance_id`, `host`, `topics`, `assignment`), and the
//! dashboard's consumer view (docs/operations.md: `member_epoch`, `subscribed_topic_regex`,
//! `target`, `revoking`, `awaiting`) for the rest; the README of muster-cli documents every
//! one.

use std::collections::{BTreeMap, BTreeSet};

use muster_client::protocol::view::{partitions_minus, AssignedPartitions};
use muster_client::protocol::{ConsumerMember, DescribedConsumerGroup, TopicPartitions};
use serde::Serialize;

use crate::render::{self, Report};

/// The member epoch a static member shows after its temporary leave (protocol-v1 §7 "Leave").
const STATIC_LEAVE_EPOCH: i32 = -2;

/// `groups describe` of a consumer-protocol group: members sorted by member id.
#[derive(Debug, Serialize)]
pub struct ConsumerGroupDescription {
    pub group: String,
    /// Always `"consumer"` (a classic group's description says `"classic"`).
    pub protocol: &'static str,
    /// `Empty`, `Assigning`, `Reconciling` or `Stable`.
    pub state: String,
    /// Rises on every change of membership, subscription or a subscribed topic's size.
    pub group_epoch: i32,
    /// The epoch of the target assignment (behind `group_epoch` while `Assigning`).
    pub assignment_epoch: i32,
    /// The server assignor (`uniform` or `range`).
    pub assignor: String,
    pub members: Vec<ConsumerMemberRow>,
}

/// One member of a consumer-protocol group.
#[derive(Debug, Serialize)]
pub struct ConsumerMemberRow {
    pub member_id: String,
    /// The static membership id; `null` for a dynamic member.
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    /// The member's address as the server saw it.
    pub host: String,
    /// The target epoch the member has reached; `-2` for a static member away on a
    /// temporary leave (its partitions are kept for it).
    pub member_epoch: i32,
    /// The topics it subscribes to by name.
    pub topics: Vec<String>,
    /// Its subscription regex, if any.
    pub subscribed_topic_regex: Option<String>,
    /// What it owns now.
    pub assignment: Vec<AssignedPartitions>,
    /// Its share of the target assignment.
    pub target: Vec<AssignedPartitions>,
    /// In `assignment` but not in `target`: to be given up.
    pub revoking: Vec<AssignedPartitions>,
    /// In `target` but not in `assignment`: to be received (once the previous
    /// owner has let go).
    pub awaiting: Vec<AssignedPartitions>,
}

type Partitions = BTreeMap<String, BTreeSet<i32>>;

fn to_map(tps: &[TopicPartitions]) -> Partitions {
    let mut map = Partitions::new();
    for tp in tps {
        map.entry(tp.topic.clone())
            .or_default()
            .extend(tp.partitions.iter().copied());
    }
    map.retain(|_, ps| !ps.is_empty());
    map
}

fn to_rows(map: Partitions) -> Vec<AssignedPartitions> {
    map.into_iter()
        .map(|(topic, partitions)| AssignedPartitions {
            topic,
            partitions: partitions.into_iter().collect(),
        })
        .collect()
}

impl From<ConsumerMember> for ConsumerMemberRow {
    fn from(m: ConsumerMember) -> Self {
        let revoking = partitions_minus(&m.assignment, &m.target_assignment);
        let awaiting = partitions_minus(&m.target_assignment, &m.assignment);
        let current = to_map(&m.assignment);
        let target = to_map(&m.target_assignment);
        ConsumerMemberRow {
            member_id: m.member_id,
            instance_id: m.group_instance_id,
            rack_id: m.rack_id,
            client_id: m.client_id,
            host: m.client_host,
            member_epoch: m.member_epoch,
            topics: m.subscribed_topics,
            subscribed_topic_regex: m.subscribed_topic_regex.filter(|r| !r.is_empty()),
            assignment: to_rows(current),
            target: to_rows(target),
            revoking,
            awaiting,
        }
    }
}

impl From<DescribedConsumerGroup> for ConsumerGroupDescription {
    fn from(g: DescribedConsumerGroup) -> Self {
        let mut members: Vec<ConsumerMemberRow> =
            g.members.into_iter().map(ConsumerMemberRow::from).collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        ConsumerGroupDescription {
            group: g.group_id,
            protocol: "consumer",
            state: g.state,
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g.assignor,
            members,
        }
    }
}

impl ConsumerMemberRow {
    /// `orders audit /logs-.*/`, or `-`.
    fn subscription_cell(&self) -> String {
        let mut parts = self.topics.clone();
        if let Some(regex) = &self.subscribed_topic_regex {
            parts.push(format!("/{regex}/"));
        }
        if parts.is_empty() {
            "-".to_owned()
        } else {
            parts.join(" ")
        }
    }

    fn epoch_cell(&self) -> String {
        if self.member_epoch == STATIC_LEAVE_EPOCH {
            format!("{STATIC_LEAVE_EPOCH} (left)")
        } else {
            self.member_epoch.to_string()
        }
    }
}

impl Report for ConsumerGroupDescription {
    fn human(&self) -> String {
        let head = render::fields(&[
            ("GROUP", self.group.clone()),
            ("PROTOCOL", self.protocol.to_owned()),
            ("STATE", self.state.clone()),
            ("GROUP EPOCH", self.group_epoch.to_string()),
            ("ASSIGNMENT EPOCH", self.assignment_epoch.to_string()),
            ("ASSIGNOR", render::or_dash(Some(&self.assignor))),
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
                "EPOCH",
                "SUBSCRIPTION",
                "ASSIGNMENT",
                "TARGET",
                "REVOKING",
                "AWAITING",
            ],
            self.members.iter().map(|m| {
                [
                    m.member_id.clone(),
                    render::or_dash(m.instance_id.as_deref()),
                    render::or_dash(Some(&m.client_id)),
                    render::or_dash(Some(&m.host)),
                    m.epoch_cell(),
                    m.subscription_cell(),
                    render::assignment_cell(&m.assignment),
                    render::assignment_cell(&m.target),
                    render::assignment_cell(&m.revoking),
                    render::assignment_cell(&m.awaiting),
                ]
            }),
        );
        format!("{head}\n\n{members}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(topic: &str, partitions: &[i32]) -> TopicPartitions {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }
    }

    fn member(
        id: &str,
        epoch: i32,
        now: Vec<TopicPartitions>,
        target: Vec<TopicPartitions>,
    ) -> ConsumerMember {
        ConsumerMember {
            member_id: id.into(),
            group_instance_id: None,
            rack_id: None,
            member_epoch: epoch,
            client_id: "app".into(),
            client_host: "127.0.0.1".into(),
            subscribed_topics: vec!["orders".into()],
            subscribed_topic_regex: None,
            assignment: now,
            target_assignment: target,
        }
    }

    fn group(members: Vec<ConsumerMember>) -> DescribedConsumerGroup {
        DescribedConsumerGroup {
            error_code: 0,
            group_id: "billing".into(),
            state: "Reconciling".into(),
            group_epoch: 3,
            assignment_epoch: 3,
            assignor: "uniform".into(),
            members,
        }
    }

    #[test]
    fn revoking_and_awaiting_are_the_two_differences() {
        let row = ConsumerMemberRow::from(member(
            "a",
            2,
            vec![tps("orders", &[2, 0, 1]), tps("audit", &[0])],
            vec![tps("orders", &[0, 3]), tps("audit", &[])],
        ));
        let json = serde_json::to_value(&row).expect("serializes");
        assert_eq!(
            json["assignment"],
            serde_json::json!([{"topic": "audit", "partitions": [0]}, {"topic": "orders", "partitions": [0, 1, 2]}])
        );
        assert_eq!(
            json["target"],
            serde_json::json!([{"topic": "orders", "partitions": [0, 3]}])
        );
        assert_eq!(
            json["revoking"],
            serde_json::json!([{"topic": "audit", "partitions": [0]}, {"topic": "orders", "partitions": [1, 2]}])
        );
        assert_eq!(
            json["awaiting"],
            serde_json::json!([{"topic": "orders", "partitions": [3]}])
        );
    }

    /// Every field, under its documented name (muster-cli's README), in this order.
    #[test]
    fn the_json_has_the_documented_fields() {
        let mut m = member(
            "a",
            3,
            vec![tps("orders", &[0])],
            vec![tps("orders", &[0, 1])],
        );
        m.group_instance_id = Some("i-a".into());
        m.rack_id = Some("r1".into());
        m.subscribed_topic_regex = Some(String::new());
        let description = ConsumerGroupDescription::from(group(vec![m]));
        let json = serde_json::to_string(&description).expect("serializes");
        assert_eq!(
            json,
            concat!(
                r#"{"group":"billing","protocol":"consumer","state":"Reconciling","#,
                r#""group_epoch":3,"assignment_epoch":3,"assignor":"uniform","members":[{"#,
                r#""member_id":"a","instance_id":"i-a","rack_id":"r1","client_id":"app","#,
                r#""host":"127.0.0.1","member_epoch":3,"topics":["orders"],"subscribed_topic_regex":null,"#,
                r#""assignment":[{"topic":"orders","partitions":[0]}],"#,
                r#""target":[{"topic":"orders","partitions":[0,1]}],"#,
                r#""revoking":[],"awaiting":[{"topic":"orders","partitions":[1]}]}]}"#
            )
        );
    }

    #[test]
    fn a_description_reads_as_a_head_and_a_member_table() {
        let mut away = member(
            "b",
            -2,
            vec![tps("orders", &[1])],
            vec![tps("orders", &[1])],
        );
        away.group_instance_id = Some("i-b".into());
        away.subscribed_topic_regex = Some("logs-.*".into());
        let described = group(vec![
            away,
            member(
                "a",
                2,
                vec![tps("orders", &[0, 2])],
                vec![tps("orders", &[0])],
            ),
        ]);
        let text = ConsumerGroupDescription::from(described).human();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "GROUP             billing");
        assert_eq!(lines[1], "PROTOCOL          consumer");
        assert_eq!(lines[3], "GROUP EPOCH       3");
        assert_eq!(lines[4], "ASSIGNMENT EPOCH  3");
        assert_eq!(lines[5], "ASSIGNOR          uniform");
        assert!(
            lines[8].starts_with("MEMBER ID  INSTANCE ID  CLIENT ID  HOST       EPOCH"),
            "{text}"
        );
        assert!(
            lines[8].ends_with("ASSIGNMENT  TARGET    REVOKING  AWAITING"),
            "{text}"
        );
        assert_eq!(
            lines[9],
            "a          -            app        127.0.0.1  2          orders            orders:0,2  orders:0  orders:2  -"
        );
        assert_eq!(
            lines[10],
            "b          i-b          app        127.0.0.1  -2 (left)  orders /logs-.*/  orders:1    orders:1  -         -"
        );
    }
}
