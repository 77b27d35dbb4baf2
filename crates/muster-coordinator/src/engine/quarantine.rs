//! The expiry quarantine (protocol §6.25): offsets past retention are not deleted at once but
//! held for `offsets_quarantine_minutes`, out of OffsetFetch's sight, and dropped only then;
//! OffsetRestore (or a member joining, with `offsets_restore_on_join`) brings them back whole.
//!
//! Retention (`timers.rs`) hands what expired to [`Group::quarantine_expired`]; the group's
//! deadline covers the earliest drop. Moving offsets in and dropping them are best-effort
//! writes, as retention's deletes were: a failed one only means the offsets come back after a
//! restart and expire (or are dropped) again. A restore by command is answered once durable;
//! a restore on join is applied at once (the joining member may fetch before any write of the
//! join is done) and written best-effort: if it fails, the disk still holds the offsets in the
//! quarantine, and the next join after a restart restores them again.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use muster_protocol::{
    ErrorCode, FetchedPartition, FetchedTopic, OffsetRestoreRequest, OffsetRestoreResponse,
    Response,
};

use super::effects::{Effects, PendingAnswer, PendingCommit, Write};
use super::history::{principal_of, Author};
use super::{ClientInfo, Event, Group, Millis, ProcessKeys, NONE};
use crate::access::{Operation, ResourceType};
use crate::config::GroupConfig;
use crate::storage::{CommittedOffset, HistoryKind, Mutation, OffsetWrite, QuarantinedOffset};

impl<R> Group<R> {
    /// Offsets retention took out at `now`: into the quarantine, or, with no grace period,
    /// deleted as before.
    pub(super) fn quarantine_expired(
        &mut self,
        expired: Vec<OffsetWrite>,
        now: Millis,
        out: &mut Effects<R>,
    ) {
        if expired.is_empty() {
            return;
        }
        if self.config.offsets.quarantine_ms == 0 {
            out.events.push(Event::OffsetsExpired {
                partitions: expired.len(),
            });
            out.expired_offsets.extend(
                expired
                    .into_iter()
                    .map(|w| (w.topic.to_string(), w.partition)),
            );
            return;
        }
        let first = self.quarantine.is_empty();
        let moved: Vec<QuarantinedOffset> = expired
            .into_iter()
            .map(|write| QuarantinedOffset {
                write,
                quarantined_at: now,
            })
            .collect();
        // A partition quarantined again (committed and expired since) keeps its newest: one
        // pass over the quarantine, not one per partition (a wide group expires thousands at
        // once).
        let again: HashSet<(&str, i32), ProcessKeys> = moved
            .iter()
            .map(|q| (&*q.write.topic, q.write.partition))
            .collect();
        self.quarantine
            .retain(|held| !again.contains(&(&*held.write.topic, held.write.partition)));
        self.quarantine.extend(moved.iter().cloned());
        out.events.push(Event::OffsetsQuarantined {
            partitions: moved.len(),
            first,
            drop_at: now.saturating_add(self.config.offsets.quarantine_ms),
        });
        self.note_deadline(now.saturating_add(self.config.offsets.quarantine_ms));
        out.quarantined.extend(moved);
    }

    /// When the quarantine next drops something.
    pub(super) fn quarantine_deadline(&self) -> Option<Millis> {
        let oldest = self.quarantine.iter().map(|q| q.quarantined_at).min();
        quarantine_due(&self.config, oldest)
    }

    /// Drops what has been quarantined for the whole grace period.
    pub(super) fn drop_quarantined(&mut self, now: Millis, out: &mut Effects<R>) {
        let grace = self.config.offsets.quarantine_ms;
        let mut dropped = Vec::new();
        self.quarantine.retain(|q| {
            let keep = q.quarantined_at.saturating_add(grace) > now;
            if !keep {
                dropped.push((q.write.topic.to_string(), q.write.partition));
            }
            keep
        });
        if dropped.is_empty() {
            return;
        }
        out.events.push(Event::QuarantineDropped {
            partitions: dropped.len(),
        });
        out.writes
            .push(Write::BestEffort(vec![Mutation::DeleteQuarantine {
                group_id: self.group_id.to_string(),
                partitions: dropped,
            }]));
    }

