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

/// The partitions of `a` not in `b`, by topic, sorted (topics left empty dropped; repeated
/// partitions once): a consumer-protocol member's `revoking` (its assignment minus its target)
/// and `awaiting` (its target minus its assignment), as the CLI and the dashboard show them.
pub fn partitions_minus(a: &[TopicPartitions], b: &[TopicPartitions]) -> Vec<AssignedPartitions> {
    use std::collections::{BTreeMap, BTreeSet};
    let sets = |tps: &[TopicPartitions]| {
        let mut sets: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for tp in tps {
            sets.entry(tp.topic.clone())
                .or_default()
                .extend(tp.partitions.iter().copied());
        }
        sets
    };
    let other = sets(b);
    sets(a)
        .into_iter()
        .filter_map(|(topic, ps)| {
            let left: Vec<i32> = match other.get(&topic) {
                Some(o) => ps.difference(o).copied().collect(),
                None => ps.into_iter().collect(),
            };
            (!left.is_empty()).then_some(AssignedPartitions {
                topic,
                partitions: left,
            })
        })
        .collect()
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

#[cfg(test)]
mod minus_tests {
    use super::*;

    fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }
    }

    #[test]
    fn revoking_and_awaiting_are_the_two_differences() {
        let owned = [tp("a", &[0, 1, 2]), tp("b", &[0])];
        let target = [tp("a", &[2, 3]), tp("c", &[1])];
        let revoking = partitions_minus(&owned, &target);
        assert_eq!(revoking.len(), 2);
        assert_eq!(revoking[0].partitions, vec![0, 1]);
        assert_eq!(revoking[1].topic, "b");
        let awaiting = partitions_minus(&target, &owned);
        assert_eq!(awaiting[0].partitions, vec![3]);
        assert_eq!(awaiting[1].topic, "c");
    }
}
