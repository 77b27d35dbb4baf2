//! Ownership epochs as fencing tokens, against the real server: the sink of docs/offsets.md
//! (the code between the `docs/offsets.md` markers below is the guide's, word for word; the
//! last test checks it) keeps the epoch beside its data and refuses a write that carries an
//! older one.
//!
//! Two members: the first owns both partitions and writes; then it stalls (a long GC pause, a
//! frozen VM: its heartbeats stop — here its member is dropped without leaving), its session
//! expires and its partitions move to the second, which claims them in the sink with their
//! new, higher epochs. The first one's late write, with the epoch it owned the partition with,
//! is refused; the new owner's writes go on.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use muster_client::{Event, Events, MemberConfig, TopicPartition};

// BEGIN docs/offsets.md sink
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Keeps, beside each partition's data, the highest ownership epoch it has seen for the
/// partition, and refuses a write that carries an older one. In a database the epoch is a
/// column of the partition's row, checked and set in the transaction that writes the data
/// (`UPDATE ... SET epoch = $1, ... WHERE partition = $2 AND epoch <= $1`).
#[derive(Debug, Default)]
pub struct FencedSink {
    partitions: Mutex<HashMap<TopicPartition, Stored>>,
}

#[derive(Debug, Default)]
struct Stored {
    epoch: i32,
    records: Vec<String>,
}

/// A refused write: `tp` belongs to the owner with epoch `current` now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fenced {
    pub tp: TopicPartition,
    pub epoch: i32,
    pub current: i32,
}

impl FencedSink {
    /// The new owner of `tp` (on `Event::Assigned`): older epochs are refused from now on,
    /// even before it writes anything.
    pub fn claim(&self, tp: &TopicPartition, epoch: i32) -> Result<(), Fenced> {
        self.store(tp, epoch, None)
    }

    /// Appends `record` to `tp`'s data, unless a newer owner has claimed `tp`.
    pub fn write(&self, tp: &TopicPartition, epoch: i32, record: &str) -> Result<(), Fenced> {
        self.store(tp, epoch, Some(record))
    }

    fn store(&self, tp: &TopicPartition, epoch: i32, record: Option<&str>) -> Result<(), Fenced> {
        let mut partitions = self
            .partitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let stored = partitions.entry(tp.clone()).or_default();
        if epoch < stored.epoch {
            let current = stored.epoch;
            return Err(Fenced {
                tp: tp.clone(),
                epoch,
                current,
            });
        }
        stored.epoch = epoch;
        stored.records.extend(record.map(str::to_owned));
        Ok(())
    }

    pub fn records(&self, tp: &TopicPartition) -> Vec<String> {
        let partitions = self
            .partitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        partitions
            .get(tp)
            .map(|s| s.records.clone())
            .unwrap_or_default()
    }
}
// END docs/offsets.md sink

/// Waits for `Assigned` events until the member has been given all of `wanted`; returns the
/// ownership epochs they came with.
async fn assigned(events: &mut Events, wanted: &[TopicPartition]) -> BTreeMap<TopicPartition, i32> {
    let mut epochs = BTreeMap::new();
    while !wanted.iter().all(|tp| epochs.contains_key(tp)) {
        let event = tokio::time::timeout(PATIENCE, events.recv())
            .await
            .expect("an event in time")
            .expect("the member goes on");
        match event {
            Event::Assigned(added) => {
                for tp in added.iter() {
                    let epoch = added
                        .ownership_epoch(tp)
                        .expect("Assigned carries the epoch");
                    epochs.insert(tp.clone(), epoch);
                }
            }
            Event::Revoked(gone) | Event::Lost(gone) => {
                for tp in gone.iter() {
                    epochs.remove(tp);
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    epochs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_out_member_cannot_overwrite_its_successors_work() {
    let server = start_server();
    create_topic(&server, "orders", 2).await;
    let all: Vec<TopicPartition> = partitions("orders", 2).into_iter().collect();
    let config = || -> MemberConfig { fast_member("sink", &["orders"], "range") };
    let sink = FencedSink::default();

    // The first member owns both partitions; it claims them and writes.
    let (first, mut first_events) = config().start(connect(&server, "first").await).unwrap();
    let first_epochs = assigned(&mut first_events, &all).await;
    for (tp, &epoch) in &first_epochs {
        assert_eq!(first.ownership_epoch(tp), Some(epoch));
        sink.claim(tp, epoch).unwrap();
        sink.write(tp, epoch, "first: 1").unwrap();
    }

    // It stalls: no more heartbeats. Its session expires and the second takes over.
    drop(first);
    drop(first_events);
    let (second, mut second_events) = config().start(connect(&server, "second").await).unwrap();
    let second_epochs = assigned(&mut second_events, &all).await;
    for (tp, &epoch) in &second_epochs {
        assert!(
            epoch > first_epochs[tp],
            "{tp}: {epoch} after {}",
            first_epochs[tp]
        );
        sink.claim(tp, epoch).unwrap();
    }

    // The first one wakes up and finishes its batch: refused, on every partition.
    for (tp, &epoch) in &first_epochs {
        assert_eq!(
            sink.write(tp, epoch, "first: 2 (late)"),
            Err(Fenced {
                tp: tp.clone(),
                epoch,
                current: second_epochs[tp],
            })
        );
    }
    // The new owner's writes go on.
    for (tp, &epoch) in &second_epochs {
        sink.write(tp, epoch, "second: 1").unwrap();
        assert_eq!(sink.records(tp), ["first: 1", "second: 1"]);
    }
    // Asked again, the server says the same.
    assert_eq!(
        second.fetch_ownership_epochs().await.unwrap(),
        second_epochs
    );
    second.close().await.unwrap();
}

/// docs/offsets.md shows the sink above, word for word.
#[test]
fn the_guide_shows_this_sink() {
    let this = include_str!("fencing_sink.rs");
    let guide = include_str!("../../../docs/offsets.md");
    let between = |text: &'static str, begin: &str, end: &str| -> &'static str {
        let start = text.find(begin).expect("begin marker") + begin.len();
        let stop = text[start..].find(end).expect("end marker");
        text[start..start + stop].trim()
    };
    let sink = between(
        this,
        "// BEGIN docs/offsets.md sink\n",
        "// END docs/offsets.md sink",
    );
    let shown = between(
        guide,
        "<!-- BEGIN sink (tests/fencing_sink.rs) -->\n```rust\n",
        "```\n<!-- END sink -->",
    );
    assert_eq!(
        shown, sink,
        "docs/offsets.md and tests/fencing_sink.rs disagree: copy the sink"
    );
}
