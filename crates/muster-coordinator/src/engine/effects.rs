//! The engine's one answer: [`Effects`], everything a call asks its shell to do.
//!
//! Every entry point of a group engine takes the message and `now` and returns an `Effects`
//! (openraft's engine is the model: the engine decides, the shell carries out). The shell — the
//! group actor — does not ask the engine anything afterwards: replies to send now, writes to
//! make durable (with the replies that wait for each), the next deadline to arm, events for the
//! operator, and quota or budget units to take back are all in the value. A second engine (the
//! consumer protocol's) returns the same type, so one shell carries out both.
//!
//! The engine holds no shared counters. Units of the server-wide pending-id budget and of a
//! principal's `max_members` quota are counted by the shell: what a JoinGroup may need is asked
//! before the call ([`Group::join_needs`](super::Group::join_needs)), reserved by the shell and
//! handed in as [`Grants`]; what the engine did not use, and what it stops holding (a member
//! left, a pending id expired), comes back as [`LedgerRequest`]s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use muster_protocol::{
    ErrorCode, OffsetCommitResponse, OffsetResetResponse, OffsetRestoreResponse, Response,
};

use super::Event;
use crate::storage::records::{HistoryWrite, OffsetWrite, QuarantinedOffset};
use crate::storage::Mutation;
use crate::types::{Millis, PrincipalName};

/// What one engine call asks its shell to do. The group actor carries it out in this order:
/// log `events`, apply `ledger`, send `replies`, start `writes` (each write's own replies leave
/// once it is durable), arm a timer for `deadline`. Nothing in one field depends on another
/// being done first. An empty `Effects` allocates nothing (an idle group makes one per call and
/// keeps none).
#[derive(Debug)]
#[must_use = "the shell must carry out what the engine asked for"]
pub struct Effects<R> {
    /// Answers that depend on nothing unwritten: sent at once, in order.
    pub replies: Vec<(R, Response)>,
    /// What must reach storage, in order; see [`Write`].
    pub writes: Vec<Write<R>>,
    /// The group's earliest deadline, when it moved earlier than any it reported before: the
    /// shell delivers `tick` at (or after) it. `None`: what was reported still holds (a timer
    /// that fires early is harmless: `tick` reports the full next deadline).
    pub deadline: Option<Millis>,
    /// For the operator (logs, metrics): what happened.
    pub events: Vec<Event>,
    /// Units of the shell's counters to give back (or, for a restored group, to count).
    pub ledger: Vec<LedgerRequest>,
    /// A consumer-protocol target to compute off the group's turn (`consumer/assign.rs`): the
    /// shell runs it on a blocking thread and hands the result back with
    /// [`Group::target_computed`](super::Group::target_computed).
    pub assignment: Option<AssignmentJob>,
    /// Set while the call runs: the group's record changed in a way that must survive a crash.
    /// Sealing the call turns it into a [`Write::Record`] holding every reply.
    pub(super) persist: bool,
    /// Offsets past retention, gathered while the call runs; sealed into a
    /// [`Write::BestEffort`].
    pub(super) expired_offsets: Vec<(String, i32)>,
    /// Offsets past retention moved to the quarantine, gathered while the call runs; sealed
    /// into a [`Write::BestEffort`].
    pub(super) quarantined: Vec<QuarantinedOffset>,
    /// Set by sealing: the call changed the group's record (written now, or owed to the next
    /// record write while one is in flight).
    pub(super) record_changed: bool,
}

impl<R> Default for Effects<R> {
    fn default() -> Self {
        Self {
            replies: Vec::new(),
            writes: Vec::new(),
            deadline: None,
            events: Vec::new(),
            ledger: Vec::new(),
            assignment: None,
            persist: false,
            expired_offsets: Vec::new(),
            quarantined: Vec::new(),
            record_changed: false,
        }
    }
}

impl<R> Effects<R> {
    pub(super) fn reply(&mut self, to: R, response: Response) {
        self.replies.push((to, response));
    }

    /// Whether a rebalance-level change happened (the group's record changed, or an event was
    /// emitted): the shell refreshes what it shows of the group's insight then, never after a
    /// plain commit or fetch.
    pub fn changed_group(&self) -> bool {
        self.record_changed || !self.events.is_empty()
    }
}

/// One write the shell makes durable.
#[derive(Debug)]
pub enum Write<R> {
    /// The group's record changed: `batch` (its record and the journal entries that changed,
    /// or its deletion) must be durable before `replies` leave. The engine hands out one at a
    /// time: once it is durable or has failed, the shell reports it with
    /// [`Group::record_written`](super::Group::record_written), which starts the next one if
    /// calls meanwhile changed the record (built then, from the latest state). If it fails,
    /// what the engine holds is ahead of disk: the shell answers `replies` with an error and
    /// rebuilds the group from storage.
    Record {
        batch: Vec<Mutation>,
        replies: Vec<(R, Response)>,
    },
    /// Committed offsets (OffsetCommit): once `batch` is durable or has failed, the shell hands
    /// `commit` back with [`Group::commit_written`](super::Group::commit_written), which makes
    /// the offsets visible and answers. Commits do not wait for each other.
    Commit {
        batch: Vec<Mutation>,
        commit: PendingCommit<R>,
    },
    /// Nobody waits (offsets past retention): a failure only means they come back after a
    /// restart and expire again.
    BestEffort(Vec<Mutation>),
}

