//! What only the durable store has: reopening, its file lock, its format version, refusing
//! files it must not touch, shutdown, and concurrent submitters.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use redb::{Database, TableDefinition};

use super::{RedbStore, GROUPS, HISTORY, JOURNAL, META, QUARANTINE};
use crate::storage::suite::{
    block_on, commit, consumer_group, group, history, offset, owner, put_history, put_offsets,
    put_quarantine, quarantined, rebalance, trim,
};
use crate::storage::{GroupRecord, Mutation, OffsetWrite, Store, StoreError, StoredState};

fn open(dir: &Path) -> RedbStore {
    RedbStore::open(dir).expect("the store opens")
}

fn open_err(dir: &Path) -> StoreError {
    match RedbStore::open(dir) {
        Ok(store) => panic!("expected an error, opened {store:?}"),
        Err(e) => e,
    }
}

#[test]
fn open_creates_the_directory_and_file() {
    let root = tempfile::tempdir().expect("a temp dir");
    let dir = root.path().join("a").join("b");
    let store = open(&dir);
    assert_eq!(store.path(), dir.join(RedbStore::FILE_NAME));
    assert!(store.path().is_file());
    assert_eq!(store.load().expect("loads"), StoredState::default());
}

#[test]
fn everything_acknowledged_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut expected = Vec::new();
    {
        let store = open(dir.path());
        for i in 0..50 {
            let id = format!("group-{i:02}");
            let writes: Vec<OffsetWrite> = (0..5).map(|p| offset("t", p, i64::from(i))).collect();
            commit(
                &store,
                vec![
                    Mutation::PutGroup(group(&id, i)),
                    put_offsets(&id, writes.clone()),
                ],
            );
            expected.push((group(&id, i), (id, writes)));
        }
        // Dropped without close: drop closes.
    }
    let state = open(dir.path()).load().expect("loads");
    let (groups, offsets): (Vec<_>, Vec<_>) = expected.into_iter().unzip();
    assert_eq!(state.groups, groups);
    assert_eq!(state.offsets, offsets);
}

#[test]
fn a_second_open_of_the_same_dir_is_locked() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let first = open(dir.path());
    let error = open_err(dir.path());
    assert_eq!(
        error,
        StoreError::Locked {
            path: dir.path().join(RedbStore::FILE_NAME)
        }
    );
    let message = error.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("--data-dir"), "{message}");
    // Still locked after close: the file stays open until the store is dropped.
    first.close().expect("closes");
    assert!(matches!(
        RedbStore::open(dir.path()),
        Err(StoreError::Locked { .. })
    ));
    drop(first);
    drop(open(dir.path()));
}

#[test]
fn a_newer_format_version_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(&store, vec![Mutation::PutGroup(group("g", 1))]);
        store.path().to_path_buf()
    };
    set_format_version(&path, 7);
    let error = open_err(dir.path());
    assert_eq!(
        error,
        StoreError::UnsupportedFormat {
            path: path.clone(),
            found: 7,
            supported: 6
        }
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("version 7"), "{message}");
    assert!(message.contains("version 6"), "{message}");
    // Nothing was reset: put the version back and the data is all there.
    set_format_version(&path, 6);
    assert_eq!(
        open(dir.path()).load().expect("loads").groups,
        vec![group("g", 1)]
    );
}

