//! OffsetCommit and OffsetFetch (protocol §6.13, §6.14); the request-level
//! answers are shared with groups that do not exist (`absent.rs`).

use muster_protocol::error_answers::commit_error;
use muster_protocol::error_answers::error_like;
use muster_protocol::{
    ErrorCode, FetchedPartition, FetchedTopic, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, PartitionResult, PartitionResults, Response,
};

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::effects::{Effects, PendingCommit, Write};
use super::limits::{check_commit, check_fetch};
use super::topic_access::{deny_unreadable, may_read};
use super::{Group, GroupState, Millis, Offsets, ProcessKeys, NONE};
use crate::access::Access;
use crate::storage::records::{CommittedOffset, OffsetWrite};
use crate::storage::Mutation;

impl<R> Group<R> {
    /// OffsetCommit (protocol §6.13). What passes is handed to the shell as a
    /// [`Write::Commit`]: the answer leaves, and the offsets become visible to OffsetFetch,
    /// only once they are durable ([`Group::commit_written`]). Topics `access` may not read
    /// are answered TOPIC_AUTHORIZATION_FAILED and not written (`topic_access.rs`); the
    /// request's size limits are checked before that, as they protect the server.
    pub fn commit_offsets(
        &mut self,
        now: Millis,
        req: OffsetCommitRequest,
        access: &Access,
        reply: R,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let (response, offsets) = self.plan_commit(now, req, access);
        if offsets.is_empty() {
            out.reply(reply, Response::OffsetCommit(response));
            return self.seal(out);
        }
        // A group without members at generation 0 has no record a write in flight could be
        // ahead of: its first commit records its creator too.
        let records_owner =
            self.owner_unrecorded && self.generation == 0 && self.members.is_empty();
        let mut batch = Vec::with_capacity(2);
        if records_owner {
            batch.push(Mutation::PutGroup(self.to_record()));
            self.owner_unrecorded = false;
        }
        batch.push(Mutation::PutOffsets {
            group_id: self.group_id.to_string(),
            offsets: offsets.clone(),
        });
        self.count_commit(true);
        out.writes.push(Write::Commit {
            batch,
            commit: PendingCommit {
                reply,
                response,
                offsets,
                records_owner,
            },
        });
        self.seal(out)
    }

    /// A commit's write is durable (`Ok`) or failed with the code its answer gets: the offsets
    /// become visible and the commit is answered, or it is answered with the failure.
    pub fn commit_written(
        &mut self,
        commit: PendingCommit<R>,
        result: Result<(), ErrorCode>,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let PendingCommit {
            reply,
            response,
            offsets,
            records_owner,
        } = commit;
        match result {
            Ok(()) => {
                self.apply_offsets(offsets);
                out.reply(reply, Response::OffsetCommit(response));
            }
            Err(code) => {
                // The owner did not reach the disk either: the next commit tries again.
                self.owner_unrecorded |= records_owner;
                out.reply(reply, error_like(&Response::OffsetCommit(response), code));
            }
        }
        self.count_commit(false);
        self.seal(out)
    }

    /// The answer to an OffsetCommit and the offsets to write.
    fn plan_commit(
        &mut self,
        now: Millis,
        req: OffsetCommitRequest,
        access: &Access,
    ) -> (OffsetCommitResponse, Vec<OffsetWrite>) {
        if let Err(code) = check_commit(&self.config.limits, &req) {
            return (commit_error(code, &req), Vec::new());
        }
        if let Err(code) = self.check_commit(now, &req) {
            let mut response = commit_error(code, &req);
            deny_unreadable(&mut response, access);
            return (response, Vec::new());
        }
        let max_metadata = self.config.max_offset_metadata_bytes;
        let mut writes: Vec<OffsetWrite> = Vec::new();
        // (topic, partition) → its write: a partition named twice is written once, with the
        // last value (as Kafka, which collects a commit into a map).
        let mut written: HashMap<(Arc<str>, i32), usize> = HashMap::new();
        let mut topics = Vec::with_capacity(req.topics.len());
        for t in req.topics {
            // One allocation per topic, shared by its partitions' writes: a long name and many
            // partitions cost their sum, not their product.
            let topic: Arc<str> = Arc::from(t.topic.as_str());
            let readable = may_read(access, &t.topic);
            let mut results = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                let code = if !readable {
                    ErrorCode::TopicAuthorizationFailed
                } else if let Err(code) =
                    check_partition(p.partition, p.offset, p.metadata.as_deref(), max_metadata)
                {
                    code
                } else {
                    let write = OffsetWrite {
                        topic: Arc::clone(&topic),
                        partition: p.partition,
                        committed: CommittedOffset {
                            offset: p.offset,
                            metadata: p.metadata,
                            commit_timestamp_ms: now,
                        },
                    };
                    match written.entry((Arc::clone(&topic), p.partition)) {
                        Entry::Occupied(at) => writes[*at.get()] = write,
                        Entry::Vacant(slot) => {
                            slot.insert(writes.len());
                            writes.push(write);
                        }
                    }
                    ErrorCode::None
                };
                results.push(PartitionResult {
                    partition: p.partition,
                    error_code: code.code(),
                });
            }
            topics.push(PartitionResults {
                topic: t.topic,
                partitions: results,
            });
        }
        (
            OffsetCommitResponse {
                error_code: NONE,
                topics,
            },
            writes,
        )
    }

    pub(super) fn check_commit(
        &mut self,
        now: Millis,
        req: &OffsetCommitRequest,
    ) -> Result<(), ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        let simple =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        if simple {
            // A commit from outside any generation is only for groups nobody is in.
            return if self.state == GroupState::Empty {
                Ok(())
            } else {
                Err(ErrorCode::UnknownMemberId)
            };
        }
        if self.consumer.is_some() {
            return self.check_consumer_commit(now, req);
        }
        self.check_member(&req.member_id, req.group_instance_id.as_deref())?;
        self.heard_from(&req.member_id, now);
        if req.generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        match self.state {
            GroupState::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Makes committed offsets visible to OffsetFetch, once durable (or restored).
    pub(super) fn apply_offsets(&mut self, writes: Vec<OffsetWrite>) {
        for w in writes {
            match self.offsets.get_mut(&*w.topic) {
                Some(parts) => {
                    parts.insert(w.partition, w.committed);
                }
                None => {
                    self.offsets
                        .entry(w.topic.to_string())
                        .or_default()
                        .insert(w.partition, w.committed);
                }
            }
        }
    }

    /// OffsetFetch (protocol §6.14): any state; no commit → offset -1. Only topics
    /// `access` may read are answered with offsets (`topic_access.rs`).
    pub fn fetch_offsets(&self, req: &OffsetFetchRequest, access: &Access) -> OffsetFetchResponse {
        if let Err(code) = check_fetch(&self.config.limits, req) {
            return OffsetFetchResponse {
                error_code: code.code(),
                topics: Vec::new(),
            };
        }
        fetch_from(Some(&self.offsets), req, access)
    }

    /// Drops offsets committed at or before `cutoff` (retention); returns what was dropped.
    pub(super) fn expire_offsets(&mut self, cutoff: Millis) -> Vec<(String, i32)> {
        let mut dropped = Vec::new();
        self.offsets.retain(|topic, parts| {
            parts.retain(|p, o| {
                let keep = o.commit_timestamp_ms > cutoff;
                if !keep {
                    dropped.push((topic.clone(), *p));
                }
                keep
            });
            !parts.is_empty()
        });
        dropped
    }
}

