//! A principal's `max_members` (protocol §5 "Quotas"): members and pending ids hold a unit
//! each, given back however they go; over the limit a join is refused with QUOTA_EXCEEDED; a
//! restart charges the recorded principals again.

use super::*;
use crate::access::Principal;
use crate::quota::QuotaKind;

impl Harness {
    /// From now on the harness's requests come from principal `name`.
    fn as_principal(&mut self, name: &str) -> Arc<crate::quota::Quota> {
        let quota = self.quotas.get(name);
        let principal = Principal::new(Arc::from(name), Vec::new(), Arc::clone(&quota));
        self.client.access = Access::principal(Arc::new(principal));
        quota
    }
}

fn members_of(quota: &crate::quota::Quota) -> u32 {
    quota.used(QuotaKind::Members)
}

#[test]
fn pending_ids_and_members_hold_one_unit_each() {
    let mut h = Harness::new();
    let quota = h.as_principal("p");
    let a = h.member_id_required();
    assert_eq!(members_of(&quota), 1, "a pending id counts");
    let b = h.member_id_required();
    assert_eq!(members_of(&quota), 2);
    // Joining with a pending id passes its unit on: no second one.
    h.rejoin(&a);
    h.rejoin(&b);
    h.complete_rebalance();
    assert_eq!(h.group.member_count(), 2);
    assert_eq!(members_of(&quota), 2);
    // A known member rejoining takes nothing.
    h.sync_all();
    h.rejoin(&a);
    assert_eq!(members_of(&quota), 2);
    // Leaving gives the unit back.
    let left = h.leave(&[(&b, None)]);
    assert_eq!(left.error_code, 0);
    assert_eq!(members_of(&quota), 1);
}

#[test]
fn over_the_limit_a_new_member_or_pending_id_is_refused_and_nothing_changes() {
    let mut h = Harness::new();
    let quota = h.as_principal("p");
    quota.set_limits(None, Some(2));
    let ids = h.form_group(2);
    assert_eq!(members_of(&quota), 2);
    let t = h.join("", None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::QuotaExceeded), "{r:?}");
    assert_eq!(r.member_id, "");
    // A new static member too.
    let t = h.join("", Some("s1"), &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::QuotaExceeded));
    assert_eq!(h.group.member_count(), 2);
    assert_eq!(h.state(), GroupState::Stable, "no rebalance for a refusal");
    // Existing members rejoin as before.
    h.rejoin(&ids[0]);
    let answers = h.complete_rebalance();
    assert!(answers.values().all(|r| r.error_code == 0), "{answers:?}");
    assert_eq!(h.group.member_count(), 2);
    // Another principal is not affected.
    let other = h.as_principal("q");
    let _pending = h.member_id_required();
    assert_eq!(members_of(&other), 1);
    assert_eq!(members_of(&quota), 2);
}

#[test]
fn group_checks_come_before_the_quota() {
    let mut config = config();
    config.max_group_size = 1;
    let mut h = Harness::with_config(config);
    let quota = h.as_principal("p");
    h.form_group(1);
    quota.set_limits(None, Some(1));
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
}

#[test]
fn expiry_eviction_and_deletion_give_units_back() {
    let mut h = Harness::new();
    let quota = h.as_principal("p");
    let _pending = h.member_id_required();
    assert_eq!(members_of(&quota), 1);
    // A pending id that never joins is forgotten after the session timeout.
    h.advance(Millis::from(SESSION) + 1);
    assert_eq!(members_of(&quota), 0);

    h.form_group(3);
    assert_eq!(members_of(&quota), 3);
    // Nobody heartbeats: every session expires.
    h.advance(Millis::from(SESSION) + 1);
    assert_eq!(h.group.member_count(), 0);
    assert_eq!(members_of(&quota), 0);

    let _pending = h.member_id_required();
    assert_eq!(members_of(&quota), 1);
    assert_eq!(h.delete(), ErrorCode::None);
    assert_eq!(
        members_of(&quota),
        0,
        "deleting the group forgets its pending ids"
    );
}

