//! The topic catalog (protocol §6.16): which topics exist and how many partitions each
//! has. Validation and change detection are pure; the supervisor owns the only writer, group
//! actors read it when a barrier completes (the leader's `topics`).

use std::collections::HashMap;
use std::sync::RwLock;

use muster_protocol::{ErrorCode, TopicInfo, TopicResult};

use crate::types::TopicLookup;

/// Longest topic name, in bytes.
pub const MAX_TOPIC_NAME_BYTES: usize = 249;

/// Protocol §6.16: 1..=249 bytes of `[A-Za-z0-9._-]`.
pub fn validate_topic_name(name: &str) -> Result<(), ErrorCode> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TOPIC_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ErrorCode::InvalidTopic)
    }
}

/// The catalog, shared between the supervisor (writes) and group actors (reads).
#[derive(Debug, Default)]
pub struct TopicCatalog {
    topics: RwLock<HashMap<String, i32>>,
}

/// What a CreateTopics request would do: per-topic results and the catalog entries to store.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TopicPlan {
    pub results: Vec<TopicResult>,
    /// Topics created or raised, to make durable and then [`TopicCatalog::install`].
    pub changes: Vec<TopicInfo>,
}

impl TopicCatalog {
    pub fn new(topics: impl IntoIterator<Item = TopicInfo>) -> Self {
        Self {
            topics: RwLock::new(
                topics
                    .into_iter()
                    .map(|t| (t.topic, t.partitions))
                    .collect(),
            ),
        }
    }

    /// Validates a CreateTopics request against the catalog without changing it. A later entry
    /// for the same topic in one request sees the earlier one. A partition count over
    /// `max_partitions` is INVALID_PARTITIONS; a new topic past `max_topics` in the catalog is
    /// RESOURCE_LIMIT_REACHED (protocol §6.18).
    pub fn plan(
        &self,
        requested: &[TopicInfo],
        max_topics: usize,
        max_partitions: i32,
    ) -> TopicPlan {
        let current = self.read();
        let mut plan = TopicPlan::default();
        let mut planned: HashMap<&str, i32> = HashMap::new();
        let mut created = 0usize;
        for t in requested {
            let code = match validate_topic_name(&t.topic) {
                Err(code) => code,
                Ok(()) if t.partitions < 1 || t.partitions > max_partitions => {
                    ErrorCode::InvalidPartitions
                }
                Ok(())
                    if !current.contains_key(&t.topic)
                        && !planned.contains_key(t.topic.as_str())
                        && current.len() + created >= max_topics =>
                {
                    ErrorCode::ResourceLimitReached
                }
                Ok(()) => {
                    let existing = planned
                        .get(t.topic.as_str())
                        .copied()
                        .or_else(|| current.get(&t.topic).copied());
                    match existing {
                        Some(n) if t.partitions < n => ErrorCode::InvalidPartitions,
                        Some(n) if t.partitions == n => ErrorCode::None,
                        existing => {
                            if existing.is_none() {
                                created += 1;
                            }
                            planned.insert(&t.topic, t.partitions);
                            ErrorCode::None
                        }
                    }
                }
            };
            plan.results.push(TopicResult {
                topic: t.topic.clone(),
                error_code: code.code(),
            });
        }
        // One change per topic (its last planned count), in the order first named: a name
        // repeated in the request is stored once.
        let mut stored: HashMap<&str, ()> = HashMap::new();
        plan.changes = requested
            .iter()
            .filter(|t| planned.get(t.topic.as_str()) == Some(&t.partitions))
            .filter(|t| stored.insert(t.topic.as_str(), ()).is_none())
            .map(|t| TopicInfo {
                topic: t.topic.clone(),
                partitions: t.partitions,
            })
            .collect();
        plan
    }

    /// Applies changes that are now durable.
    pub fn install(&self, changes: &[TopicInfo]) {
        let mut topics = match self.topics.write() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        for t in changes {
            topics.insert(t.topic.clone(), t.partitions);
        }
    }

