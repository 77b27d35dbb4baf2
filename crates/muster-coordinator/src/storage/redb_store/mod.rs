//! [`RedbStore`]: the durable [`Store`], one redb file (`muster.redb`) in the data directory.
//! It owns that file: its tables, its format version, its lock, and the one thread that
//! writes to it.
//!
//! Why redb: one crate (plus libc), no background threads of its own, a fast reopen, and ACID
//! transactions whose commit fsyncs (the default `Durability::Immediate`). fjall was rejected:
//! 43 crates and background compaction for a workload that is small and mostly overwrites.
//! An fsync measured ~3–4 ms on this class of machine under other I/O (~0.2 ms on an idle
//! disk), so one commit per batch would cap the store at a few hundred batches a second; group
//! commit (see `writer`) is what makes throughput: one dedicated thread drains everything
//! waiting, writes it in one transaction and fsyncs once for all of it.
//!
//! Layout (format version 6):
//!
//! ```text
//! meta            "format_version"                   -> u64 (6)
//! groups          group_id                           -> GroupV4 (wincode, see `codec`)
//! offsets         (group_id, topic, partition)       -> OffsetV1 (wincode)
//! topics          topic                              -> partitions (i32)
//! journal         (group_id, generation)             -> RebalanceV1 (wincode)
//! offset_history_runs (group_id, topic, partition, first_seq)
//!                                                    -> HistoryRunV1 (wincode)
//! quarantine      (group_id, topic, partition)       -> QuarantineV1 (wincode)
//! ```
//!
//! Keys order by group first, so each table holds a group's rows in one contiguous range:
//! deleting a group is a range delete per table and loading groups them in one pass. A
//! partition's history is one range too: its *runs*, each the entries of that partition one
//! write carried (`codec::history_run`), keyed by their first sequence number. Trimming below
//! a sequence number deletes the runs that end below it (read from the value's first 8 bytes)
//! and writes again the one run that straddles it, if any.
//!
//! Version 2 added the owners of groups and members (for quotas). A version 1 file is
//! migrated when opened: every group value is rewritten as version 2 with no owners, and the
//! version bumped, in one transaction (a crash leaves it version 1, to migrate again).
//! Version 3 added the `journal` table (each group's last rebalances); a version 2 file is
//! migrated by creating it (empty) and bumping the version, in one transaction; a version 1
//! file goes through both steps in one transaction.
//! Version 4 appends the consumer protocol's part to group values (`GroupV3`: target
//! assignment epoch, assignor, consumer members with their epochs and assignments). A version
//! 3 (or 2) file is migrated when opened by rewriting every group value as version 4 with no
//! consumer part, as 1 → 2 did; every older file goes through all its steps in one
//! transaction.
//! Version 5 appends each partition's ownership epoch and owner to group values (`GroupV4`)
//! and adds the `offset_history` and `quarantine` tables. A version 4 (or older) file is
//! migrated when opened by rewriting every group value as version 5 with no ownership epochs
//! and creating the two tables (empty), in one transaction.
//! Version 6 keeps the offset history in runs (`offset_history_runs`) instead of one row per
//! entry (`offset_history`): one row per partition per write, because 100 rows per busy
//! partition per write stalled the commits behind them (docs/benchmarks.md). A version 5 file
//! is migrated when opened by rewriting each partition's entries as one run and dropping the
//! old table, in one transaction; an older file gets the new table empty.
//!
//! Opening never resets anything: a locked, unreadable, foreign, corrupt or newer-format file
//! is an error naming the path and what to do. Every open verifies the checksums of the whole
//! file first (redb's integrity check; it also recovers from a crash mid-commit by falling
//! back to the last complete commit), because redb trusts an unchecked file and may panic on
//! a damaged page.
//!
//! A failed write poisons a redb `Database` (every later call fails with `PreviousIo`), so
//! the writer recovers by reopening the file (`recovery`): the handle lives in a slot shared
//! with readers, emptied while the store is unhealthy.

pub(super) mod codec;
mod load;
mod load_parking;
mod recovery;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

use redb::{
    Database, DatabaseError, ReadTransaction, ReadableDatabase, ReadableTable, StorageError,
    TableDefinition, TableError,
};
use tracing::{debug, info, warn};

pub use self::writer::WriterStats;
use self::writer::{Counters, Op};
use crate::storage::DurableSender;

