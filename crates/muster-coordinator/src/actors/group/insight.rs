//! What a group actor answers about itself without changing anything: its rebalance journal
//! (GroupHistory), what it waits for (GroupDiagnosis) and its summary for the dashboard.

use actix::prelude::*;
use muster_protocol::ErrorCode;

use super::GroupActor;
use crate::actors::messages::{Diagnose, GroupSummary, History, Summarize};
use crate::engine::{Group, Millis};

impl Handler<History> for GroupActor {
    type Result = MessageResult<History>;

    fn handle(&mut self, msg: History, _: &mut Self::Context) -> Self::Result {
        let error_code = if self.reloading {
            ErrorCode::CoordinatorNotAvailable
        } else {
            ErrorCode::None
        };
        let rebalances = if self.reloading {
            Vec::new()
        } else {
            self.group.history(msg.limit)
        };
        MessageResult(muster_protocol::GroupHistoryResponse {
            error_code: error_code.code(),
            rebalances,
        })
    }
}

impl Handler<Diagnose> for GroupActor {
    type Result = MessageResult<Diagnose>;

    fn handle(&mut self, _: Diagnose, _: &mut Self::Context) -> Self::Result {
        let mut answer = self.group.diagnose(self.env.clock.now());
        if self.reloading {
            answer = muster_protocol::GroupDiagnosisResponse {
                error_code: ErrorCode::CoordinatorNotAvailable.code(),
                ..Default::default()
            };
        }
        MessageResult(answer)
    }
}

impl Handler<Summarize> for GroupActor {
    type Result = MessageResult<Summarize>;

    fn handle(&mut self, _: Summarize, _: &mut Self::Context) -> Self::Result {
        MessageResult(summarize(&self.group, self.env.clock.now()))
    }
}

/// A group's line in the dashboard's list (asked of its actor, or of the group parked).
pub(crate) fn summarize<R>(group: &Group<R>, now: Millis) -> GroupSummary {
    GroupSummary {
        group_id: group.group_id().to_owned(),
        state: group.state(),
        members: group.member_count() as u32,
        generation: group.generation(),
        assignor: group.assignor().map(str::to_owned),
        leader: group.leader().map(str::to_owned),
        state_for_ms: now.saturating_sub(group.state_since()),
        quarantined: group.quarantined_partitions() as u32,
        quarantine_drop_at_ms: group.quarantine_drop_at(),
    }
}
