//! The supervisor's registry of groups: a slab whose keys carry a generation, so a message
//! from a group that has since been forgotten (its slot reused) never reaches the new
//! occupant, plus the group id → key index. Each group is at [`Home`]: its live actor, or
//! parked: as data, or as an index entry with its data in the store only (`group/park.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix::dev::ToEnvelope;
use actix::{Actor, Addr, Handler, MailboxError, Message};

use tracing::warn;

use super::group::{GroupActor, Parked, Reader, StoredIndex};
use super::reply::ReplyTo;
use crate::engine::{Group, Map};
use crate::logsafe::logsafe;
use crate::quota::QuotaSlot;
use crate::types::GroupState;

/// One group in the registry. The group id is the group's own allocation (shared with its
/// `Group`), so a group id is stored once however many tables name it.
pub(super) struct Entry {
    pub(super) group_id: Arc<str>,
    pub(super) home: Home,
    pub(super) state: GroupState,
    pub(super) members: u32,
    /// The unit of its creator's `max_groups` the group holds, given back when the entry is
    /// removed (deleted, expired, or an Empty group with no offsets left); its principal is
    /// the group's creator, which a group read back from the store is given again.
    pub(super) quota: Option<QuotaSlot>,
}

/// Where a group is.
pub(super) enum Home {
    /// Its actor. Shared with the sessions that cache it (as a [`GroupLink`], the same
    /// allocation): cloning an `Addr` allocates, an `Arc` does not.
    ///
    /// [`GroupLink`]: super::messages::GroupLink
    Live(Arc<Addr<GroupActor>>),
    /// No actor: the group as data, until something needs one (the supervisor's `reach`).
    /// For a store that cannot read one group back cheaply.
    Parked(Box<Parked>),
    /// No actor and no data: the group is in the store, read back when something needs it.
    Stored(StoredIndex),
}

/// A query's answer on its way: from the group's actor, or already computed from the parked
/// group.
pub(super) type Asked<T> = Pin<Box<dyn Future<Output = Result<T, MailboxError>> + Send>>;

impl Entry {
    /// Asks the group `msg`, a query: its actor answers it, or `parked` does at once from the
    /// parked group (read back from the store if only its index entry is kept), which stays
    /// parked (a query changes nothing). A group that cannot be read back (the store is
    /// failing) answers as a group that went away meanwhile does (a closed mailbox).
    pub(super) fn ask<M>(
        &self,
        reader: &Reader<'_>,
        msg: M,
        parked: impl FnOnce(&Group<ReplyTo>) -> M::Result,
    ) -> Asked<M::Result>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        GroupActor: Handler<M>,
        <GroupActor as Actor>::Context: ToEnvelope<GroupActor, M>,
    {
        match &self.home {
            Home::Live(addr) => Box::pin(addr.send(msg)),
            Home::Parked(p) => Box::pin(std::future::ready(Ok(parked(p.group())))),
            Home::Stored(index) => {
                let read = reader.read_back(&self.group_id, *index, self.created_by());
                let answer = match read {
                    Ok((group, _)) => Ok(parked(&group)),
                    Err(e) => {
                        warn!(group_id = %logsafe(&self.group_id), error = %e, "a parked group could not be read back for a query");
                        Err(MailboxError::Closed)
                    }
                };
                Box::pin(std::future::ready(answer))
            }
        }
    }

    /// The principal that created the group, whose `max_groups` unit it holds.
    pub(super) fn created_by(&self) -> Option<&Arc<str>> {
        self.quota.as_ref().map(QuotaSlot::principal)
    }
}

impl Home {
    /// The live actor, if there is one.
    pub(super) fn live(&self) -> Option<&Arc<Addr<GroupActor>>> {
        match self {
            Home::Live(addr) => Some(addr),
            Home::Parked(_) | Home::Stored(_) => None,
        }
    }

    /// Whether the group is parked (no actor), with its data or in the store only.
    pub(super) fn is_parked(&self) -> bool {
        !matches!(self, Home::Live(_))
    }
}