/// A store as the previous release (format version 1) left it: groups in the version 1
/// encoding (no owners), offsets and topics as today.
#[test]
fn a_version_1_store_is_migrated_with_no_owners() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(&store, vec![Mutation::PutGroup(group("g", 1))]);
        commit(&store, vec![Mutation::PutGroup(group("h", 2))]);
        commit(&store, vec![put_offsets("g", vec![offset("t", 0, 5)])]);
        store.path().to_path_buf()
    };
    {
        let db = Database::open(&path).expect("redb opens the file");
        let txn = db.begin_write().expect("write txn");
        {
            let mut groups = txn.open_table(GROUPS).expect("groups table");
            for id in ["g", "h"] {
                let generation = if id == "g" { 1 } else { 2 };
                let (key, bytes) =
                    super::codec::encode_group_v1(group(id, generation)).expect("encodes");
                groups
                    .insert(key.as_str(), bytes.as_slice())
                    .expect("insert");
            }
            let mut meta = txn.open_table(META).expect("meta table");
            meta.insert("format_version", 1).expect("insert");
        }
        // Version 1 had no journal, history or quarantine table.
        assert!(txn.delete_table(JOURNAL).expect("delete"));
        assert!(txn.delete_table(HISTORY).expect("delete"));
        assert!(txn.delete_table(QUARANTINE).expect("delete"));
        txn.commit().expect("commit");
    }
    let owner_less = |id: &str, generation: i32| {
        let mut record = group(id, generation);
        record.created_by = None;
        for m in &mut record.members {
            m.principal = None;
        }
        record
    };
    let store = open(dir.path());
    let loaded = store.load().expect("loads");
    assert_eq!(loaded.groups, vec![owner_less("g", 1), owner_less("h", 2)]);
    assert_eq!(loaded.offsets.len(), 1, "offsets are untouched");
    // Migrated on disk: the current version, and new writes carry owners.
    commit(&store, vec![Mutation::PutGroup(group("g", 3))]);
    drop(store);
    assert_eq!(format_version(&path), RedbStore::FORMAT_VERSION);
    let loaded = open(dir.path()).load().expect("loads");
    assert_eq!(loaded.groups, vec![group("g", 3), owner_less("h", 2)]);
}

/// Rewrites the store at `path` as format version `version` (2, 3 or 4) left it: its group
/// values in the GroupV2 encoding (no consumer part) for 2 and 3, GroupV3 (no ownership
/// epochs) for 4; no history or quarantine table, and no journal table for version 2.
fn make_old_version(path: &Path, groups: &[GroupRecord], version: u64) {
    let encode = match version {
        2 | 3 => super::codec::encode_group_v2,
        4 => super::codec::encode_group_v3,
        other => panic!("no maker for format version {other}"),
    };
    let db = Database::open(path).expect("redb opens the file");
    let txn = db.begin_write().expect("write txn");
    {
        let mut table = txn.open_table(GROUPS).expect("groups table");
        for record in groups {
            let (key, bytes) = encode(record.clone()).expect("encodes");
            table
                .insert(key.as_str(), bytes.as_slice())
                .expect("insert");
        }
        txn.open_table(META)
            .expect("meta table")
            .insert("format_version", version)
            .expect("insert");
    }
    if version == 2 {
        assert!(txn.delete_table(JOURNAL).expect("delete"));
    }
    assert!(txn.delete_table(HISTORY).expect("delete"));
    assert!(txn.delete_table(QUARANTINE).expect("delete"));
    txn.commit().expect("commit");
}

/// A store as format version 2 left it (no journal table): migrated to the current version
/// when opened, its groups and offsets untouched, its journal empty and writable.
#[test]
fn a_version_2_store_is_migrated_with_an_empty_journal() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(&store, vec![Mutation::PutGroup(group("g", 1))]);
        commit(&store, vec![put_offsets("g", vec![offset("t", 0, 5)])]);
        store.path().to_path_buf()
    };
    make_old_version(&path, &[group("g", 1)], 2);
    let store = open(dir.path());
    assert_eq!(format_version_of(&store), RedbStore::FORMAT_VERSION);
    let loaded = store.load().expect("loads");
    assert_eq!(loaded.groups, vec![group("g", 1)]);
    assert_eq!(loaded.offsets.len(), 1, "offsets are untouched");
    assert!(loaded.journals.is_empty());
    commit(
        &store,
        vec![Mutation::PutRebalances {
            group_id: "g".into(),
            entries: vec![rebalance(2)],
            dropped: vec![],
        }],
    );
    drop(store);
    assert_eq!(format_version(&path), RedbStore::FORMAT_VERSION);
    let loaded = open(dir.path()).load().expect("loads");
    assert_eq!(loaded.journals, vec![("g".into(), vec![rebalance(2)])]);
}

