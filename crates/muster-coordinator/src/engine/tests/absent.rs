//! Groups that do not exist: what each request type gets, and which requests create the group
//! (protocol §6.1).
//! Group-id validation and the error answers' shapes are muster-protocol's, tested there.

use super::*;

// --------------------------------------------------------------------------- absent groups

#[test]
fn absent_group_answers() {
    let cfg = config();
    let join = |member_id: &str| {
        Request::JoinGroup(Harness::join_req(member_id, None, &["t1"], &["range"]))
    };
    assert_eq!(
        absent_group(&join(""), &cfg, &Access::open()),
        AbsentGroup::Create
    );
    let expect_answer = |req: &Request| match absent_group(req, &cfg, &Access::open()) {
        AbsentGroup::Answer(r) => r,
        AbsentGroup::Create => panic!("{req:?} must not create a group"),
    };
    match expect_answer(&join("someone")) {
        Response::JoinGroup(r) => {
            assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
            assert_eq!(r.member_id, "someone");
        }
        other => panic!("{other:?}"),
    }
    let mut bad_timeout = Harness::join_req("", None, &["t1"], &["range"]);
    bad_timeout.session_timeout_ms = 1;
    match expect_answer(&Request::JoinGroup(bad_timeout)) {
        Response::JoinGroup(r) => {
            assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout))
        }
        other => panic!("{other:?}"),
    }
    let hb = Request::Heartbeat(HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: "m".into(),
        group_instance_id: None,
    });
    assert_eq!(
        expect_answer(&hb),
        Response::Heartbeat(muster_protocol::HeartbeatResponse {
            error_code: code(ErrorCode::UnknownMemberId)
        })
    );
    let sync = Request::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: "m".into(),
        ..SyncGroupRequest::default()
    });
    match expect_answer(&sync) {
        Response::SyncGroup(r) => assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId)),
        other => panic!("{other:?}"),
    }
    let leave = Request::LeaveGroup(LeaveGroupRequest {
        group_id: GROUP.into(),
        members: vec![
            LeavingMember {
                member_id: "a".into(),
                ..LeavingMember::default()
            },
            LeavingMember {
                member_id: String::new(),
                group_instance_id: Some("i".into()),
                reason: None,
            },
        ],
    });
    match expect_answer(&leave) {
        Response::LeaveGroup(r) => {
            assert_eq!(r.members.len(), 2);
            assert!(r
                .members
                .iter()
                .all(|m| m.error_code == code(ErrorCode::UnknownMemberId)));
            assert_eq!(r.members[1].group_instance_id.as_deref(), Some("i"));
        }
        other => panic!("{other:?}"),
    }
    let commit = |generation: i32, member_id: &str| {
        Request::OffsetCommit(OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
            topics: vec![
                commit_topic("t1", &[(0, 1, None), (1, 1, None)]),
                commit_topic("t2", &[(0, 1, None)]),
            ],
        })
    };
    for generation in [0, 3] {
        match expect_answer(&commit(generation, "m")) {
            Response::OffsetCommit(r) => {
                let illegal = code(ErrorCode::IllegalGeneration);
                assert_eq!(r.error_code, illegal);
                let codes: Vec<i16> = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect();
                assert_eq!(codes, vec![illegal; 3]);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        absent_group(&commit(-1, ""), &cfg, &Access::open()),
        AbsentGroup::Create
    );
    let fetch = Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![tp("t1", &[0, 4])]),
    });
    match expect_answer(&fetch) {
        Response::OffsetFetch(r) => {
            assert_eq!(r.error_code, 0);
            assert!(r.topics[0]
                .partitions
                .iter()
                .all(|p| p.offset == -1 && p.error_code == 0));
            assert_eq!(r.topics[0].partitions.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    let fetch_all = Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    });
    match expect_answer(&fetch_all) {
        Response::OffsetFetch(r) => assert!(r.topics.is_empty()),
        other => panic!("{other:?}"),
    }
}
