//! OffsetCommit and OffsetFetch (protocol §6.13, §6.14), with OffsetCommit's ownership check
//! (PARTITION_NOT_OWNED, `tenure.rs` says who owns what) and the offset writes in flight that
//! commits, resets and restores share ([`PendingCommit`]); the request-level answers are shared
//! with groups that do not exist (`absent.rs`).

use muster_protocol::error_answers::commit_error;
use muster_protocol::{
    ErrorCode, FetchedPartition, FetchedTopic, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, PartitionResult, PartitionResults, Response,
};

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::effects::{Effects, PendingAnswer, PendingCommit, Write};
use super::history::Author;
use super::limits::{check_commit, check_fetch};
use super::topic_access::{deny_unreadable, may_read};
use super::{ClientInfo, Event, Group, GroupState, Millis, Offsets, ProcessKeys, NONE};
use crate::access::Access;
use crate::storage::records::{CommittedOffset, HistoryKind, OffsetWrite};
use crate::storage::Mutation;

impl<R> Group<R> {
    /// OffsetCommit (protocol §6.13). What passes is handed to the shell as a
    /// [`Write::Commit`]: the answer leaves, and the offsets become visible to OffsetFetch,
    /// only once they are durable ([`Group::commit_written`]). Topics `client.access` may not
    /// read are answered TOPIC_AUTHORIZATION_FAILED and not written (`topic_access.rs`), and a
    /// member's partitions it does not own PARTITION_NOT_OWNED (`tenure.rs`); the request's
    /// size limits are checked before that, as they protect the server. Each written partition
    /// gets a history entry in the same write (`history.rs`).
    pub fn commit_offsets(
        &mut self,
        now: Millis,
        req: OffsetCommitRequest,
        client: &ClientInfo,
        reply: R,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let generation = req.generation_id;
        let (response, offsets, member, not_owned) = self.plan_commit(now, req, &client.access);
        if not_owned > 0 {
            out.events.push(Event::CommitNotOwned {
                member_id: member.as_deref().unwrap_or_default().to_owned(),
                partitions: not_owned,
            });
        }
        if offsets.is_empty() {
            out.reply(reply, Response::OffsetCommit(response));
            return self.seal(out);
        }
        let author = self.author(member, client, generation);
        // History is written with the commit, or (`offset_history_flush_ms`) later, many
        // commits' entries in one write, made once the commit is durable (`history.rs`).
        let flush_ms = self.config.offsets.history_flush_ms;
        let deferred = (flush_ms > 0 && self.config.offsets.history_entries > 0)
            .then(|| Self::deferred(&author, now, now.saturating_add(flush_ms)));
        let (history, trim) = if deferred.is_some() {
            (Vec::new(), Vec::new())
        } else {
            self.plan_history(
                offsets.iter().map(|w| {
                    (
                        &w.topic,
                        w.partition,
                        w.committed.offset,
                        w.committed.metadata.as_ref(),
                    )
                }),
                HistoryKind::Commit,
                now,
                &author,
            )
        };
        // A group without members at generation 0 has no record a write in flight could be
        // ahead of: its first commit records its creator too.
        let records_owner =
            self.owner_unrecorded && self.generation == 0 && self.members.is_empty();
        let mut batch = Vec::with_capacity(3);
        if records_owner {
            batch.push(Mutation::PutGroup(self.to_record()));
            self.owner_unrecorded = false;
        }
        batch.push(Mutation::PutOffsets {
            group_id: self.group_id.to_string(),
            offsets: offsets.clone(),
        });
        if !history.is_empty() {
            batch.push(Mutation::PutHistory {
                group_id: self.group_id.to_string(),
                entries: history.clone(),
                trim,
            });
        }
        self.count_commit(true);
        out.writes.push(Write::Commit {
            batch,
            commit: PendingCommit {
                reply: Some(reply),
                answer: PendingAnswer::Commit(response),
                offsets,
                removed: Vec::new(),
                history,
                history_deferred: deferred,
                unquarantined: Vec::new(),
                records_owner,
            },
        });
        self.seal(out)
    }

    /// An offset write's batch is durable (`Ok`) or failed with the code its answer gets: the
    /// offsets (and their history entries) become visible and the request is answered, or it
    /// is answered with the failure and what it took out of the quarantine goes back.
    pub fn commit_written(
        &mut self,
        commit: PendingCommit<R>,
        result: Result<(), ErrorCode>,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let PendingCommit {
            reply,
            answer,
            offsets,
            removed,
            history,
            history_deferred,
            unquarantined,
            records_owner,
        } = commit;
        let response = match result {
            Ok(()) => {
                if let Some(deferred) = history_deferred {
                    self.record_deferred(&offsets, deferred, &mut out);
                }
                self.apply_offsets(offsets);
                self.remove_offsets(&removed);
                self.apply_history(history);
                answer.into_response()
            }
            Err(code) => {
                // The owner did not reach the disk either: the next commit tries again.
                self.owner_unrecorded |= records_owner;
                self.unplan_history(&history);
                self.requarantine(unquarantined);
                answer.into_failure(code)
            }
        };
        if let Some(reply) = reply {
            out.reply(reply, response);
        }
        self.count_commit(false);
        self.seal(out)
    }

