//! Partition ownership of classic groups (protocol §6.13, §6.23; `tenure.rs`): OffsetCommit's
//! PARTITION_NOT_OWNED check, the cooperative hand-over, ownership epochs and the
//! OwnershipEpochs request.

use muster_protocol::OwnershipEpochsRequest;

use super::protect::{codes, commit_batch, offsets, simple_commit, with_offsets};
use super::*;
use crate::config::OffsetsConfig;

const NOT_OWNED: i16 = ErrorCode::PartitionNotOwned.code();

fn checked() -> GroupConfig {
    with_offsets(OffsetsConfig {
        ownership_check: true,
        history_entries: 0,
        quarantine_ms: 0,
        ..OffsetsConfig::default()
    })
}

/// The leader hands out `plan` (partitions of t1 by member), then every other member syncs:
/// the group is Stable.
fn sync_plan(h: &mut Harness, plan: &[(&str, &[i32])]) {
    let generation = h.generation();
    let leader = h.leader();
    let assignments = plan
        .iter()
        .map(|(id, ps)| assign(id, vec![tp("t1", ps)]))
        .collect();
    let mut tokens = vec![h.sync(&leader, generation, assignments)];
    let others: Vec<String> = h
        .describe()
        .members
        .into_iter()
        .map(|m| m.member_id)
        .filter(|id| *id != leader)
        .collect();
    for id in others {
        tokens.push(h.sync(&id, generation, Vec::new()));
    }
    for t in tokens {
        assert_eq!(h.sync_reply(t).error_code, 0);
    }
    assert_eq!(h.state(), GroupState::Stable);
    h.take_events();
}

/// The next generation of the same members (the leader rejoins), synced with `plan`.
fn next_generation(h: &mut Harness, plan: &[(&str, &[i32])]) {
    let leader = h.leader();
    let before = h.generation();
    h.rejoin(&leader);
    h.complete_rebalance();
    assert_eq!(h.generation(), before + 1);
    sync_plan(h, plan);
}

/// Two dynamic members, the leader `a` first, at the end of their first barrier.
fn pair(h: &mut Harness) -> (String, String) {
    let ids = h.join_all(2);
    let a = h.leader();
    let b = h.followers(&ids)[0].clone();
    (a, b)
}

/// `member` commits `offset + partition` to each of t1's `partitions`: each partition's code,
/// and the partitions its write put.
fn commit_t1(
    h: &mut Harness,
    member: &str,
    generation: i32,
    partitions: &[i32],
) -> (Vec<(i32, i16)>, Vec<i32>) {
    let entries: Vec<(i32, i64, Option<String>)> = partitions
        .iter()
        .map(|&p| (p, 100 + i64::from(p), None))
        .collect();
    let (r, batch) = commit_batch(h, member, generation, vec![commit_topic("t1", &entries)]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let written = batch
        .unwrap_or_default()
        .into_iter()
        .flat_map(|m| match m {
            Mutation::PutOffsets { offsets, .. } => offsets,
            _ => Vec::new(),
        })
        .map(|w| w.partition)
        .collect();
    let codes = codes(&r).into_iter().map(|(_, p, c)| (p, c)).collect();
    (codes, written)
}

fn epochs_req(member: &str, generation: i32) -> OwnershipEpochsRequest {
    OwnershipEpochsRequest {
        group_id: GROUP.to_owned(),
        generation_id: generation,
        member_id: member.to_owned(),
        group_instance_id: None,
    }
}

/// The member's OwnershipEpochs answer: `(topic, partition, epoch)`, or the refusal's code.
fn epochs(h: &mut Harness, member: &str, generation: i32) -> Result<Vec<(i32, i32)>, i16> {
    let r = h
        .group
        .ownership_epochs(h.now, &epochs_req(member, generation));
    if r.error_code != 0 {
        // A refusal names no generation (protocol §6.23).
        assert_eq!(r.generation_id, -1);
        assert!(r.topics.is_empty());
        return Err(r.error_code);
    }
    assert_eq!(r.generation_id, generation);
    Ok(r.topics
        .iter()
        .inspect(|t| assert_eq!(t.topic, "t1"))
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.epoch)))
        .collect())
}

// -------------------------------------------------------------------------------- the check

#[test]
fn a_member_commits_its_own_partitions_and_not_anothers_in_the_same_request() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    let generation = h.generation();
    let (codes, written) = commit_t1(&mut h, &a, generation, &[0, 3, 1]);
    assert_eq!(codes, vec![(0, 0), (3, NOT_OWNED), (1, 0)]);
    assert_eq!(
        written,
        vec![0, 1],
        "the refused partition is not in the batch"
    );
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 100), ("t1".to_owned(), 1, 101)]
    );
    assert!(h.take_events().contains(&Event::CommitNotOwned {
        member_id: a.clone(),
        partitions: 1,
    }));
    // The owner commits it; a partition nobody was given is nobody's.
    let (codes, written) = commit_t1(&mut h, &b, generation, &[3]);
    assert_eq!((codes, written), (vec![(3, 0)], vec![3]));
    let (codes, written) = commit_t1(&mut h, &b, generation, &[6]);
    assert_eq!((codes, written), (vec![(6, NOT_OWNED)], vec![]));
    // Another topic, too.
    let (r, batch) = commit_batch(
        &mut h,
        &a,
        generation,
        vec![commit_topic("t2", &[(0, 1, None)])],
    );
    assert_eq!(r.topics[0].partitions[0].error_code, NOT_OWNED);
    assert!(batch.is_none(), "nothing to write");
}

