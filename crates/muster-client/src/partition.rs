//! The client's partition vocabulary: [`TopicPartition`] (one partition, ordered by topic then
//! number), [`OffsetAndMetadata`], and conversions between flat partition lists and the wire's
//! grouped [`TopicPartitions`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use muster_protocol::TopicPartitions;

/// One partition of one topic. Ordered by topic, then partition number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// `topic-partition`, as Kafka prints it (e.g. `orders-3`).
impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A committed (or to-be-committed) position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    pub offset: i64,
    pub metadata: Option<String>,
}

impl OffsetAndMetadata {
    pub fn new(offset: i64) -> Self {
        OffsetAndMetadata {
            offset,
            metadata: None,
        }
    }

    pub fn with_metadata(offset: i64, metadata: impl Into<String>) -> Self {
        OffsetAndMetadata {
            offset,
            metadata: Some(metadata.into()),
        }
    }
}

impl From<i64> for OffsetAndMetadata {
    fn from(offset: i64) -> Self {
        OffsetAndMetadata::new(offset)
    }
}

/// Groups partitions by topic, as the wire carries them: topics in order, partitions sorted
/// and deduplicated within each, no empty entries.
pub fn group_partitions<'a>(
    partitions: impl IntoIterator<Item = &'a TopicPartition>,
) -> Vec<TopicPartitions> {
    let mut by_topic: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic
            .entry(tp.topic.as_str())
            .or_default()
            .insert(tp.partition);
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| TopicPartitions {
            topic: topic.to_owned(),
            partitions: partitions.into_iter().collect(),
        })
        .collect()
}

/// Flattens the wire's grouped form into a sorted, deduplicated set.
pub fn flatten_partitions(grouped: &[TopicPartitions]) -> BTreeSet<TopicPartition> {
    grouped
        .iter()
        .flat_map(|tp| {
            tp.partitions
                .iter()
                .map(|&p| TopicPartition::new(tp.topic.clone(), p))
        })
        .collect()
}

/// A compact `orders-[0,1,2] audit-[4]` rendering for logs.
pub fn display_partitions<'a>(partitions: impl IntoIterator<Item = &'a TopicPartition>) -> String {
    let grouped = group_partitions(partitions);
    if grouped.is_empty() {
        return "(none)".to_owned();
    }
    grouped
        .iter()
        .map(|tp| {
            let list: Vec<String> = tp.partitions.iter().map(i32::to_string).collect();
            format!("{}-[{}]", tp.topic, list.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_round_trips_and_normalizes() {
        let flat = [
            TopicPartition::new("b", 1),
            TopicPartition::new("a", 2),
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 2),
        ];
        let grouped = group_partitions(&flat);
        assert_eq!(
            grouped,
            vec![
                TopicPartitions {
                    topic: "a".into(),
                    partitions: vec![0, 2]
                },
                TopicPartitions {
                    topic: "b".into(),
                    partitions: vec![1]
                },
            ]
        );
        let back: Vec<_> = flatten_partitions(&grouped).into_iter().collect();
        assert_eq!(
            back,
            vec![
                TopicPartition::new("a", 0),
                TopicPartition::new("a", 2),
                TopicPartition::new("b", 1)
            ]
        );
        assert_eq!(display_partitions(&back), "a-[0,2] b-[1]");
        assert_eq!(display_partitions(&[]), "(none)");
        assert_eq!(TopicPartition::new("orders", 3).to_string(), "orders-3");
    }
}
