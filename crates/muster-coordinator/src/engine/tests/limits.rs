//! Request limits and capacities (protocol §6.18 "Limits", `engine/limits.rs`): each cap
//! refuses with its code, the refusal changes nothing, and the server-wide pending-id budget is
//! taken and given back exactly.

use super::*;
use crate::config::Limits;

fn limited(f: impl FnOnce(&mut Limits)) -> GroupConfig {
    let mut config = config();
    f(&mut config.limits);
    config
}

fn join_code(h: &mut Harness, req: JoinGroupRequest) -> i16 {
    let t = h.send_join(req);
    h.join_reply(t).error_code
}

fn new_join() -> JoinGroupRequest {
    Harness::join_req("", None, &["t1"], &["range"])
}

const OVER: i16 = ErrorCode::RequestLimitExceeded.code();

#[test]
fn join_ids_and_reason_over_their_limits_are_refused() {
    let mut h = Harness::new();
    let limits = Limits::default();
    let mut req = new_join();
    req.member_id = "m".repeat(limits.max_member_id_bytes + 1);
    assert_eq!(join_code(&mut h, req), OVER);
    let mut req = new_join();
    req.group_instance_id = Some("i".repeat(limits.max_instance_id_bytes + 1));
    assert_eq!(join_code(&mut h, req), OVER);
    let mut req = new_join();
    req.reason = Some("r".repeat(limits.max_reason_bytes + 1));
    assert_eq!(join_code(&mut h, req), OVER);
    // At the limit is fine.
    let mut req = new_join();
    req.group_instance_id = Some("i".repeat(limits.max_instance_id_bytes));
    req.reason = Some("r".repeat(limits.max_reason_bytes));
    assert_eq!(join_code(&mut h, req), 0);
}

#[test]
fn refused_join_does_not_echo_an_oversized_member_id() {
    let mut h = Harness::new();
    let mut req = new_join();
    req.member_id = "m".repeat(10_000);
    let t = h.send_join(req);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, OVER);
    assert!(r.member_id.is_empty());
    assert_eq!(h.group.member_count(), 0);
}

#[test]
fn assignor_count_names_and_metadata_are_capped() {
    let mut h = Harness::with_config(limited(|l| {
        l.max_assignors = 2;
        l.max_assignor_name_bytes = 8;
        l.max_assignor_metadata_bytes = 10;
    }));
    let mut req = new_join();
    req.assignors = assignors(&["a", "b", "c"]);
    assert_eq!(join_code(&mut h, req), OVER, "three assignors");
    let mut req = new_join();
    req.assignors = assignors(&["ninechars"]);
    assert_eq!(join_code(&mut h, req), OVER, "a nine-byte name");
    let mut req = new_join();
    // "ud-a" + "ud-b" = 8 bytes: fits; a third byte-heavy one does not.
    req.assignors = assignors(&["a", "b"]);
    assert_eq!(
        join_code(&mut h, req.clone()),
        ErrorCode::MemberIdRequired.code()
    );
    req.assignors[0].user_data = vec![0; 7];
    assert_eq!(join_code(&mut h, req), OVER, "11 bytes of user data");
}

#[test]
fn subscriptions_and_owned_partitions_are_capped() {
    let mut h = Harness::with_config(limited(|l| {
        l.max_subscribed_topics = 2;
        l.max_partitions_per_request = 3;
    }));
    let mut req = new_join();
    req.topics = strings(&["a", "b", "c"]);
    assert_eq!(join_code(&mut h, req), OVER);
    let mut req = new_join();
    req.topics = vec!["t".repeat(250)];
    assert_eq!(join_code(&mut h, req), ErrorCode::InvalidTopic.code());
    let mut req = new_join();
    req.owned_partitions = vec![tp("t1", &[0, 1]), tp("t2", &[0, 1])];
    assert_eq!(join_code(&mut h, req), OVER);
}

