//! The heartbeat task: every `heartbeat_interval`, while the member has a member id and a
//! generation and is not sending JoinGroup (a held JoinGroup keeps the session alive by
//! itself), it sends a Heartbeat. Answers that call for action are passed to the membership
//! task as [`Signal`]s, tagged with the generation they concern so that stale ones are ignored.
//! It stops when the member is closed or has failed.
//!
//! A heartbeat that finds the coordinator lost (a coordinator error, a broken or silent
//! link) makes the route find it again, and is sent again at once to the new one, with the
//! same member id and generation: the new coordinator hears from the member without waiting
//! an interval, and the member goes on in its generation.

use std::sync::Arc;
use std::time::Duration;

use muster_protocol::{ErrorCode, HeartbeatRequest, Response};
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;
use tracing::{debug, trace, warn};

use super::route::RouteView;
use super::{MemberConfig, MemberState, Phase, Signal};
use crate::client::coordinator_lost;
use crate::error::ErrorCodeExt;

/// How long a heartbeat waits for its answer: half the session timeout, at least one
/// heartbeat interval, at most the request timeout. A coordinator answers a heartbeat at once,
/// so a socket silent that long is taken for dead and closed (`send_once_expecting_an_answer`)
/// and the coordinator found again: a member behind a cut-off node notices within an interval
/// plus this bound (5 s with a 6 s session), and the other half of its session is left to
/// reach the group's new coordinator before the session expires there.
pub(super) fn silence_limit(config: &MemberConfig, request_timeout: Duration) -> Duration {
    (config.session_timeout / 2)
        .max(config.effective_heartbeat_interval())
        .min(request_timeout)
}

pub(super) async fn run(
    mut route: RouteView,
    config: Arc<MemberConfig>,
    state: watch::Receiver<MemberState>,
    signals: mpsc::UnboundedSender<Signal>,
) {
    let interval = config.effective_heartbeat_interval();
    let timeout = silence_limit(&config, route.connection().config().request_timeout);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await; // The first tick is immediate; the first heartbeat waits an interval.
    let mut resend = false;
    loop {
        if !resend {
            ticker.tick().await;
        }
        resend = false;
        let (phase, member_id, generation) = {
            let s = state.borrow();
            (s.phase, s.member_id.clone(), s.generation_id)
        };
        match phase {
            Phase::Closed | Phase::Failed => return,
            Phase::Joining => continue,
            Phase::Syncing | Phase::Stable => {}
        }
        if member_id.is_empty() || generation < 0 {
            continue;
        }
        let request = HeartbeatRequest {
            group_id: config.group_id.clone(),
            generation_id: generation,
            member_id: member_id.clone(),
            group_instance_id: config.group_instance_id.clone(),
        };
        let result = route
            .connection()
            .send_once_expecting_an_answer(request, timeout)
            .await;
        if coordinator_lost(&result) {
            debug!(group_id = %config.group_id, generation, "heartbeat: coordinator lost; finding it again");
            match route.refind().await {
                Ok(()) => resend = true,
                Err(err) => {
                    warn!(group_id = %config.group_id, error = %err, "cannot find the coordinator")
                }
            }
            continue;
        }
        route.answered();
        let code = match result {
            Ok(Response::Heartbeat(answer)) => answer.error_code,
            Ok(other) => {
                warn!(response = other.name(), "unexpected answer to Heartbeat");
                continue;
            }
            Err(err) => {
                debug!(group_id = %config.group_id, error = %err, "heartbeat failed");
                if let Some(code) = err.error_code() {
                    code.code()
                } else {
                    continue;
                }
            }
        };
        match ErrorCode::from_code(code) {
            Some(ErrorCode::None) => {
                trace!(group_id = %config.group_id, generation, "heartbeat");
            }
            Some(code) if code.needs_rejoin() || code == ErrorCode::FencedInstanceId => {
                debug!(group_id = %config.group_id, %member_id, generation, %code, "heartbeat asks to rejoin");
                let _ = signals.send(Signal {
                    generation,
                    member_id,
                    code,
                    partitions: Vec::new(),
                });
            }
            _ => {
                warn!(group_id = %config.group_id, code, "heartbeat refused");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half the session, at least one heartbeat interval, at most the request timeout.
    #[test]
    fn the_silence_limit_follows_the_session_timeout() {
        let limit = |session_s: u64, interval_ms: Option<u64>, request_s: u64| {
            let mut config =
                MemberConfig::new("g", ["t"]).session_timeout(Duration::from_secs(session_s));
            if let Some(ms) = interval_ms {
                config = config.heartbeat_interval(Duration::from_millis(ms));
            }
            silence_limit(&config, Duration::from_secs(request_s))
        };
        assert_eq!(limit(6, None, 30), Duration::from_secs(3));
        assert_eq!(limit(10, None, 30), Duration::from_secs(5));
        assert_eq!(limit(6, Some(4_000), 30), Duration::from_secs(4));
        assert_eq!(limit(45, None, 5), Duration::from_secs(5));
    }
}
