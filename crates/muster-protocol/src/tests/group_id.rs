//! [`Request::group_id`]: one test per request kind. Each group-scoped request carries other
//! strings (member ids, topics) that must not be mistaken for its group id.

use crate::*;

fn tp(topic: &str) -> TopicPartitions {
    TopicPartitions {
        topic: topic.into(),
        partitions: vec![0],
    }
}

#[test]
fn hello_has_no_group() {
    let r = Request::from(HelloRequest {
        protocol_version: 1,
        client_id: "orders".into(),
        auth_token: Some("orders".into()),
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn join_group_names_its_group() {
    let r = Request::from(JoinGroupRequest {
        group_id: "g-join".into(),
        member_id: "m".into(),
        group_instance_id: Some("i".into()),
        topics: vec!["t".into()],
        ..JoinGroupRequest::default()
    });
    assert_eq!(r.group_id(), Some("g-join"));
}

#[test]
fn join_group_with_an_empty_group_id_names_it() {
    // Validation is the coordinator's business: the empty id is still the addressed group.
    let r = Request::from(JoinGroupRequest::default());
    assert_eq!(r.group_id(), Some(""));
}

#[test]
fn sync_group_names_its_group() {
    let r = Request::from(SyncGroupRequest {
        group_id: "g-sync".into(),
        member_id: "m".into(),
        assignor: Some("range".into()),
        assignments: vec![MemberAssignment {
            member_id: "other".into(),
            partitions: vec![tp("t")],
            user_data: vec![],
        }],
        ..SyncGroupRequest::default()
    });
    assert_eq!(r.group_id(), Some("g-sync"));
}

#[test]
fn heartbeat_names_its_group() {
    let r = Request::from(HeartbeatRequest {
        group_id: "g-heartbeat".into(),
        generation_id: 3,
        member_id: "m".into(),
        group_instance_id: None,
    });
    assert_eq!(r.group_id(), Some("g-heartbeat"));
}

#[test]
fn leave_group_names_its_group() {
    let r = Request::from(LeaveGroupRequest {
        group_id: "g-leave".into(),
        members: vec![LeavingMember {
            member_id: "m".into(),
            group_instance_id: None,
            reason: Some("bye".into()),
        }],
    });
    assert_eq!(r.group_id(), Some("g-leave"));
}

#[test]
fn offset_commit_names_its_group() {
    let r = Request::from(OffsetCommitRequest {
        group_id: "g-commit".into(),
        generation_id: -1,
        topics: vec![OffsetCommitTopic {
            topic: "t".into(),
            partitions: vec![OffsetCommitPartition {
                partition: 0,
                offset: 42,
                metadata: None,
            }],
        }],
        ..OffsetCommitRequest::default()
    });
    assert_eq!(r.group_id(), Some("g-commit"));
}

#[test]
fn offset_fetch_names_its_group() {
    let r = Request::from(OffsetFetchRequest {
        group_id: "g-fetch".into(),
        topics: Some(vec![tp("t")]),
    });
    assert_eq!(r.group_id(), Some("g-fetch"));
    let all = Request::from(OffsetFetchRequest {
        group_id: "g-fetch-all".into(),
        topics: None,
    });
    assert_eq!(all.group_id(), Some("g-fetch-all"));
}

#[test]
fn describe_groups_has_no_single_group() {
    // Even with exactly one id: the answer does not come from one group's coordinator.
    let r = Request::from(DescribeGroupsRequest {
        group_ids: vec!["g".into()],
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn list_groups_has_no_group() {
    let r = Request::from(ListGroupsRequest {
        states: vec!["Stable".into()],
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn delete_groups_has_no_single_group() {
    let r = Request::from(DeleteGroupsRequest {
        group_ids: vec!["g".into()],
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn create_topics_has_no_group() {
    let r = Request::from(CreateTopicsRequest {
        topics: vec![TopicInfo {
            topic: "g".into(),
            partitions: 1,
        }],
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn describe_topics_has_no_group() {
    let r = Request::from(DescribeTopicsRequest {
        topics: Some(vec!["g".into()]),
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn find_coordinator_is_not_routed_to_its_group() {
    // Its key is a group id, but any node answers it without reaching the group's coordinator.
    let r = Request::from(FindCoordinatorRequest {
        key: "orders".into(),
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn describe_cluster_has_no_group() {
    assert_eq!(Request::from(DescribeClusterRequest {}).group_id(), None);
}

#[test]
fn group_history_is_an_admin_request() {
    // About one group, but authorized as an admin request (`describe`), not routed as a
    // group request.
    let r = Request::from(GroupHistoryRequest {
        group_id: "g".into(),
        limit: 5,
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn group_diagnosis_is_an_admin_request() {
    let r = Request::from(GroupDiagnosisRequest {
        group_id: "g".into(),
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn consumer_group_heartbeat_names_its_group() {
    // A group request like JoinGroup (`read` on the group), whatever its epoch says.
    for member_epoch in [0, 7, -1, -2] {
        let r = Request::from(ConsumerGroupHeartbeatRequest {
            group_id: "g-consumer".into(),
            member_id: "m".into(),
            member_epoch,
            group_instance_id: Some("i".into()),
            rack_id: Some("r".into()),
            subscribed_topics: Some(vec!["t".into()]),
            server_assignor: Some("uniform".into()),
            owned_partitions: Some(vec![tp("t")]),
            ..ConsumerGroupHeartbeatRequest::default()
        });
        assert_eq!(r.group_id(), Some("g-consumer"));
    }
}

#[test]
fn consumer_group_describe_has_no_single_group() {
    let r = Request::from(ConsumerGroupDescribeRequest {
        group_ids: vec!["g".into()],
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn group_simulate_is_an_admin_request() {
    // `describe` on the group, as GroupHistory: it changes nothing in the group.
    let r = Request::from(GroupSimulateRequest {
        group_id: "g".into(),
        remove_members: vec!["m".into()],
        add_members: 1,
        partitions: vec![TopicInfo {
            topic: "t".into(),
            partitions: 3,
        }],
    });
    assert_eq!(r.group_id(), None);
}

#[test]
fn ownership_epochs_names_its_group() {
    // A member's request, checked like a Heartbeat: `read` on the group.
    let r = Request::from(OwnershipEpochsRequest {
        group_id: "g-epochs".into(),
        generation_id: 4,
        member_id: "m".into(),
        group_instance_id: Some("i".into()),
    });
    assert_eq!(r.group_id(), Some("g-epochs"));
}

#[test]
fn offset_history_names_its_group() {
    // Routed to the group's coordinator like OffsetCommit (which holds the history), whatever
    // topic or partition it narrows to.
    for (topic, partition) in [(None, None), (Some("t".to_owned()), Some(0))] {
        let r = Request::from(OffsetHistoryRequest {
            group_id: "g-history".into(),
            topic,
            partition,
            limit: 0,
        });
        assert_eq!(r.group_id(), Some("g-history"));
    }
}

#[test]
fn offset_reset_names_its_group() {
    // Dry run or executed, every reset target: the group's coordinator answers it.
    let targets = [
        ResetTo::Time { at_ms: 1 },
        ResetTo::EarliestRecorded,
        ResetTo::ShiftBy { delta: -5 },
        ResetTo::Offset { offset: 0 },
    ];
    for (to, execute) in targets.into_iter().zip([false, true, false, true]) {
        let r = Request::from(OffsetResetRequest {
            group_id: "g-reset".into(),
            to,
            topics: vec![tp("t")],
            execute,
        });
        assert_eq!(r.group_id(), Some("g-reset"));
    }
}

#[test]
fn offset_restore_names_its_group() {
    for execute in [false, true] {
        let r = Request::from(OffsetRestoreRequest {
            group_id: "g-restore".into(),
            execute,
        });
        assert_eq!(r.group_id(), Some("g-restore"));
    }
}
