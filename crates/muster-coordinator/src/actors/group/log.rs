//! The operator's log lines for what a group's engine reports ([`Event`]s), and the metrics
//! that count them. Ids are client-supplied: every one goes through [`logsafe`].

use tracing::{debug, info, warn};

use crate::engine::Event;
use crate::logsafe::{logsafe, logsafe_list};

/// Logs an engine event. Ids are client-supplied: every one goes through [`logsafe`].
pub(super) fn log_event(group_id: &str, event: &Event) {
    let group_id = logsafe(group_id);
    match event {
        Event::RebalanceStarted {
            trigger,
            generation,
        } => debug!(
            %group_id,
            generation,
            trigger = trigger.as_str(),
            "rebalance started"
        ),
        Event::RebalanceCompleted {
            generation,
            members,
            assignor,
            barrier_ms,
            trigger,
            added,
            removed,
        } => {
            crate::metrics::rebalance_completed(*trigger, *barrier_ms);
            info!(
                %group_id,
                generation,
                members,
                assignor = %logsafe(assignor.as_deref().unwrap_or("-")),
                barrier_ms,
                trigger = trigger.as_str(),
                added,
                removed,
                "rebalance completed"
            )
        }
        Event::MemberExpired {
            member_id,
            last_heard_ms_ago,
        } => {
            crate::metrics::session_expired();
            info!(%group_id, member_id = %logsafe(member_id), last_heard_ms_ago, "session expired")
        }
        Event::TargetAssigned {
            epoch,
            members,
            assignor,
            moved,
            trigger,
        } => {
            crate::metrics::target_assigned(*moved);
            info!(
                %group_id,
                epoch,
                members,
                assignor = %logsafe(assignor),
                moved,
                trigger,
                "target assignment computed"
            )
        }
        Event::RevocationTimedOut { member_id } => {
            crate::metrics::session_expired();
            info!(
                %group_id,
                member_id = %logsafe(member_id),
                "member kept partitions past its rebalance timeout; removed"
            )
        }
        Event::NewMemberTimedOut { member_id } => {
            info!(
                %group_id,
                member_id = %logsafe(member_id),
                "new member's join held too long; refused"
            )
        }
        Event::BarrierSlow {
            waiting_for,
            elapsed_ms,
        } => warn!(
            %group_id,
            elapsed_ms,
            waiting_for = %logsafe_list(waiting_for),
            "rebalance past half its timeout, waiting for members to rejoin"
        ),
        Event::OffsetsExpired { partitions } => {
            info!(%group_id, partitions, "offsets expired (retention)")
        }
        Event::OffsetsQuarantined {
            partitions,
            first,
            drop_at,
        } => {
            crate::metrics::offsets_quarantined(*partitions);
            if *first {
                // One WARN per group entering the quarantine: an operator must hear that a
                // group's progress is about to be lost while it can still be restored.
                warn!(
                    %group_id,
                    partitions,
                    drop_at_ms = drop_at,
                    "offsets expired (retention) and were quarantined: `muster offsets restore` \
                     brings them back until drop_at_ms"
                )
            } else {
                info!(%group_id, partitions, "more offsets expired into the quarantine")
            }
        }
        Event::QuarantineDropped { partitions } => {
            crate::metrics::quarantine_dropped(*partitions);
            info!(%group_id, partitions, "quarantined offsets dropped after the grace period")
        }
        Event::OffsetsRestored { partitions, by } => {
            crate::metrics::offsets_restored(by, *partitions);
            info!(%group_id, partitions, by, "quarantined offsets restored")
        }
        Event::OffsetsReset { partitions, by } => {
            crate::metrics::offsets_reset(*partitions);
            info!(%group_id, partitions, principal = %logsafe(by), "offsets reset")
        }
        Event::CommitNotOwned {
            member_id,
            partitions,
        } => {
            crate::metrics::commits_not_owned(*partitions);
            debug!(
                %group_id,
                member_id = %logsafe(member_id),
                partitions,
                "commit refused for partitions the member does not own"
            )
        }
        Event::GroupRemoved => info!(%group_id, "empty group removed (retention)"),
        Event::EvictedAtBarrier { member_ids } => {
            warn!(%group_id, members = %logsafe_list(member_ids), "members did not rejoin before the rebalance timeout")
        }
        Event::RebalanceFinished { kind, total_ms } => {
            crate::metrics::rebalance_finished(kind, *total_ms);
        }
        Event::EvictedAtSync { member_ids } => {
            warn!(%group_id, members = %logsafe_list(member_ids), "members did not sync before the rebalance timeout")
        }
    }
}
