//! Partition ownership in consumer-protocol groups (protocol §6.13, §6.23; `tenure.rs`,
//! `group.rs`'s `move_ownership`): a member owns what it holds, its assigned and
//! pending-revocation partitions; a partition's ownership epoch rises when it reaches its next
//! owner. The harness's default config has the ownership check on.

use muster_protocol::{
    ConsumerGroupHeartbeatRequest, ErrorCode, OffsetCommitPartition, OffsetCommitRequest,
    OffsetCommitTopic, OwnershipEpochsRequest, Response, TopicPartitions,
};

use super::harness::{code, count, set, Cg, GROUP, HELD};
use crate::config::{GroupConfig, OffsetsConfig};

const NOT_OWNED: i16 = ErrorCode::PartitionNotOwned.code();

/// `member` commits offset 7 to each of `topic`'s `partitions` at `epoch`: the request's code,
/// then each partition's.
fn commit(cg: &mut Cg, member: &str, epoch: i32, topic: &str, partitions: &[i32]) -> Vec<i16> {
    let req = OffsetCommitRequest {
        group_id: GROUP.to_owned(),
        generation_id: epoch,
        member_id: member.to_owned(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: topic.to_owned(),
            partitions: partitions
                .iter()
                .map(|&partition| OffsetCommitPartition {
                    partition,
                    offset: 7,
                    metadata: None,
                })
                .collect(),
        }],
    };
    let client = cg.client.clone();
    let token = cg.next_token();
    let effects = cg.group.commit_offsets(cg.now, req, &client, token);
    let replies = cg.collect(effects);
    match replies.into_iter().find(|(t, _)| *t == token) {
        Some((_, Response::OffsetCommit(r))) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
            .collect(),
        other => panic!("no commit answer: {other:?}"),
    }
}

/// The member's OwnershipEpochs answer at `epoch`: `(topic, partition, epoch)`, or the code.
fn epochs(cg: &mut Cg, member: &str, epoch: i32) -> Result<Vec<(String, i32, i32)>, i16> {
    let r = cg.group.ownership_epochs(
        cg.now,
        &OwnershipEpochsRequest {
            group_id: GROUP.to_owned(),
            generation_id: epoch,
            member_id: member.to_owned(),
            group_instance_id: None,
        },
    );
    if r.error_code != 0 {
        assert!(r.topics.is_empty());
        return Err(r.error_code);
    }
    Ok(r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.clone(), p.partition, p.epoch))
        })
        .collect())
}

fn partitions(of: &[TopicPartitions]) -> Vec<i32> {
    set(of).into_values().flatten().collect()
}

/// a held all of foo; b joined: a keeps three, is to give up three. Returns (kept, revoked).
fn revoking(cg: &mut Cg) -> (Vec<TopicPartitions>, Vec<i32>) {
    let all = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    assert_eq!(count(&all), 6);
    cg.join("b", &["foo"]);
    let r = cg.beat("a", 1, &all);
    assert_eq!(r.member_epoch, 1, "a revokes at its epoch first");
    let kept = r.assignment.unwrap_or_default();
    assert_eq!(count(&kept), 3);
    let kept_set = partitions(&kept);
    let revoked = (0..6).filter(|p| !kept_set.contains(p)).collect();
    (kept, revoked)
}

#[test]
fn a_member_is_refused_the_partitions_it_does_not_hold() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    // a holds all of foo and nothing of bar (not subscribed).
    assert_eq!(commit(&mut cg, "a", 1, "foo", &[0, 5]), vec![0, 0, 0]);
    assert_eq!(
        commit(&mut cg, "a", 1, "bar", &[0, 1]),
        vec![0, NOT_OWNED, NOT_OWNED]
    );
    assert!(cg.events.iter().any(|e| matches!(
        e,
        crate::engine::Event::CommitNotOwned { member_id, partitions: 2 } if member_id == "a"
    )));
}

