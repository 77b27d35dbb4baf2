//! OffsetCommit and OffsetFetch (protocol §6.13, §6.14).

use super::*;

// ---------------------------------------------------------------------------- offset commit

#[test]
fn simple_commit_on_an_empty_group_is_accepted() {
    let mut h = Harness::new();
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic(
            "t1",
            &[(0, 10, Some("m".into())), (1, 11, None)],
        )],
    );
    assert_eq!(r.error_code, 0);
    assert!(r.topics[0].partitions.iter().all(|p| p.error_code == 0));
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[0].committed.commit_timestamp_ms, h.now);
    assert!(h.group.has_offsets());
    assert_eq!(h.state(), GroupState::Empty);
}

/// The engine hands a commit to its shell as a write; the answer leaves, and the offsets are
/// visible, only once the shell reports the write durable.
fn commit_in_flight(h: &mut Harness, offset: i64) -> (u32, PendingCommit<u32>) {
    let token = h.next_token();
    let effects = h.group.commit_offsets(
        h.now,
        OffsetCommitRequest {
            group_id: GROUP.to_owned(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![commit_topic("t1", &[(0, offset, None)])],
        },
        &ClientInfo::default(),
        token,
    );
    assert!(
        effects.replies.is_empty(),
        "not answered before it is durable"
    );
    let mut writes = effects.writes;
    assert_eq!(writes.len(), 1);
    match writes.remove(0) {
        Write::Commit { batch, commit } => {
            assert!(matches!(
                batch.last(),
                Some(Mutation::PutOffsets { offsets, .. }) if offsets.len() == 1
            ));
            (token, commit)
        }
        other => panic!("a commit write, not {other:?}"),
    }
}

#[test]
fn a_commit_is_answered_and_visible_only_once_written() {
    let mut h = Harness::new();
    let (token, commit) = commit_in_flight(&mut h, 7);
    assert!(!h.group.has_offsets(), "visible only once durable");
    assert_eq!(h.group.commits_in_flight(), 1);
    let effects = h.group.commit_written(commit, Ok(()));
    assert_eq!(h.group.commits_in_flight(), 0);
    h.collect(effects);
    let Some(Response::OffsetCommit(r)) = h.reply_for(token) else {
        panic!("answered once durable");
    };
    assert_eq!(r.error_code, 0);
    assert!(h.group.has_offsets());
}

#[test]
fn a_commit_whose_write_failed_is_answered_with_the_failure_and_not_applied() {
    let mut h = Harness::new();
    let (token, commit) = commit_in_flight(&mut h, 7);
    let effects = h
        .group
        .commit_written(commit, Err(ErrorCode::NotCoordinator));
    h.collect(effects);
    let Some(Response::OffsetCommit(r)) = h.reply_for(token) else {
        panic!("answered");
    };
    let failed = code(ErrorCode::NotCoordinator);
    assert_eq!(r.error_code, failed);
    assert!(r.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == failed));
    assert!(!h.group.has_offsets());
    assert_eq!(h.group.commits_in_flight(), 0);
}

#[test]
fn simple_commit_on_a_non_empty_group_is_refused_everywhere() {
    let mut h = Harness::new();
    h.form_group(1);
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("t1", &[(0, 10, None), (1, 11, None)]),
            commit_topic("t2", &[(0, 1, None)]),
        ],
    );
    let unknown = code(ErrorCode::UnknownMemberId);
    assert_eq!(r.error_code, unknown);
    assert_eq!(r.topics.len(), 2);
    assert!(r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.error_code == unknown));
    assert_eq!(r.topics[0].partitions.len(), 2);
    assert!(writes.is_empty());
}

#[test]
fn commit_checks_the_member_then_the_generation() {
    let mut h = Harness::new();
    let (s1, _s2) = static_pair(&mut h);
    let generation = h.generation();
    let topics = || vec![commit_topic("t1", &[(0, 5, None)])];
    let (r, w) = h.commit("ghost", None, generation + 3, topics());
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert!(w.is_empty());
    let (r, _) = h.commit("ghost", Some("s1"), generation + 3, topics());
    assert_eq!(r.error_code, code(ErrorCode::FencedInstanceId));
    assert_eq!(r.topics[0].partitions[0].error_code, r.error_code);
    let (r, _) = h.commit(&s1, Some("s2"), generation, topics());
    assert_eq!(r.error_code, code(ErrorCode::FencedInstanceId));
    let (r, _) = h.commit(&s1, Some("s1"), generation + 3, topics());
    assert_eq!(r.error_code, code(ErrorCode::IllegalGeneration));
    assert_eq!(r.topics[0].partitions[0].error_code, r.error_code);
    let (r, w) = h.commit(&s1, Some("s1"), generation, topics());
    assert_eq!(r.error_code, 0);
    assert_eq!(w.len(), 1);
    // Generation -1 with a member id is a member commit: the generation is wrong.
    let (r, _) = h.commit(&s1, None, -1, topics());
    assert_eq!(r.error_code, code(ErrorCode::IllegalGeneration));
}

