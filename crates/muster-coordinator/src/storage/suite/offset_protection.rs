//! The suite's cases for offset protection (issue #22), run against every backend like the
//! rest: ownership epochs in the group record, offset histories (appended, trimmed, read back
//! in order), the expiry quarantine, what deleting a group removes, and a reset's batch
//! (offsets put and removed, history appended) applied whole or not at all.

use std::sync::Arc;

use super::{
    block_on, commit, consumer_group, group, load, offset, owner, put_offsets, Store, StoreError,
};
use crate::storage::{
    CommittedOffset, HistoryEntry, HistoryKind, HistoryTrim, HistoryWrite, Mutation, OffsetWrite,
    QuarantinedOffset, StoredGroup,
};

/// History entry `seq` of `topic`/`partition`, its fields varied by `seq`: every kind, a
/// removed offset (-1) every fifth entry, metadata on even ones, empty and non-ASCII ids.
pub fn history(topic: &str, partition: i32, seq: u64) -> HistoryWrite {
    let kind = match seq % 3 {
        0 => HistoryKind::Commit,
        1 => HistoryKind::Reset,
        _ => HistoryKind::Restore,
    };
    let even = seq.is_multiple_of(2);
    HistoryWrite {
        topic: topic.into(),
        partition,
        entry: HistoryEntry {
            seq,
            kind,
            offset: if seq % 5 == 4 {
                -1
            } else {
                (seq as i64).wrapping_mul(10)
            },
            metadata: even.then(|| format!("meta-{seq}")),
            at_ms: 1_700_000_000_000u64.wrapping_add(seq),
            member_id: Arc::from(format!("member-ü-{}", seq % 4)),
            client_id: Arc::from(if even { "worker" } else { "" }),
            client_host: Arc::from(if even { "/10.0.0.1" } else { "" }),
            generation: (seq % 1000) as i32 - 1,
        },
    }
}

/// Drop `topic`/`partition`'s history entries below `below_seq`.
pub fn trim(topic: &str, partition: i32, below_seq: u64) -> HistoryTrim {
    HistoryTrim {
        topic: topic.into(),
        partition,
        below_seq,
    }
}

pub fn put_history(group_id: &str, entries: Vec<HistoryWrite>, trim: Vec<HistoryTrim>) -> Mutation {
    Mutation::PutHistory {
        group_id: group_id.into(),
        entries,
        trim,
    }
}

/// `topic`/`partition`'s offset `offset`, quarantined at `at`.
pub fn quarantined(topic: &str, partition: i32, offset: i64, at: u64) -> QuarantinedOffset {
    QuarantinedOffset {
        write: OffsetWrite {
            topic: topic.into(),
            partition,
            committed: CommittedOffset {
                offset,
                metadata: (offset % 2 == 0).then(|| format!("q-{offset}")),
                commit_timestamp_ms: at.saturating_sub(100),
            },
        },
        quarantined_at: at,
    }
}

pub fn put_quarantine(group_id: &str, offsets: Vec<QuarantinedOffset>) -> Mutation {
    Mutation::PutQuarantine {
        group_id: group_id.into(),
        offsets,
    }
}

fn delete_quarantine(group_id: &str, partitions: &[(&str, i32)]) -> Mutation {
    Mutation::DeleteQuarantine {
        group_id: group_id.into(),
        partitions: partitions
            .iter()
            .map(|(topic, partition)| ((*topic).to_owned(), *partition))
            .collect(),
    }
}

/// Ownership epochs survive put, load and a restart; the next record replaces them (an empty
/// map included); a consumer group's come back with its consumer part.
pub fn ownership_epochs_round_trip(store: &dyn Store) {
    let mut owned = group("g", 5);
    owned.ownership = vec![
        owner("orders", 0, 5, "g-m1"),
        owner("orders", 1, 3, "g-m2"),
        owner("payments-ü", 0, i32::MAX, ""),
    ];
    commit(
        store,
        vec![
            Mutation::PutGroup(owned.clone()),
            Mutation::PutGroup(consumer_group("c", 7)),
        ],
    );
    assert_eq!(
        load(store).groups,
        vec![consumer_group("c", 7), owned.clone()]
    );
    assert_eq!(
        store.load_group("g").expect("loads").record,
        Some(owned.clone())
    );

    let mut moved = owned.clone();
    moved.generation = 6;
    moved.ownership[1] = owner("orders", 1, 6, "g-m1");
    let mut cleared = consumer_group("c", 8);
    cleared.ownership.clear();
    commit(
        store,
        vec![
            Mutation::PutGroup(moved.clone()),
            Mutation::PutGroup(cleared.clone()),
        ],
    );
    assert_eq!(load(store).groups, vec![cleared, moved]);
}