#[test]
fn a_partition_pending_revocation_is_committed_by_its_old_owner_until_it_moves() {
    let mut cg = Cg::new();
    let (kept, revoked) = revoking(&mut cg);
    let moving = revoked[0];
    // Pending revocation: still a's to commit (its last offsets), not yet b's.
    assert_eq!(commit(&mut cg, "a", 1, "foo", &[moving]), vec![0, 0]);
    assert_eq!(cg.beat("b", 2, &[]).error_code, HELD);
    assert_eq!(
        commit(&mut cg, "b", 2, "foo", &[moving]),
        vec![0, NOT_OWNED]
    );
    let before = epochs(&mut cg, "a", 1).expect("a's epochs");
    assert_eq!(
        before.len(),
        6,
        "assigned and pending revocation: {before:?}"
    );
    let old_epoch = before.iter().find(|e| e.1 == moving).map(|e| e.2);
    // a confirms the revocation; b's held heartbeat gets the partitions at once.
    assert_eq!(cg.beat("a", 1, &kept).member_epoch, 2);
    let b = cg.late_answer("b").expect("answered at the release");
    assert_eq!(partitions(&b.assignment.unwrap_or_default()), revoked);
    assert_eq!(
        commit(&mut cg, "a", 2, "foo", &[moving]),
        vec![0, NOT_OWNED]
    );
    assert_eq!(commit(&mut cg, "b", 2, "foo", &[moving]), vec![0, 0]);
    let b_epochs = epochs(&mut cg, "b", 2).expect("b's epochs");
    assert_eq!(
        b_epochs.iter().map(|e| e.1).collect::<Vec<_>>(),
        revoked,
        "exactly what b holds"
    );
    let new_epoch = b_epochs.iter().find(|e| e.1 == moving).map(|e| e.2);
    assert!(new_epoch > old_epoch, "{old_epoch:?} → {new_epoch:?}");
    // a's kept partitions keep their epochs.
    let a_epochs = epochs(&mut cg, "a", 2).expect("a's epochs");
    assert_eq!(
        a_epochs.iter().map(|e| e.1).collect::<Vec<_>>(),
        partitions(&kept)
    );
    assert!(a_epochs.iter().all(|e| before.contains(e)), "{a_epochs:?}");
}

#[test]
fn ownership_epochs_is_checked_with_the_member_epoch() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    let mine = epochs(&mut cg, "a", 1).expect("a's epochs");
    assert_eq!(mine.len(), 6);
    assert!(
        mine.iter().all(|(t, _, e)| t == "foo" && *e == 1),
        "{mine:?}"
    );
    assert_eq!(
        epochs(&mut cg, "a", 0),
        Err(code(ErrorCode::StaleMemberEpoch))
    );
    assert_eq!(
        epochs(&mut cg, "a", 2),
        Err(code(ErrorCode::FencedMemberEpoch))
    );
    assert_eq!(
        epochs(&mut cg, "nobody", 1),
        Err(code(ErrorCode::UnknownMemberId))
    );
    assert_eq!(
        epochs(&mut cg, "", -1),
        Err(code(ErrorCode::UnknownMemberId))
    );
}

#[test]
fn with_the_check_off_a_consumer_member_commits_any_partition() {
    let mut cg = Cg::with_config(GroupConfig {
        offsets: OffsetsConfig {
            ownership_check: false,
            ..OffsetsConfig::default()
        },
        ..GroupConfig::default()
    });
    cg.join("a", &["foo"]);
    assert_eq!(commit(&mut cg, "a", 1, "bar", &[0]), vec![0, 0]);
}

#[test]
fn a_static_members_new_incarnation_holds_its_partitions_with_new_epochs() {
    let mut cg = Cg::new();
    let join = |id: &str| ConsumerGroupHeartbeatRequest {
        group_instance_id: Some("pod-0".into()),
        ..Cg::join_request(id, &["foo"])
    };
    assert_eq!(cg.send(join("a")).member_epoch, 1);
    let old = epochs(&mut cg, "a", 1).expect("a's epochs");
    assert_eq!(old.len(), 6);
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        group_instance_id: Some("pod-0".into()),
        ..Cg::request("a", -2)
    });
    assert_eq!(r.error_code, 0);
    let r = cg.send(join("a2"));
    assert_eq!(
        (r.error_code, r.member_epoch),
        (0, 1),
        "the epoch is taken over"
    );
    let new = epochs(&mut cg, "a2", 1).expect("a2's epochs");
    assert_eq!(new.len(), 6);
    for ((t, p, before), (t2, p2, after)) in old.iter().zip(&new) {
        assert_eq!((t, p), (t2, p2));
        assert_eq!(*after, before + 1, "the old process may still run");
    }
    assert_eq!(commit(&mut cg, "a2", 1, "foo", &[0]), vec![0, 0]);
    assert_eq!(
        commit(&mut cg, "a", 1, "foo", &[0]),
        vec![
            code(ErrorCode::UnknownMemberId),
            code(ErrorCode::UnknownMemberId)
        ]
    );
}
