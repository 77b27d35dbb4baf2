//! Dry-run rebalance (`simulate.rs`): what would move, with nothing changed.

use muster_protocol::{ErrorCode, GroupSimulateRequest, TopicInfo};

use super::harness::{count, Cg};

fn request(remove: &[&str], add: u32, grow: &[(&str, i32)]) -> GroupSimulateRequest {
    GroupSimulateRequest {
        group_id: "cg".into(),
        remove_members: remove.iter().map(|s| (*s).to_owned()).collect(),
        add_members: add,
        partitions: grow
            .iter()
            .map(|(t, p)| TopicInfo {
                topic: (*t).to_owned(),
                partitions: *p,
            })
            .collect(),
    }
}

/// Settles every member of a consumer group at its target.
fn settled(members: &[&str]) -> Cg {
    let mut cg = Cg::new();
    let mut state = Vec::new();
    for m in members {
        let r = cg.join(m, &["foo", "bar"]);
        state.push((
            m.to_string(),
            r.member_epoch,
            r.assignment.unwrap_or_default(),
        ));
    }
    for _ in 0..4 {
        for (m, epoch, owned) in &mut state {
            cg.step(m, epoch, owned);
        }
    }
    assert_eq!(cg.group.state(), crate::engine::GroupState::Stable);
    cg
}

#[test]
fn a_joining_member_only_takes_its_share() {
    let cg = settled(&["a", "b", "c"]);
    let epoch = cg.group.generation();
    let r = cg.group.simulate(&request(&[], 1, &[]), &cg.catalog);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.assignor, "uniform");
    let new = r
        .members
        .iter()
        .find(|m| m.member_id == "new-1")
        .expect("added");
    assert_eq!(new.change, "added");
    let gained = count(&new.gained);
    assert!((2..=3).contains(&gained), "9 partitions over 4: {gained}");
    // Only what moves to the newcomer stops; staying members gain nothing.
    assert_eq!(r.stopped_partitions as usize, gained);
    for m in r.members.iter().filter(|m| m.change == "staying") {
        assert!(m.gained.is_empty(), "{m:?}");
    }
    // Nothing changed in the group.
    assert_eq!(cg.group.generation(), epoch);
    assert_eq!(cg.group.member_count(), 3);
}

#[test]
fn a_leaving_member_loses_everything_and_only_that_moves() {
    let cg = settled(&["a", "b", "c"]);
    let r = cg.group.simulate(&request(&["b"], 0, &[]), &cg.catalog);
    let b = r.members.iter().find(|m| m.member_id == "b").expect("b");
    assert_eq!(b.change, "removed");
    assert!(b.kept.is_empty());
    assert_eq!(r.stopped_partitions as usize, count(&b.lost));
}

#[test]
fn a_topic_growing_stops_nothing() {
    let cg = settled(&["a", "b"]);
    let r = cg
        .group
        .simulate(&request(&[], 0, &[("bar", 5)]), &cg.catalog);
    assert_eq!(r.error_code, 0);
    let gained: usize = r.members.iter().map(|m| count(&m.gained)).sum();
    assert_eq!(gained, 2);
    assert_eq!(r.stopped_partitions, 0);
}

#[test]
fn bad_simulations_are_refused() {
    let cg = settled(&["a"]);
    let r = cg.group.simulate(&request(&["zz"], 0, &[]), &cg.catalog);
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code());
    let r = cg
        .group
        .simulate(&request(&[], 0, &[("bar", 2)]), &cg.catalog);
    assert_eq!(r.error_code, ErrorCode::InvalidPartitions.code());
    assert!(r.error_message.is_some());
}

/// A group whose config limits one request to `max` partitions.
fn settled_with_limit(members: &[&str], max: usize) -> Cg {
    let mut config = crate::config::GroupConfig::default();
    config.limits.max_partitions_per_request = max;
    let mut cg = Cg::with_config(config);
    for m in members {
        cg.join(m, &["foo", "bar"]);
    }
    cg
}

#[test]
fn a_simulated_count_no_topic_may_have_is_refused() {
    let cg = settled(&["a"]);
    let max = cg.config.limits.max_partitions_per_topic;
    let r = cg
        .group
        .simulate(&request(&[], 0, &[("bar", i32::MAX)]), &cg.catalog);
    assert_eq!(r.error_code, ErrorCode::InvalidPartitions.code(), "{r:?}");
    let message = r.error_message.unwrap_or_default();
    assert!(message.contains(&max.to_string()), "{message}");
    assert!(r.members.is_empty());
}

#[test]
fn a_simulation_assigns_at_most_a_requests_worth_of_partitions() {
    // foo and bar have 9 partitions in all (the harness's catalog): bar grown to 7 makes 13.
    let cg = settled_with_limit(&["a", "b"], 12);
    let r = cg
        .group
        .simulate(&request(&[], 0, &[("bar", 7)]), &cg.catalog);
    assert_eq!(
        r.error_code,
        ErrorCode::RequestLimitExceeded.code(),
        "{r:?}"
    );
    let message = r.error_message.unwrap_or_default();
    assert!(
        message.contains("13 partitions") && message.contains("12"),
        "{message}"
    );
    // At the limit it runs.
    let r = cg
        .group
        .simulate(&request(&[], 0, &[("bar", 6)]), &cg.catalog);
    assert_eq!(r.error_code, 0, "{r:?}");
}

#[test]
fn added_members_count_once_per_subscribed_topic() {
    // Two topics: 6 added members are 12 subscriptions.
    let cg = settled_with_limit(&["a"], 12);
    let r = cg.group.simulate(&request(&[], 6, &[]), &cg.catalog);
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = cg.group.simulate(&request(&[], 7, &[]), &cg.catalog);
    assert_eq!(
        r.error_code,
        ErrorCode::RequestLimitExceeded.code(),
        "{r:?}"
    );
    assert!(r.members.is_empty());
    let message = r.error_message.unwrap_or_default();
    assert!(message.contains("7 added members"), "{message}");
}
