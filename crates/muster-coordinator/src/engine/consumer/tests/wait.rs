//! Held heartbeats (`wait.rs`): a member waiting for partitions another member still holds is
//! answered the moment they are released, or at its heartbeat interval.

use muster_protocol::ErrorCode;

use super::harness::{count, tp, Cg, HELD};

#[test]
fn a_waiting_member_is_answered_the_moment_its_partitions_are_released() {
    let mut cg = Cg::new();
    let all = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    cg.join("b", &["foo"]);
    // a is told to give three up; b's heartbeat waits for them.
    let kept = cg.beat("a", 1, &all).assignment.unwrap_or_default();
    assert_eq!(count(&kept), 3);
    assert_eq!(cg.beat("b", 2, &[]).error_code, HELD);
    assert!(cg.is_held("b"));
    // a confirms: in the same call, b's held heartbeat is answered with them.
    cg.now += 3;
    assert_eq!(cg.beat("a", 1, &kept).member_epoch, 2);
    let b = cg.late_answer("b").expect("answered at the release");
    assert_eq!((b.error_code, b.member_epoch), (0, 2));
    assert_eq!(count(&b.assignment.unwrap_or_default()), 3);
}

#[test]
fn a_held_heartbeat_is_answered_by_its_interval_at_the_latest() {
    let mut cg = Cg::new();
    let all = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    cg.join("b", &["foo"]);
    cg.beat("a", 1, &all);
    assert_eq!(cg.beat("b", 2, &[]).error_code, HELD);
    // a never confirms: b is answered (unchanged) after one heartbeat interval.
    cg.now += 4_999;
    cg.tick();
    assert!(cg.late_answer("b").is_none());
    cg.now += 1;
    cg.tick();
    let b = cg.late_answer("b").expect("answered at the interval");
    assert_eq!((b.error_code, b.member_epoch, b.assignment), (0, 2, None));
}

#[test]
fn held_heartbeats_are_answered_when_the_group_stops_here_or_the_member_goes() {
    let mut cg = Cg::new();
    let all = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    let b_epoch = cg.join("b", &["foo"]).member_epoch;
    let c_epoch = cg.join("c", &["foo"]).member_epoch;
    cg.beat("a", 1, &all);
    assert_eq!(cg.beat("b", b_epoch, &[]).error_code, HELD);
    assert_eq!(cg.beat("c", c_epoch, &[]).error_code, HELD);
    // b leaves on another connection: its held heartbeat is answered UNKNOWN_MEMBER_ID.
    assert_eq!(cg.send(Cg::request("b", -1)).error_code, 0);
    let b = cg.late_answer("b").expect("answered");
    assert_eq!(b.error_code, ErrorCode::UnknownMemberId.code());
    // The node stops coordinating the group: c's is answered NOT_COORDINATOR.
    let effects = cg.group.abort_held(ErrorCode::NotCoordinator);
    cg.collect(effects);
    let c = cg.late_answer("c").expect("answered");
    assert_eq!(c.error_code, ErrorCode::NotCoordinator.code());
    let _ = tp;
}
