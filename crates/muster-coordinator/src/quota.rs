//! Per-principal quotas on what a principal holds (protocol §5 "Quotas": `max_groups` counts the existing
//! groups it created, `max_members` its members and pending member ids across groups). A
//! [`Quota`] keeps the counts. A group's registry entry holds its creator's unit as a
//! [`QuotaSlot`], which gives it back when dropped, whatever way the group goes. Members' units
//! are counts the shell's ledger (`actors/ledger.rs`) takes and gives back on the group engine's
//! word: the engine holds only the principal's name and returns the unit from the one place a
//! member leaves its map. [`Quotas`] is the table by principal name that the auth file's
//! reloads and the store's recovery share, so counts survive both.
//!
//! The request-rate quota is not here: it throttles reading a connection (the server's
//! session), it holds nothing.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::types::PrincipalName;

/// Unlimited, in the atomic limit fields.
const UNLIMITED: u32 = u32::MAX;

/// What a slot counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaKind {
    Groups,
    Members,
}

impl QuotaKind {
    /// The gauge of a principal's usage.
    fn metric(self) -> &'static str {
        match self {
            QuotaKind::Groups => "muster_quota_groups",
            QuotaKind::Members => "muster_quota_members",
        }
    }
}

/// One principal's limits and current usage.
pub struct Quota {
    principal: Arc<str>,
    /// The same name as group engines hold it (one pointer per member).
    name: PrincipalName,
    max_groups: AtomicU32,
    max_members: AtomicU32,
    groups: AtomicU32,
    members: AtomicU32,
}

impl Quota {
    pub fn unlimited(principal: Arc<str>) -> Self {
        Quota {
            name: PrincipalName::new(&principal),
            principal,
            max_groups: AtomicU32::new(UNLIMITED),
            max_members: AtomicU32::new(UNLIMITED),
            groups: AtomicU32::new(0),
            members: AtomicU32::new(0),
        }
    }

    pub fn principal(&self) -> &Arc<str> {
        &self.principal
    }

    /// The principal's name as group engines hold it.
    pub fn name(&self) -> &PrincipalName {
        &self.name
    }

    /// Sets the limits (`None` = unlimited). Units already held stay held; a lowered limit
    /// only refuses new ones.
    pub fn set_limits(&self, max_groups: Option<u32>, max_members: Option<u32>) {
        self.max_groups
            .store(max_groups.unwrap_or(UNLIMITED), Ordering::Relaxed);
        self.max_members
            .store(max_members.unwrap_or(UNLIMITED), Ordering::Relaxed);
    }

    pub fn max(&self, kind: QuotaKind) -> Option<u32> {
        let max = self.limit(kind).load(Ordering::Relaxed);
        (max != UNLIMITED).then_some(max)
    }

    /// Whether a new unit of `kind` would be refused now.
    pub fn at_limit(&self, kind: QuotaKind) -> bool {
        self.used(kind) >= self.limit(kind).load(Ordering::Relaxed)
    }

    pub fn used(&self, kind: QuotaKind) -> u32 {
        self.count(kind).load(Ordering::Relaxed)
    }

    fn limit(&self, kind: QuotaKind) -> &AtomicU32 {
        match kind {
            QuotaKind::Groups => &self.max_groups,
            QuotaKind::Members => &self.max_members,
        }
    }

    fn count(&self, kind: QuotaKind) -> &AtomicU32 {
        match kind {
            QuotaKind::Groups => &self.groups,
            QuotaKind::Members => &self.members,
        }
    }

    /// Sets the principal's usage gauge. Only on a take or a give-back (joins, leaves, group
    /// creation and removal), never on a heartbeat.
    fn report(&self, kind: QuotaKind, used: u32) {
        crate::metrics::quota_used(kind.metric(), &self.principal, used);
    }

    /// Counts one unit, unless that would pass the limit.
    pub(crate) fn try_count(&self, kind: QuotaKind) -> Result<(), QuotaExceeded> {
        let max = self.limit(kind).load(Ordering::Relaxed);
        self.count(kind)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < max).then_some(used + 1)
            })
            .map(|before| self.report(kind, before + 1))
            .map_err(|_| QuotaExceeded {
                principal: Arc::clone(&self.principal),
                kind,
                max,
            })
    }

    /// Counts one unit whatever the limit.
    pub(crate) fn count_in(&self, kind: QuotaKind) {
        let before = self.count(kind).fetch_add(1, Ordering::AcqRel);
        self.report(kind, before.saturating_add(1));
    }

    /// Gives one unit back; never below zero (a unit given back twice would otherwise wrap the
    /// count and lock the principal out for good).
    pub(crate) fn give_back(&self, kind: QuotaKind) {
        let before = self
            .count(kind)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(1))
            })
            .unwrap_or_default();
        debug_assert!(
            before > 0,
            "a {kind:?} unit of {} given back twice",
            self.principal
        );
        self.report(kind, before.saturating_sub(1));
    }

    /// Takes one unit, unless that would pass the limit.
    pub fn try_take(self: &Arc<Self>, kind: QuotaKind) -> Result<QuotaSlot, QuotaExceeded> {
        self.try_count(kind)?;
        Ok(QuotaSlot {
            quota: Arc::clone(self),
            kind,
        })
    }

    /// Takes one unit whatever the limit: for what already exists (a group or member loaded
    /// from the store), which a quota must count but cannot refuse.
    pub fn take(self: &Arc<Self>, kind: QuotaKind) -> QuotaSlot {
        self.count_in(kind);
        QuotaSlot {
            quota: Arc::clone(self),
            kind,
        }
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("principal", &self.principal)
            .field("groups", &self.used(QuotaKind::Groups))
            .field("max_groups", &self.max(QuotaKind::Groups))
            .field("members", &self.used(QuotaKind::Members))
            .field("max_members", &self.max(QuotaKind::Members))
            .finish()
    }
}