    /// Offsets a failed restore took out go back, and the group wakes for their drop again (a
    /// tick while they were out armed nothing for them).
    pub(super) fn requarantine(&mut self, offsets: Vec<QuarantinedOffset>) {
        if offsets.is_empty() {
            return;
        }
        self.quarantine.extend(offsets);
        if let Some(at) = self.quarantine_deadline() {
            self.note_deadline(at);
        }
    }

    /// How many partitions the quarantine holds (for the shell's gauges and the dashboard).
    pub fn quarantined_partitions(&self) -> usize {
        self.quarantine.len()
    }

    /// When the quarantine next drops something (for the dashboard).
    pub fn quarantine_drop_at(&self) -> Option<Millis> {
        self.quarantine_deadline()
    }

    /// Whether `q`'s partition got an offset since it was quarantined (a commit, a reset):
    /// the quarantined one is stale, and a restore must not overwrite the newer one.
    fn superseded(&self, q: &QuarantinedOffset) -> bool {
        self.offsets
            .get(&*q.write.topic)
            .is_some_and(|parts| parts.contains_key(&q.write.partition))
    }

    /// The batch that brings `taken` back at `now` by `author`: the offsets committed anew
    /// (retention starts again), out of the quarantine, each with a `restore` history entry.
    /// A superseded partition only leaves the quarantine.
    fn restore_batch(
        &mut self,
        taken: &[QuarantinedOffset],
        now: Millis,
        author: &Author,
    ) -> (
        Vec<Mutation>,
        Vec<OffsetWrite>,
        Vec<crate::storage::HistoryWrite>,
    ) {
        let offsets: Vec<OffsetWrite> = taken
            .iter()
            .filter(|q| !self.superseded(q))
            .map(|q| OffsetWrite {
                topic: Arc::clone(&q.write.topic),
                partition: q.write.partition,
                committed: CommittedOffset {
                    commit_timestamp_ms: now,
                    ..q.write.committed.clone()
                },
            })
            .collect();
        let (history, trim) = self.plan_history(
            offsets.iter().map(|w| {
                (
                    &w.topic,
                    w.partition,
                    w.committed.offset,
                    w.committed.metadata.as_ref(),
                )
            }),
            HistoryKind::Restore,
            now,
            author,
        );
        let group_id = self.group_id.to_string();
        let mut batch = Vec::with_capacity(3);
        if !offsets.is_empty() {
            batch.push(Mutation::PutOffsets {
                group_id: group_id.clone(),
                offsets: offsets.clone(),
            });
        }
        batch.push(Mutation::DeleteQuarantine {
            group_id: group_id.clone(),
            partitions: taken
                .iter()
                .map(|q| (q.write.topic.to_string(), q.write.partition))
                .collect(),
        });
        if !history.is_empty() {
            batch.push(Mutation::PutHistory {
                group_id,
                entries: history.clone(),
                trim,
            });
        }
        // Commits' entries held back go first (`history.rs`).
        if let Some(unwritten) = self.take_unwritten_history() {
            batch.insert(0, unwritten);
        }
        (batch, offsets, history)
    }

    /// A member joining at `now` gets the quarantined offsets back first (with
    /// `offsets_restore_on_join`): applied at once, written best-effort. Returns what the
    /// rebalance's journal entry says of it.
    pub(super) fn restore_on_join(
        &mut self,
        now: Millis,
        member_id: &Arc<str>,
        client: &ClientInfo,
        out: &mut Effects<R>,
    ) -> Option<String> {
        if self.quarantine.is_empty() || !self.config.offsets.restore_on_join {
            return None;
        }
        let taken = std::mem::take(&mut self.quarantine);
        let author = Author {
            member_id: Arc::clone(member_id),
            client_id: Arc::clone(&client.client_id),
            client_host: Arc::clone(&client.client_host),
            generation: -1,
        };
        let (batch, offsets, history) = self.restore_batch(&taken, now, &author);
        let restored = offsets.len();
        self.apply_offsets(offsets);
        self.apply_history(history);
        out.writes.push(Write::BestEffort(batch));
        if restored == 0 {
            return None;
        }
        out.events.push(Event::OffsetsRestored {
            partitions: restored,
            by: "join",
        });
        Some(format!(
            "{restored} quarantined offsets restored for the joining member"
        ))
    }