/// A store as format version 3 left it (group values without a consumer part): migrated when
/// opened by rewriting every group value, in one transaction; offsets and journal untouched;
/// consumer parts written afterwards survive a reopen.
#[test]
fn a_version_3_store_is_migrated_with_no_consumer_parts() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(
            &store,
            vec![
                Mutation::PutGroup(group("g", 1)),
                Mutation::PutGroup(group("h", 2)),
                put_offsets("g", vec![offset("t", 0, 5)]),
                Mutation::PutRebalances {
                    group_id: "g".into(),
                    entries: vec![rebalance(1)],
                    dropped: vec![],
                },
            ],
        );
        store.path().to_path_buf()
    };
    make_old_version(&path, &[group("g", 1), group("h", 2)], 3);
    // Not readable as it is: the values must be rewritten, not merely relabelled.
    {
        let db = Database::open(&path).expect("redb opens the file");
        let txn = redb::ReadableDatabase::begin_read(&db).expect("read txn");
        let table = txn.open_table(GROUPS).expect("groups table");
        let value = table.get("g").expect("read").expect("a value");
        assert!(super::codec::decode_group("g", value.value()).is_err());
    }

    let store = open(dir.path());
    assert_eq!(format_version_of(&store), RedbStore::FORMAT_VERSION);
    let loaded = store.load().expect("loads");
    assert_eq!(loaded.groups, vec![group("g", 1), group("h", 2)]);
    assert!(loaded.groups.iter().all(|g| g.consumer.is_none()));
    assert_eq!(loaded.offsets.len(), 1, "offsets are untouched");
    assert_eq!(loaded.journals, vec![("g".into(), vec![rebalance(1)])]);
    commit(&store, vec![Mutation::PutGroup(consumer_group("g", 3))]);
    drop(store);
    assert_eq!(format_version(&path), RedbStore::FORMAT_VERSION);
    let loaded = open(dir.path()).load().expect("loads");
    assert_eq!(loaded.groups, vec![consumer_group("g", 3), group("h", 2)]);
}

/// A version 3 store with a group value that is not a GroupV2 one: refused as corrupt, and
/// left as it was (still version 3, the other groups not rewritten).
#[test]
fn a_damaged_value_fails_the_migration_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(&store, vec![Mutation::PutGroup(group("g", 1))]);
        store.path().to_path_buf()
    };
    make_old_version(&path, &[group("g", 1)], 3);
    {
        let db = Database::open(&path).expect("redb opens the file");
        let txn = db.begin_write().expect("write txn");
        txn.open_table(GROUPS)
            .expect("groups table")
            .insert("h", [0xffu8; 3].as_slice())
            .expect("insert");
        txn.commit().expect("commit");
    }
    let error = open_err(dir.path());
    assert!(
        matches!(&error, StoreError::CorruptFile { reason, .. } if reason.contains("\"h\"")),
        "{error:?}"
    );
    assert_eq!(format_version(&path), 3);
    let db = Database::open(&path).expect("redb opens the file");
    let txn = redb::ReadableDatabase::begin_read(&db).expect("read txn");
    let table = txn.open_table(GROUPS).expect("groups table");
    let value = table.get("g").expect("read").expect("a value");
    assert_eq!(
        super::codec::decode_group_v2("g", value.value()).expect("still GroupV2"),
        group("g", 1)
    );
    assert!(
        txn.open_table(HISTORY).is_err(),
        "no table of the migration is left behind"
    );
}