use super::{Durable, Mutation, ParkingLoad, Store, StoreError, StoredGroup, StoredState};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const GROUPS: TableDefinition<&str, &[u8]> = TableDefinition::new("groups");
const OFFSETS: TableDefinition<(&str, &str, i32), &[u8]> = TableDefinition::new("offsets");
const TOPICS: TableDefinition<&str, i32> = TableDefinition::new("topics");
const JOURNAL: TableDefinition<(&str, i32), &[u8]> = TableDefinition::new("journal");
const HISTORY: TableDefinition<(&str, &str, i32, u64), &[u8]> =
    TableDefinition::new("offset_history_runs");
/// Format 5's offset history, one row per entry keyed by its seq: read only to migrate it.
const HISTORY_V5: TableDefinition<(&str, &str, i32, u64), &[u8]> =
    TableDefinition::new("offset_history");
const QUARANTINE: TableDefinition<(&str, &str, i32), &[u8]> = TableDefinition::new("quarantine");

const FORMAT_VERSION_KEY: &str = "format_version";

/// What the writer thread is asked to do (by the store, and drained by `recovery` while the
/// database is being reopened).
enum Command {
    Apply {
        ops: Vec<Op>,
        done: DurableSender,
    },
    /// Write what is already queued, then exit.
    Stop,
}

/// Durable coordinator state in one redb file, written by one group-committing thread.
///
/// `apply` encodes the batch on the caller's thread and queues it; it never waits for I/O.
/// `load` reads the last committed state and works until the store is dropped, even after
/// `close` (but not while it is recovering from a failed write). Dropping the store closes it.
pub struct RedbStore {
    shared: Arc<Shared>,
    commands: Sender<Command>,
    closed: AtomicBool,
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// What the store and its writer thread share.
pub(super) struct Shared {
    /// The database file.
    pub(super) path: PathBuf,
    /// The open database; `None` while the writer is reopening it after a failure.
    db: RwLock<Option<Arc<Database>>>,
    /// False from a failed write until a reopen and a probe write have succeeded.
    healthy: AtomicBool,
    pub(super) counters: Counters,
    /// Tests: how many upcoming rounds (and reopen attempts) fail as on a full disk.
    #[cfg(test)]
    pub(super) inject_failures: std::sync::atomic::AtomicU32,
}

impl Shared {
    /// The open database, unless the store is recovering.
    pub(super) fn database(&self) -> Result<Arc<Database>, StoreError> {
        self.db
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                StoreError::Unavailable(format!("{} is being reopened", self.path.display()))
            })
    }

    /// Takes the database out of the slot (readers then fail fast) to reopen it.
    pub(super) fn take_database(&self) -> Option<Arc<Database>> {
        self.db
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(super) fn put_database(&self, db: Database) {
        *self.db.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(db));
    }

    pub(super) fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// Tests: fails this write if a failure was injected.
    #[cfg(test)]
    pub(super) fn injected(&self) -> Result<(), StoreError> {
        let failing = self
            .inject_failures
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            Err(StoreError::Io("injected: No space left on device".into()))
        } else {
            Ok(())
        }
    }

    #[cfg(not(test))]
    pub(super) fn injected(&self) -> Result<(), StoreError> {
        Ok(())
    }

    pub(super) fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Ordering::Release);
        crate::metrics::storage_healthy(healthy);
    }
}

impl RedbStore {
    /// The file the store keeps inside its directory.
    pub const FILE_NAME: &'static str = "muster.redb";

    /// The store format this build reads and writes.
    pub const FORMAT_VERSION: u64 = 6;
    /// redb's page cache (its write buffer takes at most half). The store is written, not read,
    /// after startup; the cache only spares the writer re-reading the B-tree pages it updates,
    /// and those reads hit the OS page cache. 16 MiB held every page of a 1 000-group store in
    /// the heap (~260 B per idle member); with 1 MiB, commit throughput stayed within the
    /// noise of the store benchmark (≤ 4 %, p99 unchanged; docs/benchmarks.md).
    pub const CACHE_BYTES: usize = 1024 * 1024;

    /// Opens the store in `dir`, creating the directory and an empty store if missing.
    ///
    /// Fails with [`StoreError::Locked`] if another handle (in this process or another) has it
    /// open, [`StoreError::Unreadable`] if the directory or file cannot be used,
    /// [`StoreError::CorruptFile`] if the file is not a Muster store or fails its checks, and
    /// [`StoreError::UnsupportedFormat`] if it was written in another format version.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Unreadable {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        let path = dir.join(Self::FILE_NAME);
        let db = open_database(&path)?;
        let shared = Arc::new(Shared {
            path: path.clone(),
            db: RwLock::new(Some(Arc::new(db))),
            healthy: AtomicBool::new(true),
            counters: Counters::default(),
            #[cfg(test)]
            inject_failures: Default::default(),
        });
        crate::metrics::storage_healthy(true);

