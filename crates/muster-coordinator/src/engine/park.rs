//! Whether a group may be parked: held by the shell as plain data, with no actor of its own,
//! until a request, an admin call or its next deadline wakes it (`actors/group/park.rs`).
//!
//! A parked group must need nothing but its data: no member to expire, no request held, no
//! write or assignment whose outcome must come back to it. What it may keep is what an
//! abandoned group keeps — offsets, offset history, the quarantine, the rebalance journal —
//! and the deadlines of retention and the quarantine, which the shell keeps for it.

use super::*;
use crate::storage::records::{
    GroupRecord, HistoryWrite, OffsetWrite, QuarantinedOffset, RebalanceRecord,
};

impl<R> Group<R> {
    /// Whether nothing but data is left: Empty, no member of either protocol, no pending
    /// member id (each holds a deadline and a unit of a quota), nothing held or owed, no write
    /// of the record or of offsets in flight, no assignment being computed and no offset
    /// history waiting for its flush. Such a group holds no unit of the shell's counters
    /// (`release_all` gives back nothing), and a change of topics is nothing to it (only
    /// members subscribe), so it need not be told of one.
    pub fn is_parkable(&self) -> bool {
        self.state == GroupState::Empty
            && self.member_count() == 0
            && self.pending.is_empty()
            && self.num_awaiting_join == 0
            && self.barrier.is_none()
            && self.sync_window.is_none()
            && !self.record_in_flight
            && self.record_owed.is_none()
            && self.record_awaited.is_none()
            && self.commits_in_flight == 0
            && self.consumer_waiters.is_empty()
            && self
                .consumer
                .as_deref()
                .is_none_or(|part| part.assigning.is_none())
            && self.history_due().is_none()
    }
}

/// What a parked group's data is read back from: everything the store holds for it
/// (`Store::load_group`, taken apart by the shell, as the engine does not name the store).
pub struct StoredParts {
    /// Its record, if one was ever written (a group of simple commits has none).
    pub record: Option<GroupRecord>,
    pub offsets: Vec<OffsetWrite>,
    pub journal: Vec<RebalanceRecord>,
    pub history: Vec<HistoryWrite>,
    pub quarantine: Vec<QuarantinedOffset>,
}

impl<R> Group<R> {
    /// A group parked with its data in the store only, read back: what [`Group::restore`]
    /// makes of `stored` (as at startup), with the two things the store may not hold as the
    /// group had them. `state_since`: when it went Empty (a group that never had a record
    /// written is restored Empty since *now*, which would push its offsets' expiry — the
    /// later of commit and `state_since`, plus retention — to every wake, so that a group
    /// woken by its own retention deadline would never expire anything). `created_by`: its
    /// creator, whose `max_groups` unit the shell holds (a group of simple commits records it
    /// only with its first commit, and not at all without an auth file).
    ///
    /// Only for a group that was parkable when parked: Empty, with no member.
    pub fn unpark(
        group_id: String,
        stored: StoredParts,
        state_since: Millis,
        created_by: Option<Arc<str>>,
        config: Arc<GroupConfig>,
        now: Millis,
    ) -> (Self, Vec<LedgerRequest>) {
        let record = stored
            .record
            .unwrap_or_else(|| GroupRecord::empty(group_id, state_since));
        let (mut group, counted) = Group::restore(record, stored.offsets, config, now);
        group.restore_journal(stored.journal);
        group.restore_offset_records(stored.history, stored.quarantine);
        if group.state == GroupState::Empty {
            group.state_since = state_since;
        }
        if group.created_by.is_none() && created_by.is_some() {
            group.set_created_by(created_by);
        }
        // The full next deadline, as after any restore: the shell arms it.
        group.rearm();
        (group, counted)
    }
}

/// The next deadline of a group loaded parked from its summary, with no engine built: what
/// [`Group::next_deadline`] of the group restored from the same data would be, since
/// retention and the quarantine are all the deadlines such a group has. `state_since`: when it
/// went Empty; `oldest_commit`: its oldest offset's commit; `oldest_quarantined`: when its
/// oldest quarantined offset went in (`None`: no offset, no quarantine).
pub fn parked_deadline(
    config: &GroupConfig,
    state_since: Millis,
    oldest_commit: Option<Millis>,
    oldest_quarantined: Option<Millis>,
) -> Option<Millis> {
    let retention = super::timers::retention_due(
        config,
        state_since,
        oldest_commit,
        oldest_quarantined.is_some(),
    );
    let quarantine = super::quarantine::quarantine_due(config, oldest_quarantined);
    retention.into_iter().chain(quarantine).min()
}