/// Entries are appended out of key order across neighbouring keys (partitions 1 and 10,
/// topics `t` and `t2`, groups `g`, `g\u{1}` and `g2`) and read back sorted by topic, partition
/// and seq; a trim drops exactly its partition's entries below `below_seq`, before the entries
/// of its own mutation are appended.
pub fn history_is_appended_trimmed_and_reloaded_in_order(store: &dyn Store) {
    commit(
        store,
        vec![
            put_history(
                "g",
                vec![history("t", 10, 1), history("t", 1, 2), history("t", 1, 1)],
                vec![],
            ),
            put_history("g2", vec![history("t", 1, 1)], vec![]),
            put_history("g\u{1}", vec![history("t", 1, 1)], vec![]),
        ],
    );
    commit(
        store,
        vec![put_history(
            "g",
            vec![
                history("t2", 1, 1),
                history("t", 1, 3),
                history("t", 1, 4),
                history("t", 10, 2),
            ],
            vec![],
        )],
    );
    commit(
        store,
        vec![put_history(
            "g",
            vec![history("t", 1, 5)],
            vec![trim("t", 1, 3)],
        )],
    );
    let g = vec![
        history("t", 1, 3),
        history("t", 1, 4),
        history("t", 1, 5),
        history("t", 10, 1),
        history("t", 10, 2),
        history("t2", 1, 1),
    ];
    assert_eq!(
        load(store).history,
        vec![
            ("g".into(), g.clone()),
            ("g\u{1}".into(), vec![history("t", 1, 1)]),
            ("g2".into(), vec![history("t", 1, 1)]),
        ]
    );
    assert_eq!(store.load_group("g").expect("loads").history, g);

    // Trims go first: an entry below its own mutation's trim stays. A trim up to u64::MAX
    // empties a partition; one of a partition with no history changes nothing.
    commit(
        store,
        vec![put_history(
            "g",
            vec![history("t", 1, 2)],
            vec![
                trim("t", 1, 5),
                trim("t", 10, u64::MAX),
                trim("absent", 0, 9),
            ],
        )],
    );
    let g = vec![history("t", 1, 2), history("t", 1, 5), history("t2", 1, 1)];
    assert_eq!(store.load_group("g").expect("loads").history, g);
    // Trimming every entry of a group leaves it no history at all.
    commit(
        store,
        vec![put_history("g2", vec![], vec![trim("t", 1, u64::MAX)])],
    );
    assert_eq!(
        load(store).history,
        vec![("g".into(), g), ("g\u{1}".into(), vec![history("t", 1, 1)]),]
    );
    assert_eq!(
        store.load_group("g2").expect("loads"),
        StoredGroup::default()
    );
}

/// Quarantined offsets are upserted by partition, deleted by partition (an absent one is no
/// error), read back sorted, and independent of the committed offsets of the same partitions.
pub fn quarantine_is_put_replaced_deleted_and_reloaded(store: &dyn Store) {
    commit(
        store,
        vec![
            put_offsets("g", vec![offset("t", 1, 50)]),
            put_quarantine(
                "g",
                vec![
                    quarantined("u", 0, 7, 100),
                    quarantined("t", 1, 6, 100),
                    quarantined("t", 0, 5, 100),
                ],
            ),
            put_quarantine("g\u{1}", vec![quarantined("t", 0, 1, 1)]),
        ],
    );
    commit(
        store,
        vec![put_quarantine("g", vec![quarantined("t", 1, 9, 200)])],
    );
    commit(
        store,
        vec![delete_quarantine("g", &[("t", 0), ("never", 3)])],
    );
    let g = vec![quarantined("t", 1, 9, 200), quarantined("u", 0, 7, 100)];
    let state = load(store);
    assert_eq!(
        state.quarantine,
        vec![
            ("g".into(), g.clone()),
            ("g\u{1}".into(), vec![quarantined("t", 0, 1, 1)]),
        ]
    );
    assert_eq!(state.offsets, vec![("g".into(), vec![offset("t", 1, 50)])]);
    assert_eq!(store.load_group("g").expect("loads").quarantine, g);

    commit(store, vec![delete_quarantine("g", &[("t", 1), ("u", 0)])]);
    assert_eq!(
        load(store).quarantine,
        vec![("g\u{1}".into(), vec![quarantined("t", 0, 1, 1)])]
    );
    assert_eq!(store.load_group("g").expect("loads").quarantine, vec![]);
}