#[test]
fn a_commit_before_the_first_assignment_owns_nothing() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    // CompletingRebalance: refused as a whole, as without the check.
    let generation = h.generation();
    let (r, _) = commit_batch(
        &mut h,
        &a,
        generation,
        vec![commit_topic("t1", &[(0, 1, None)])],
    );
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ErrorCode::RebalanceInProgress)
    );
    // The leader leaves b out: b owns nothing.
    sync_plan(&mut h, &[(&a, &[0, 1, 2, 3, 4, 5])]);
    let (codes, _) = commit_t1(&mut h, &b, generation, &[0]);
    assert_eq!(codes, vec![(0, NOT_OWNED)]);
}

#[test]
fn a_commit_from_outside_the_group_is_not_checked() {
    let mut h = Harness::with_config(checked());
    simple_commit(&mut h, "t1", 3, 7);
    // A group whose members all left: their partitions are free for tools again.
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    h.leave(&[(a.as_str(), None), (b.as_str(), None)]);
    assert_eq!(h.state(), GroupState::Empty);
    simple_commit(&mut h, "t1", 0, 8);
    simple_commit(&mut h, "t1", 3, 9);
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 8), ("t1".to_owned(), 3, 9)]
    );
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::CommitNotOwned { .. })));
}

#[test]
fn with_the_check_off_a_member_commits_any_partition() {
    let mut h = Harness::with_config(with_offsets(OffsetsConfig {
        ownership_check: false,
        ..checked().offsets
    }));
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    let generation = h.generation();
    let (codes, written) = commit_t1(&mut h, &a, generation, &[0, 3, 6]);
    assert_eq!(codes, vec![(0, 0), (3, 0), (6, 0)]);
    assert_eq!(written, vec![0, 3, 6]);
}

#[test]
fn cooperative_hand_over_the_old_owner_commits_until_the_partition_has_a_new_one() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    let n = h.generation();
    // Generation N+1 takes 2 from a and gives it to nobody (the first cooperative round).
    next_generation(&mut h, &[(&a, &[0, 1]), (&b, &[3, 4, 5])]);
    let n1 = h.generation();
    let (codes, written) = commit_t1(&mut h, &a, n1, &[2]);
    assert_eq!(
        (codes, written),
        (vec![(2, 0)], vec![2]),
        "its last offsets"
    );
    assert_eq!(commit_t1(&mut h, &b, n1, &[2]).0, vec![(2, NOT_OWNED)]);
    assert_eq!(epochs(&mut h, &a, n1), Ok(vec![(0, n), (1, n), (2, n)]));
    // Generation N+2 gives it to b.
    next_generation(&mut h, &[(&a, &[0, 1]), (&b, &[2, 3, 4, 5])]);
    let n2 = h.generation();
    assert_eq!(commit_t1(&mut h, &a, n2, &[2]).0, vec![(2, NOT_OWNED)]);
    assert_eq!(commit_t1(&mut h, &b, n2, &[2]).0, vec![(2, 0)]);
    assert_eq!(epochs(&mut h, &a, n2), Ok(vec![(0, n), (1, n)]));
    assert_eq!(
        epochs(&mut h, &b, n2),
        Ok(vec![(2, n2), (3, n), (4, n), (5, n)])
    );
}

#[test]
fn an_eager_member_commits_during_the_rebalance_what_it_owned() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    let generation = h.generation();
    // b starts a rebalance; a, about to give everything up, commits first (Kafka's
    // onPartitionsRevoked) at the generation it has.
    h.rejoin_with(&b, |r| r.topics = strings(&["t1", "t2"]));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        commit_t1(&mut h, &a, generation, &[0, 3]).0,
        vec![(0, 0), (3, NOT_OWNED)]
    );
}

// ----------------------------------------------------------------------------------- epochs

#[test]
fn epochs_rise_when_a_partition_changes_owner_and_stay_while_it_does_not() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    let g = h.generation();
    assert_eq!(epochs(&mut h, &a, g), Ok(vec![(0, g), (1, g), (2, g)]));
    // Generation g+1 moves 2 to b directly; a keeps 0 and 1 (their epochs stay).
    next_generation(&mut h, &[(&a, &[0, 1]), (&b, &[2, 3, 4, 5])]);
    assert_eq!(epochs(&mut h, &a, g + 1), Ok(vec![(0, g), (1, g)]));
    let b_epochs = vec![(2, g + 1), (3, g), (4, g), (5, g)];
    assert_eq!(epochs(&mut h, &b, g + 1), Ok(b_epochs.clone()));
    // Generations with nothing moving change no epoch.
    for _ in 0..3 {
        next_generation(&mut h, &[(&a, &[0, 1]), (&b, &[2, 3, 4, 5])]);
    }
    assert_eq!(epochs(&mut h, &b, g + 4), Ok(b_epochs));
    // Back to a: the generation it got it in, not the previous epoch plus one.
    next_generation(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    assert_eq!(
        epochs(&mut h, &a, g + 5),
        Ok(vec![(0, g), (1, g), (2, g + 5)])
    );
}

