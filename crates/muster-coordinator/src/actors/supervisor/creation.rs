//! Where group actors come from: a request that creates its group (within the server's
//! `max_groups` and its principal's quotas, protocol §6 and §6.18; in cluster mode its
//! `max_groups` unit is charged in etcd first, across every node), and the groups loaded from
//! the store (at startup, or with a shard taken over). Each is registered with the unit of its
//! creator's `max_groups` it holds, and started on the next arbiter, round-robin — or, loaded
//! with nothing but data (an abandoned group's offsets), parked with no actor at all (and,
//! with a store that reads one group back cheaply, with no engine either: an index entry).

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use muster_protocol::{ErrorCode, Request, Response};
use tracing::{debug, info, warn};

use super::parking::start;
use super::Supervisor;
use crate::actors::group::GroupActor;
use crate::actors::group::StoredIndex;
use crate::actors::messages::{GroupCall, GroupLink};
use crate::actors::registry::{Entry, Home};
use crate::actors::reply::ReplyTo;
use crate::engine::{parked_deadline, Group, GroupState};
use crate::logsafe::logsafe;
use crate::quota::{Quota, QuotaKind, QuotaSlot};
use crate::storage::{
    GroupRecord, HistoryWrite, OffsetWrite, ParkedSummary, QuarantinedOffset, StoreError,
    StoredState,
};

impl Supervisor {
    /// Creates the group `group_id` for `call` (a request that creates its group) and hands
    /// the call to it, unless the server or the principal may hold no more groups (or, for a
    /// JoinGroup, the principal no more members): then `call` is answered here. When the store
    /// keeps the principals' `max_groups` across a cluster, the group is created only once its
    /// unit is charged there ([`Supervisor::charged`]); the requests for it that arrive
    /// meanwhile wait in `creating`.
    pub(super) fn create_group(
        &mut self,
        group_id: String,
        call: GroupCall,
        ctx: &mut Context<Self>,
    ) -> Option<(Arc<str>, GroupLink)> {
        if self.groups.len() + self.creating.len() >= self.config.limits.max_groups {
            // The server holds as many groups as it may (protocol §6.18).
            return refuse(call, ErrorCode::ResourceLimitReached, None);
        }
        // A JoinGroup that creates its group needs a member unit too: refused now if
        // the principal has none left, before a group is charged to it that would
        // only stand Empty until removed.
        let no_member_left = matches!(
            call.request,
            Request::JoinGroup(_) | Request::ConsumerGroupHeartbeat(_)
        ) && call
            .client
            .access
            .quota()
            .is_some_and(|q| q.at_limit(QuotaKind::Members));
        if no_member_left {
            return refuse(call, ErrorCode::QuotaExceeded, None);
        }
        let Some(quota) = call.client.access.quota().map(Arc::clone) else {
            return self.make_group(group_id, call, None, ctx);
        };
        // The creator's `max_groups` (protocol §6), after the server's own limit: across the
        // cluster if the store keeps it, else this node's count.
        let max = quota.max(QuotaKind::Groups);
        if let Some(charged) = self.store.charge_group(&group_id, quota.principal(), max) {
            let id: Arc<str> = Arc::from(group_id.as_str());
            self.creating.insert(Arc::clone(&id), Vec::new());
            ctx.spawn(charged.into_actor(self).map(move |result, act, ctx| {
                act.charged(id, call, &quota, result, ctx);
            }));
            return None;
        }
        match quota.try_take(QuotaKind::Groups) {
            Ok(slot) => self.make_group(group_id, call, Some(slot), ctx),
            Err(over) => {
                debug!(group_id = %logsafe(&group_id), error = %over, "group not created");
                refuse(call, ErrorCode::QuotaExceeded, Some(over.to_string()))
            }
        }
    }

