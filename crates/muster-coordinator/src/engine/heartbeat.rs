//! Heartbeat (protocol §6.9): answered at once, refreshes the session.

use muster_protocol::{ErrorCode, HeartbeatRequest};

use super::limits::check_heartbeat;
use super::{Group, GroupState, Millis};

impl<R> Group<R> {
    /// Heartbeat (protocol §6.9): answered at once; returns the error code.
    pub fn heartbeat(&mut self, now: Millis, req: &HeartbeatRequest) -> ErrorCode {
        if let Err(code) = check_heartbeat(&self.config.limits, req) {
            return code;
        }
        if self.consumer.is_some() {
            return self.classic_heartbeat_to_consumer(now, req);
        }
        match self.state {
            GroupState::Dead => return ErrorCode::CoordinatorNotAvailable,
            GroupState::Empty => return ErrorCode::UnknownMemberId,
            _ => {}
        }
        // Refreshing a session only pushes its deadline later: no timer work needed.
        if let Err(code) =
            self.check_and_hear(&req.member_id, req.group_instance_id.as_deref(), now)
        {
            return code;
        }
        if req.generation_id != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        if self.state == GroupState::PreparingRebalance {
            ErrorCode::RebalanceInProgress
        } else {
            ErrorCode::None
        }
    }
}
