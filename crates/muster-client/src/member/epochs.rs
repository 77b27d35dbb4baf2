//! The ownership epochs a member knows (protocol §6.23): one per partition it owns, the
//! fencing token the server gave the partition when this member became its owner. It rises
//! each time the partition gets another owner and is never reused in the group, so a sink
//! that stores it beside its data can refuse a write that carries an older one: a member that
//! lost the partition (a zombie) cannot overwrite its successor's work.
//!
//! The membership tasks ask OwnershipEpochs after every assignment — classic: after a
//! SyncGroup that succeeded, before the assignment is applied and
//! [`Event::Assigned`](super::Event::Assigned) emitted; consumer protocol: before each
//! `Assigned` of new partitions — whenever a partition of it has no epoch yet, and keep the
//! answer in the [`OwnershipBook`] shared with the handle. Failing to ask changes nothing
//! else: the failure is logged at debug level, the partitions simply have no epoch until the
//! next assignment or [`GroupMember::fetch_ownership_epochs`](super::GroupMember::fetch_ownership_epochs).
//!
//! An epoch stays valid for as long as the member owns its partition without interruption
//! (the server keeps a present owner's epoch across generations); it is forgotten the moment
//! the partition leaves the member's owned set. The book's *version* counts those departures,
//! so an answer asked before one (which may describe a tenure since ended) is not kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use muster_protocol::{OwnershipEpochsRequest, Response, TopicEpochs};

use super::route::RouteView;
use crate::error::ClientError;
use crate::partition::TopicPartition;

/// The epochs of the partitions a member owns, shared by its task (which changes what it owns)
/// and its handle (which reads them, and may ask the server again).
#[derive(Debug, Default)]
pub(crate) struct OwnershipBook {
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    /// What the member owns now, in its own view.
    owned: BTreeSet<TopicPartition>,
    /// Known epochs, of owned partitions only.
    epochs: BTreeMap<TopicPartition, i32>,
    /// Bumped whenever a partition leaves `owned`.
    version: u64,
}

impl OwnershipBook {
    fn lock(&self) -> MutexGuard<'_, Book> {
        // Every change is a few map operations that leave the book consistent if one panics.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The member owns `owned` from now on: epochs of partitions it no longer owns are
    /// forgotten (and answers asked before now are no longer kept).
    pub(crate) fn set_owned<'a>(&self, owned: impl IntoIterator<Item = &'a TopicPartition>) {
        let owned: BTreeSet<TopicPartition> = owned.into_iter().cloned().collect();
        let mut book = self.lock();
        if book.owned.iter().any(|tp| !owned.contains(tp)) {
            book.version += 1;
        }
        book.epochs.retain(|tp, _| owned.contains(tp));
        book.owned = owned;
    }

    pub(crate) fn version(&self) -> u64 {
        self.lock().version
    }

    /// Whether some of `partitions` has no known epoch.
    pub(crate) fn missing<'a>(
        &self,
        mut partitions: impl Iterator<Item = &'a TopicPartition>,
    ) -> bool {
        let book = self.lock();
        partitions.any(|tp| !book.epochs.contains_key(tp))
    }

    /// Keeps the epochs of the task's own answer for the owned partitions: asked in the
    /// generation (epoch) whose assignment the task applies, with nothing lost since.
    pub(crate) fn accept(&self, topics: &[TopicEpochs]) {
        let mut book = self.lock();
        for t in topics {
            for p in &t.partitions {
                let tp = TopicPartition::new(t.topic.clone(), p.partition);
                if book.owned.contains(&tp) {
                    book.epochs.insert(tp, p.epoch);
                }
            }
        }
    }

    /// Keeps the epochs of an answer asked at `version`, for the partitions still owned;
    /// returns `false` (keeping nothing) when a partition left the owned set meanwhile.
    pub(crate) fn record(&self, version: u64, topics: &[TopicEpochs]) -> bool {
        if self.lock().version != version {
            return false;
        }
        // The lock is taken twice, but only the handle records this way, and only the task
        // changes what is owned: between the two, nothing can have left.
        self.accept(topics);
        true
    }

    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<i32> {
        self.lock().epochs.get(tp).copied()
    }

    /// Every known epoch.
    pub(crate) fn snapshot(&self) -> BTreeMap<TopicPartition, i32> {
        self.lock().epochs.clone()
    }

    /// The known epochs of `partitions`.
    pub(crate) fn of<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> BTreeMap<TopicPartition, i32> {
        let book = self.lock();
        partitions
            .into_iter()
            .filter_map(|tp| book.epochs.get(tp).map(|&e| (tp.clone(), e)))
            .collect()
    }
}

/// The epochs of an OwnershipEpochs answer, or its error.
pub(crate) fn parse(group_id: &str, response: Response) -> Result<Vec<TopicEpochs>, ClientError> {
    let Response::OwnershipEpochs(answer) = response else {
        return Err(ClientError::Unexpected(response.name()));
    };
    ClientError::check(answer.error_code, || {
        format!("OwnershipEpochs group {group_id}")
    })?;
    Ok(answer.topics)
}

/// A membership task asks the ownership epochs of what it owns (or is about to own). One
/// attempt within `timeout`, on the coordinator's connection as it is (a lost coordinator is
/// the heartbeat's to find); `None` on failure, logged at debug level: the member goes on
/// without them.
pub(super) async fn ask(
    route: &mut RouteView,
    request: OwnershipEpochsRequest,
    timeout: Duration,
) -> Option<Vec<TopicEpochs>> {
    let (group_id, generation) = (request.group_id.clone(), request.generation_id);
    let result = route
        .connection()
        .send_once(request, timeout)
        .await
        .and_then(|response| parse(&group_id, response));
    match result {
        Ok(topics) => Some(topics),
        Err(err) => {
            tracing::debug!(%group_id, generation, error = %err, "cannot read the ownership epochs; going on without them");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::PartitionEpoch;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn answer(epochs: &[(i32, i32)]) -> Vec<TopicEpochs> {
        vec![TopicEpochs {
            topic: "t".into(),
            partitions: epochs
                .iter()
                .map(|&(partition, epoch)| PartitionEpoch { partition, epoch })
                .collect(),
        }]
    }

    #[test]
    fn epochs_are_kept_for_owned_partitions_while_they_stay_owned() {
        let book = OwnershipBook::default();
        book.set_owned(&[tp(0), tp(1)]);
        assert!(book.missing([tp(0)].iter()));
        let v = book.version();
        // An answer naming a partition the member does not own keeps only the owned ones.
        assert!(book.record(v, &answer(&[(0, 3), (1, 4), (2, 9)])));
        assert!(!book.missing([tp(0), tp(1)].iter()));
        assert_eq!(book.get(&tp(1)), Some(4));
        assert_eq!(book.get(&tp(2)), None);
        // Growing keeps what is known; the new partition has none yet.
        book.set_owned(&[tp(0), tp(1), tp(2)]);
        assert_eq!(book.version(), v, "nothing left");
        assert!(book.missing([tp(0), tp(2)].iter()));
        assert_eq!(book.of(&[tp(0), tp(2)]), BTreeMap::from([(tp(0), 3)]));
        // Losing one forgets its epoch, and an answer asked before is not kept.
        book.set_owned(&[tp(0), tp(2)]);
        assert_eq!(book.get(&tp(1)), None);
        assert!(!book.record(v, &answer(&[(2, 5)])));
        assert_eq!(book.get(&tp(2)), None);
        book.accept(&answer(&[(2, 5), (7, 7)]));
        assert_eq!(book.snapshot(), BTreeMap::from([(tp(0), 3), (tp(2), 5)]));
    }
}
