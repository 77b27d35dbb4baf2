//! Offset commit and fetch, shared by the group member (commits fenced by its generation and
//! member id) and the admin API (commits with generation -1 for an Empty group): building the
//! requests and turning the answers into results.

use std::collections::{BTreeMap, BTreeSet};

use muster_protocol::{
    ErrorCode, OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, OffsetFetchRequest,
    Response,
};

use crate::error::ClientError;
use crate::partition::{group_partitions, OffsetAndMetadata, TopicPartition};

/// Who commits: a member of a generation, or an administrator (`generation -1`, empty member
/// id; accepted only while the group is Empty).
#[derive(Debug, Clone)]
pub(crate) struct Committer {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

pub(crate) fn commit_request(
    committer: Committer,
    offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> OffsetCommitRequest {
    let mut topics: BTreeMap<String, Vec<OffsetCommitPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        topics
            .entry(tp.topic)
            .or_default()
            .push(OffsetCommitPartition {
                partition: tp.partition,
                offset: offset.offset,
                metadata: offset.metadata,
            });
    }
    OffsetCommitRequest {
        group_id: committer.group_id,
        generation_id: committer.generation_id,
        member_id: committer.member_id,
        group_instance_id: committer.group_instance_id,
        topics: topics
            .into_iter()
            .map(|(topic, partitions)| OffsetCommitTopic { topic, partitions })
            .collect(),
    }
}

/// `Ok` when the request and every partition were answered `NONE`; otherwise the request-level
/// error; else [`ClientError::PartitionsNotOwned`] naming every partition refused with
/// `PARTITION_NOT_OWNED` (the member has lost them: that comes first); else the first
/// partition's error. The other partitions may have been committed: the server commits per
/// partition (refusing, e.g., only metadata over its size limit, or a partition the member does
/// not own).
pub(crate) fn check_commit(group_id: &str, response: Response) -> Result<(), ClientError> {
    let Response::OffsetCommit(answer) = response else {
        return Err(ClientError::Unexpected(response.name()));
    };
    ClientError::check(answer.error_code, || {
        format!("OffsetCommit group {group_id}")
    })?;
    let not_owned: BTreeSet<TopicPartition> = answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code == ErrorCode::PartitionNotOwned.code())
                .map(|p| TopicPartition::new(t.topic.clone(), p.partition))
        })
        .collect();
    if !not_owned.is_empty() {
        return Err(ClientError::PartitionsNotOwned {
            group_id: group_id.to_owned(),
            partitions: not_owned.into_iter().collect(),
        });
    }
    for topic in &answer.topics {
        for p in &topic.partitions {
            ClientError::check(p.error_code, || {
                format!(
                    "OffsetCommit group {group_id} partition {}-{}",
                    topic.topic, p.partition
                )
            })?;
        }
    }
    Ok(())
}

pub(crate) fn fetch_request(
    group_id: &str,
    partitions: Option<&[TopicPartition]>,
) -> OffsetFetchRequest {
    OffsetFetchRequest {
        group_id: group_id.to_owned(),
        topics: partitions.map(group_partitions),
    }
}

/// The committed offsets in a fetch answer; partitions with nothing committed (offset -1) are
/// left out.
pub(crate) fn parse_fetch(
    group_id: &str,
    response: Response,
) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, ClientError> {
    let Response::OffsetFetch(answer) = response else {
        return Err(ClientError::Unexpected(response.name()));
    };
    ClientError::check(answer.error_code, || {
        format!("OffsetFetch group {group_id}")
    })?;
    let mut offsets = BTreeMap::new();
    for topic in answer.topics {
        for p in topic.partitions {
            ClientError::check(p.error_code, || {
                format!(
                    "OffsetFetch group {group_id} partition {}-{}",
                    topic.topic, p.partition
                )
            })?;
            if p.offset >= 0 {
                offsets.insert(
                    TopicPartition::new(topic.topic.clone(), p.partition),
                    OffsetAndMetadata {
                        offset: p.offset,
                        metadata: p.metadata,
                    },
                );
            }
        }
    }
    Ok(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::{
        FetchedPartition, FetchedTopic, OffsetCommitResponse, OffsetFetchResponse, PartitionResult,
        PartitionResults,
    };

    #[test]
    fn commit_groups_by_topic() {
        let offsets = BTreeMap::from([
            (TopicPartition::new("b", 0), OffsetAndMetadata::new(5)),
            (
                TopicPartition::new("a", 1),
                OffsetAndMetadata::with_metadata(7, "m"),
            ),
            (TopicPartition::new("a", 0), OffsetAndMetadata::new(3)),
        ]);
        let req = commit_request(
            Committer {
                group_id: "g".into(),
                generation_id: -1,
                member_id: String::new(),
                group_instance_id: None,
            },
            offsets,
        );
        assert_eq!(req.topics.len(), 2);
        assert_eq!(req.topics[0].topic, "a");
        assert_eq!(req.topics[0].partitions[1].metadata.as_deref(), Some("m"));
        assert_eq!(req.topics[1].partitions[0].offset, 5);
    }

    #[test]
    fn partition_errors_surface() {
        let answer = Response::OffsetCommit(OffsetCommitResponse {
            error_code: 0,
            topics: vec![PartitionResults {
                topic: "a".into(),
                partitions: vec![
                    PartitionResult {
                        partition: 0,
                        error_code: 0,
                    },
                    PartitionResult {
                        partition: 1,
                        error_code: ErrorCode::OffsetMetadataTooLarge.code(),
                    },
                ],
            }],
        });
        let err = check_commit("g", answer).expect_err("partition 1 failed");
        assert_eq!(err.error_code(), Some(ErrorCode::OffsetMetadataTooLarge));
        assert!(err.to_string().contains("a-1"), "{err}");
    }

    #[test]
    fn partitions_not_owned_are_named_together_and_come_first() {
        let result = |partition: i32, code: ErrorCode| PartitionResult {
            partition,
            error_code: code.code(),
        };
        let answer = Response::OffsetCommit(OffsetCommitResponse {
            error_code: 0,
            topics: vec![
                PartitionResults {
                    topic: "a".into(),
                    partitions: vec![
                        result(0, ErrorCode::OffsetMetadataTooLarge),
                        result(1, ErrorCode::PartitionNotOwned),
                        result(2, ErrorCode::None),
                    ],
                },
                PartitionResults {
                    topic: "b".into(),
                    partitions: vec![result(4, ErrorCode::PartitionNotOwned)],
                },
            ],
        });
        match check_commit("g", answer) {
            Err(ClientError::PartitionsNotOwned {
                group_id,
                partitions,
            }) => {
                assert_eq!(group_id, "g");
                assert_eq!(
                    partitions,
                    [TopicPartition::new("a", 1), TopicPartition::new("b", 4)]
                );
            }
            other => panic!("expected PartitionsNotOwned, got {other:?}"),
        }
    }

    #[test]
    fn fetch_leaves_out_uncommitted() {
        let answer = Response::OffsetFetch(OffsetFetchResponse {
            error_code: 0,
            topics: vec![FetchedTopic {
                topic: "a".into(),
                partitions: vec![
                    FetchedPartition {
                        partition: 0,
                        offset: 42,
                        metadata: None,
                        error_code: 0,
                    },
                    FetchedPartition {
                        partition: 1,
                        offset: -1,
                        metadata: None,
                        error_code: 0,
                    },
                ],
            }],
        });
        let offsets = parse_fetch("g", answer).expect("ok");
        assert_eq!(offsets.len(), 1);
        assert_eq!(offsets[&TopicPartition::new("a", 0)].offset, 42);
    }
}
