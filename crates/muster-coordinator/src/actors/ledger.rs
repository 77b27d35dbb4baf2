//! The server-wide counters group engines draw on, kept by the shell: the budget of pending
//! member ids (protocol §6.18, `max_pending_member_ids`) and every principal's `max_members`
//! quota (protocol §6). The engine holds no counter: it says what a JoinGroup may need
//! ([`Group::join_needs`]), the shell reserves it here and hands the outcome in as [`Grants`],
//! and what the engine gives back comes out of its effects as [`LedgerRequest`]s, applied here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::access::Access;
use crate::engine::{Grant, Grants, Group, JoinNeeds, LedgerRequest};
use crate::quota::{QuotaKind, Quotas};

/// Member ids handed out with MEMBER_ID_REQUIRED and not yet joined, counted over every group
/// of the server (protocol §6.4): one counter shared by every group actor.
#[derive(Debug, Clone, Default)]
pub struct PendingBudget(Arc<AtomicUsize>);

impl PendingBudget {
    /// Takes one unit unless `max` are already taken.
    fn try_take(&self, max: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < max).then_some(used + 1)
            })
            .is_ok()
    }

    /// Gives back `n` units.
    fn release(&self, n: usize) {
        if n > 0 {
            // Never below zero, whatever a caller does.
            let _ = self
                .0
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                    Some(used.saturating_sub(n))
                });
        }
    }

    /// Pending ids held now, over all groups.
    pub fn in_use(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// The counters, as every group actor shares them.
#[derive(Debug, Clone)]
pub struct Ledger {
    quotas: Quotas,
    pending: PendingBudget,
    max_pending: usize,
}

impl Ledger {
    pub fn new(quotas: Quotas, max_pending_member_ids: usize) -> Self {
        Ledger {
            quotas,
            pending: PendingBudget::default(),
            max_pending: max_pending_member_ids,
        }
    }

    pub fn pending(&self) -> &PendingBudget {
        &self.pending
    }

    /// Reserves what a JoinGroup of `access` may need: the principal's unit first, and a
    /// pending id only if that was not refused (an over-quota principal does not spend the
    /// server's pending ids).
    fn reserve(&self, needs: JoinNeeds, access: &Access) -> Grants {
        let member_unit = match (needs.member_unit, access.quota()) {
            (true, Some(quota)) => match quota.try_count(QuotaKind::Members) {
                Ok(()) => Grant::Granted,
                Err(_) => Grant::Refused,
            },
            _ => Grant::NotAsked,
        };
        let pending_id = if needs.pending_id && member_unit != Grant::Refused {
            if self.pending.try_take(self.max_pending) {
                Grant::Granted
            } else {
                Grant::Refused
            }
        } else {
            Grant::NotAsked
        };
        Grants {
            member_unit,
            pending_id,
        }
    }

    /// What the shell reserves before handing a JoinGroup to `group`: what the engine says it
    /// may need, reserved.
    pub fn reserve_for_join<R>(
        &self,
        group: &Group<R>,
        req: &muster_protocol::JoinGroupRequest,
        client: &crate::engine::ClientInfo,
    ) -> Grants {
        self.reserve(group.join_needs(req, client), &client.access)
    }

    /// Reserves a unit of `access`'s principal's `max_members` when `needed` (a new
    /// consumer-protocol member: `Group::consumer_join_needs_unit`).
    pub fn reserve_member_unit(&self, needed: bool, access: &Access) -> Grant {
        self.reserve(
            JoinNeeds {
                member_unit: needed,
                pending_id: false,
            },
            access,
        )
        .member_unit
    }

    /// Carries out what an engine gave back (or, for a restored group, counts what exists).
    pub fn apply(&self, requests: impl IntoIterator<Item = LedgerRequest>) {
        for request in requests {
            match request {
                LedgerRequest::ReturnPendingIds(n) => self.pending.release(n),
                LedgerRequest::ReturnMemberUnit(principal) => self
                    .quotas
                    .get(principal.as_str())
                    .give_back(QuotaKind::Members),
                LedgerRequest::CountMemberUnit(principal) => self
                    .quotas
                    .get(principal.as_str())
                    .count_in(QuotaKind::Members),
            }
        }
    }
}
