//! The suite's cases for the writes other nodes may race (`storage/shared.rs`), as every
//! backend must do them when no other node interferes: catalog changes planned against what
//! the store holds are all written, and a charge of a group's quota unit either is not kept
//! by the store at all or is durable at once when the principal has room.

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

pub fn a_charge_with_room_is_kept_or_left_to_the_node(store: &dyn Store) {
    if let Some(charged) = store.charge_group("g", "alice", Some(1)) {
        block_on(charged).expect("alice has room for one group");
        // Charging the same group again is the unit it holds, not a second one.
        let again = store
            .charge_group("g", "alice", Some(1))
            .expect("a store that charges once charges again");
        block_on(again).expect("the group already holds its unit");
    }
}
