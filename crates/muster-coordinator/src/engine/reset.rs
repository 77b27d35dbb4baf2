//! OffsetReset (protocol §6.24): put an Empty group's offsets back to a point in time, to the
//! oldest recorded, by a shift, or to an offset; a dry run answers what would change.
//!
//! An executed reset is one write (offsets put, offsets removed, one `reset` history entry per
//! partition), so a crash leaves the old offsets or the new ones, never a mix, and it is
//! answered once durable. Its entries are stamped later than every entry before them, so a
//! reset to the time just before it (`recorded_at_ms - 1`) puts back exactly what it replaced.
//! A partition the history cannot answer for (trimmed past the time asked, or with no offset
//! to shift) fails the whole reset: nothing is executed, and the answer says which.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use muster_protocol::{
    ErrorCode, OffsetResetRequest, OffsetResetResponse, ResetPartition, ResetTo, ResetTopic,
    Response,
};

use super::effects::{Effects, PendingAnswer, PendingCommit, Write};
use super::history::Author;
use super::limits::check_reset;
use super::topic_access::may_read;
use super::{ClientInfo, Group, GroupState, Millis, NONE};
use crate::access::{Operation, ResourceType};
use crate::storage::{CommittedOffset, HistoryKind, Mutation, OffsetWrite};

/// Members a refusal names before it only counts the rest.
const NAMED_MEMBERS: usize = 10;

/// Where one partition goes: `None` = its offset is removed.
type Target = Option<CommittedOffset>;

impl<R> Group<R> {
    /// OffsetReset (protocol §6.24).
    pub fn reset_offsets(
        &mut self,
        now: Millis,
        req: OffsetResetRequest,
        client: &ClientInfo,
        reply: R,
    ) -> Effects<R> {
        let mut out = Effects::default();
        match self.plan_reset(now, &req, client) {
            Err(response) => out.reply(reply, Response::OffsetReset(response)),
            Ok((response, _)) if !req.execute => out.reply(reply, Response::OffsetReset(response)),
            Ok((mut response, plan)) => {
                let author = Author {
                    member_id: super::history::principal_of(&client.access),
                    client_id: Arc::clone(&client.client_id),
                    client_host: Arc::clone(&client.client_host),
                    generation: -1,
                };
                let at = response.recorded_at_ms;
                let mut offsets = Vec::new();
                let mut removed = Vec::new();
                for (topic, partition, target) in plan {
                    match target {
                        Some(committed) => offsets.push(OffsetWrite {
                            topic,
                            partition,
                            committed: CommittedOffset {
                                commit_timestamp_ms: at,
                                ..committed
                            },
                        }),
                        None => removed.push((topic, partition)),
                    }
                }
                let (history, trim) = self.plan_history(
                    offsets
                        .iter()
                        .map(|w| {
                            (
                                &w.topic,
                                w.partition,
                                w.committed.offset,
                                w.committed.metadata.as_ref(),
                            )
                        })
                        .chain(removed.iter().map(|(t, p)| (t, *p, -1, None))),
                    HistoryKind::Reset,
                    at,
                    &author,
                );
                let group_id = self.group_id.to_string();
                let removed: Vec<(String, i32)> = removed
                    .into_iter()
                    .map(|(t, p)| (t.to_string(), p))
                    .collect();
                let mut batch = vec![Mutation::PutOffsets {
                    group_id: group_id.clone(),
                    offsets: offsets.clone(),
                }];
                // Commits' entries held back go first: a reset is undone by the history.
                if let Some(unwritten) = self.take_unwritten_history() {
                    batch.insert(0, unwritten);
                }
                if !removed.is_empty() {
                    batch.push(Mutation::DeleteOffsets {
                        group_id: group_id.clone(),
                        partitions: removed.clone(),
                    });
                }
                if !history.is_empty() {
                    batch.push(Mutation::PutHistory {
                        group_id,
                        entries: history.clone(),
                        trim,
                    });
                }
                response.executed = true;
                out.events.push(super::Event::OffsetsReset {
                    partitions: offsets.len() + removed.len(),
                    by: client.access.name().to_owned(),
                });
                self.count_commit(true);
                out.writes.push(Write::Commit {
                    batch,
                    commit: PendingCommit {
                        reply: Some(reply),
                        answer: PendingAnswer::Reset(response),
                        offsets,
                        removed,
                        history: Vec::new(),
                        history_deferred: None,
                        unquarantined: Vec::new(),
                        records_owner: false,
                    },
                });
                // The history entries join with the offsets once durable.
                if let Some(Write::Commit { commit, .. }) = out.writes.last_mut() {
                    commit.history = history;
                }
            }
        }
        self.seal(out)
    }

