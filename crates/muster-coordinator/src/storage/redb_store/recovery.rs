//! How the writer gets the store back after a failed write: a full disk (ENOSPC), an I/O
//! error (EIO), anything that may have left the redb `Database` poisoned (redb fails every
//! call after an I/O error inside a commit with `PreviousIo`; only a reopen clears it).
//!
//! While the store is unhealthy, `apply` refuses batches at once and any that raced in are
//! answered here with [`StoreError::Unavailable`]; nothing queues behind a dead disk. The
//! writer retries with exponential backoff ([`Backoff`]: 50 ms doubling to 5 s): check that
//! the filesystem takes [`SPACE_PROBE_BYTES`] more (a file written, fsync'd and removed beside
//! the store), drop the old handle, reopen the file (which checks it and rolls a half-written
//! commit back), and commit a probe write. Only then does the store take writes again.
//!
//! The space check matters: redb reuses pages that earlier commits freed inside its file, so a
//! probe commit alone succeeds on a full disk, and the store would flap between healthy and
//! failing while no real write can succeed. The backoff is reset by the first real round that
//! commits, not by the probes: a disk with just enough room for them fails the next round and
//! waits longer before the next try.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::Database;
use tracing::{info, warn};

use super::{open_database, runtime_error, Command, RedbStore, Shared, FORMAT_VERSION_KEY, META};
use crate::storage::StoreError;

/// Wait before the first reopen attempt.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest wait between attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);
/// Free space the filesystem must show (by taking a file of this size) before the store takes
/// writes again.
const SPACE_PROBE_BYTES: usize = 1024 * 1024;
/// The space probe's file, beside the store's; removed after each check.
const SPACE_PROBE_FILE: &str = "muster.space-probe";

/// How long a reopen waits for readers to let go of the old handle before trying later.
const RELEASE_WAIT: Duration = Duration::from_millis(200);

/// The wait before the next reopen attempt.
#[derive(Debug)]
pub(super) struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(RETRY_FIRST)
    }
}

impl Backoff {
    pub(super) fn reset(&mut self) {
        self.0 = RETRY_FIRST;
    }

    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (self.0 * 2).min(RETRY_MAX);
        wait
    }
}

/// Reopens the store until a probe write commits. Returns false if told to stop (or every
/// sender is gone) first: the store is then closing, unhealthy.
pub(super) fn recover(
    shared: &Shared,
    commands: &Receiver<Command>,
    backoff: &mut Backoff,
) -> bool {
    let path = &shared.path;
    warn!(path = %path.display(), "storage failing: refusing writes until it has recovered");
    // Readers see the slot empty and fail fast; the handle is dropped once they let go.
    let mut old = shared.take_database();
    loop {
        if !wait(commands, backoff.next()) {
            return false;
        }
        if let Some(db) = old.take() {
            old = release(db).err();
            if old.is_some() {
                continue;
            }
        }
        let reopened = shared
            .injected()
            .and_then(|()| probe_space(path))
            .and_then(|()| open_database(path))
            .and_then(|db| probe(&db).map(|()| db));
        match reopened {
            Ok(db) => {
                shared.put_database(db);
                shared.set_healthy(true);
                info!(path = %path.display(), "storage recovered: writes accepted again");
                return true;
            }
            Err(error) => {
                crate::metrics::storage_error();
                warn!(path = %path.display(), %error, "storage still failing; will retry");
            }
        }
    }
}

/// Sleeps for `period`, answering every batch that arrives meanwhile with
/// [`StoreError::Unavailable`]. False if told to stop.
fn wait(commands: &Receiver<Command>, period: Duration) -> bool {
    let until = Instant::now() + period;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        match commands.recv_timeout(left) {
            Ok(Command::Apply { done, .. }) => done.complete(Err(StoreError::Unavailable(
                "the store is recovering from a failed write".into(),
            ))),
            Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => return true,
        }
    }
}

/// Drops the last handle to the old database (which releases its file lock), waiting a little
/// for a reader that still holds a clone. Gives the handle back if it is still shared.
fn release(mut db: Arc<Database>) -> Result<(), Arc<Database>> {
    let until = Instant::now() + RELEASE_WAIT;
    loop {
        match Arc::try_unwrap(db) {
            Ok(db) => {
                drop(db);
                return Ok(());
            }
            Err(shared) if Instant::now() < until => {
                db = shared;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(shared) => return Err(shared),
        }
    }
}

/// Whether the filesystem holding `store` takes [`SPACE_PROBE_BYTES`] more, durably.
fn probe_space(store: &Path) -> Result<(), StoreError> {
    let probe = store.with_file_name(SPACE_PROBE_FILE);
    let written = std::fs::File::create(&probe).and_then(|mut file| {
        file.write_all(&vec![0; SPACE_PROBE_BYTES])?;
        file.sync_all()
    });
    // Removed whatever happened: it must not take the space it was testing for.
    let _ = std::fs::remove_file(&probe);
    written.map_err(|e| {
        StoreError::Io(format!(
            "{} cannot take {SPACE_PROBE_BYTES} more bytes: {e}",
            probe.display()
        ))
    })
}

/// A small durable write: proof that the disk takes writes again.
fn probe(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(runtime_error)?;
    {
        let mut meta = txn.open_table(META).map_err(runtime_error)?;
        meta.insert(FORMAT_VERSION_KEY, RedbStore::FORMAT_VERSION)
            .map_err(runtime_error)?;
    }
    txn.commit().map_err(runtime_error)
}
