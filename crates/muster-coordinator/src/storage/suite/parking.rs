//! The suite's case for startup with parking ([`Store::load_parking`]), run against every
//! backend like the rest: a group that is nothing but data comes as a summary (its record,
//! its oldest commit, its quarantine's size and oldest entry), every other group whole, and
//! the split is what [`summarise`] makes of a full load.

use super::{
    commit, consumer_group, group, offset, put_offsets, put_quarantine, quarantined, Store,
};
use super::{history, put_history, rebalance};
use crate::storage::{summarise, Mutation, ParkedSummary, ParkingLoad, RebalanceRecord};
use crate::types::GroupState;

/// A group whose members all left: Empty, no member, its creator recorded.
fn abandoned(id: &str) -> crate::storage::GroupRecord {
    crate::storage::GroupRecord {
        state: GroupState::Empty,
        leader: None,
        members: Vec::new(),
        state_since_ms: 9_000,
        created_by: Some("alice".into()),
        ..group(id, 4)
    }
}

/// The same load with its summaries in group id order.
fn sorted(mut load: ParkingLoad) -> ParkingLoad {
    load.parked.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    load
}

pub fn load_parking_summarises_groups_with_nothing_but_data(store: &dyn Store) {
    let journal: Vec<RebalanceRecord> = vec![rebalance(3)];
    commit(
        store,
        vec![
            // Members: loaded whole, with everything it has.
            Mutation::PutGroup(group("busy", 3)),
            put_offsets("busy", vec![offset("a", 0, 1)]),
            put_history("busy", vec![history("a", 0, 1)], Vec::new()),
            Mutation::PutRebalances {
                group_id: "busy".into(),
                entries: journal.clone(),
                dropped: Vec::new(),
            },
            // A consumer group with members: whole too.
            Mutation::PutGroup(consumer_group("consumer", 7)),
            // Its members left: a summary, its journal and history not read.
            Mutation::PutGroup(abandoned("left")),
            put_offsets("left", vec![offset("a", 0, 30), offset("b", 1, 20)]),
            put_history("left", vec![history("a", 0, 2)], Vec::new()),
            Mutation::PutRebalances {
                group_id: "left".into(),
                entries: vec![rebalance(4)],
                dropped: Vec::new(),
            },
            // Simple commits, never a record.
            put_offsets("simple", vec![offset("c", 2, 40)]),
            // Everything in the quarantine; nothing but history.
            put_quarantine(
                "quarantined",
                vec![quarantined("a", 0, 1, 300), quarantined("a", 1, 2, 200)],
            ),
            put_history("history-only", vec![history("z", 0, 5)], Vec::new()),
        ],
    );
    let loaded = sorted(store.load_parking().expect("loads"));
    let ids: Vec<&str> = loaded.state.groups.iter().map(|g| &*g.group_id).collect();
    assert_eq!(ids, ["busy", "consumer"]);
    assert_eq!(
        loaded.state.offsets,
        vec![("busy".to_owned(), vec![offset("a", 0, 1)])]
    );
    assert_eq!(
        loaded.state.history,
        vec![("busy".to_owned(), vec![history("a", 0, 1)])]
    );
    assert_eq!(loaded.state.journals, vec![("busy".to_owned(), journal)]);
    assert!(loaded.state.quarantine.is_empty());
    let bare = |id: &str| ParkedSummary {
        group_id: id.into(),
        record: None,
        oldest_commit: None,
        quarantined: 0,
        oldest_quarantined: None,
    };
    assert_eq!(
        loaded.parked,
        vec![
            bare("history-only"),
            ParkedSummary {
                record: Some(abandoned("left")),
                // `offset` commits offset n at 5 000 + n.
                oldest_commit: Some(5_020),
                ..bare("left")
            },
            ParkedSummary {
                quarantined: 2,
                oldest_quarantined: Some(200),
                ..bare("quarantined")
            },
            ParkedSummary {
                oldest_commit: Some(5_040),
                ..bare("simple")
            },
        ]
    );
    // A backend's own split is the summary of its full load.
    let full = sorted(summarise(store.load().expect("loads")));
    assert_eq!(loaded, full);
}