    /// The cluster-wide charge of `group_id`'s unit is over: the group is created and given
    /// `call` and the requests that waited, or `call` is refused (QUOTA_EXCEEDED naming the
    /// quota; NOT_COORDINATOR when the shard moved meanwhile) and the waiting requests are
    /// routed afresh (each may create the group in turn, perhaps for another principal).
    fn charged(
        &mut self,
        group_id: Arc<str>,
        call: GroupCall,
        quota: &Arc<Quota>,
        result: Result<(), StoreError>,
        ctx: &mut Context<Self>,
    ) {
        let waiting = self.creating.remove(&group_id).unwrap_or_default();
        match result {
            Ok(()) => {
                if let Some(code) = self.refusal(&group_id) {
                    // The shard was given away while the unit was charged: its next owner
                    // gives the unit back when it loads the shard (no record of the group).
                    refuse(call, code, None);
                } else {
                    // Counted here whatever this node's count says: the cluster's decided.
                    let slot = quota.take(QuotaKind::Groups);
                    self.make_group(group_id.to_string(), call, Some(slot), ctx);
                }
            }
            Err(error) => {
                let code = match &error {
                    StoreError::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
                    StoreError::Fenced { .. } | StoreError::NotOwner { .. } => {
                        ErrorCode::NotCoordinator
                    }
                    _ => ErrorCode::CoordinatorNotAvailable,
                };
                if code == ErrorCode::QuotaExceeded {
                    debug!(group_id = %logsafe(&group_id), %error, "group not created");
                } else {
                    warn!(group_id = %logsafe(&group_id), %error,
                        "group not created: its quota unit could not be charged");
                }
                refuse(call, code, Some(error.to_string()));
            }
        }
        for call in waiting {
            self.route(group_id.to_string(), call, ctx);
        }
    }

    /// Creates the group, holding `quota` (its creator's unit), and hands it `call`.
    fn make_group(
        &mut self,
        group_id: String,
        call: GroupCall,
        quota: Option<QuotaSlot>,
        ctx: &mut Context<Self>,
    ) -> Option<(Arc<str>, GroupLink)> {
        debug!(group_id = %logsafe(&group_id), "group created");
        let mut group = Group::new(group_id, Arc::clone(&self.config), self.clock.now());
        group.set_created_by(quota.as_ref().map(|q| Arc::clone(q.principal())));
        let (group_id, key) = self.register(group, quota, false, ctx);
        let addr = self.reach(key, ctx)?;
        addr.do_send(call);
        Some((group_id, addr as GroupLink))
    }

    /// Registers `group`, holding `quota` (its creator's unit of `max_groups`): parked if
    /// `may_park` and it has nothing but data (a group loaded from the store), else with its
    /// actor started on the next arbiter. Returns its id and key.
    fn register(
        &mut self,
        group: Group<ReplyTo>,
        quota: Option<QuotaSlot>,
        may_park: bool,
        ctx: &mut Context<Self>,
    ) -> (Arc<str>, u64) {
        let group_id = Arc::clone(group.shared_group_id());
        let state = group.state();
        let members = group.member_count() as u32;
        let key = self.groups.next_key();
        let park = may_park && self.config.park_after_ms > 0 && group.is_parkable();
        let (home, next) = if !park {
            let env = self.env(ctx);
            let make = move |_: &mut Context<GroupActor>| GroupActor::new(key, group, env);
            (Home::Live(Arc::new(start(self.next_arbiter(), make))), None)
        } else if self.store.reads_one_group_cheaply() {
            // Its data is what was just loaded: the store keeps it, the registry its index.
            let (index, next) = GroupActor::indexed(key, group);
            (Home::Stored(index), next)
        } else {
            let next = group.next_deadline();
            let parked = GroupActor::parked(key, group, self.clock.now());
            (Home::Parked(parked), next)
        };
        let inserted = self.groups.insert(Entry {
            group_id: Arc::clone(&group_id),
            home,
            state,
            members,
            quota,
        });
        debug_assert_eq!(inserted, key);
        self.count(None, Some((state, members)));
        if park {
            self.count_parked();
            // Its deadline (retention, the quarantine) wakes it; a live actor arms its own.
            if let Some(at) = next {
                self.timers.arm(key, at);
                self.reschedule(ctx);
            }
        }
        (group_id, key)
    }