/// An offset write in flight (an OffsetCommit, an executed OffsetReset or OffsetRestore, or a
/// restore on join): opaque to the shell, handed back to the engine.
#[derive(Debug)]
pub struct PendingCommit<R> {
    pub(super) reply: Option<R>,
    pub(super) answer: PendingAnswer,
    pub(super) offsets: Vec<OffsetWrite>,
    /// Partitions whose offset the write removes (a reset to before their first commit).
    pub(super) removed: Vec<(String, i32)>,
    /// The history entries it writes.
    pub(super) history: Vec<HistoryWrite>,
    /// `Some`: the commit's history entries are made once it is durable and written by the
    /// group's next history flush (`offset_history_flush_ms`, `history.rs`).
    pub(super) history_deferred: Option<Deferred>,
    /// Offsets it takes out of the quarantine (put back if the write fails).
    pub(super) unquarantined: Vec<QuarantinedOffset>,
    /// The write also records the group's creator (a member-less group made by a commit).
    pub(super) records_owner: bool,
}

// Defined here, not in `history.rs` (which makes and reads them), so that this file names
// nothing of the engine's rule files: no import loop.
/// Who wrote an entry: shared by the entries of one write (one allocation per commit, not per
/// partition).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Writer {
    pub(super) member_id: Arc<str>,
    pub(super) client_id: Arc<str>,
    pub(super) client_host: Arc<str>,
}

/// A commit whose history entries are made once it is durable and written later: who wrote
/// it (one allocation per commit) and when.
#[derive(Debug)]
pub(super) struct Deferred {
    pub(super) writer: Arc<Writer>,
    pub(super) generation: i32,
    pub(super) at: Millis,
    pub(super) due: Millis,
}

/// The answer a [`PendingCommit`] owes once written.
#[derive(Debug)]
pub(super) enum PendingAnswer {
    Commit(OffsetCommitResponse),
    Reset(OffsetResetResponse),
    Restore(OffsetRestoreResponse),
}

impl PendingAnswer {
    /// The answer once the write is durable.
    pub(super) fn into_response(self) -> Response {
        match self {
            PendingAnswer::Commit(r) => Response::OffsetCommit(r),
            PendingAnswer::Reset(r) => Response::OffsetReset(r),
            PendingAnswer::Restore(r) => Response::OffsetRestore(r),
        }
    }

    /// The answer when the write failed with `code`: nothing of it was applied.
    pub(super) fn into_failure(self, code: ErrorCode) -> Response {
        let message = Some(if code == ErrorCode::InvalidRequest {
            "the store refused the write (the server's log says why): nothing was changed, and \
             the same request will be refused again"
                .to_owned()
        } else {
            format!(
                "the write failed ({}): nothing was changed; retry",
                code.name()
            )
        });
        match self {
            PendingAnswer::Commit(r) => {
                muster_protocol::error_answers::error_like(&Response::OffsetCommit(r), code)
            }
            PendingAnswer::Reset(r) => Response::OffsetReset(OffsetResetResponse {
                error_code: code.code(),
                error_message: message,
                executed: false,
                recorded_at_ms: 0,
                topics: r.topics,
            }),
            PendingAnswer::Restore(r) => Response::OffsetRestore(OffsetRestoreResponse {
                error_code: code.code(),
                error_message: message,
                executed: false,
                ..r
            }),
        }
    }
}

impl<R> PendingCommit<R> {
    /// How many partitions it writes (for the shell's metrics).
    pub fn partitions(&self) -> usize {
        self.offsets.len() + self.removed.len()
    }
}

/// A unit of a counter the shell keeps for the whole server, to give back or count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerRequest {
    /// Give back this many of the server's pending member ids (protocol §6.18).
    ReturnPendingIds(usize),
    /// Give back one unit of this principal's `max_members` (a member or pending id it held
    /// went, or a reserved unit was not used).
    ReturnMemberUnit(PrincipalName),
    /// Count one unit of this principal's `max_members` whatever its limit: a member restored
    /// from storage exists, and what exists is counted, never refused.
    CountMemberUnit(PrincipalName),
}

/// What the shell reserved for one JoinGroup, as asked by
/// [`Group::join_needs`](super::Group::join_needs). A reservation the engine does not use
/// comes back as a [`LedgerRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grants {
    /// A unit of the joining principal's `max_members`.
    pub member_unit: Grant,
    /// One of the server's pending member ids.
    pub pending_id: Grant,
}

/// One reservation's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// Not asked for (the engine said it would not need it).
    #[default]
    NotAsked,
    /// Reserved for this call.
    Granted,
    /// Asked for and refused: the counter is at its limit.
    Refused,
}

/// What one JoinGroup may need from the shell's counters ([`Group::join_needs`]
/// (super::Group::join_needs)); the shell reserves each, in this order (the principal's quota
/// first, so that an over-quota principal does not spend the server's pending ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JoinNeeds {
    pub member_unit: bool,
    pub pending_id: bool,
}

/// A consumer-protocol target assignment to compute off the group's turn
/// (`consumer/assign.rs`): run it with `AssignmentJob::run` (pure, any thread) and hand the
/// result back with [`Group::target_computed`](super::Group::target_computed). A snapshot: the
/// members' resolved subscriptions, the partition counts and the current targets.
#[derive(Debug)]
pub struct AssignmentJob {
    pub(super) epoch: i32,
    pub(super) assignor: String,
    pub(super) members: BTreeMap<String, BTreeSet<String>>,
    pub(super) counts: BTreeMap<String, i32>,
    pub(super) current: BTreeMap<String, BTreeMap<String, BTreeSet<i32>>>,
}

/// A computed target, for [`Group::target_computed`](super::Group::target_computed). Opaque to
/// the shell.
#[derive(Debug)]
pub struct ComputedTarget {
    pub(super) epoch: i32,
    pub(super) assignor: String,
    pub(super) target: BTreeMap<String, BTreeMap<String, BTreeSet<i32>>>,
}
