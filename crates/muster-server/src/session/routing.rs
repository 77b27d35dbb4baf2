//! Per-group routing and ordering for one connection: which way each group request goes and
//! in what order. A group the connection has not reached yet is routed through the supervisor,
//! which returns the group's inbox; the session caches it ([`Router`]'s address cache) and
//! talks to the group directly from then on. Requests that come while routed ones are still
//! queued at the supervisor are held, so none overtakes another. The requests of one burst for
//! one group travel as one [`GroupBatch`].

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use muster_coordinator::actors::{GroupBatch, GroupCall, GroupLink, Route, Ticket};
use muster_protocol::{ErrorCode, Request, Response};

use super::Session;

/// Most group inboxes one connection caches (a consumer talks to one or two groups; an admin
/// tool may touch many, and then the cache simply starts over).
const GROUP_CACHE_LIMIT: usize = 256;

/// Most requests one [`GroupBatch`] carries (a group actor handles a batch in one go; this
/// bounds how long other groups on its arbiter wait behind it).
const MAX_BATCH: usize = 64;

/// Most requests a new batch has room for before its first push: 16 × ~230 bytes stays in
/// the allocator's small classes, so a request that turns out to be alone (sent as a call,
/// its vector dropped) wastes a cheap allocation, never a large one. Larger batches grow.
const BATCH_ROOM: usize = 16;

/// A connection's routing state.
#[derive(Default)]
pub(super) struct Router {
    /// Group id → inbox, both shared with the supervisor's registry (an entry costs this map's
    /// slot, not copies).
    groups: HashMap<Arc<str>, GroupLink>,
    /// Groups this connection is reaching through the supervisor (not cached yet).
    routing: HashMap<String, Routing>,
    /// Group requests of the current burst bound for one group, not yet sent.
    batch: Option<PendingBatch>,
    /// Requests in the last batch sent: a new batch starts with room for that many, up to
    /// [`BATCH_ROOM`]. A pipelining client's bursts keep their size, so its batches are
    /// allocated once instead of grown 1 → 4 → 8 → 16, each step copying every request
    /// (~230 bytes each) so far.
    last_batch: usize,
}

/// A group a connection reaches through the supervisor. Its requests must not overtake each
/// other: until every routed one is handled, nothing goes to the group directly.
#[derive(Default)]
struct Routing {
    /// Requests routed and not yet handled by the supervisor.
    outstanding: u32,
    /// The group's id and inbox, once a routed request found the group.
    found: Option<(Arc<str>, GroupLink)>,
    /// Requests that came after the group was found: held (neither routed nor sent) until the
    /// outstanding ones are handled, then sent to the group in order. Routing them instead
    /// could go on for as long as the client keeps requests in flight.
    held: Vec<(Request, Ticket)>,
}

/// Group requests of the current burst bound for one group, not yet sent.
struct PendingBatch {
    to: GroupLink,
    calls: Vec<(Request, Ticket)>,
}

impl Session {
    /// One request on its way to its group alone (not in a batch).
    fn group_call(&self, request: Request, ticket: Ticket) -> GroupCall {
        GroupCall {
            request,
            reply: self.reply(ticket),
            client: self.client.clone(),
        }
    }

    /// A group request joins the batch for its group, which is sent at the end of the burst
    /// (or when full, or when a request for another group comes). A group this connection has
    /// not reached yet is routed through the supervisor, which returns its inbox.
    pub(super) fn dispatch_to_group(
        &mut self,
        request: Request,
        ticket: Ticket,
        ctx: &mut Context<Self>,
    ) {
        let Some(group_id) = request.group_id() else {
            return self.answer(
                ticket,
                Response::error(ErrorCode::InvalidRequest, "not a group request"),
            );
        };
        if let Some(batch) = &mut self.router.batch {
            if batch.calls[0].0.group_id() == Some(group_id) {
                batch.calls.push((request, ticket));
                if batch.calls.len() >= MAX_BATCH {
                    self.flush(ctx);
                }
                return;
            }
            self.flush(ctx);
        }
        if let Some(to) = self.router.groups.get(group_id) {
            if to.connected() {
                let mut calls = Vec::with_capacity(self.router.last_batch.clamp(1, BATCH_ROOM));
                calls.push((request, ticket));
                self.router.batch = Some(PendingBatch {
                    to: Arc::clone(to),
                    calls,
                });
                return;
            }
        }
        if let Some(routing) = self.router.routing.get_mut(group_id) {
            if routing.found.is_some() {
                routing.held.push((request, ticket));
                return;
            }
        }
        let call = self.group_call(request, ticket);
        self.route(call, ctx);
    }