    /// Who writes a commit's history entries: the committing member (its ids are shared with
    /// it), or, for a commit from outside any generation, the connection's client.
    fn author(&self, member: Option<Arc<str>>, client: &ClientInfo, generation: i32) -> Author {
        let known = member.as_deref().and_then(|id| self.member_client(id));
        match (member, known) {
            (Some(member_id), Some((client_id, client_host))) => Author {
                member_id,
                client_id,
                client_host,
                generation,
            },
            (member, _) => Author {
                member_id: member.unwrap_or_else(|| Arc::from("")),
                client_id: Arc::clone(&client.client_id),
                client_host: Arc::clone(&client.client_host),
                generation: generation.max(-1),
            },
        }
    }

    /// A member's client id and host, of either protocol.
    fn member_client(&self, member_id: &str) -> Option<(Arc<str>, Arc<str>)> {
        if let Some(m) = self.members.get(member_id) {
            return Some((
                Arc::clone(&m.client.client_id),
                Arc::clone(&m.client.client_host),
            ));
        }
        let m = self.consumer.as_deref()?.members.get(member_id)?;
        Some((
            Arc::clone(&m.client.client_id),
            Arc::clone(&m.client.client_host),
        ))
    }

    /// The answer to an OffsetCommit, the offsets to write, the committing member (`None`
    /// for a commit from outside any generation) and how many partitions it does not own.
    fn plan_commit(
        &mut self,
        now: Millis,
        req: OffsetCommitRequest,
        access: &Access,
    ) -> (
        OffsetCommitResponse,
        Vec<OffsetWrite>,
        Option<Arc<str>>,
        usize,
    ) {
        if let Err(code) = check_commit(&self.config.limits, &req) {
            return (commit_error(code, &req), Vec::new(), None, 0);
        }
        let member = match self.check_commit(now, &req) {
            Ok(member) => member,
            Err(code) => {
                let mut response = commit_error(code, &req);
                deny_unreadable(&mut response, access);
                return (response, Vec::new(), None, 0);
            }
        };
        // Whose partitions the commit may name: every one for a commit from outside the
        // group, the member's own otherwise (unless the check is off).
        let owner = member
            .as_deref()
            .filter(|_| self.config.offsets.ownership_check);
        let max_metadata = self.config.max_offset_metadata_bytes;
        let mut writes: Vec<OffsetWrite> = Vec::new();
        // (topic, partition) → its write: a partition named twice is written once, with the
        // last value (as Kafka, which collects a commit into a map).
        let mut written: HashMap<(Arc<str>, i32), usize> = HashMap::new();
        let mut topics = Vec::with_capacity(req.topics.len());
        let mut not_owned = 0usize;
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
                } else if owner.is_some_and(|m| !self.tenure.owns(m, &t.topic, p.partition)) {
                    not_owned += 1;
                    ErrorCode::PartitionNotOwned
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
            member,
            not_owned,
        )
    }

    /// The request-level checks of an OffsetCommit (and of OwnershipEpochs, which a member
    /// sends the same way): the committing member's id, shared with the group's map, or
    /// `None` for a commit from outside any generation.
    pub(super) fn check_commit(
        &mut self,
        now: Millis,
        req: &OffsetCommitRequest,
    ) -> Result<Option<Arc<str>>, ErrorCode> {
        self.check_member_request(
            now,
            &req.member_id,
            req.generation_id,
            req.group_instance_id.as_deref(),
        )
    }

    /// [`Group::check_commit`] on its parts.
    pub(super) fn check_member_request(
        &mut self,
        now: Millis,
        member_id: &str,
        generation_id: i32,
        instance: Option<&str>,
    ) -> Result<Option<Arc<str>>, ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        let simple = generation_id < 0 && member_id.is_empty() && instance.is_none();
        if simple {
            // A commit from outside any generation is only for groups nobody is in.
            return if self.state == GroupState::Empty {
                Ok(None)
            } else {
                Err(ErrorCode::UnknownMemberId)
            };
        }
        if self.consumer.is_some() {
            return self
                .check_consumer_commit(now, member_id, generation_id, instance)
                .map(Some);
        }
        self.check_and_hear(member_id, instance, now)?;
        if generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        match self.state {
            GroupState::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
            _ => Ok(self
                .members
                .get_key_value(member_id)
                .map(|(id, _)| Arc::clone(id))),
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

    /// Removes offsets (a reset to before a partition's first commit), once durable.
    pub(super) fn remove_offsets(&mut self, removed: &[(String, i32)]) {
        for (topic, partition) in removed {
            if let Some(parts) = self.offsets.get_mut(topic.as_str()) {
                parts.remove(partition);
                if parts.is_empty() {
                    self.offsets.remove(topic.as_str());
                }
            }
        }
    }

    /// Takes out offsets committed at or before `cutoff` (retention) and returns them.
    pub(super) fn expire_offsets(&mut self, cutoff: Millis) -> Vec<OffsetWrite> {
        let mut expired = Vec::new();
        self.offsets.retain(|topic, parts| {
            let shared: Arc<str> = Arc::from(topic.as_str());
            parts.retain(|p, o| {
                let keep = o.commit_timestamp_ms > cutoff;
                if !keep {
                    expired.push(OffsetWrite {
                        topic: Arc::clone(&shared),
                        partition: *p,
                        committed: o.clone(),
                    });
                }
                keep
            });
            !parts.is_empty()
        });
        expired
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
