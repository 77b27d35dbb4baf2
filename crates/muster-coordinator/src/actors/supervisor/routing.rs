//! Routing: a group's first request from a connection reaches its actor here (or is answered
//! here, when the group cannot be served on this node or does not exist and the request does
//! not create it; a parked group is given an actor first, a group whose creation waits for its
//! cluster-wide quota unit queues the request); the session caches the inbox it is handed
//! back. Also the registry's
//! removals (a group that forgot itself) and shutdown, which goes to every group registered.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::join_all;
use muster_protocol::validate_group_id;
use muster_protocol::ErrorCode;

use super::Supervisor;
use crate::access::ResourceType;
use crate::actors::group::{answer_parked, is_parked_query};
use crate::actors::messages::{AbortHeld, Forget, GroupCall, GroupLink, Route, Shutdown};
use crate::actors::registry::Home;
use crate::engine::{absent_group, unreadable_topics, AbsentGroup};

impl Supervisor {
    /// Why a group id cannot be served here, if it cannot.
    pub(super) fn refusal(&self, group_id: &str) -> Option<ErrorCode> {
        if let Err(code) = validate_group_id(group_id) {
            Some(code)
        } else {
            self.placement.refusal(group_id)
        }
    }

    /// Removes the group `key` from the registry, the gauges and the timer queue.
    pub(super) fn forget(&mut self, key: u64) {
        if let Some(entry) = self.groups.remove(key) {
            self.count(Some((entry.state, entry.members)), None);
            self.timers.disarm(key);
            if entry.home.is_parked() {
                self.parked = self.parked.saturating_sub(1);
                crate::metrics::groups_parked(self.parked);
            }
            match entry.home {
                Home::Parked(parked) => parked.forget(),
                Home::Stored(index) => index.forget(key),
                Home::Live(_) => {}
            }
        }
    }
}

impl Handler<Route> for Supervisor {
    type Result = Option<(Arc<str>, GroupLink)>;

    fn handle(&mut self, route: Route, ctx: &mut Self::Context) -> Self::Result {
        let Route { group_id, call } = route;
        self.route(group_id, call, ctx)
    }
}

impl Supervisor {
    /// A group's request to its actor (module docs); the group's id and inbox, for the
    /// session to cache, when it has one.
    pub(super) fn route(
        &mut self,
        group_id: String,
        call: GroupCall,
        ctx: &mut Context<Self>,
    ) -> Option<(Arc<str>, GroupLink)> {
        if let Some(code) = self.refusal(&group_id) {
            let answer = crate::engine::refusal_for(&call.request, code, &call.client.access);
            call.reply.send(answer);
            return None;
        }
        if let Some((key, entry)) = self.groups.find(&group_id) {
            let answer = match &entry.home {
                Home::Parked(parked) => answer_parked(parked.group(), &call.request, &call.client),
                Home::Stored(index) if is_parked_query(&call.request) => {
                    // Read back for the query only; if the store cannot, the group is woken
                    // below, and its actor answers as any group reloading its data does.
                    let read = self
                        .reader()
                        .read_back(&entry.group_id, *index, entry.created_by());
                    read.ok()
                        .and_then(|(group, _)| answer_parked(&group, &call.request, &call.client))
                }
                _ => None,
            };
            if let Some(answer) = answer {
                // A query: answered parked. No inbox for the session to cache: its next
                // request for the group comes here too.
                call.reply.send(answer);
                return None;
            }
            let group_id = Arc::clone(&entry.group_id);
            let addr = self.reach(key, ctx)?;
            addr.do_send(call);
            let link: GroupLink = addr;
            return Some((group_id, link));
        }
        if let Some(waiting) = self.creating.get_mut(group_id.as_str()) {
            // Its quota unit is being charged: it is served once created (`creation.rs`).
            waiting.push(call);
            return None;
        }
        match absent_group(&call.request, &self.config, &call.client.access) {
            AbsentGroup::Answer(response) => {
                crate::metrics::authorization_denials(
                    ResourceType::Topic.name(),
                    unreadable_topics(&call.request, &call.client.access),
                );
                call.reply.send(response);
                None
            }
            AbsentGroup::Create => self.create_group(group_id, call, ctx),
        }
    }
}

impl Handler<Forget> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Forget, _: &mut Self::Context) {
        self.forget(msg.key);
    }
}

impl Handler<Shutdown> for Supervisor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Shutdown, _: &mut Self::Context) -> Self::Result {
        let aborts: Vec<_> = self
            .groups
            .values()
            .filter_map(|e| e.home.live())
            .map(|addr| addr.send(AbortHeld))
            .collect();
        Box::pin(async move {
            join_all(aborts).await;
        })
    }
}
