//! The JSON shape operators read for a described member (DescribeGroups' [`DescribedMember`]):
//! one mapping, shared by `muster groups describe --json` (muster-cli) and the dashboard's group
//! page (muster-server), so that the two name every field alike. Behind the crate's `serde`
//! feature; the wire codec does not use it.
//!
//! The field names are a promise to scripts (muster-cli's README, docs/operations.md): they
//! differ from the wire's where the wire's are awkward to read (`instance_id` for
//! `group_instance_id`, `host` for `client_host`), and change only together with those docs.

use serde::Serialize;

use crate::{DescribedMember, TopicPartitions};

/// A described member, as the CLI and the dashboard print it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// A rebalance is in progress and waits for this member's JoinGroup.
    pub holding_rebalance: bool,
}

/// Partitions of one topic: `{"topic", "partitions"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssignedPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

impl From<TopicPartitions> for AssignedPartitions {
    fn from(TopicPartitions { topic, partitions }: TopicPartitions) -> Self {
        AssignedPartitions { topic, partitions }
    }
}

impl AssignedPartitions {
    /// Each of `tps`, in order.
    pub fn all(tps: Vec<TopicPartitions>) -> Vec<AssignedPartitions> {
        tps.into_iter().map(AssignedPartitions::from).collect()
    }
}

impl From<DescribedMember> for MemberRow {
    fn from(m: DescribedMember) -> Self {
        MemberRow {
            member_id: m.member_id,
            instance_id: m.group_instance_id,
            client_id: m.client_id,
            host: m.client_host,
            topics: m.topics,
            assignment: AssignedPartitions::all(m.assignment),
            session_timeout_ms: m.session_timeout_ms,
            last_seen_ms_ago: m.last_seen_ms_ago,
            holding_rebalance: m.holding_rebalance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field, under its promised name, in this order.
    #[test]
    fn a_member_row_has_the_promised_fields() {
        let row = MemberRow::from(DescribedMember {
            member_id: "m1".into(),
            group_instance_id: Some("i1".into()),
            client_id: "c".into(),
            client_host: "/10.0.0.1".into(),
            topics: vec!["orders".into()],
            assignment: vec![TopicPartitions {
                topic: "orders".into(),
                partitions: vec![0, 2],
            }],
            session_timeout_ms: 10_000,
            last_seen_ms_ago: 7,
            holding_rebalance: true,
        });
        let json = serde_json::to_string(&row).expect("serializes");
        assert_eq!(
            json,
            concat!(
                r#"{"member_id":"m1","instance_id":"i1","client_id":"c","host":"/10.0.0.1","#,
                r#""topics":["orders"],"assignment":[{"topic":"orders","partitions":[0,2]}],"#,
                r#""session_timeout_ms":10000,"last_seen_ms_ago":7,"holding_rebalance":true}"#
            )
        );
    }
}