/// A store as format version 4 left it (group values without ownership epochs, no history or
/// quarantine table): migrated when opened by rewriting every group value and creating both
/// tables, in one transaction; offsets and journal untouched; ownership epochs, history and
/// quarantine written afterwards survive a reopen.
#[test]
fn a_version_4_store_is_migrated_with_no_ownership_epochs() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        commit(
            &store,
            vec![
                Mutation::PutGroup(consumer_group("g", 3)),
                Mutation::PutGroup(group("h", 2)),
                put_offsets("g", vec![offset("t", 0, 5)]),
                Mutation::PutRebalances {
                    group_id: "g".into(),
                    entries: vec![rebalance(3)],
                    dropped: vec![],
                },
            ],
        );
        store.path().to_path_buf()
    };
    make_old_version(&path, &[consumer_group("g", 3), group("h", 2)], 4);
    // Not readable as it is: the values must be rewritten, not merely relabelled.
    {
        let db = Database::open(&path).expect("redb opens the file");
        let txn = redb::ReadableDatabase::begin_read(&db).expect("read txn");
        let table = txn.open_table(GROUPS).expect("groups table");
        let value = table.get("g").expect("read").expect("a value");
        assert!(super::codec::decode_group("g", value.value()).is_err());
        assert!(txn.open_table(HISTORY).is_err(), "format 4 has no history");
    }

    let store = open(dir.path());
    assert_eq!(format_version_of(&store), RedbStore::FORMAT_VERSION);
    let mut unowned = consumer_group("g", 3);
    unowned.ownership.clear();
    let loaded = store.load().expect("loads");
    assert_eq!(loaded.groups, vec![unowned, group("h", 2)]);
    assert_eq!(loaded.offsets.len(), 1, "offsets are untouched");
    assert_eq!(loaded.journals, vec![("g".into(), vec![rebalance(3)])]);
    assert!(loaded.history.is_empty());
    assert!(loaded.quarantine.is_empty());

    let mut owned = group("h", 3);
    owned.ownership = vec![owner("t", 0, 3, "h-m1")];
    commit(
        &store,
        vec![
            Mutation::PutGroup(consumer_group("g", 4)),
            Mutation::PutGroup(owned.clone()),
            put_history("g", vec![history("t", 0, 1)], vec![]),
            put_quarantine("h", vec![quarantined("t", 0, 1, 5)]),
        ],
    );
    drop(store);
    assert_eq!(format_version(&path), RedbStore::FORMAT_VERSION);
    let loaded = open(dir.path()).load().expect("loads");
    assert_eq!(loaded.groups, vec![consumer_group("g", 4), owned]);
    assert_eq!(loaded.history, vec![("g".into(), vec![history("t", 0, 1)])]);
    assert_eq!(
        loaded.quarantine,
        vec![("h".into(), vec![quarantined("t", 0, 1, 5)])]
    );
}

/// An offset reset's batch with a part that cannot be encoded is refused whole before it is
/// queued: none of its offsets, deletions or history entries is written, and the store stays
/// healthy (a refused batch is no storage failure).
#[test]
fn a_reset_batch_with_an_unencodable_part_applies_nothing() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open(dir.path());
    commit(
        &store,
        vec![
            put_offsets("g", vec![offset("t", 0, 1), offset("t", 1, 2)]),
            put_history("g", vec![history("t", 0, 1)], vec![]),
        ],
    );
    let before = store.load().expect("loads");
    let mut unwritable = consumer_group("g", 2);
    if let Some(consumer) = unwritable.consumer.as_mut() {
        consumer.members[0].state = 7;
    }
    let refused = block_on(store.apply(vec![
        put_offsets("g", vec![offset("t", 0, 5)]),
        Mutation::DeleteOffsets {
            group_id: "g".into(),
            partitions: vec![("t".into(), 1)],
        },
        put_history("g", vec![history("t", 0, 2)], vec![trim("t", 0, 2)]),
        Mutation::PutGroup(unwritable),
    ]));
    assert!(
        matches!(refused, Err(StoreError::Rejected(_))),
        "{refused:?}"
    );
    assert!(store.healthy());
    assert_eq!(store.load().expect("loads"), before);
    drop(store);
    assert_eq!(open(dir.path()).load().expect("loads"), before);
}

fn format_version_of(store: &RedbStore) -> u64 {
    let db = store.shared.database().expect("open");
    let txn = redb::ReadableDatabase::begin_read(&*db).expect("read txn");
    let meta = txn.open_table(META).expect("meta table");
    meta.get("format_version")
        .expect("read")
        .expect("a version")
        .value()
}