/// A principal at its limit (answered QUOTA_EXCEEDED).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("principal {principal} is at its {} quota ({max})", match kind {
    QuotaKind::Groups => "max_groups",
    QuotaKind::Members => "max_members",
})]
pub struct QuotaExceeded {
    pub principal: Arc<str>,
    pub kind: QuotaKind,
    pub max: u32,
}

/// One unit of a principal's quota, held by the group or member it counts; given back on drop.
pub struct QuotaSlot {
    quota: Arc<Quota>,
    kind: QuotaKind,
}

impl QuotaSlot {
    /// The principal this unit is charged to (what the store records as its owner).
    pub fn principal(&self) -> &Arc<str> {
        &self.quota.principal
    }
}

impl Drop for QuotaSlot {
    fn drop(&mut self) {
        self.quota.give_back(self.kind);
    }
}

impl fmt::Debug for QuotaSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QuotaSlot({}, {:?})", self.quota.principal, self.kind)
    }
}

/// Every principal's [`Quota`] by name, created on first use and kept for the life of the
/// process (a principal removed from the auth file keeps its counts, in case it comes back).
#[derive(Debug, Default, Clone)]
pub struct Quotas(Arc<Mutex<HashMap<Arc<str>, Arc<Quota>>>>);

impl Quotas {
    /// The principal's quota, made unlimited if it has none yet.
    pub fn get(&self, principal: &str) -> Arc<Quota> {
        let mut table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(quota) = table.get(principal) {
            return Arc::clone(quota);
        }
        let name: Arc<str> = Arc::from(principal);
        let quota = Arc::new(Quota::unlimited(Arc::clone(&name)));
        table.insert(name, Arc::clone(&quota));
        quota
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_up_to_the_limit_and_give_back_on_drop() {
        let quotas = Quotas::default();
        let quota = quotas.get("p");
        quota.set_limits(Some(2), None);
        let a = quota.try_take(QuotaKind::Groups).expect("first");
        let b = quota.try_take(QuotaKind::Groups).expect("second");
        let refused = quota.try_take(QuotaKind::Groups).expect_err("third");
        assert_eq!(refused.max, 2);
        assert_eq!(quota.used(QuotaKind::Groups), 2);
        drop(a);
        assert_eq!(quota.used(QuotaKind::Groups), 1);
        let _c = quota.try_take(QuotaKind::Groups).expect("room again");
        drop(b);
        // Members are unlimited and counted apart.
        let members: Vec<_> = (0..100)
            .map(|_| quota.try_take(QuotaKind::Members).expect("unlimited"))
            .collect();
        assert_eq!(quota.used(QuotaKind::Members), 100);
        drop(members);
        assert_eq!(quota.used(QuotaKind::Members), 0);
    }

    #[test]
    fn member_units_are_counted_and_given_back_by_name() {
        // Members' units are plain counts (the group engine holds the principal's name and
        // gives the unit back through the shell's ledger): no slot object per member.
        let quota = Quotas::default().get("p");
        quota.set_limits(None, Some(1));
        quota.try_count(QuotaKind::Members).expect("room for one");
        assert!(quota.try_count(QuotaKind::Members).is_err());
        assert_eq!(quota.used(QuotaKind::Members), 1);
        assert_eq!(quota.used(QuotaKind::Groups), 0);
        quota.count_in(QuotaKind::Members);
        assert_eq!(quota.used(QuotaKind::Members), 2);
        quota.give_back(QuotaKind::Members);
        quota.give_back(QuotaKind::Members);
        assert_eq!(quota.used(QuotaKind::Members), 0);
    }

    #[test]
    fn the_table_keeps_one_quota_per_name_across_lookups() {
        let quotas = Quotas::default();
        let slot = quotas.get("p").take(QuotaKind::Members);
        assert_eq!(quotas.get("p").used(QuotaKind::Members), 1);
        assert_eq!(slot.principal().as_ref(), "p");
        assert_eq!(quotas.get("q").used(QuotaKind::Members), 0);
    }

    #[test]
    fn loaded_units_are_counted_even_past_a_lowered_limit() {
        let quota = Quotas::default().get("p");
        quota.set_limits(None, Some(1));
        let _loaded = [
            quota.take(QuotaKind::Members),
            quota.take(QuotaKind::Members),
        ];
        assert_eq!(quota.used(QuotaKind::Members), 2);
        assert!(quota.try_take(QuotaKind::Members).is_err());
    }
}