    /// The answer, and for a reset that may go on, each partition's target.
    #[allow(clippy::type_complexity)]
    fn plan_reset(
        &self,
        now: Millis,
        req: &OffsetResetRequest,
        client: &ClientInfo,
    ) -> Result<(OffsetResetResponse, Vec<(Arc<str>, i32, Target)>), OffsetResetResponse> {
        let refuse = |code: ErrorCode, message: String| OffsetResetResponse {
            error_code: code.code(),
            error_message: Some(message),
            ..OffsetResetResponse::default()
        };
        if let Err(code) = check_reset(&self.config.limits, req) {
            return Err(refuse(
                code,
                "the reset names more partitions, or longer topic names, than the server \
                 accepts in one request"
                    .to_owned(),
            ));
        }
        let access = &client.access;
        if req.execute && !access.allows(ResourceType::Group, &self.group_id, Operation::Delete) {
            return Err(refuse(
                ErrorCode::GroupAuthorizationFailed,
                "resetting offsets needs the delete right on the group".to_owned(),
            ));
        }
        if self.state == GroupState::Dead {
            return Err(refuse(
                ErrorCode::CoordinatorNotAvailable,
                "the group is being removed; retry".to_owned(),
            ));
        }
        if self.member_count() > 0 || self.state != GroupState::Empty {
            return Err(refuse(ErrorCode::NonEmptyGroup, self.members_named()));
        }
        if let ResetTo::Offset { offset } = req.to {
            if offset < 0 {
                return Err(refuse(
                    ErrorCode::InvalidRequest,
                    format!("--to-offset {offset}: an offset is at least 0"),
                ));
            }
        }
        let mut topics: BTreeMap<Arc<str>, Vec<ResetPartition>> = BTreeMap::new();
        let mut plan = Vec::new();
        let mut unanswerable = Vec::new();
        for (topic, partition) in self.reset_scope(req) {
            let current = self.offsets.get(&*topic).and_then(|p| p.get(&partition));
            let shown = topics.entry(Arc::clone(&topic)).or_default();
            if !may_read(access, &topic) {
                shown.push(ResetPartition {
                    partition,
                    current: -1,
                    new: -1,
                    error_code: ErrorCode::TopicAuthorizationFailed.code(),
                });
                continue;
            }
            let target = self.reset_target(&req.to, &topic, partition, current);
            let (new, code) = match &target {
                Ok(Some(c)) => (c.offset, NONE),
                Ok(None) => (-1, NONE),
                Err(()) => {
                    unanswerable.push(format!("{topic}:{partition}"));
                    (-1, ErrorCode::UnknownTopicOrPartition.code())
                }
            };
            shown.push(ResetPartition {
                partition,
                current: current.map_or(-1, |c| c.offset),
                new,
                error_code: code,
            });
            if let Ok(target) = target {
                plan.push((Arc::clone(&topic), partition, target));
            }
        }
        // Later than every entry before it, so that `recorded_at_ms - 1` undoes it.
        let latest = self
            .history
            .values()
            .flat_map(|logs| logs.values())
            .filter_map(|log| log.entries.back().map(|e| e.at_ms))
            .max()
            .unwrap_or(0);
        let mut response = OffsetResetResponse {
            error_code: NONE,
            error_message: None,
            executed: false,
            recorded_at_ms: if req.execute { now.max(latest + 1) } else { 0 },
            topics: topics
                .into_iter()
                .map(|(topic, partitions)| ResetTopic {
                    topic: topic.to_string(),
                    partitions,
                })
                .collect(),
        };
        if !unanswerable.is_empty() {
            response.error_code = ErrorCode::InvalidRequest.code();
            response.recorded_at_ms = 0;
            let shown: Vec<&str> = unanswerable
                .iter()
                .take(NAMED_MEMBERS)
                .map(String::as_str)
                .collect();
            response.error_message = Some(format!(
                "nothing was reset: {} partition(s) cannot be ({}{}): their history does not \
                 reach back that far, or they have no offset to shift; narrow the reset with \
                 --topic",
                unanswerable.len(),
                shown.join(", "),
                if unanswerable.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                },
            ));
            return Err(response);
        }
        Ok((response, plan))
    }

    /// The partitions a reset names: those of its topics (all of a topic's when it lists
    /// none), or every partition with an offset or a history; sorted, each once.
    fn reset_scope(&self, req: &OffsetResetRequest) -> BTreeSet<(Arc<str>, i32)> {
        let known = |topic: &str| -> BTreeSet<i32> {
            let mut ps: BTreeSet<i32> = self
                .offsets
                .get(topic)
                .map(|p| p.keys().copied().collect())
                .unwrap_or_default();
            if let Some(logs) = self.history.get(topic) {
                ps.extend(
                    logs.iter()
                        .filter(|(_, l)| !l.entries.is_empty())
                        .map(|(p, _)| *p),
                );
            }
            ps
        };
        let mut scope = BTreeSet::new();
        if req.topics.is_empty() {
            let names: BTreeSet<&str> = self
                .offsets
                .keys()
                .map(String::as_str)
                .chain(self.history.keys().map(|t| &**t))
                .collect();
            for topic in names {
                let shared: Arc<str> = Arc::from(topic);
                for p in known(topic) {
                    scope.insert((Arc::clone(&shared), p));
                }
            }
            return scope;
        }
        for t in &req.topics {
            let shared: Arc<str> = Arc::from(t.topic.as_str());
            let partitions = if t.partitions.is_empty() {
                known(&t.topic)
            } else {
                t.partitions.iter().copied().filter(|p| *p >= 0).collect()
            };
            for p in partitions {
                scope.insert((Arc::clone(&shared), p));
            }
        }
        scope
    }

    /// Where `to` puts one partition: `Err` when the history cannot say.
    fn reset_target(
        &self,
        to: &ResetTo,
        topic: &str,
        partition: i32,
        current: Option<&CommittedOffset>,
    ) -> Result<Target, ()> {
        let log = self.log(topic, partition);
        let from_entry = |e: &super::history::Entry| -> Target {
            (e.offset >= 0).then(|| CommittedOffset {
                offset: e.offset,
                metadata: e.metadata.as_deref().map(str::to_owned),
                commit_timestamp_ms: e.at_ms,
            })
        };
        match *to {
            ResetTo::Time { at_ms } => {
                let Some(log) = log else {
                    return Err(());
                };
                match log.entries.iter().rev().find(|e| e.at_ms <= at_ms) {
                    Some(e) => Ok(from_entry(e)),
                    // Nothing committed yet at that time, if the history is whole.
                    None if log.complete() => Ok(None),
                    None => Err(()),
                }
            }
            ResetTo::EarliestRecorded => log
                .and_then(|l| l.entries.iter().find(|e| e.offset >= 0))
                .map(|e| Ok(from_entry(e)))
                .unwrap_or(Err(())),
            ResetTo::ShiftBy { delta } => {
                let current = current.ok_or(())?;
                Ok(Some(CommittedOffset {
                    offset: current.offset.saturating_add(delta).max(0),
                    ..current.clone()
                }))
            }
            ResetTo::Offset { offset } => Ok(Some(CommittedOffset {
                offset,
                metadata: current.and_then(|c| c.metadata.clone()),
                commit_timestamp_ms: 0,
            })),
        }
    }

    /// Why a reset is refused while the group has members: who they are.
    fn members_named(&self) -> String {
        let mut ids: Vec<&str> = self.members.keys().map(|id| &**id).collect();
        if let Some(part) = self.consumer.as_deref() {
            ids.extend(part.members.keys().map(|id| &**id));
        }
        ids.sort_unstable();
        let shown: Vec<&str> = ids.iter().take(NAMED_MEMBERS).copied().collect();
        let more = ids.len() - shown.len();
        format!(
            "group {} is {} with {} member(s): {}{}; offsets can be reset only when it is \
             Empty (stop its consumers first)",
            self.group_id,
            self.state,
            ids.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
        )
    }
}
