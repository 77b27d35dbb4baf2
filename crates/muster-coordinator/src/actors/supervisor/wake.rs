//! The one wake-up timer: groups arm their earliest deadline in the supervisor's
//! [`DeadlineQueue`], and a single actix timer, set for the queue's earliest entry, ticks the
//! groups that are due and sets itself again. A million members cost one timer, not a million.
//!
//! [`DeadlineQueue`]: crate::actors::DeadlineQueue

use std::time::Instant;

use actix::prelude::*;

use super::Supervisor;
use crate::actors::messages::{ArmTimer, Tick};

impl Supervisor {
    /// Sets the timer for the queue's earliest deadline, unless it is already set at or
    /// before it (and cancels it when the queue is empty).
    pub(super) fn reschedule(&mut self, ctx: &mut Context<Self>) {
        let Some(at) = self.timers.earliest() else {
            if let Some((_, handle)) = self.wake.take() {
                ctx.cancel_future(handle);
            }
            return;
        };
        if self
            .wake
            .as_ref()
            .is_some_and(|(scheduled, _)| *scheduled <= at)
        {
            return;
        }
        if let Some((_, handle)) = self.wake.take() {
            ctx.cancel_future(handle);
        }
        let delay = self
            .clock
            .instant_at(at)
            .saturating_duration_since(Instant::now());
        let handle = ctx.run_later(delay, |act, ctx| {
            act.wake = None;
            act.fire(ctx);
        });
        self.wake = Some((at, handle));
    }

    /// Ticks every group whose deadline has passed, then sets the timer for the next one.
    fn fire(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let mut due = std::mem::take(&mut self.due);
        self.timers.pop_due(now, &mut due);
        for key in due.drain(..) {
            // A parked group's deadline is work for it (retention, the quarantine): unparked.
            if let Some(addr) = self.reach(key, ctx) {
                addr.do_send(Tick);
            }
        }
        self.due = due;
        self.reschedule(ctx);
    }
}

impl Handler<ArmTimer> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: ArmTimer, ctx: &mut Self::Context) {
        if self.groups.get(msg.key).is_some() && self.timers.arm(msg.key, msg.at) {
            self.reschedule(ctx);
        }
    }
}