/// The registry: entries in a slab indexed by the low half of a group's key, plus the
/// name → key index. A key's high half is its slot's generation, so a message from a group
/// that has since been forgotten (its slot reused) never reaches the new occupant.
///
/// One 64-byte slot and one 24-byte index slot per group, where two hash tables keyed by
/// `String` copies of the id (the group id twice more on the heap) used to be.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) slots: Vec<Slot>,
    free: Vec<u32>,
    by_id: Map<Arc<str>, u64>,
}

pub(super) struct Slot {
    generation: u32,
    pub(super) entry: Option<Entry>,
}

impl Registry {
    pub(super) fn index(key: u64) -> usize {
        (key & u64::from(u32::MAX)) as usize
    }

    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The key the next [`Registry::insert`] will return.
    pub(super) fn next_key(&self) -> u64 {
        let index = self
            .free
            .last()
            .map_or(self.slots.len(), |&index| index as usize);
        let generation = self.slots.get(index).map_or(0, |s| s.generation);
        u64::from(generation) << 32 | index as u64
    }

    /// Adds a group; returns its key.
    pub(super) fn insert(&mut self, entry: Entry) -> u64 {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 groups");
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        let key = u64::from(slot.generation) << 32 | u64::from(index);
        self.by_id.insert(Arc::clone(&entry.group_id), key);
        slot.entry = Some(entry);
        key
    }

    pub(super) fn get(&self, key: u64) -> Option<&Entry> {
        let slot = self.slots.get(Self::index(key))?;
        (u64::from(slot.generation) == key >> 32)
            .then_some(slot.entry.as_ref())
            .flatten()
    }

    pub(super) fn get_mut(&mut self, key: u64) -> Option<&mut Entry> {
        let slot = self.slots.get_mut(Self::index(key))?;
        (u64::from(slot.generation) == key >> 32)
            .then_some(slot.entry.as_mut())
            .flatten()
    }

    pub(super) fn key_of(&self, group_id: &str) -> Option<u64> {
        self.by_id.get(group_id).copied()
    }

    pub(super) fn find(&self, group_id: &str) -> Option<(u64, &Entry)> {
        let key = self.key_of(group_id)?;
        self.get(key).map(|e| (key, e))
    }

    pub(super) fn remove(&mut self, key: u64) -> Option<Entry> {
        let index = Self::index(key);
        let slot = self.slots.get_mut(index)?;
        if u64::from(slot.generation) != key >> 32 {
            return None;
        }
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.by_id.remove(&*entry.group_id);
        self.free.push(index as u32);
        Some(entry)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().filter_map(|s| s.entry.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(group_id: &str) -> Entry {
        let (tx, _rx) = actix::dev::channel::channel(1);
        Entry {
            group_id: group_id.into(),
            home: Home::Live(Arc::new(Addr::new(tx))),
            state: GroupState::Empty,
            members: 0,
            quota: None,
        }
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_slot_is_64_bytes() {
        // Live, parked or in the store only, a group's home is one word and its tag.
        assert_eq!(std::mem::size_of::<Home>(), 16);
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    #[test]
    fn registry_keys_of_forgotten_groups_stay_dead() {
        let mut r = Registry::default();
        let key_a = r.next_key();
        assert_eq!(r.insert(entry("a")), key_a);
        let key_b = r.insert(entry("b"));
        assert_ne!(key_a, key_b);
        assert_eq!(r.find("a").map(|(k, _)| k), Some(key_a));
        assert!(r.remove(key_a).is_some());
        assert!(r.remove(key_a).is_none(), "removed once");
        assert!(r.find("a").is_none());
        // The slot is reused under a new generation: the old key reaches nothing.
        let key_c = r.next_key();
        assert_eq!(r.insert(entry("c")), key_c);
        assert_eq!(Registry::index(key_c), Registry::index(key_a));
        assert_ne!(key_c, key_a);
        assert!(r.get(key_a).is_none());
        assert!(r.get_mut(key_a).is_none());
        assert!(r.remove(key_a).is_none());
        assert_eq!(r.get(key_c).map(|e| &*e.group_id), Some("c"));
        assert_eq!(r.len(), 2);
        let mut ids: Vec<&str> = r.values().map(|e| &*e.group_id).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["b", "c"]);
    }
}