    /// DescribeTopics: the named topics that exist (unknown names left out), or all.
    pub fn describe(&self, names: Option<&[String]>) -> Vec<TopicInfo> {
        let topics = self.read();
        let mut found: Vec<TopicInfo> = match names {
            Some(names) => names
                .iter()
                .filter_map(|n| {
                    topics.get(n).map(|&partitions| TopicInfo {
                        topic: n.clone(),
                        partitions,
                    })
                })
                .collect(),
            None => topics
                .iter()
                .map(|(topic, &partitions)| TopicInfo {
                    topic: topic.clone(),
                    partitions,
                })
                .collect(),
        };
        if names.is_none() {
            found.sort_unstable_by(|a, b| a.topic.cmp(&b.topic));
        }
        found
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, i32>> {
        // A writer never panics while holding the lock; recover the data if one ever did.
        match self.topics.read() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl TopicLookup for TopicCatalog {
    fn partitions(&self, topic: &str) -> Option<i32> {
        self.read().get(topic).copied()
    }

    fn each(&self, f: &mut dyn FnMut(&str, i32)) {
        for (topic, &partitions) in self.read().iter() {
            f(topic, partitions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(topic: &str, partitions: i32) -> TopicInfo {
        TopicInfo {
            topic: topic.into(),
            partitions,
        }
    }

    fn codes(plan: &TopicPlan) -> Vec<i16> {
        plan.results.iter().map(|r| r.error_code).collect()
    }

    #[test]
    fn names_are_validated() {
        assert!(validate_topic_name("orders.v1_a-b").is_ok());
        assert_eq!(validate_topic_name(""), Err(ErrorCode::InvalidTopic));
        assert_eq!(validate_topic_name("a b"), Err(ErrorCode::InvalidTopic));
        assert_eq!(validate_topic_name("é"), Err(ErrorCode::InvalidTopic));
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert_eq!(
            validate_topic_name(&"a".repeat(250)),
            Err(ErrorCode::InvalidTopic)
        );
    }

    #[test]
    fn create_raise_lower_and_same() {
        let catalog = TopicCatalog::new([info("a", 3)]);
        let plan = catalog.plan(
            &[info("a", 5), info("b", 1), info("a", 3), info("c", 0)],
            100,
            100,
        );
        // a: raised to 5; b: created; a again at 3: lower than the 5 planned → refused; c: bad.
        assert_eq!(codes(&plan), vec![0, 0, 37, 37]);
        assert_eq!(plan.changes, vec![info("a", 5), info("b", 1)]);
        catalog.install(&plan.changes);
        assert_eq!(catalog.partitions("a"), Some(5));

        let same = catalog.plan(&[info("a", 5)], 100, 100);
        assert_eq!(codes(&same), vec![0]);
        assert!(same.changes.is_empty(), "same count changes nothing");
        let lower = catalog.plan(&[info("a", 4)], 100, 100);
        assert_eq!(codes(&lower), vec![ErrorCode::InvalidPartitions.code()]);
    }

    #[test]
    fn topic_count_and_partition_count_are_capped() {
        let catalog = TopicCatalog::new([info("a", 1)]);
        let plan = catalog.plan(
            &[
                info("a", 3),
                info("b", 1),
                info("b", 2),
                info("c", 1),
                info("d", 11),
            ],
            2,
            10,
        );
        // a raised (exists), b new (2nd topic), b again (same topic), c over max_topics, d over
        // max_partitions.
        assert_eq!(
            codes(&plan),
            vec![
                0,
                0,
                0,
                ErrorCode::ResourceLimitReached.code(),
                ErrorCode::InvalidPartitions.code()
            ]
        );
        assert_eq!(
            plan.changes,
            vec![info("a", 3), info("b", 2)],
            "b stored once"
        );
        let huge = catalog.plan(&[info("a", i32::MAX)], 100, 100_000);
        assert_eq!(codes(&huge), vec![ErrorCode::InvalidPartitions.code()]);
    }

    #[test]
    fn a_topic_named_twice_is_stored_once() {
        let catalog = TopicCatalog::new([]);
        let plan = catalog.plan(&[info("a", 2), info("b", 1), info("a", 2)], 100, 100);
        assert_eq!(plan.changes, vec![info("a", 2), info("b", 1)]);
    }

    #[test]
    fn describe_leaves_unknown_out() {
        let catalog = TopicCatalog::new([info("b", 2), info("a", 1)]);
        assert_eq!(catalog.describe(None), vec![info("a", 1), info("b", 2)]);
        assert_eq!(
            catalog.describe(Some(&["b".into(), "zz".into()])),
            vec![info("b", 2)]
        );
    }
}