        let (commands, queue) = mpsc::channel();
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("muster-store-writer".into())
                .spawn(move || writer::run(&shared, queue))
                .map_err(|e| StoreError::Io(format!("cannot start the store writer: {e}")))?
        };
        debug!(path = %path.display(), "store opened");
        Ok(RedbStore {
            shared,
            commands,
            closed: AtomicBool::new(false),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// What the writer has committed so far: batches per round is how much group commit saves.
    pub fn stats(&self) -> WriterStats {
        self.shared.counters.snapshot()
    }

    /// Tests: the next `n` write rounds and reopen attempts fail as on a full disk.
    #[cfg(test)]
    pub(super) fn inject_failures(&self, n: u32) {
        self.shared.inject_failures.store(n, Ordering::Release);
    }
}

/// Opens (creating if missing) and checks the database file: at startup and on every
/// recovery. The integrity check verifies every page's checksum before anything is trusted: a
/// damaged file is refused here, clearly, instead of failing (or panicking inside redb)
/// somewhere later. It reads the whole file: ~150 ms for 100 000 groups and 1 000 000 offsets
/// (136 MiB). It also rolls back a commit that a failed write left half done.
fn open_database(path: &Path) -> Result<Database, StoreError> {
    // Everything the coordinator reads it reads once, at startup; afterwards the store is
    // written, not read. redb's default 1 GiB page cache would only hold on to memory
    // (measured ~280 B per idle member), so keep it small.
    let db = redb::Builder::new()
        .set_cache_size(RedbStore::CACHE_BYTES)
        .set_check_integrity_on_open(true)
        .create(path)
        .map_err(|e| open_error(path, e))?;
    check_format(&db, path)?;
    Ok(db)
}

impl Store for RedbStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        let db = self.shared.database()?;
        load::load(&db, &self.shared.path)
    }

    fn load_parking(&self) -> Result<ParkingLoad, StoreError> {
        let db = self.shared.database()?;
        load_parking::load_parking(&db, &self.shared.path)
    }

    fn load_group(&self, group_id: &str) -> Result<StoredGroup, StoreError> {
        if !self.shared.healthy() {
            return Err(StoreError::Unavailable(format!(
                "{} is recovering from a failed write",
                self.shared.path.display()
            )));
        }
        let db = self.shared.database()?;
        load::load_group(&db, &self.shared.path, group_id)
    }

    /// One read transaction over a handful of keys of the local file (pages mostly in the
    /// OS's cache).
    fn reads_one_group_cheaply(&self) -> bool {
        true
    }

    fn healthy(&self) -> bool {
        self.shared.healthy()
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        if self.closed.load(Ordering::Acquire) {
            return Durable::ready(Err(StoreError::Closed));
        }
        // Fail fast while recovering: no queue builds up behind a full disk.
        if !self.shared.healthy() {
            return Durable::ready(Err(StoreError::Unavailable(format!(
                "{} is recovering from a failed write",
                self.shared.path.display()
            ))));
        }
        let ops = match writer::prepare(batch) {
            Ok(ops) => ops,
            Err(e) => return Durable::ready(Err(e)),
        };
        let (done, durable) = Durable::pending();
        // If the writer is gone the command comes back and is dropped with its sender, which
        // resolves the `Durable` to `Closed`. The same happens to a batch that races `close`
        // and lands in the queue after the writer's last round.
        let _ = self.commands.send(Command::Apply { ops, done });
        durable
    }

    fn close(&self) -> Result<(), StoreError> {
        self.closed.store(true, Ordering::Release);
        // The lock only guards taking the handle; a panic elsewhere cannot leave it torn.
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(handle) = handle else {
            return Ok(());
        };
        // Queued behind every batch already submitted: the writer commits them, then exits.
        let _ = self.commands.send(Command::Stop);
        handle.join().map_err(|_| {
            StoreError::Io(format!(
                "the writer thread of {} panicked",
                self.shared.path.display()
            ))
        })?;
        debug!(path = %self.shared.path.display(), "store closed");
        Ok(())
    }
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            warn!(path = %self.shared.path.display(), %error, "store did not close cleanly");
        }
    }
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.shared.path)
            .field("healthy", &self.shared.healthy())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A failure while writing: the writer answers every batch of the round with it.
pub(super) fn runtime_error(error: impl Into<redb::Error>) -> StoreError {
    match error.into() {
        redb::Error::Corrupted(reason) => StoreError::Corrupt(reason),
        redb::Error::ValueTooLarge(len) => {
            StoreError::Rejected(format!("a value of {len} bytes is too large to store"))
        }
        other => StoreError::Io(other.to_string()),
    }
}