    /// Sends the batch gathered so far to its group.
    pub(super) fn flush(&mut self, ctx: &mut Context<Self>) {
        let Some(PendingBatch { to, mut calls }) = self.router.batch.take() else {
            return;
        };
        self.router.last_batch = calls.len();
        let unsent = if calls.len() == 1 {
            // Alone: the per-request message (no batch vector on either side).
            let Some((request, ticket)) = calls.pop() else {
                return;
            };
            let call = self.group_call(request, ticket);
            match to.try_call(call) {
                Ok(()) => return,
                // A busy group: queue anyway; this connection's in-flight cap bounds it.
                Err(SendError::Full(call)) => return to.call(call),
                Err(SendError::Closed(call)) => vec![call],
            }
        } else {
            let batch = GroupBatch {
                replies: self.out.clone(),
                client: self.client.clone(),
                calls,
            };
            match to.try_batch(batch) {
                Ok(()) => return,
                Err(SendError::Full(batch)) => return to.batch(batch),
                Err(SendError::Closed(mut batch)) => batch
                    .take_calls()
                    .into_iter()
                    .map(|(request, ticket)| self.group_call(request, ticket))
                    .collect(),
            }
        };
        // The group's actor stopped (the group was deleted or removed): route afresh.
        for call in unsent {
            self.route(call, ctx);
        }
    }

    /// Sends every held request through the supervisor, behind the routed ones it waits for
    /// (in order, as the supervisor handles its mailbox in order).
    pub(super) fn route_held(&mut self, ctx: &mut Context<Self>) {
        let held: Vec<_> = self
            .router
            .routing
            .values_mut()
            .flat_map(|routing| std::mem::take(&mut routing.held))
            .collect();
        for (request, ticket) in held {
            let call = self.group_call(request, ticket);
            self.route(call, ctx);
        }
    }

    fn route(&mut self, call: GroupCall, ctx: &mut Context<Self>) {
        let group_id = call.request.group_id().unwrap_or_default().to_owned();
        self.router.groups.remove(group_id.as_str());
        self.router
            .routing
            .entry(group_id.clone())
            .or_default()
            .outstanding += 1;
        let route = Route {
            group_id: group_id.clone(),
            call,
        };
        // The request must not be tied to this session's lifetime: actix skips a message whose
        // sender dropped the answer future, so a request routed just before the client closed
        // (a LeaveGroup on shutdown, say) would be lost with the session's futures.
        let routed = self.settings.supervisor.send(route);
        let session = ctx.address();
        actix::spawn(async move {
            let found = routed.await.ok().flatten();
            session.do_send(Routed { group_id, found });
        });
    }
}

/// The supervisor handled a request this session routed (and, if the group exists, returned
/// its id and inbox). Once every routed request for the group is handled, later requests go
/// to the group directly.
#[derive(Message)]
#[rtype(result = "()")]
struct Routed {
    group_id: String,
    found: Option<(Arc<str>, GroupLink)>,
}

impl Handler<Routed> for Session {
    type Result = ();

    fn handle(&mut self, msg: Routed, ctx: &mut Self::Context) {
        let router = &mut self.router;
        let Some(routing) = router.routing.get_mut(msg.group_id.as_str()) else {
            return;
        };
        routing.outstanding = routing.outstanding.saturating_sub(1);
        if routing.found.is_none() {
            routing.found = msg.found;
        }
        if routing.outstanding > 0 {
            return;
        }
        let Some(Routing { found, held, .. }) = router.routing.remove(msg.group_id.as_str()) else {
            return;
        };
        // Only requests after the group was found are held.
        let Some((group_id, to)) = found else {
            return;
        };
        if router.groups.len() >= GROUP_CACHE_LIMIT {
            router.groups.clear();
        }
        router.groups.insert(group_id, Arc::clone(&to));
        if !held.is_empty() {
            self.flush(ctx);
            self.router.batch = Some(PendingBatch { to, calls: held });
            self.flush(ctx);
        }
    }
}
