//! The offset history as store format 6 keeps it (runs, `codec::history_run`): how many rows
//! a write makes, trims that delete whole runs or cut one, runs that interleave, and the
//! migration of a format 5 file (one row per entry). What every backend must do with history
//! is in the shared suite (`suite/offset_protection.rs`).

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTableMetadata};

use super::{RedbStore, HISTORY, HISTORY_V5, META};
use crate::storage::suite::{commit, history, offset, put_history, put_offsets, trim};
use crate::storage::{HistoryWrite, Mutation, Store, StoreError};

fn open(dir: &Path) -> RedbStore {
    RedbStore::open(dir).expect("the store opens")
}

/// The history rows (runs) of the store at `dir`, as (topic, partition, first seq).
fn runs(store: &RedbStore) -> Vec<(String, i32, u64)> {
    let db = store.shared.database().expect("open");
    let txn = db.begin_read().expect("read txn");
    let table = txn.open_table(HISTORY).expect("history table");
    redb::ReadableTable::iter(&table)
        .expect("iterates")
        .map(|row| {
            let (key, _) = row.expect("a row");
            let (_, topic, partition, first) = key.value();
            (topic.to_owned(), partition, first)
        })
        .collect()
}

fn entries(topic: &str, partition: i32, seqs: std::ops::Range<u64>) -> Vec<HistoryWrite> {
    seqs.map(|seq| history(topic, partition, seq)).collect()
}

/// One write of many partitions' entries is one row per partition, whatever order they come
/// in; a trim below a run's end deletes it whole, one inside it keeps the run's rest.
#[test]
fn a_write_is_one_run_per_partition_and_trims_cut_runs() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open(dir.path());
    let mut mixed = entries("t", 1, 0..50);
    mixed.extend(entries("t", 0, 0..100));
    mixed.reverse();
    commit(&store, vec![put_history("g", mixed, vec![])]);
    assert_eq!(runs(&store), vec![("t".into(), 0, 0), ("t".into(), 1, 0)]);

    // Partition 0: a second run 100..200, then trims at 100 (the first run exactly), at 150
    // (inside the second) and nothing below 150 is left; partition 1 untouched.
    commit(
        &store,
        vec![put_history(
            "g",
            entries("t", 0, 100..200),
            vec![trim("t", 0, 100)],
        )],
    );
    assert_eq!(runs(&store), vec![("t".into(), 0, 100), ("t".into(), 1, 0)]);
    commit(
        &store,
        vec![put_history("g", vec![], vec![trim("t", 0, 150)])],
    );
    assert_eq!(runs(&store), vec![("t".into(), 0, 150), ("t".into(), 1, 0)]);
    let mut expected = entries("t", 0, 150..200);
    expected.extend(entries("t", 1, 0..50));
    assert_eq!(store.load_group("g").expect("loads").history, expected);
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.load_group("g").expect("loads").history, expected);
    assert_eq!(
        store.load().expect("loads").history,
        vec![("g".into(), expected)]
    );
}

/// Runs of one partition that interleave (a reset's entry written while commits' entries
/// around it were written in another write) load in sequence order and trim exactly.
#[test]
fn interleaved_runs_load_in_order_and_trim_exactly() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open(dir.path());
    let odd: Vec<_> = (1..10).step_by(2).map(|s| history("t", 0, s)).collect();
    let even: Vec<_> = (0..10).step_by(2).map(|s| history("t", 0, s)).collect();
    commit(&store, vec![put_history("g", odd, vec![])]);
    commit(&store, vec![put_history("g", even, vec![])]);
    assert_eq!(runs(&store), vec![("t".into(), 0, 0), ("t".into(), 0, 1)]);
    assert_eq!(
        store.load_group("g").expect("loads").history,
        entries("t", 0, 0..10)
    );
    // Both runs straddle 5: each keeps its part at or above it.
    commit(
        &store,
        vec![put_history("g", vec![], vec![trim("t", 0, 5)])],
    );
    assert_eq!(runs(&store), vec![("t".into(), 0, 5), ("t".into(), 0, 6)]);
    assert_eq!(
        store.load().expect("loads").history,
        vec![("g".into(), entries("t", 0, 5..10))]
    );
}

