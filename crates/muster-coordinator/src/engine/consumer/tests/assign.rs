//! Targets computed off the group's turn (`assign.rs`): the group is Assigning meanwhile,
//! members keep their partitions, changes made while a job runs get one more job, and a result
//! nobody waits for is dropped.

use super::harness::{count, Cg};
use crate::config::{ConsumerConfig, GroupConfig};
use crate::engine::{Ctx, GroupState};

/// Every target goes off the group's turn.
fn offloaded() -> Cg {
    let mut cg = Cg::with_config(GroupConfig {
        consumer: ConsumerConfig {
            inline_assignment_limit: 0,
            ..ConsumerConfig::default()
        },
        ..GroupConfig::default()
    });
    cg.hold_jobs = true;
    cg
}

fn finish_jobs(cg: &mut Cg) {
    while !cg.jobs.is_empty() {
        let job = cg.jobs.remove(0);
        let computed = job.run();
        let cx = Ctx {
            now: cg.now,
            topics: &cg.catalog,
        };
        let effects = cg.group.target_computed(cx, computed);
        cg.collect(effects);
    }
}

#[test]
fn a_large_target_is_computed_off_the_turn_while_members_keep_their_partitions() {
    let mut cg = offloaded();
    // The first member: its target comes later; it stays at epoch 0 meanwhile.
    let r = cg.join("a", &["foo"]);
    assert_eq!(r.member_epoch, 0);
    assert_eq!(cg.group.state(), GroupState::Assigning);
    assert_eq!(cg.jobs.len(), 1);
    // A known member at epoch 0 heartbeats without repeating its subscription.
    assert_eq!(cg.beat("a", 0, &[]).error_code, 0);
    finish_jobs(&mut cg);
    let r = cg.beat("a", 0, &[]);
    assert_eq!(r.member_epoch, 1);
    let owned = r.assignment.unwrap_or_default();
    assert_eq!(count(&owned), 6);
    assert_eq!(cg.group.state(), GroupState::Stable);

    // Two more join while a job is out: one job at a time, the second covers both.
    cg.join("b", &["foo"]);
    cg.join("c", &["foo"]);
    assert_eq!(cg.jobs.len(), 1, "one job at a time");
    assert_eq!(cg.group.state(), GroupState::Assigning);
    // a keeps everything meanwhile: its target has not changed yet.
    let r = cg.beat("a", 1, &owned);
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert!(r.assignment.is_some_and(|a| count(&a) == 6));
    finish_jobs(&mut cg);
    assert_eq!(cg.group.describe_consumer().assignment_epoch, 3);
    assert_eq!(cg.group.state(), GroupState::Reconciling);
    let mut epochs = [1, 0, 0];
    let mut owned_by = [owned, Vec::new(), Vec::new()];
    for _ in 0..4 {
        for (i, m) in ["a", "b", "c"].iter().enumerate() {
            cg.step(m, &mut epochs[i], &mut owned_by[i]);
        }
    }
    assert_eq!(
        owned_by.iter().map(|o| count(o)).collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
    assert_eq!(cg.group.state(), GroupState::Stable);
    // The journal has one entry per computed target, each naming its change.
    let history = cg.group.history(0);
    assert_eq!(history.len(), 3);
    assert_eq!(
        (
            history[0].generation_id,
            history[0].trigger.member_id.as_str()
        ),
        (3, "c")
    );
    assert_eq!(
        (
            history[1].generation_id,
            history[1].trigger.member_id.as_str()
        ),
        (2, "b")
    );
}

#[test]
fn a_result_nobody_waits_for_is_dropped_and_a_restart_resumes() {
    let mut cg = offloaded();
    cg.join("a", &["foo"]);
    let stale = cg.jobs.remove(0);
    // The group is rebuilt from its record (a write failed, or a restart): the job's result
    // is not for it; its next call starts a new job.
    let record = cg.record.clone().expect("written");
    let (restored, _) =
        crate::engine::Group::<u32>::restore(record, Vec::new(), cg.config.clone(), cg.now);
    cg.group = restored;
    let cx = Ctx {
        now: cg.now,
        topics: &cg.catalog,
    };
    let effects = cg.group.target_computed(cx, stale.run());
    cg.collect(effects);
    assert_eq!(cg.group.describe_consumer().assignment_epoch, 0, "dropped");
    cg.beat("a", 0, &[]);
    assert_eq!(cg.jobs.len(), 1, "resumed");
    finish_jobs(&mut cg);
    let r = cg.beat("a", 0, &[]);
    assert_eq!(
        (r.member_epoch, count(&r.assignment.unwrap_or_default())),
        (1, 6)
    );
    assert_eq!(cg.group.history(1)[0].trigger.kind, "coordinator_restart");
}

/// Many changes while a job runs (more than the causes kept): every target the journal
/// records still names a change, never a restart.
#[test]
fn a_job_covering_many_changes_still_names_one() {
    let mut cg = offloaded();
    cg.join("m-0", &["foo"]);
    for i in 1..100 {
        cg.join(&format!("m-{i}"), &["foo"]);
    }
    finish_jobs(&mut cg);
    let history = cg.group.history(0);
    assert!(!history.is_empty());
    for entry in history {
        assert_eq!(entry.trigger.kind, "member_joined", "{entry:?}");
    }
    assert_eq!(cg.group.describe_consumer().assignment_epoch, 100);
}

/// A job whose result never comes back (the shell's blocking task failed) does not leave the
/// group Assigning for good: once the shell reports it, the next heartbeat starts another.
#[test]
fn a_lost_job_is_started_again() {
    let mut cg = offloaded();
    cg.join("a", &["foo"]);
    let lost = cg.jobs.remove(0);
    cg.group.target_failed(lost.epoch());
    cg.beat("a", 0, &[]);
    assert_eq!(
        cg.jobs.len(),
        1,
        "a new job: the group was {:?}",
        cg.group.state()
    );
    finish_jobs(&mut cg);
    let r = cg.beat("a", 0, &[]);
    assert_eq!(
        (r.member_epoch, count(&r.assignment.unwrap_or_default())),
        (1, 6)
    );
    assert_eq!(cg.group.state(), crate::engine::GroupState::Stable);
}