fn format_version(path: &Path) -> u64 {
    let db = Database::open(path).expect("redb opens the file");
    let txn = redb::ReadableDatabase::begin_read(&db).expect("read txn");
    let meta = txn.open_table(META).expect("meta table");
    meta.get("format_version")
        .expect("read")
        .expect("a version")
        .value()
}

fn set_format_version(path: &Path, version: u64) {
    let db = Database::open(path).expect("redb opens the file");
    let txn = db.begin_write().expect("write txn");
    {
        let mut meta = txn.open_table(META).expect("meta table");
        meta.insert("format_version", version).expect("insert");
    }
    txn.commit().expect("commit");
}

#[test]
fn a_garbage_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join(RedbStore::FILE_NAME);
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&path, &garbage).expect("write garbage");
    let error = open_err(dir.path());
    assert!(
        matches!(&error, StoreError::CorruptFile { path: p, .. } if *p == path),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("backup"), "{message}");
    assert_eq!(std::fs::read(&path).expect("read back"), garbage);
}

#[test]
fn someone_elses_redb_file_is_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join(RedbStore::FILE_NAME);
    {
        let db = Database::create(&path).expect("create");
        let txn = db.begin_write().expect("write txn");
        {
            let other: TableDefinition<&str, &str> = TableDefinition::new("bookmarks");
            let mut table = txn.open_table(other).expect("table");
            table.insert("home", "/").expect("insert");
        }
        txn.commit().expect("commit");
    }
    let error = open_err(dir.path());
    assert!(
        matches!(&error, StoreError::CorruptFile { reason, .. } if reason.contains("not a Muster store")),
        "{error:?}"
    );
}

#[test]
fn an_unusable_directory_is_unreadable() {
    let root = tempfile::tempdir().expect("a temp dir");
    // The data dir is a regular file.
    let file = root.path().join("not-a-dir");
    std::fs::write(&file, b"x").expect("write");
    let error = open_err(&file);
    assert!(
        matches!(&error, StoreError::Unreadable { path, .. } if *path == file),
        "{error:?}"
    );
    assert!(error.to_string().contains(&file.display().to_string()));

    // The data file is a directory.
    let dir = root.path().join("data");
    std::fs::create_dir_all(dir.join(RedbStore::FILE_NAME)).expect("mkdir");
    let error = open_err(&dir);
    assert!(matches!(&error, StoreError::Unreadable { .. }), "{error:?}");

    // A directory without permissions (root ignores permission bits, so only checked when
    // they bite).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let locked = root.path().join("locked");
        std::fs::create_dir(&locked).expect("mkdir");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        if std::fs::read_dir(&locked).is_err() {
            let error = open_err(&locked);
            assert!(matches!(&error, StoreError::Unreadable { .. }), "{error:?}");
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755))
            .expect("chmod back");
    }
}

#[test]
fn apply_after_close_is_closed_and_close_is_idempotent() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open(dir.path());
    commit(&store, vec![Mutation::PutGroup(group("g", 1))]);
    store.close().expect("closes");
    store.close().expect("closes again");
    assert_eq!(
        block_on(store.apply(vec![Mutation::PutGroup(group("g", 2))])),
        Err(StoreError::Closed)
    );
    // Reading still works until the store is dropped.
    assert_eq!(store.load().expect("loads").groups, vec![group("g", 1)]);
}

#[test]
fn close_commits_everything_submitted_before_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open(dir.path());
    let pending: Vec<_> = (0..200)
        .map(|i| store.apply(vec![put_offsets("g", vec![offset("t", i, i64::from(i))])]))
        .collect();
    store.close().expect("closes");
    block_on(async {
        for durable in pending {
            durable.await.expect("durable");
        }
    });
    drop(store);
    let state = open(dir.path()).load().expect("loads");
    let expected: Vec<OffsetWrite> = (0..200).map(|i| offset("t", i, i64::from(i))).collect();
    assert_eq!(state.offsets, vec![("g".to_string(), expected)]);
}

