//! Coordinator metrics, recorded through the `metrics` facade (the server installs the
//! Prometheus recorder; without one these calls cost nearly nothing). Labels are bounded:
//! states, triggers and the auth file's principals, never a group or member id.

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};

use crate::types::{GroupState, RebalanceTrigger};

/// Registers descriptions (for `# HELP` lines).
pub fn describe() {
    describe_gauge!("muster_groups", "Groups by state");
    describe_gauge!("muster_members", "Members of all groups");
    describe_counter!(
        "muster_rebalances_total",
        "Completed rebalances, by trigger"
    );
    describe_histogram!(
        "muster_rebalance_duration_seconds",
        Unit::Seconds,
        "Time a join barrier was open"
    );
    describe_counter!(
        "muster_session_expiries_total",
        "Members removed by session expiry"
    );
    describe_counter!(
        "muster_offset_commits_total",
        "Partition offsets committed (acknowledged durable)"
    );
    describe_histogram!(
        "muster_storage_write_seconds",
        Unit::Seconds,
        "Time from submitting a write to it being durable (includes group-commit batching)"
    );
    describe_histogram!(
        "muster_storage_sync_seconds",
        Unit::Seconds,
        "Time one storage transaction took to commit and sync"
    );
    describe_counter!(
        "muster_storage_errors_total",
        "Storage writes (rounds, and reopen attempts while recovering) that failed"
    );
    describe_counter!(
        "muster_authorization_denials_total",
        "Requests (or the groups and topics named in one) refused by the ACLs, by resource type"
    );
    describe_gauge!(
        "muster_quota_groups",
        "Groups counted against each principal's max_groups (the groups it created)"
    );
    describe_gauge!(
        "muster_quota_members",
        "Members and pending member ids counted against each principal's max_members"
    );
    describe_gauge!(
        "muster_storage_healthy",
        "1 while storage takes writes; 0 from a failed write until it has recovered"
    );
}

pub(crate) fn groups_in_state(state: GroupState, count: usize) {
    gauge!("muster_groups", "state" => state.as_str()).set(count as f64);
}

/// A principal's quota usage, `metric` being `muster_quota_groups` or `muster_quota_members`
/// (principals are the auth file's: a bounded label set). Plain names, so that this module
/// depends on nothing it reports on.
pub(crate) fn quota_used(metric: &'static str, principal: &str, used: u32) {
    gauge!(metric, "principal" => principal.to_owned()).set(f64::from(used));
}

pub(crate) fn members(count: u64) {
    gauge!("muster_members").set(count as f64);
}

pub(crate) fn rebalance_completed(trigger: RebalanceTrigger, barrier_ms: u64) {
    counter!("muster_rebalances_total", "trigger" => trigger.as_str()).increment(1);
    histogram!("muster_rebalance_duration_seconds").record(barrier_ms as f64 / 1000.0);
}

pub(crate) fn session_expired() {
    counter!("muster_session_expiries_total").increment(1);
}

pub(crate) fn offsets_committed(partitions: usize) {
    counter!("muster_offset_commits_total").increment(partitions as u64);
}

pub(crate) fn storage_write(seconds: f64) {
    histogram!("muster_storage_write_seconds").record(seconds);
}

/// One storage transaction committed and synced (for store backends).
pub fn storage_sync(seconds: f64) {
    histogram!("muster_storage_sync_seconds").record(seconds);
}

/// A storage write (or a reopen attempt while recovering) failed (for store backends).
pub fn storage_error() {
    counter!("muster_storage_errors_total").increment(1);
}

/// Whether storage takes writes (for store backends).
pub fn storage_healthy(healthy: bool) {
    gauge!("muster_storage_healthy").set(if healthy { 1.0 } else { 0.0 });
}

/// `count` authorization denials of one resource type (the session counts the group `read`
/// denials of group requests under the same name and labels).
pub fn authorization_denials(resource: &'static str, count: usize) {
    if count > 0 {
        counter!("muster_authorization_denials_total", "resource" => resource)
            .increment(count as u64);
    }
}