    /// Registers every group of `initial` (and every group that only has offsets, offset
    /// history or quarantined offsets), charging each to its creator's quota.
    pub(super) fn load(&mut self, initial: StoredState, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let mut offsets: HashMap<String, Vec<OffsetWrite>> = initial.offsets.into_iter().collect();
        let mut journals: HashMap<String, _> = initial.journals.into_iter().collect();
        let mut history: HashMap<String, Vec<HistoryWrite>> = initial.history.into_iter().collect();
        let mut quarantine: HashMap<String, Vec<QuarantinedOffset>> =
            initial.quarantine.into_iter().collect();
        let groups = initial.groups.len();
        // Loaded members are counted against their principals' quotas, whatever the limit.
        let ledger = self.env(ctx).ledger.clone();
        for record in initial.groups {
            let group_id = record.group_id.clone();
            let group_offsets = offsets.remove(&group_id).unwrap_or_default();
            let journal = journals.remove(&group_id).unwrap_or_default();
            let (mut group, counted) =
                Group::restore(record, group_offsets, Arc::clone(&self.config), now);
            ledger.apply(counted);
            group.restore_journal(journal);
            group.restore_offset_records(
                history.remove(&group_id).unwrap_or_default(),
                quarantine.remove(&group_id).unwrap_or_default(),
            );
            // What exists is counted, even past a limit lowered since (never refused).
            let quota = group
                .created_by()
                .map(|p| self.quotas.get(p).take(QuotaKind::Groups));
            self.register(group, quota, true, ctx);
        }
        // Groups that only ever had simple commits have offsets but no metadata (and so no
        // members to count); a group whose offsets all went to the quarantine may have only
        // that, or only its history, left.
        let mut rest: Vec<String> = offsets
            .keys()
            .chain(history.keys())
            .chain(quarantine.keys())
            .cloned()
            .collect();
        rest.sort_unstable();
        rest.dedup();
        for group_id in rest {
            let group_offsets = offsets.remove(&group_id).unwrap_or_default();
            let record = GroupRecord::empty(group_id.clone(), now);
            let (mut group, _) =
                Group::restore(record, group_offsets, Arc::clone(&self.config), now);
            group.restore_offset_records(
                history.remove(&group_id).unwrap_or_default(),
                quarantine.remove(&group_id).unwrap_or_default(),
            );
            self.register(group, None, true, ctx);
        }
        if !self.groups.is_empty() {
            info!(
                groups = self.groups.len(),
                with_metadata = groups,
                "groups loaded"
            );
        }
    }
}

impl Supervisor {
    /// Registers each group of `parked` (summaries of groups with nothing but data) parked
    /// as an index entry, its data left in the store: no engine is built for it. Its next
    /// deadline is what its engine's would be ([`parked_deadline`]); its creator is charged,
    /// as at any load. Should parking be off, or the store not read groups back cheaply
    /// (summaries are made only when both hold), each is read back and registered whole.
    pub(super) fn load_parked(&mut self, parked: Vec<ParkedSummary>, ctx: &mut Context<Self>) {
        if parked.is_empty() {
            return;
        }
        let now = self.clock.now();
        let count = parked.len();
        let as_index = self.config.park_after_ms > 0 && self.store.reads_one_group_cheaply();
        let mut indexed = 0;
        for summary in parked {
            // As `Group::restore` does: a group never recorded is Empty since now.
            let state_since = summary.record.as_ref().map_or(now, |r| r.state_since_ms);
            let created_by = summary.record.and_then(|r| r.created_by);
            let quota = created_by
                .as_deref()
                .map(|p| self.quotas.get(p).take(QuotaKind::Groups));
            let index = StoredIndex::new(state_since, summary.quarantined > 0);
            if !as_index {
                let principal = quota.as_ref().map(|q| Arc::clone(q.principal()));
                match self
                    .reader()
                    .read_back(&summary.group_id, index, principal.as_ref())
                {
                    Ok((group, _)) => {
                        self.register(group, quota, true, ctx);
                    }
                    Err(e) => {
                        warn!(group_id = %logsafe(&summary.group_id), error = %e, "a group loaded parked could not be read back; not registered");
                    }
                }
                continue;
            }
            let key = self.groups.next_key();
            if summary.quarantined > 0 {
                crate::metrics::quarantine_size(key, summary.quarantined as usize);
            }
            let next = parked_deadline(
                &self.config,
                state_since,
                summary.oldest_commit,
                summary.oldest_quarantined,
            );
            let inserted = self.groups.insert(Entry {
                group_id: Arc::from(summary.group_id),
                home: Home::Stored(index),
                state: GroupState::Empty,
                members: 0,
                quota,
            });
            debug_assert_eq!(inserted, key);
            indexed += 1;
            if let Some(at) = next {
                self.timers.arm(key, at);
            }
        }
        self.count_parked_loaded(GroupState::Empty, indexed);
        self.reschedule(ctx);
        info!(groups = count, "groups loaded parked");
    }
}

/// Answers a request for a group that is not created, with `code` in the request's shape
/// (and `message`, where the answer has room for one: a ConsumerGroupHeartbeat's).
fn refuse(
    call: GroupCall,
    code: ErrorCode,
    message: Option<String>,
) -> Option<(Arc<str>, GroupLink)> {
    let mut answer = crate::engine::refusal_for(&call.request, code, &call.client.access);
    if let (Response::ConsumerGroupHeartbeat(heartbeat), Some(message)) = (&mut answer, message) {
        heartbeat.error_message = Some(message);
    }
    call.reply.send(answer);
    None
}