#[test]
fn rebalance_timeout_over_the_max_is_refused() {
    let mut h = Harness::with_config(limited(|l| l.max_rebalance_timeout_ms = 60_000));
    let mut req = new_join();
    req.rebalance_timeout_ms = 60_001;
    assert_eq!(join_code(&mut h, req), OVER);
    let mut req = new_join();
    req.rebalance_timeout_ms = 60_000;
    assert_eq!(join_code(&mut h, req), ErrorCode::MemberIdRequired.code());
}

#[test]
fn generated_member_ids_carry_a_truncated_client_id() {
    let mut h = Harness::new();
    h.client.client_id = "c".repeat(200).into();
    let id = h.member_id_required();
    assert!(id.len() <= 101, "{} bytes", id.len());
    assert!(id.starts_with(&"c".repeat(64)));
    // And the id it was given is accepted back.
    h.rejoin(&id);
    let answers = h.complete_rebalance();
    assert_eq!(answers[&id].error_code, 0);
}

#[test]
fn pending_ids_count_against_max_group_size() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 2,
        ..config()
    });
    let a = h.member_id_required();
    let _b = h.member_id_required();
    // Two pending ids fill a group of two: a third new member is refused.
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        ErrorCode::GroupMaxSizeReached.code()
    );
    // A pending id itself may still join.
    let t = h.rejoin(&a);
    assert!(!h.is_answered(t) || h.join_reply(t).error_code == 0);
}

#[test]
fn the_pending_budget_is_server_wide_and_given_back() {
    let config = limited(|l| l.max_pending_member_ids = 2);
    let quotas = Quotas::default();
    let ledger = Ledger::new(quotas.clone(), 2);
    let budget = ledger.pending().clone();
    let mut h = Harness::with_ledger(config.clone(), quotas.clone(), ledger.clone());
    // A second group sharing the same budget (as every group of a server does).
    let mut other = Harness::with_ledger(config, quotas, ledger);
    let a = h.member_id_required();
    let _b = other.member_id_required();
    assert_eq!(budget.in_use(), 2);
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        ErrorCode::ResourceLimitReached.code()
    );
    // Joining gives the unit back.
    h.rejoin(&a);
    assert_eq!(budget.in_use(), 1);
    // Expiry gives it back.
    let session = Millis::from(SESSION);
    other.tick_to(session + 1);
    assert_eq!(budget.in_use(), 0);
    let _c = other.member_id_required();
    assert_eq!(budget.in_use(), 1);
    // A group that goes gives back what it held.
    drop(other);
    assert_eq!(budget.in_use(), 0);
}

#[test]
fn leave_forgets_a_pending_id_and_its_budget() {
    let mut h = Harness::new();
    let budget = h.ledger.pending().clone();
    let id = h.member_id_required();
    assert_eq!(budget.in_use(), 1);
    let r = h.leave(&[(&id, None)]);
    assert_eq!(r.members[0].error_code, 0);
    assert_eq!(budget.in_use(), 0);
}

#[test]
fn leave_with_an_oversized_reason_is_refused_whole() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let response = h.leave_req(LeaveGroupRequest {
        group_id: GROUP.into(),
        members: vec![LeavingMember {
            member_id: ids[0].clone(),
            group_instance_id: None,
            reason: Some("r".repeat(2_000)),
        }],
    });
    assert_eq!(response.error_code, OVER);
    assert!(response.members.is_empty());
    assert_eq!(h.group.member_count(), 1, "nobody left");
}

#[test]
fn heartbeat_with_an_oversized_member_id_is_refused() {
    let mut h = Harness::new();
    h.form_group(1);
    let long = "m".repeat(300);
    assert_eq!(h.heartbeat(&long, 1), ErrorCode::RequestLimitExceeded);
}

#[test]
fn commit_partitions_are_capped_and_topic_names_too() {
    let mut h = Harness::with_config(limited(|l| l.max_partitions_per_request = 3));
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("t1", &[(0, 1, None), (1, 1, None)]),
            commit_topic("t2", &[(0, 1, None), (1, 1, None)]),
        ],
    );
    assert_eq!(r.error_code, OVER);
    assert!(writes.is_empty());
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic(&"t".repeat(250), &[(0, 1, None)])],
    );
    assert_eq!(r.error_code, ErrorCode::InvalidTopic.code());
    assert!(writes.is_empty());
}