/// Deleting a group deletes its history and its quarantine (also for a group with no record),
/// and nothing of the groups beside it in key order.
pub fn delete_group_removes_its_history_and_quarantine_and_no_others(store: &dyn Store) {
    let ids = ["f", "g", "g\0", "g ", "g2", "h", "no-record"];
    for id in ids {
        let mut batch = vec![
            put_history(id, vec![history("t", 0, 1), history("t", 0, 2)], vec![]),
            put_quarantine(id, vec![quarantined("t", 1, 4, 10)]),
        ];
        if id != "no-record" {
            batch.push(Mutation::PutGroup(group(id, 1)));
        }
        commit(store, batch);
    }
    commit(
        store,
        vec![
            Mutation::DeleteGroup {
                group_id: "g".into(),
            },
            Mutation::DeleteGroup {
                group_id: "no-record".into(),
            },
        ],
    );
    let state = load(store);
    let left = ["f", "g\0", "g ", "g2", "h"];
    let with_history: Vec<&str> = state.history.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(with_history, left);
    let quarantined_in: Vec<&str> = state.quarantine.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(quarantined_in, left);
    for (_, entries) in &state.history {
        assert_eq!(entries, &vec![history("t", 0, 1), history("t", 0, 2)]);
    }
    for id in ["g", "no-record"] {
        assert_eq!(store.load_group(id).expect("loads"), StoredGroup::default());
    }
}

/// An offset reset's batch: offsets put and removed and their history entries appended (with a
/// trim), all or nothing. With a group record no encoding backend can write (a consumer member
/// state number outside 0..=2) the batch is refused whole and nothing of it applied; the
/// memory store, which encodes nothing, applies all of it.
pub fn a_reset_batch_applies_whole(store: &dyn Store) {
    commit(
        store,
        vec![
            put_offsets(
                "g",
                vec![offset("t", 0, 10), offset("t", 1, 11), offset("t", 2, 12)],
            ),
            put_history(
                "g",
                vec![history("t", 0, 1), history("t", 1, 1), history("t", 2, 1)],
                vec![],
            ),
        ],
    );
    let reset = |offsets: Vec<OffsetWrite>| {
        vec![
            put_offsets("g", offsets),
            Mutation::DeleteOffsets {
                group_id: "g".into(),
                partitions: vec![("t".into(), 2)],
            },
            put_history(
                "g",
                vec![history("t", 0, 2), history("t", 1, 2), history("t", 2, 2)],
                vec![trim("t", 0, 2)],
            ),
        ]
    };
    commit(store, reset(vec![offset("t", 0, 3), offset("t", 1, 4)]));
    let after_reset = load(store);
    let g = store.load_group("g").expect("loads");
    assert_eq!(g.offsets, vec![offset("t", 0, 3), offset("t", 1, 4)]);
    assert_eq!(
        g.history,
        vec![
            history("t", 0, 2),
            history("t", 1, 1),
            history("t", 1, 2),
            history("t", 2, 1),
            history("t", 2, 2),
        ]
    );

    let mut unwritable = consumer_group("g", 9);
    if let Some(consumer) = unwritable.consumer.as_mut() {
        consumer.members[0].state = 9;
    }
    let mut batch = vec![
        put_offsets("g", vec![offset("t", 0, 99)]),
        Mutation::DeleteOffsets {
            group_id: "g".into(),
            partitions: vec![("t".into(), 1)],
        },
        put_history("g", vec![history("t", 0, 3)], vec![trim("t", 1, u64::MAX)]),
    ];
    batch.push(Mutation::PutGroup(unwritable.clone()));
    match block_on(store.apply(batch)) {
        Err(StoreError::Rejected(_)) => assert_eq!(load(store), after_reset),
        Ok(()) => {
            let g = store.load_group("g").expect("loads");
            assert_eq!(g.record, Some(unwritable));
            assert_eq!(g.offsets, vec![offset("t", 0, 99)]);
            assert_eq!(
                g.history,
                vec![
                    history("t", 0, 2),
                    history("t", 0, 3),
                    history("t", 2, 1),
                    history("t", 2, 2),
                ]
            );
        }
        Err(other) => panic!("neither applied nor refused: {other:?}"),
    }
}
