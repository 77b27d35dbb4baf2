//! Running a consumer-protocol group's assignment job (`engine/consumer/assign.rs`) off the
//! group's turn: on Tokio's blocking threads, so that the group's arbiter — shared with many
//! other groups — goes on answering them while a large target is computed. The result comes
//! back as the group's next turn.

use std::time::Instant;

use actix::prelude::*;
use tracing::{debug, error};

use super::GroupActor;
use crate::engine::consumer::AssignmentJob;
use crate::engine::Ctx;
use crate::logsafe::logsafe;

impl GroupActor {
    pub(super) fn compute_target(&mut self, job: AssignmentJob, ctx: &mut Context<Self>) {
        let epoch = job.epoch();
        let work = job.work();
        let started = Instant::now();
        let running = tokio::task::spawn_blocking(move || job.run());
        self.jobs += 1;
        ctx.spawn(running.into_actor(self).map(move |computed, act, ctx| {
            act.jobs -= 1;
            let computed = match computed {
                Ok(computed) => computed,
                Err(e) => {
                    // The assignor panicked (a bug): the group stays Assigning, no longer
                    // waits for this job, and its next heartbeat or tick starts a new one.
                    error!(group_id = %logsafe(act.group.group_id()), epoch, error = %e, "target assignment failed");
                    act.group.target_failed(epoch);
                    return;
                }
            };
            debug!(
                group_id = %logsafe(act.group.group_id()),
                epoch,
                work,
                ms = started.elapsed().as_millis() as u64,
                "target computed off the group's turn"
            );
            let cx = Ctx {
                now: act.env.clock.now(),
                topics: act.env.catalog.as_ref(),
            };
            let effects = act.group.target_computed(cx, computed);
            act.carry_out(effects, ctx);
            act.settle(ctx);
        }));
    }
}
