//! Turns histories into what the rules compare: tenures (who owned which partition, with
//! which ownership epoch, from when to when) and acknowledged commits.

use std::collections::BTreeMap;

use crate::history::{Event, History, Outcome, RunRecord};

/// How a tenure ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `Revoked` handled: an orderly hand-over.
    Revoked,
    /// `Lost`, or a commit refused PARTITION_NOT_OWNED: the member learnt it had lost it.
    Lost,
    /// The process was SIGKILLed, or stopped by itself.
    Died,
    /// Still owned when the history ends without a recorded death (the runner's record is
    /// missing the kill): counted as owned until the run stopped.
    Open,
}

/// One partition owned by one member incarnation, from `start` (its `Assigned` arrived) to
/// `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenure {
    /// Index of the history in the checked slice.
    pub history: usize,
    /// "group/worker#incarnation".
    pub who: String,
    pub worker: String,
    pub member_id: String,
    pub partition: i32,
    pub epoch: i32,
    pub generation: i32,
    pub start: u64,
    pub end: u64,
    pub how: End,
}

/// One partition's offset in an acknowledged commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    pub who: String,
    pub member_id: String,
    pub generation: i32,
    pub partition: i32,
    pub offset: i64,
    pub epoch: i32,
    pub sent: u64,
    pub done: u64,
}

/// A group's tenures and acknowledged commits, per partition.
#[derive(Debug, Default)]
pub struct GroupView {
    pub tenures: BTreeMap<i32, Vec<Tenure>>,
    pub acked: BTreeMap<i32, Vec<Acked>>,
    pub commits_failed: usize,
    pub not_owned: usize,
}

/// Builds the view of `group` from the histories of its incarnations.
pub fn group_view(group: &str, histories: &[History], record: &RunRecord) -> GroupView {
    let mut view = GroupView::default();
    for (index, h) in histories.iter().enumerate() {
        if h.group != group {
            continue;
        }
        let killed = record
            .killed
            .iter()
            .find(|k| k.group == h.group && k.worker == h.worker && k.incarnation == h.incarnation)
            .map(|k| k.t);
        let mut open: BTreeMap<i32, Tenure> = BTreeMap::new();
        let mut close = |open: &mut BTreeMap<i32, Tenure>, p: i32, t: u64, how: End| {
            if let Some(mut tenure) = open.remove(&p) {
                tenure.end = t;
                tenure.how = how;
                view.tenures.entry(p).or_default().push(tenure);
            }
        };
        let mut died = None;
        for event in &h.events {
            match event {
                Event::Assigned {
                    t,
                    member_id,
                    generation,
                    partitions,
                } => {
                    for &(p, epoch) in partitions {
                        // Assigned again while owned: the old tenure ends here.
                        close(&mut open, p, *t, End::Revoked);
                        open.insert(
                            p,
                            Tenure {
                                history: index,
                                who: h.name(),
                                worker: h.worker.clone(),
                                member_id: member_id.clone(),
                                partition: p,
                                epoch,
                                generation: *generation,
                                start: *t,
                                end: u64::MAX,
                                how: End::Open,
                            },
                        );
                    }
                }
                Event::Revoked { t, partitions, .. } => {
                    for &p in partitions {
                        close(&mut open, p, *t, End::Revoked);
                    }
                }
                Event::Lost { t, partitions, .. } => {
                    for &p in partitions {
                        close(&mut open, p, *t, End::Lost);
                    }
                }
                Event::Commit {
                    sent,
                    done,
                    member_id,
                    generation,
                    offsets,
                    outcome,
                } => match outcome {
                    Outcome::Acked => {
                        for entry in offsets {
                            view.acked.entry(entry.partition).or_default().push(Acked {
                                who: h.name(),
                                member_id: member_id.clone(),
                                generation: *generation,
                                partition: entry.partition,
                                offset: entry.offset,
                                epoch: entry.epoch,
                                sent: *sent,
                                done: *done,
                            });
                        }
                    }
                    Outcome::NotOwned(refused) => {
                        view.not_owned += refused.len();
                        for &p in refused {
                            close(&mut open, p, *done, End::Lost);
                        }
                    }
                    Outcome::Failed(_) => view.commits_failed += 1,
                },
                Event::Exit { t, .. } => died = Some(*t),
                Event::Start { .. } | Event::Member { .. } => {}
            }
        }
        let (t, how) = match (died, killed) {
            (Some(t), _) | (None, Some(t)) => (t, End::Died),
            (None, None) => (record.stopped, End::Open),
        };
        let rest: Vec<i32> = open.keys().copied().collect();
        for p in rest {
            close(&mut open, p, t, how);
        }
    }
    for tenures in view.tenures.values_mut() {
        tenures.sort_by_key(|t| (t.start, t.epoch));
    }
    for acked in view.acked.values_mut() {
        acked.sort_by_key(|a| (a.done, a.sent));
    }
    view
}