    /// OffsetRestore (protocol §6.25): lists the quarantine, or (`execute`) brings it back
    /// whole, answered once durable. `delete` on the group to execute, `read` on every topic
    /// (a topic the principal may not read is answered TOPIC_AUTHORIZATION_FAILED and stays).
    pub fn restore_offsets(
        &mut self,
        now: Millis,
        req: OffsetRestoreRequest,
        client: &ClientInfo,
        reply: R,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let access = &client.access;
        let mut response = self.quarantine_view(access);
        if !req.execute {
            out.reply(reply, Response::OffsetRestore(response));
            return self.seal(out);
        }
        if !access.allows(ResourceType::Group, &self.group_id, Operation::Delete) {
            out.reply(
                reply,
                Response::OffsetRestore(OffsetRestoreResponse {
                    error_code: ErrorCode::GroupAuthorizationFailed.code(),
                    error_message: Some(
                        "restoring offsets needs the delete right on the group".to_owned(),
                    ),
                    ..OffsetRestoreResponse::default()
                }),
            );
            return self.seal(out);
        }
        if self.quarantine.is_empty() {
            out.reply(reply, Response::OffsetRestore(response));
            return self.seal(out);
        }
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.quarantine)
            .into_iter()
            .partition(|q| super::topic_access::may_read(access, &q.write.topic));
        self.quarantine = kept;
        if taken.is_empty() {
            out.reply(reply, Response::OffsetRestore(response));
            return self.seal(out);
        }
        let author = Author {
            member_id: principal_of(access),
            client_id: Arc::clone(&client.client_id),
            client_host: Arc::clone(&client.client_host),
            generation: -1,
        };
        let (batch, offsets, history) = self.restore_batch(&taken, now, &author);
        response.executed = true;
        self.count_commit(true);
        if !offsets.is_empty() {
            out.events.push(Event::OffsetsRestored {
                partitions: offsets.len(),
                by: "command",
            });
        }
        out.writes.push(Write::Commit {
            batch,
            commit: PendingCommit {
                reply: Some(reply),
                answer: PendingAnswer::Restore(response),
                offsets,
                removed: Vec::new(),
                history,
                history_deferred: None,
                unquarantined: taken,
                records_owner: false,
            },
        });
        self.seal(out)
    }

    /// What the quarantine holds, as OffsetRestore shows it: a topic `access` may not read
    /// shows TOPIC_AUTHORIZATION_FAILED and no offsets.
    fn quarantine_view(&self, access: &crate::access::Access) -> OffsetRestoreResponse {
        let mut topics: BTreeMap<&str, Vec<FetchedPartition>> = BTreeMap::new();
        for q in self.quarantine.iter().filter(|q| !self.superseded(q)) {
            let readable = super::topic_access::may_read(access, &q.write.topic);
            topics.entry(&q.write.topic).or_default().push(if readable {
                FetchedPartition {
                    partition: q.write.partition,
                    offset: q.write.committed.offset,
                    metadata: q.write.committed.metadata.clone(),
                    error_code: NONE,
                }
            } else {
                FetchedPartition {
                    partition: q.write.partition,
                    offset: -1,
                    metadata: None,
                    error_code: ErrorCode::TopicAuthorizationFailed.code(),
                }
            });
        }
        let oldest = self.quarantine.iter().map(|q| q.quarantined_at).min();
        OffsetRestoreResponse {
            error_code: NONE,
            error_message: None,
            executed: false,
            quarantined_at_ms: oldest.unwrap_or(0),
            drop_at_ms: self.quarantine_deadline().unwrap_or(0),
            topics: topics
                .into_iter()
                .map(|(topic, mut partitions)| {
                    partitions.sort_unstable_by_key(|p| p.partition);
                    FetchedTopic {
                        topic: topic.to_owned(),
                        partitions,
                    }
                })
                .collect(),
        }
    }
}

/// When a quarantine whose oldest offset was quarantined at `oldest` next drops something
/// (`None`: an empty quarantine). Shared with the deadline of a group loaded parked
/// (`park.rs`).
pub(super) fn quarantine_due(config: &GroupConfig, oldest: Option<Millis>) -> Option<Millis> {
    oldest.map(|at| at.saturating_add(config.offsets.quarantine_ms))
}