/// A damaged run is reported by the load, naming the group and partition, and a trim that
/// meets it leaves it for that report instead of failing every write.
#[test]
fn a_damaged_run_is_reported_not_trimmed_away() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(
            &store,
            vec![put_history("g", entries("t", 3, 0..4), vec![])],
        );
        store.path().to_path_buf()
    };
    {
        let db = Database::open(&path).expect("redb opens the file");
        let txn = db.begin_write().expect("write txn");
        {
            let mut table = txn.open_table(HISTORY).expect("history table");
            // last_seq 9 (straddles a trim at 2) and then garbage.
            let mut value = 9u64.to_le_bytes().to_vec();
            value.extend([0xff; 5]);
            table
                .insert(("g", "t", 3, 0), value.as_slice())
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    let store = open(dir.path());
    commit(
        &store,
        vec![put_history("g", vec![], vec![trim("t", 3, 2)])],
    );
    match store.load_group("g") {
        Err(StoreError::Corrupt(reason)) | Err(StoreError::CorruptFile { reason, .. }) => {
            assert!(reason.contains("\"g\" \"t\"/3"), "{reason}")
        }
        other => panic!("expected a corrupt-data error, got {other:?}"),
    }
}

/// A format 5 store (one history row per entry, `offset_history`) is migrated when opened:
/// each partition's entries become one run, the old table is gone, the version is 6, and the
/// entries, offsets and later writes are all there after a reopen.
#[test]
fn a_version_5_store_is_migrated_to_runs() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(
            &store,
            vec![
                Mutation::PutGroup(crate::storage::suite::group("g", 2)),
                put_offsets("g", vec![offset("t", 0, 5)]),
            ],
        );
        store.path().to_path_buf()
    };
    let mut g = entries("t", 0, 3..40);
    g.extend(entries("t", 1, 0..2));
    g.extend(entries("u", 0, 7..8));
    let h = entries("t", 0, 0..3);
    {
        let db = Database::open(&path).expect("redb opens the file");
        let txn = db.begin_write().expect("write txn");
        {
            let mut old = txn.open_table(HISTORY_V5).expect("format 5's table");
            for (group, writes) in [("g", &g), ("h", &h)] {
                for w in writes {
                    let value = super::codec::encode_history(w.entry.clone()).expect("encodes");
                    old.insert(
                        (group, &*w.topic, w.partition, w.entry.seq),
                        value.as_slice(),
                    )
                    .expect("insert");
                }
            }
            txn.open_table(META)
                .expect("meta table")
                .insert("format_version", 5)
                .expect("insert");
        }
        assert!(
            txn.delete_table(HISTORY).expect("delete"),
            "format 5 had no runs"
        );
        txn.commit().expect("commit");
    }

    let store = open(dir.path());
    assert_eq!(
        runs(&store),
        vec![
            ("t".into(), 0, 3),
            ("t".into(), 1, 0),
            ("u".into(), 0, 7),
            ("t".into(), 0, 0),
        ]
    );
    let loaded = store.load().expect("loads");
    assert_eq!(
        loaded.history,
        vec![("g".into(), g.clone()), ("h".into(), h.clone())]
    );
    assert_eq!(loaded.offsets.len(), 1, "offsets are untouched");
    commit(
        &store,
        vec![put_history(
            "g",
            entries("t", 0, 40..41),
            vec![trim("t", 0, 39)],
        )],
    );
    drop(store);
    let store = open(dir.path());
    let db = store.shared.database().expect("open");
    let txn = db.begin_read().expect("read txn");
    assert!(txn.open_table(HISTORY_V5).is_err(), "the old table is gone");
    let meta = txn.open_table(META).expect("meta");
    let version = meta
        .get("format_version")
        .expect("read")
        .expect("a version");
    assert_eq!(version.value(), RedbStore::FORMAT_VERSION);
    let table = txn.open_table(HISTORY).expect("runs");
    assert_eq!(table.len().expect("counts"), 5);
    let mut expected = entries("t", 0, 39..41);
    expected.extend(entries("t", 1, 0..2));
    expected.extend(entries("u", 0, 7..8));
    assert_eq!(store.load_group("g").expect("loads").history, expected);
}