#[test]
fn commit_writes_a_repeated_partition_once_and_shares_the_topic() {
    let mut h = Harness::new();
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("t1", &[(0, 1, None), (1, 2, None), (0, 3, None)]),
            commit_topic("t1", &[(1, 4, None)]),
        ],
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.topics[0].partitions.len(),
        3,
        "one result per requested partition"
    );
    let got: Vec<(i32, i64)> = writes
        .iter()
        .map(|w| (w.partition, w.committed.offset))
        .collect();
    assert_eq!(got, vec![(0, 3), (1, 4)], "last value wins, written once");
    let (_, writes) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic("t2", &[(0, 1, None), (1, 1, None)])],
    );
    assert!(
        Arc::ptr_eq(&writes[0].topic, &writes[1].topic),
        "one allocation per topic entry, shared by its partitions"
    );
}

#[test]
fn fetch_answers_a_repeated_partition_once() {
    let mut h = Harness::new();
    let _ = h.commit(
        "",
        None,
        -1,
        vec![commit_topic("t1", &[(0, 5, Some("x".repeat(4_000)))])],
    );
    let r = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: Some(vec![tp("t1", &[0, 0, 0, 1]), tp("t1", &[0])]),
        },
        &Access::open(),
    );
    assert_eq!(r.error_code, 0);
    let answered: usize = r.topics.iter().map(|t| t.partitions.len()).sum();
    assert_eq!(answered, 2, "{r:?}");
}

#[test]
fn fetch_partitions_are_capped() {
    let h = Harness::with_config(limited(|l| l.max_partitions_per_request = 2));
    let r = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: Some(vec![tp("t1", &[0, 1, 2])]),
        },
        &Access::open(),
    );
    assert_eq!(r.error_code, OVER);
    assert!(r.topics.is_empty());
}

#[test]
fn absent_groups_apply_the_same_limits() {
    let config = config();
    let mut req = new_join();
    req.rebalance_timeout_ms = config.limits.max_rebalance_timeout_ms + 1;
    let answer = absent_group(&Request::JoinGroup(req), &config, &Access::open());
    let AbsentGroup::Answer(Response::JoinGroup(r)) = answer else {
        panic!("refused without creating: {answer:?}");
    };
    assert_eq!(r.error_code, OVER);
}

#[test]
fn an_exhausted_generation_refuses_to_rebalance() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    h.group.set_generation_for_test(i32::MAX);
    // A new member cannot start a rebalance.
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        ErrorCode::ResourceLimitReached.code()
    );
    // A leave would need a new generation: everyone is answered and the group goes Empty at
    // its last generation, instead of wrapping to i32::MIN.
    let t = h.rejoin(&ids[1]);
    assert_eq!(
        h.join_reply(t).error_code,
        ErrorCode::ResourceLimitReached.code()
    );
    h.leave(&[(&ids[0], None)]);
    h.complete_rebalance_by_ticking();
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(h.generation(), i32::MAX);
    assert_eq!(h.group.member_count(), 0);
}

#[test]
fn many_assignors_cost_linear_support_checks() {
    // 16 distinct names per member, members disjoint but one common name: the support list
    // grows, the checks stay correct.
    let mut h = Harness::new();
    let ids = h.form_group_with(20, |i, req| {
        let mut names: Vec<String> = (0..15).map(|k| format!("x{i}-{k}")).collect();
        names.push("common".into());
        req.assignors = names
            .iter()
            .map(|n| AssignorMetadata {
                name: n.clone(),
                user_data: Vec::new(),
            })
            .collect();
    });
    assert_eq!(ids.len(), 20);
    assert_eq!(h.group.assignor(), Some("common"));
}
