//! What the offset-protection tests share (`ownership.rs`, `history.rs`, `reset.rs`,
//! `quarantine.rs`; protocol §6.13, §6.23–§6.25): the requests, sent to the harness's group
//! with every write durable at once, and what they wrote.

use muster_protocol::{
    OffsetFetchResponse, OffsetHistoryRequest, OffsetHistoryResponse, OffsetResetRequest,
    OffsetResetResponse, OffsetRestoreRequest, OffsetRestoreResponse, ResetTo,
};

use super::*;
use crate::access::{Grant, Operation, Pattern, Principal, ResourceType};
use crate::config::OffsetsConfig;
use crate::quota::Quota;

/// `config()` with `offsets` as its offset protections.
pub(super) fn with_offsets(offsets: OffsetsConfig) -> GroupConfig {
    GroupConfig {
        // History written with each commit, so that a test sees it in the commit's batch;
        // the deferred write (`offset_history_flush_ms`) has tests of its own (`history.rs`).
        offsets: OffsetsConfig {
            history_flush_ms: 0,
            ..offsets
        },
        ..config()
    }
}

/// A principal granted `ops` on topics matching `topics` and `group_ops` on every group.
pub(super) fn principal(topics: &[&str], group_ops: &[Operation]) -> Access {
    let mut grants: Vec<Grant> = topics
        .iter()
        .map(|p| Grant::new(ResourceType::Topic, Pattern::parse(p), &[Operation::Read]))
        .collect();
    if !group_ops.is_empty() {
        grants.push(Grant::new(
            ResourceType::Group,
            Pattern::parse("*"),
            group_ops,
        ));
    }
    Access::principal(Arc::new(Principal::new(
        Arc::from("ops"),
        grants,
        Arc::new(Quota::unlimited(Arc::from("ops"))),
    )))
}

/// Each partition's code of a commit's answer: `(topic, partition, code)`.
pub(super) fn codes(r: &OffsetCommitResponse) -> Vec<(String, i32, i16)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.clone(), p.partition, p.error_code))
        })
        .collect()
}

/// An OffsetCommit and the batch its write carried (`None`: nothing was written).
pub(super) fn commit_batch(
    h: &mut Harness,
    member_id: &str,
    generation: i32,
    topics: Vec<OffsetCommitTopic>,
) -> (OffsetCommitResponse, Option<Vec<Mutation>>) {
    let before = h.commit_batches.len();
    let (r, _) = h.commit(member_id, None, generation, topics);
    assert!(h.commit_batches.len() <= before + 1, "one write per commit");
    let batch = (h.commit_batches.len() > before).then(|| h.commit_batches.remove(before));
    (r, batch)
}

/// A commit from outside any generation (the group Empty) of `offset` to `topic`/`partition`.
pub(super) fn simple_commit(h: &mut Harness, topic: &str, partition: i32, offset: i64) {
    simple_commit_with(h, topic, partition, offset, None);
}

pub(super) fn simple_commit_with(
    h: &mut Harness,
    topic: &str,
    partition: i32,
    offset: i64,
    metadata: Option<&str>,
) {
    let (r, _) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic(
            topic,
            &[(partition, offset, metadata.map(str::to_owned))],
        )],
    );
    assert_eq!(codes(&r), vec![(topic.to_owned(), partition, 0)], "{r:?}");
}

/// OffsetFetch of every committed topic, with open access.
pub(super) fn fetch_all(h: &Harness) -> OffsetFetchResponse {
    h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.to_owned(),
            topics: None,
        },
        &Access::default(),
    )
}

/// What OffsetFetch shows: `(topic, partition, offset)`.
pub(super) fn offsets(h: &Harness) -> Vec<(String, i32, i64)> {
    fetch_all(h)
        .topics
        .into_iter()
        .flat_map(|t| {
            t.partitions
                .into_iter()
                .map(move |p| (t.topic.clone(), p.partition, p.offset))
        })
        .collect()
}

/// OffsetHistory of `topic` (`None`: every topic) and `partition`, at most `limit` entries per
/// partition (0: all), asked with `access`.
pub(super) fn history_of(
    h: &Harness,
    topic: Option<&str>,
    partition: Option<i32>,
    limit: u32,
    access: &Access,
) -> OffsetHistoryResponse {
    h.group.offset_history(
        &OffsetHistoryRequest {
            group_id: GROUP.to_owned(),
            topic: topic.map(str::to_owned),
            partition,
            limit,
        },
        access,
    )
}

/// The sequence numbers and offsets OffsetHistory shows for one partition, newest first.
pub(super) fn entries(h: &Harness, topic: &str, partition: i32) -> Vec<(u64, i64)> {
    let r = history_of(h, Some(topic), Some(partition), 0, &Access::default());
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| p.entries.iter().map(|e| (e.seq, e.offset)))
        .collect()
}

pub(super) fn reset_req(
    to: ResetTo,
    topics: Vec<TopicPartitions>,
    execute: bool,
) -> OffsetResetRequest {
    OffsetResetRequest {
        group_id: GROUP.to_owned(),
        to,
        topics,
        execute,
    }
}

/// An OffsetReset by the harness's client, every write durable at once.
pub(super) fn reset(h: &mut Harness, req: OffsetResetRequest) -> OffsetResetResponse {
    let token = h.next_token();
    let client = h.client.clone();
    let effects = h.group.reset_offsets(h.now, req, &client, token);
    h.collect(effects);
    match h.reply_for(token) {
        Some(Response::OffsetReset(r)) => r,
        other => panic!("not an OffsetReset answer: {other:?}"),
    }
}

/// An OffsetRestore by the harness's client, every write durable at once.
pub(super) fn restore(h: &mut Harness, execute: bool) -> OffsetRestoreResponse {
    let token = h.next_token();
    let client = h.client.clone();
    let req = OffsetRestoreRequest {
        group_id: GROUP.to_owned(),
        execute,
    };
    let effects = h.group.restore_offsets(h.now, req, &client, token);
    h.collect(effects);
    match h.reply_for(token) {
        Some(Response::OffsetRestore(r)) => r,
        other => panic!("not an OffsetRestore answer: {other:?}"),
    }
}

/// Splits an engine call's effects into its one offset write (batch and pending commit) and
/// the rest, which the harness carries out.
pub(super) fn take_commit(
    h: &mut Harness,
    mut effects: Effects<u32>,
) -> Option<(Vec<Mutation>, PendingCommit<u32>)> {
    let at = effects
        .writes
        .iter()
        .position(|w| matches!(w, Write::Commit { .. }))?;
    let Write::Commit { batch, commit } = effects.writes.remove(at) else {
        unreachable!("the position of a commit write");
    };
    h.collect(effects);
    Some((batch, commit))
}