#[test]
fn concurrent_submitters_all_become_durable() {
    const THREADS: i32 = 8;
    const ROUNDS: i32 = 100;
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Arc::new(open(dir.path()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let id = format!("group-{t}");
                for round in 0..ROUNDS {
                    let writes = (0..4).map(|p| offset("t", p, i64::from(round))).collect();
                    let batch = vec![
                        Mutation::PutGroup(group(&id, round)),
                        put_offsets(&id, writes),
                    ];
                    block_on(store.apply(batch)).expect("durable");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("submitter finished");
    }
    drop(store);
    let state = open(dir.path()).load().expect("loads");
    let last = ROUNDS - 1;
    let expected_groups: Vec<_> = (0..THREADS)
        .map(|t| group(&format!("group-{t}"), last))
        .collect();
    assert_eq!(state.groups, expected_groups);
    for (t, (id, writes)) in state.offsets.iter().enumerate() {
        assert_eq!(id, &format!("group-{t}"));
        let expected: Vec<_> = (0..4).map(|p| offset("t", p, i64::from(last))).collect();
        assert_eq!(writes, &expected);
    }
    assert_eq!(state.offsets.len(), THREADS as usize);
}

#[test]
fn a_damaged_file_is_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = {
        let store = open(dir.path());
        for i in 0..200 {
            commit(&store, vec![Mutation::PutGroup(group(&format!("g{i}"), 1))]);
        }
        store.path().to_path_buf()
    };
    let intact = std::fs::read(&path).expect("read");
    let mut flipped = intact.clone();
    for byte in &mut flipped[intact.len() / 3..intact.len() / 3 + 4096] {
        *byte ^= 0x5a;
    }
    let damaged = [
        ("truncated to half", intact[..intact.len() / 2].to_vec()),
        ("one byte short", intact[..intact.len() - 1].to_vec()),
        ("shorter than a header", intact[..100].to_vec()),
        ("a page overwritten", flipped),
    ];
    for (what, bytes) in damaged {
        std::fs::write(&path, &bytes).expect("write");
        let error = open_err(dir.path());
        assert!(
            matches!(&error, StoreError::CorruptFile { path: p, .. } if *p == path),
            "{what}: {error:?}"
        );
        assert_eq!(std::fs::read(&path).expect("read back"), bytes, "{what}");
    }
    std::fs::write(&path, &intact).expect("write");
    assert_eq!(open(dir.path()).load().expect("loads").groups.len(), 200);
}

/// Waits (bounded, polling) until `check` holds.
fn eventually(what: &str, check: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !check() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_failed_write_fails_its_batch_then_the_store_recovers() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open(dir.path());
    commit(&store, vec![put_offsets("g", vec![offset("a", 0, 1)])]);

    // The failing round, then one failed reopen attempt.
    store.inject_failures(2);
    let failed = block_on(store.apply(vec![put_offsets("g", vec![offset("a", 0, 2)])]));
    assert!(matches!(failed, Err(StoreError::Io(_))), "{failed:?}");
    assert!(!store.healthy(), "unhealthy after a failed write");
    // While recovering: refused at once, and one group cannot be read.
    let refused = block_on(store.apply(vec![put_offsets("g", vec![offset("a", 0, 3)])]));
    assert!(
        matches!(refused, Err(StoreError::Unavailable(_))) || store.healthy(),
        "{refused:?}"
    );
    eventually("the store to recover", || store.healthy());
    assert_eq!(store.shared.inject_failures.load(Ordering::Acquire), 0);

    // What was durable before is there, what failed is not, and writes work again.
    let g = store.load_group("g").expect("loads once recovered");
    assert_eq!(g.offsets, vec![offset("a", 0, 1)]);
    commit(&store, vec![put_offsets("g", vec![offset("a", 0, 4)])]);
    drop(store);
    let reopened = open(dir.path());
    let g = reopened.load_group("g").expect("loads");
    assert_eq!(g.offsets, vec![offset("a", 0, 4)]);
}