/// Maps redb's refusal to open a file to what the operator should do about it.
fn open_error(path: &Path, error: DatabaseError) -> StoreError {
    let path = path.to_path_buf();
    match error {
        DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => {
            StoreError::Locked { path }
        }
        DatabaseError::Storage(StorageError::Corrupted(reason)) => {
            StoreError::CorruptFile { path, reason }
        }
        // redb reports "not a redb file" (wrong magic number) as InvalidData, and a file too
        // short to hold a header as UnexpectedEof.
        DatabaseError::Storage(StorageError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            StoreError::CorruptFile {
                path,
                reason: e.to_string(),
            }
        }
        DatabaseError::UpgradeRequired(version) => StoreError::Unreadable {
            path,
            reason: format!(
                "the file uses redb file format {version}, which this build cannot open"
            ),
        },
        other => StoreError::Unreadable {
            path,
            reason: other.to_string(),
        },
    }
}

/// Checks the format version of an existing store, or writes it (and creates the tables) in a
/// new one. A file with tables but no version is someone else's redb file: refused.
fn check_format(db: &Database, path: &Path) -> Result<(), StoreError> {
    let corrupt = |reason: String| StoreError::CorruptFile {
        path: path.to_path_buf(),
        reason,
    };
    let unreadable = |e: redb::Error| match e {
        redb::Error::Corrupted(reason) => corrupt(reason),
        other => StoreError::Unreadable {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    };

    let txn = db.begin_read().map_err(|e| unreadable(e.into()))?;
    let version = match txn.open_table(META) {
        Ok(meta) => meta
            .get(FORMAT_VERSION_KEY)
            .map_err(|e| unreadable(e.into()))?
            .map(|v| v.value()),
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(corrupt(format!("its meta table: {e}"))),
    };
    match version {
        Some(RedbStore::FORMAT_VERSION) => {
            // Every table must exist with the types this version gives it.
            check_table(&txn, GROUPS).map_err(&corrupt)?;
            check_table(&txn, OFFSETS).map_err(&corrupt)?;
            check_table(&txn, TOPICS).map_err(&corrupt)?;
            check_table(&txn, JOURNAL).map_err(&corrupt)?;
            check_table(&txn, HISTORY).map_err(&corrupt)?;
            check_table(&txn, QUARANTINE).map_err(&corrupt)?;
            Ok(())
        }
        Some(old @ (1..=5)) => {
            check_table(&txn, GROUPS).map_err(&corrupt)?;
            check_table(&txn, OFFSETS).map_err(&corrupt)?;
            check_table(&txn, TOPICS).map_err(&corrupt)?;
            if old >= 3 {
                check_table(&txn, JOURNAL).map_err(&corrupt)?;
            }
            if old == 5 {
                check_table(&txn, HISTORY_V5).map_err(&corrupt)?;
                check_table(&txn, QUARANTINE).map_err(&corrupt)?;
            }
            drop(txn);
            migrate(db, old).map_err(|e| match e {
                MigrationError::Store(e) => unreadable(e),
                MigrationError::Codec(e) => corrupt(e.to_string()),
            })
        }
        Some(found) => Err(StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            found,
            supported: RedbStore::FORMAT_VERSION,
        }),
        None => {
            let tables = txn.list_tables().map_err(|e| unreadable(e.into()))?.count();
            if tables > 0 {
                return Err(corrupt(
                    "it holds tables but no Muster format version, so it is not a Muster store"
                        .into(),
                ));
            }
            drop(txn);
            initialize(db).map_err(unreadable)
        }
    }
}

fn check_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    table: TableDefinition<K, V>,
) -> Result<(), String> {
    txn.open_table(table)
        .map(drop)
        .map_err(|e| format!("table {table}: {e}"))
}

enum MigrationError {
    Store(redb::Error),
    Codec(codec::CodecError),
}

impl<E: Into<redb::Error>> From<E> for MigrationError {
    fn from(e: E) -> Self {
        MigrationError::Store(e.into())
    }
}

