//! Computing a target assignment without blocking other groups (issue #21: a 1 000-member,
//! 10 000-partition target must never hold up other groups' requests). A group actor shares its
//! thread with many others, so a large computation does not run on the group's turn: the engine
//! hands the shell an `AssignmentJob` (defined with the other effects, `../effects.rs`) — a snapshot of the members' subscriptions, the
//! partition counts and the current targets — that the shell runs on a blocking thread, and
//! hands the [`ComputedTarget`] back with [`Group::target_computed`]. Meanwhile the group is
//! `Assigning`: members keep reconciling toward the previous target (as in Kafka 4, whose
//! coordinator also assigns asynchronously). Changes made while a job runs are taken up by one
//! more job when it returns. A small group (members × partitions up to
//! `ConsumerConfig::inline_assignment_limit`) is assigned at once, on its turn: a job's round
//! trip would cost it more than the computation.

use super::target::run_assignor;
use crate::engine::effects::{AssignmentJob, ComputedTarget};
use crate::engine::{Ctx, Effects, Event, Group};

impl AssignmentJob {
    /// The group epoch the target is for.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// How much work it is: members × partitions.
    pub fn work(&self) -> usize {
        let partitions: usize = self.counts.values().map(|&c| c.max(0) as usize).sum();
        self.members.len().saturating_mul(partitions)
    }

    /// Runs the assignor.
    pub fn run(self) -> ComputedTarget {
        let target = run_assignor(&self.assignor, &self.members, &self.counts, &self.current);
        ComputedTarget {
            epoch: self.epoch,
            assignor: self.assignor,
            target,
        }
    }
}

impl<R> Group<R> {
    /// Starts computing the target at the group epoch, unless a job is already out (its return
    /// starts the next one).
    pub(in crate::engine) fn start_assignment(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let epoch = self.generation;
        let default = self.config.consumer.default_assignor.clone();
        let inline_limit = self.config.consumer.inline_assignment_limit;
        let Some(part) = self.consumer.as_deref_mut() else {
            return;
        };
        if part.assigning.is_some() || part.assignment_epoch >= epoch {
            return;
        }
        let assignor = part.choose_assignor(&default);
        let (members, counts) = part.subscriptions(cx.topics);
        let current = part
            .members
            .values()
            .map(|m| (m.member_id.to_string(), m.target.clone()))
            .collect();
        let job = AssignmentJob {
            epoch,
            assignor,
            members,
            counts,
            current,
        };
        if job.work() <= inline_limit {
            let computed = job.run();
            self.apply_target(cx, computed, out);
        } else {
            part.assigning = Some(epoch);
            out.assignment = Some(job);
        }
    }

    /// A job's target is back (from the shell, any time later): the members get their shares,
    /// and the next job starts if the group changed meanwhile. A result the group no longer
    /// waits for (it was reloaded from storage, or deleted) is dropped.
    pub fn target_computed(&mut self, cx: Ctx<'_>, computed: ComputedTarget) -> Effects<R> {
        let mut out = Effects::default();
        let waited = self
            .consumer
            .as_deref()
            .is_some_and(|p| p.assigning == Some(computed.epoch));
        if waited {
            if let Some(part) = self.consumer.as_deref_mut() {
                part.assigning = None;
            }
            self.apply_target(cx, computed, &mut out);
            self.start_assignment(cx, &mut out);
            self.refresh_consumer_state(cx.now);
        }
        self.seal(out)
    }

    /// The job for `epoch` will not come back (the shell's thread running it failed): the
    /// group no longer waits for it, and its next heartbeat or tick starts another.
    pub fn target_failed(&mut self, epoch: i32) {
        if let Some(part) = self.consumer.as_deref_mut() {
            if part.assigning == Some(epoch) {
                part.assigning = None;
            }
        }
    }

    /// Whether a target is behind the group epoch with no job out for it (after a restart or a
    /// reload): the next call starts one.
    pub(in crate::engine) fn resume_assignment(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let behind = self
            .consumer
            .as_deref()
            .is_some_and(|p| p.assigning.is_none() && p.assignment_epoch < self.generation);
        if behind {
            self.start_assignment(cx, out);
        }
    }

    /// Hands each member its share of `computed`, and journals it.
    fn apply_target(&mut self, cx: Ctx<'_>, computed: ComputedTarget, out: &mut Effects<R>) {
        let before = self.targets();
        let Some(part) = self.consumer.as_deref_mut() else {
            return;
        };
        let ComputedTarget {
            epoch,
            assignor,
            mut target,
        } = computed;
        let mut moved = 0usize;
        for m in part.members.values_mut() {
            // A member that joined after the snapshot has no share yet: the next job gives it one.
            let share = target.remove(&*m.member_id).unwrap_or_default();
            moved += share
                .iter()
                .map(|(t, ps)| {
                    let had = m.target.get(t);
                    ps.iter()
                        .filter(|p| !had.is_some_and(|h| h.contains(p)))
                        .count()
                })
                .sum::<usize>();
            m.target = share;
        }
        part.assignor = assignor.clone();
        part.assignment_epoch = epoch;
        // What waiting members wait for may have changed.
        part.released = true;
        // The first change the target covers is what the journal names (the others it covers
        // are dropped with it); none noted: a target behind the epoch after a restart or a
        // reload.
        let mut first = None;
        while part
            .pending_causes
            .front()
            .is_some_and(|(e, _, _)| *e <= epoch)
        {
            let taken = part.pending_causes.pop_front();
            first = first.or(taken.map(|(_, cause, since)| (cause, since)));
        }
        let (cause, since) = first.unwrap_or_else(|| {
            let cause = muster_protocol::RebalanceCause {
                kind: crate::engine::journal::kind::COORDINATOR_RESTART.to_owned(),
                ..Default::default()
            };
            (cause, cx.now)
        });
        let trigger = super::journal::static_kind(&cause.kind);
        out.persist = true;
        out.events.push(Event::TargetAssigned {
            epoch,
            members: part.members.len(),
            assignor,
            moved,
            trigger,
        });
        self.journal_epoch(epoch, cause, since, &before);
    }
}