#[test]
fn commit_by_state() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let topics = || vec![commit_topic("t1", &[(0, 5, None)])];
    let (r, _) = h.commit(&ids[0], None, generation, topics());
    assert_eq!(r.error_code, 0, "Stable");
    let leader = h.leader();
    h.rejoin(&leader);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let (r, w) = h.commit(&ids[1], None, generation, topics());
    assert_eq!(r.error_code, 0, "PreparingRebalance: finishing owned work");
    assert_eq!(w.len(), 1);
    h.complete_rebalance();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let (r, w) = h.commit(&ids[1], None, generation + 1, topics());
    assert_eq!(r.error_code, code(ErrorCode::RebalanceInProgress));
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ErrorCode::RebalanceInProgress)
    );
    assert!(w.is_empty());
}

#[test]
fn oversized_metadata_is_refused_on_its_partition_only() {
    let mut h = Harness::new();
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic(
                "t1",
                &[
                    (0, 1, Some("x".repeat(4_097))),
                    (1, 2, Some("y".repeat(4_096))),
                ],
            ),
            commit_topic("t2", &[(0, 3, None)]),
        ],
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ErrorCode::OffsetMetadataTooLarge)
    );
    assert_eq!(r.topics[0].partitions[1].error_code, 0);
    assert_eq!(r.topics[1].partitions[0].error_code, 0);
    let written: Vec<(String, i32)> = writes
        .iter()
        .map(|w| (w.topic.to_string(), w.partition))
        .collect();
    assert_eq!(written, vec![("t1".into(), 1), ("t2".into(), 0)]);
}

#[test]
fn fetch_returns_applied_offsets() {
    let mut h = Harness::new();
    let _ = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("zeta", &[(2, 20, None), (0, 10, Some("meta".into()))]),
            commit_topic("alpha", &[(1, 7, None)]),
        ],
    );
    let fetched = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: Some(vec![tp("zeta", &[0, 1]), tp("nothing", &[3])]),
        },
        &Access::open(),
    );
    assert_eq!(fetched.error_code, 0);
    let zeta = &fetched.topics[0];
    assert_eq!(zeta.topic, "zeta");
    assert_eq!(
        (
            zeta.partitions[0].offset,
            zeta.partitions[0].metadata.as_deref()
        ),
        (10, Some("meta"))
    );
    assert_eq!(
        (zeta.partitions[1].offset, zeta.partitions[1].error_code),
        (-1, 0)
    );
    assert_eq!(fetched.topics[1].partitions[0].offset, -1);
    assert_eq!(fetched.topics[1].partitions[0].partition, 3);

    let all = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: None,
        },
        &Access::open(),
    );
    let flat: Vec<(String, i32, i64)> = all
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic.clone(), p.partition, p.offset))
        })
        .collect();
    assert_eq!(
        flat,
        vec![
            ("alpha".into(), 1, 7),
            ("zeta".into(), 0, 10),
            ("zeta".into(), 2, 20),
        ]
    );
}

#[test]
fn offsets_survive_membership_changes() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let generation = h.generation();
    let _ = h.commit(
        &ids[0],
        None,
        generation,
        vec![commit_topic("t1", &[(0, 42, None)])],
    );
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    let f = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: None,
        },
        &Access::open(),
    );
    assert_eq!(f.topics[0].partitions[0].offset, 42);
}

/// Protocol §6.13 "Valid partitions and offsets": checked per partition, in order; a failing
/// partition is not written and the rest of the request still is.
#[test]
fn negative_partitions_and_offsets_are_refused_per_partition() {
    let mut h = Harness::new();
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic(
            "t1",
            &[
                (0, 10, None),
                (-3, 10, None),
                (1, -5, None),
                (2, -1, None),
                (-1, -1, Some("x".repeat(5_000))),
                (3, 0, None),
            ],
        )],
    );
    assert_eq!(
        r.error_code, 0,
        "a per-partition problem is not a request error"
    );
    let codes: Vec<i16> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(
        codes,
        vec![
            0,
            code(ErrorCode::UnknownTopicOrPartition),
            code(ErrorCode::InvalidRequest),
            code(ErrorCode::InvalidRequest),
            code(ErrorCode::UnknownTopicOrPartition),
            0,
        ]
    );
    let written: Vec<(i32, i64)> = writes
        .iter()
        .map(|w| (w.partition, w.committed.offset))
        .collect();
    assert_eq!(
        written,
        vec![(0, 10), (3, 0)],
        "only the valid partitions are written"
    );
}