/// Migrates a file of format version `from` (1 to 5) to the current one, in one transaction
/// (a crash leaves it at `from`, to migrate again).
///
/// - 1 → 2: rewrites every group value with no owners recorded (its groups and members count
///   against no principal until they are next written by a principal's request).
/// - 2 → 3: creates the (empty) `journal` table: groups have no history yet.
/// - 3 → 4: rewrites every group value with no consumer part (a release that wrote format 3
///   had no consumer-protocol groups).
/// - 4 → 5: rewrites every group value with no ownership epochs (a release that wrote format
///   4 kept none: each partition gets its first when it is next granted) and creates the (empty)
///   `offset_history` and `quarantine` tables: offsets have no history yet, and nothing is
///   quarantined.
/// - 5 → 6: rewrites each partition's offset history entries (`offset_history`, one row each)
///   as one run (`offset_history_runs`) and deletes the old table; group values are unchanged.
///
/// Group values are rewritten once, from the format they are in straight to the current one.
fn migrate(db: &Database, from: u64) -> Result<(), MigrationError> {
    let decode = match from {
        1 => Some(codec::decode_group_v1 as codec::GroupDecoder),
        2 | 3 => Some(codec::decode_group_v2 as codec::GroupDecoder),
        4 => Some(codec::decode_group_v3 as codec::GroupDecoder),
        _ => None,
    };
    let txn = db.begin_write()?;
    let (migrated, runs) = {
        let mut groups = txn.open_table(GROUPS)?;
        let mut rewritten = Vec::new();
        if let Some(decode) = decode {
            for entry in groups.iter()? {
                let (key, value) = entry?;
                let record = decode(key.value(), value.value()).map_err(MigrationError::Codec)?;
                rewritten.push(codec::encode_group(record).map_err(MigrationError::Codec)?);
            }
        }
        for (group_id, bytes) in &rewritten {
            groups.insert(group_id.as_str(), bytes.as_slice())?;
        }
        txn.open_table(JOURNAL)?;
        txn.open_table(QUARANTINE)?;
        let runs = if from == 5 {
            migrate_history_to_runs(&txn)?
        } else {
            txn.open_table(HISTORY)?;
            0
        };
        let mut meta = txn.open_table(META)?;
        meta.insert(FORMAT_VERSION_KEY, RedbStore::FORMAT_VERSION)?;
        (rewritten.len(), runs)
    };
    txn.commit()?;
    info!(
        groups_rewritten = migrated,
        history_runs_written = runs,
        from,
        to = RedbStore::FORMAT_VERSION,
        "store format migrated"
    );
    Ok(())
}

/// Format 5 → 6: each partition's history rows become one run; the old table is deleted.
/// Returns the number of runs written.
fn migrate_history_to_runs(txn: &redb::WriteTransaction) -> Result<usize, MigrationError> {
    let mut runs = txn.open_table(HISTORY)?;
    let mut written = 0;
    {
        let old = txn.open_table(HISTORY_V5)?;
        let mut partition: Option<(String, String, i32)> = None;
        let mut entries = Vec::new();
        let mut flush = |partition: &Option<(String, String, i32)>,
                         entries: &mut Vec<crate::storage::HistoryEntry>|
         -> Result<(), MigrationError> {
            if let (Some((group, topic, p)), false) = (partition, entries.is_empty()) {
                let (first_seq, value) =
                    codec::encode_history_run(entries).map_err(MigrationError::Codec)?;
                runs.insert(
                    (group.as_str(), topic.as_str(), *p, first_seq),
                    value.as_slice(),
                )?;
                written += 1;
            }
            entries.clear();
            Ok(())
        };
        for row in old.iter()? {
            let (key, value) = row?;
            let (group, topic, p, seq) = key.value();
            if partition
                .as_ref()
                .is_none_or(|(g, t, q)| (g.as_str(), t.as_str(), *q) != (group, topic, p))
            {
                flush(&partition, &mut entries)?;
                partition = Some((group.to_owned(), topic.to_owned(), p));
            }
            entries.push(codec::decode_history(seq, value.value()).map_err(|e| {
                MigrationError::Codec(codec::CodecError::new(format!(
                    "offset history of {group:?} {topic:?}/{p}: {e}"
                )))
            })?);
        }
        flush(&partition, &mut entries)?;
    }
    txn.delete_table(HISTORY_V5)?;
    Ok(written)
}

/// Writes the format version and creates the tables of a new store.
fn initialize(db: &Database) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    {
        let mut meta = txn.open_table(META)?;
        meta.insert(FORMAT_VERSION_KEY, RedbStore::FORMAT_VERSION)?;
        txn.open_table(GROUPS)?;
        txn.open_table(OFFSETS)?;
        txn.open_table(TOPICS)?;
        txn.open_table(JOURNAL)?;
        txn.open_table(HISTORY)?;
        txn.open_table(QUARANTINE)?;
    }
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod history_tests;
#[cfg(test)]
mod tests;