/// The per-partition rule of protocol §6.13 ("Valid partitions and offsets"), in its order: a
/// negative partition does not exist; a negative offset is refused, because OffsetFetch uses
/// -1 for "no commit" and a stored -1 could not be told apart from it; metadata has a size cap.
/// A partition that fails is not committed, and the others still are.
fn check_partition(
    partition: i32,
    offset: i64,
    metadata: Option<&str>,
    max_metadata: usize,
) -> Result<(), ErrorCode> {
    if partition < 0 {
        Err(ErrorCode::UnknownTopicOrPartition)
    } else if offset < 0 {
        Err(ErrorCode::InvalidRequest)
    } else if metadata.is_some_and(|m| m.len() > max_metadata) {
        Err(ErrorCode::OffsetMetadataTooLarge)
    } else {
        Ok(())
    }
}

/// OffsetFetch over a group's offsets (`None`: the group does not exist). A named topic the
/// connection may not read has TOPIC_AUTHORIZATION_FAILED on each partition (and no offset);
/// "every committed topic" leaves such topics out, as Kafka does.
pub(super) fn fetch_from(
    offsets: Option<&Offsets>,
    req: &OffsetFetchRequest,
    access: &Access,
) -> OffsetFetchResponse {
    let lookup = |topic: &str, partition: i32| {
        offsets
            .and_then(|o| o.get(topic))
            .and_then(|p| p.get(&partition))
    };
    let topics = match &req.topics {
        // A partition named twice is answered once (protocol §6.14): the answer's size must
        // follow the request's, and a stored offset's metadata can be 4 KiB.
        Some(wanted) => {
            let mut seen: HashSet<(&str, i32), ProcessKeys> = HashSet::default();
            wanted
                .iter()
                .map(|t| {
                    let readable = may_read(access, &t.topic);
                    FetchedTopic {
                        topic: t.topic.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .filter(|&&p| seen.insert((t.topic.as_str(), p)))
                            .map(|&p| {
                                if readable {
                                    fetched(p, lookup(&t.topic, p))
                                } else {
                                    unauthorized(p)
                                }
                            })
                            .collect(),
                    }
                })
                .collect()
        }
        None => {
            let mut all: Vec<FetchedTopic> = offsets
                .into_iter()
                .flatten()
                .filter(|(topic, _)| may_read(access, topic))
                .map(|(topic, parts)| {
                    let mut partitions: Vec<FetchedPartition> =
                        parts.iter().map(|(&p, o)| fetched(p, Some(o))).collect();
                    partitions.sort_unstable_by_key(|p| p.partition);
                    FetchedTopic {
                        topic: topic.clone(),
                        partitions,
                    }
                })
                .collect();
            all.sort_unstable_by(|a, b| a.topic.cmp(&b.topic));
            all
        }
    };
    OffsetFetchResponse {
        error_code: NONE,
        topics,
    }
}

fn fetched(partition: i32, committed: Option<&CommittedOffset>) -> FetchedPartition {
    match committed {
        Some(c) => FetchedPartition {
            partition,
            offset: c.offset,
            metadata: c.metadata.clone(),
            error_code: NONE,
        },
        None => FetchedPartition {
            partition,
            offset: -1,
            metadata: None,
            error_code: NONE,
        },
    }
}

fn unauthorized(partition: i32) -> FetchedPartition {
    FetchedPartition {
        partition,
        offset: -1,
        metadata: None,
        error_code: ErrorCode::TopicAuthorizationFailed.code(),
    }
}
