//! Coordinator metrics, recorded through the `metrics` facade (the server installs the
//! Prometheus recorder; without one these calls cost nearly nothing). Labels are bounded:
//! states, triggers and the auth file's principals, never a group or member id.

use std::collections::BTreeMap;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};

use crate::types::{GroupState, RebalanceTrigger};

/// Registers descriptions (for `# HELP` lines).
pub fn describe() {
    describe_gauge!("muster_groups", "Groups by state");
    describe_gauge!("muster_members", "Members of all groups");
    describe_gauge!(
        "muster_groups_parked",
        "Groups kept as data, with no actor (Empty, nothing in flight, no recent request)"
    );
    describe_counter!(
        "muster_rebalances_total",
        "Completed rebalances, by trigger"
    );
    describe_histogram!(
        "muster_rebalance_duration_seconds",
        Unit::Seconds,
        "Time a join barrier was open"
    );
    describe_histogram!(
        "muster_rebalance_seconds",
        Unit::Seconds,
        "Whole rebalances, from the barrier opening to the leader's assignment (or to an \
         empty generation), by trigger (the journal's cause kind)"
    );
    describe_gauge!(
        "muster_groups_stuck",
        "Groups whose join barrier is past half its rebalance timeout (the WARN was logged)"
    );
    describe_gauge!(
        "muster_groups_unowned_partitions",
        "Stable groups with subscribed partitions that no member owns"
    );
    describe_gauge!(
        "muster_longest_barrier_seconds",
        "How long the longest-open join barrier in progress has been open (0: none)"
    );
    describe_counter!(
        "muster_session_expiries_total",
        "Members removed by session expiry"
    );
    describe_counter!(
        "muster_consumer_target_assignments_total",
        "Target assignments computed for consumer-protocol groups (one per group epoch bump)"
    );
    describe_counter!(
        "muster_consumer_partitions_moved_total",
        "Partitions given a new target owner in consumer-protocol groups"
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
        "muster_groups_quarantined",
        "Groups with offsets in the expiry quarantine (restorable with `muster offsets restore`)"
    );
    describe_gauge!(
        "muster_offsets_quarantined",
        "Partition offsets in the expiry quarantine, over all groups"
    );
    describe_counter!(
        "muster_offsets_quarantined_total",
        "Partition offsets moved to the expiry quarantine by retention"
    );
    describe_counter!(
        "muster_offsets_quarantine_dropped_total",
        "Quarantined partition offsets dropped for good after the grace period"
    );
    describe_counter!(
        "muster_offsets_restored_total",
        "Quarantined partition offsets brought back, by `command` (OffsetRestore) or `join`"
    );
    describe_counter!("muster_offset_resets_total", "OffsetResets executed");
    describe_counter!(
        "muster_offsets_reset_partitions_total",
        "Partition offsets changed by executed OffsetResets"
    );
    describe_counter!(
        "muster_commits_not_owned_total",
        "Partition offsets refused with PARTITION_NOT_OWNED (a member committing a partition it \
         does not own: a zombie, or a client that commits partitions it was never assigned)"
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

pub(crate) fn groups_parked(count: usize) {
    gauge!("muster_groups_parked").set(count as f64);
}

pub(crate) fn rebalance_completed(trigger: RebalanceTrigger, barrier_ms: u64) {
    counter!("muster_rebalances_total", "trigger" => trigger.as_str()).increment(1);
    histogram!("muster_rebalance_duration_seconds").record(barrier_ms as f64 / 1000.0);
}

/// A rebalance got its assignment (or ended with no members) `total_ms` after its barrier
/// opened; `kind` is its cause kind (a fixed set: `engine::cause_kind`).
pub(crate) fn rebalance_finished(kind: &'static str, total_ms: u64) {
    histogram!("muster_rebalance_seconds", "trigger" => kind).record(total_ms as f64 / 1000.0);
}

/// A group became stuck (`+1`) or stopped being stuck (`-1`).
pub(crate) fn groups_stuck(delta: f64) {
    gauge!("muster_groups_stuck").increment(delta);
}

/// A group started (`+1`) or stopped (`-1`) having unowned partitions.
pub(crate) fn groups_unowned(delta: f64) {
    gauge!("muster_groups_unowned_partitions").increment(delta);
}

/// The join barriers open now (group actor key → when it opened, on the coordinator's
/// clock), for [`refresh_longest_barrier`]. Touched when a barrier opens or closes, never per
/// request.
static OPEN_BARRIERS: std::sync::Mutex<BTreeMap<u64, u64>> = std::sync::Mutex::new(BTreeMap::new());

pub(crate) fn barrier_open(key: u64, started_at: Option<u64>) {
    let mut open = OPEN_BARRIERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match started_at {
        Some(at) => open.insert(key, at),
        None => open.remove(&key),
    };
}

/// Sets `muster_longest_barrier_seconds` for `now_ms` (ms since the Unix epoch): the server
/// calls it before rendering its metrics.
pub fn refresh_longest_barrier(now_ms: u64) {
    let oldest = OPEN_BARRIERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .values()
        .min()
        .copied();
    let seconds = oldest.map_or(0.0, |at| now_ms.saturating_sub(at) as f64 / 1000.0);
    gauge!("muster_longest_barrier_seconds").set(seconds);
}

/// Partitions in each group's expiry quarantine (group actor key → count), for the
/// quarantine gauges. Touched only when a group's quarantine changes.
static QUARANTINES: std::sync::Mutex<BTreeMap<u64, usize>> = std::sync::Mutex::new(BTreeMap::new());

pub(crate) fn quarantine_size(key: u64, partitions: usize) {
    let mut all = QUARANTINES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if partitions == 0 {
        all.remove(&key);
    } else {
        all.insert(key, partitions);
    }
    gauge!("muster_groups_quarantined").set(all.len() as f64);
    gauge!("muster_offsets_quarantined").set(all.values().sum::<usize>() as f64);
}

pub(crate) fn offsets_quarantined(partitions: usize) {
    counter!("muster_offsets_quarantined_total").increment(partitions as u64);
}

pub(crate) fn quarantine_dropped(partitions: usize) {
    counter!("muster_offsets_quarantine_dropped_total").increment(partitions as u64);
}

pub(crate) fn offsets_restored(by: &'static str, partitions: usize) {
    counter!("muster_offsets_restored_total", "by" => by).increment(partitions as u64);
}

pub(crate) fn offsets_reset(partitions: usize) {
    counter!("muster_offset_resets_total").increment(1);
    counter!("muster_offsets_reset_partitions_total").increment(partitions as u64);
}

pub(crate) fn commits_not_owned(partitions: usize) {
    counter!("muster_commits_not_owned_total").increment(partitions as u64);
}

pub(crate) fn session_expired() {
    counter!("muster_session_expiries_total").increment(1);
}

pub(crate) fn target_assigned(moved: usize) {
    counter!("muster_consumer_target_assignments_total").increment(1);
    counter!("muster_consumer_partitions_moved_total").increment(moved as u64);
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