#[test]
fn a_static_members_new_incarnation_gets_new_epochs_and_the_old_one_is_refused() {
    let mut h = Harness::with_config(checked());
    let (s1, s2) = static_pair(&mut h);
    let g = h.generation();
    // sync_all gave member i (in id order) partition i: s1 has 0, s2 has 1.
    assert_eq!(epochs(&mut h, &s2, g), Ok(vec![(1, g)]));
    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    let new_s2 = h.join_reply(t).member_id;
    assert_ne!(new_s2, s2);
    assert_eq!(h.generation(), g, "no rebalance");
    // The epoch rises within the generation: max(previous + 1, generation).
    assert_eq!(epochs(&mut h, &new_s2, g), Ok(vec![(1, g + 1)]));
    assert_eq!(commit_t1(&mut h, &new_s2, g, &[1]).0, vec![(1, 0)]);
    let (r, _) = h.commit(&s2, None, g, vec![commit_topic("t1", &[(1, 5, None)])]);
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ErrorCode::UnknownMemberId)
    );
    // A later owner change goes on from there, past the generation.
    next_generation(&mut h, &[(&s1, &[0, 1]), (&new_s2, &[])]);
    assert_eq!(epochs(&mut h, &s1, g + 1), Ok(vec![(0, g), (1, g + 2)]));
    assert_eq!(epochs(&mut h, &new_s2, g + 1), Ok(vec![]));
}

#[test]
fn epochs_and_owners_survive_a_restart() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    sync_plan(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    next_generation(&mut h, &[(&a, &[0, 1]), (&b, &[2, 3, 4, 5])]);
    let g = h.generation();
    let before_a = epochs(&mut h, &a, g);
    let before_b = epochs(&mut h, &b, g);
    let record = h.group.to_record();
    assert_eq!(record.ownership.len(), 6);
    assert!(record
        .ownership
        .iter()
        .any(|o| o.partition == 2 && o.owner == b && o.epoch == g));
    h.restart(Vec::new());
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(epochs(&mut h, &a, g), before_a);
    assert_eq!(epochs(&mut h, &b, g), before_b);
    assert_eq!(
        commit_t1(&mut h, &a, g, &[1, 2]).0,
        vec![(1, 0), (2, NOT_OWNED)]
    );
    // The restored map goes on: the next owner change is a new epoch.
    assert_eq!(h.group.to_record().ownership, record.ownership);
    next_generation(&mut h, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
    assert_eq!(
        epochs(&mut h, &a, g + 1),
        Ok(vec![(0, g - 1), (1, g - 1), (2, g + 1)])
    );
}

#[test]
fn ownership_epochs_is_checked_as_a_commit() {
    let mut h = Harness::with_config(checked());
    let (a, b) = pair(&mut h);
    let g = h.generation();
    // Before the assignment: the rebalance is not done.
    assert_eq!(
        epochs(&mut h, &a, g),
        Err(code(ErrorCode::RebalanceInProgress))
    );
    sync_plan(&mut h, &[(&a, &[0, 2, 4]), (&b, &[1, 3, 5])]);
    assert_eq!(epochs(&mut h, &a, g), Ok(vec![(0, g), (2, g), (4, g)]));
    assert_eq!(epochs(&mut h, &b, g), Ok(vec![(1, g), (3, g), (5, g)]));
    assert_eq!(
        epochs(&mut h, &a, g + 1),
        Err(code(ErrorCode::IllegalGeneration))
    );
    assert_eq!(
        epochs(&mut h, &a, g - 1),
        Err(code(ErrorCode::IllegalGeneration))
    );
    assert_eq!(
        epochs(&mut h, "nobody", g),
        Err(code(ErrorCode::UnknownMemberId))
    );
    assert_eq!(
        epochs(&mut h, "", -1),
        Err(code(ErrorCode::UnknownMemberId))
    );
    let r = h.group.ownership_epochs(
        h.now,
        &OwnershipEpochsRequest {
            group_instance_id: Some("not-mine".into()),
            ..epochs_req(&a, g)
        },
    );
    assert_ne!(r.error_code, 0, "{r:?}");
    assert!(r.topics.is_empty());
    // An Empty group has no members to ask for.
    h.leave(&[(a.as_str(), None), (b.as_str(), None)]);
    assert_eq!(
        epochs(&mut h, "", -1),
        Err(code(ErrorCode::UnknownMemberId))
    );
    assert_eq!(epochs(&mut h, &a, g), Err(code(ErrorCode::UnknownMemberId)));
}