#[test]
fn a_static_takeover_by_another_principal_moves_the_unit() {
    let mut h = Harness::new();
    let p = h.as_principal("p");
    h.join("", Some("s1"), &["t1"], &["range"]);
    h.complete_rebalance();
    h.sync_all();
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(members_of(&p), 1);
    // Same principal: the unit stays.
    let t = h.join("", Some("s1"), &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(members_of(&p), 1);
    // Another principal at its limit is refused and the member stays p's.
    let q = h.as_principal("q");
    q.set_limits(None, Some(0));
    let t = h.join("", Some("s1"), &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::QuotaExceeded));
    assert_eq!((members_of(&p), members_of(&q)), (1, 0));
    // With room, it takes the member over, and the unit with it.
    q.set_limits(None, None);
    let t = h.join("", Some("s1"), &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!((members_of(&p), members_of(&q)), (0, 1));
}

#[test]
fn a_restart_charges_recorded_principals_even_past_their_limit() {
    let mut h = Harness::new();
    let quota = h.as_principal("p");
    h.form_group(3);
    let record = h.group.to_record();
    assert!(record
        .members
        .iter()
        .all(|m| m.principal.as_deref() == Some("p")));
    quota.set_limits(None, Some(1));
    // The old group goes with the old process; the restored one is charged.
    h.restart(Vec::new());
    assert_eq!(members_of(&quota), 3);
    assert_eq!(h.group.member_count(), 3);
    // Still over the lowered limit: nothing new fits.
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::QuotaExceeded));
}

#[test]
fn without_an_auth_file_nothing_is_charged_or_recorded() {
    let mut h = Harness::new();
    h.form_group(2);
    let record = h.group.to_record();
    assert!(record.members.iter().all(|m| m.principal.is_none()));
    assert_eq!(record.created_by, None);
}

/// The shell reserves what `join_needs` names before the call; what the join does not use comes
/// back in its effects, so a refused or answered-early join leaves every counter as it was.
#[test]
fn reservations_a_join_does_not_use_come_back() {
    let mut h = Harness::new();
    let quota = h.as_principal("p");
    let ids = h.form_group(1);
    let budget = h.ledger.pending().clone();
    assert_eq!((members_of(&quota), budget.in_use()), (1, 0));
    // A known member rejoining needs nothing.
    let req = h.last_join[&ids[0]].clone();
    assert_eq!(h.group.join_needs(&req, &h.client), JoinNeeds::default());
    // A new dynamic member may need a unit and a pending id; refused before using them (its
    // session timeout is out of range), both come back.
    let mut req = Harness::join_req("", None, &["t1"], &["range"]);
    req.session_timeout_ms = 1;
    let needs = h.group.join_needs(&req, &h.client);
    assert_eq!(
        needs,
        JoinNeeds {
            member_unit: true,
            pending_id: true
        }
    );
    let t = h.send_join(req);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::InvalidSessionTimeout)
    );
    assert_eq!((members_of(&quota), budget.in_use()), (1, 0));
    // A static instance of the same principal taking itself over needs no new unit.
    // (It joins a Stable group: held at the new barrier.)
    h.join_static("s1");
    let s1 = h.group.statics["s1"].to_string();
    assert_eq!(members_of(&quota), 2);
    let req = Harness::join_req("", Some("s1"), &["t1"], &["range"]);
    assert_eq!(h.group.join_needs(&req, &h.client), JoinNeeds::default());
    assert!(h.group.has_member(&s1));
}

/// Without an auth file nothing is charged: a join needs at most a pending id.
#[test]
fn an_open_server_charges_no_member_units() {
    let h = Harness::new();
    let req = Harness::join_req("", None, &["t1"], &["range"]);
    assert_eq!(
        h.group.join_needs(&req, &h.client),
        JoinNeeds {
            member_unit: false,
            pending_id: true
        }
    );
}
