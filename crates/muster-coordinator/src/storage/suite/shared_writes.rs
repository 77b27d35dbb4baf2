//! The suite's cases for the writes other nodes may race (`storage/shared.rs`), as every
//! backend must do them when no other node interferes: catalog changes planned against what
//! the store holds are all written. (Quota charges are kept by the etcd store only: its own
//! tests, `muster-etcd`'s `store/shared_tests.rs`, cover them.)

use super::{block_on, commit, load, topic, Store};
use crate::storage::{Mutation, TopicChange};

pub fn planned_topic_changes_are_written(store: &dyn Store) {
    commit(store, vec![Mutation::PutTopic(topic("orders", 3))]);
    let outcome = block_on(store.put_topics(vec![
        TopicChange {
            topic: topic("audit", 2),
            based_on: None,
        },
        TopicChange {
            topic: topic("orders", 5),
            based_on: Some(3),
        },
    ]))
    .expect("the changes are durable");
    assert!(!outcome.conflicted, "{outcome:?}");
    assert!(outcome.found.is_empty(), "{outcome:?}");
    assert_eq!(outcome.written, vec![topic("audit", 2), topic("orders", 5)]);
    assert_eq!(
        load(store).topics,
        vec![topic("audit", 2), topic("orders", 5)]
    );
}
