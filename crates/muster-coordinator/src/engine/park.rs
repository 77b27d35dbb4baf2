//! Whether a group may be parked: held by the shell as plain data, with no actor of its own,
//! until a request, an admin call or its next deadline wakes it (`actors/group/park.rs`).
//!
//! A parked group must need nothing but its data: no member to expire, no request held, no
//! write or assignment whose outcome must come back to it. What it may keep is what an
//! abandoned group keeps — offsets, offset history, the quarantine, the rebalance journal —
//! and the deadlines of retention and the quarantine, which the shell keeps for it.

use super::*;

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
            && self.commits_in_flight == 0
            && self.consumer_waiters.is_empty()
            && self
                .consumer
                .as_deref()
                .is_none_or(|part| part.assigning.is_none())
            && self.history_due().is_none()
    }
}
