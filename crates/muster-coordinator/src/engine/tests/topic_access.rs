//! Topic authorization of OffsetCommit and OffsetFetch (protocol §5 "Authorization"): `read`
//! on each topic named; a denied topic's partitions are TOPIC_AUTHORIZATION_FAILED and the
//! other topics are processed; an OffsetFetch of everything leaves denied topics out.

use muster_protocol::OffsetFetchResponse;

use super::*;
use crate::access::{Grant, Operation, Pattern, Principal, ResourceType};
use crate::quota::Quota;

const DENIED: i16 = 29;

/// A principal that may read the topics matching `patterns` (and nothing else on topics).
fn reader(patterns: &[&str]) -> Access {
    let grants = patterns
        .iter()
        .map(|p| Grant::new(ResourceType::Topic, Pattern::parse(p), &[Operation::Read]))
        .collect();
    Access::principal(Arc::new(Principal::new(
        Arc::from("p"),
        grants,
        Arc::new(Quota::unlimited(Arc::from("p"))),
    )))
}

fn codes(r: &OffsetCommitResponse) -> Vec<(String, Vec<i16>)> {
    r.topics
        .iter()
        .map(|t| {
            (
                t.topic.clone(),
                t.partitions.iter().map(|p| p.error_code).collect(),
            )
        })
        .collect()
}

fn fetch(
    h: &Harness,
    topics: Option<Vec<TopicPartitions>>,
    access: &Access,
) -> OffsetFetchResponse {
    h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics,
        },
        access,
    )
}

/// Commits offsets to `orders-a`, `billing-a` and `orders-b` with open access.
fn committed() -> Harness {
    let mut h = Harness::new();
    let (r, _) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("orders-a", &[(0, 10, None), (1, 11, None)]),
            commit_topic("billing-a", &[(0, 20, Some("secret".into()))]),
            commit_topic("orders-b", &[(0, 30, None)]),
        ],
    );
    assert_eq!(r.error_code, 0);
    h
}

#[test]
fn a_denied_topic_among_allowed_ones_is_refused_and_the_rest_committed() {
    let mut h = Harness::new();
    h.client.access = reader(&["orders-*"]);
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("orders-a", &[(0, 10, None), (1, 11, None)]),
            // Denied before its partitions are validated: -5 and -1 would be other errors.
            commit_topic("billing-a", &[(-5, 20, None), (0, -1, None)]),
            commit_topic("orders-b", &[(-1, 30, None)]),
        ],
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        codes(&r),
        vec![
            ("orders-a".to_owned(), vec![0, 0]),
            ("billing-a".to_owned(), vec![DENIED, DENIED]),
            (
                "orders-b".to_owned(),
                vec![code(ErrorCode::UnknownTopicOrPartition)]
            ),
        ]
    );
    let written: Vec<(&str, i32)> = writes.iter().map(|w| (&*w.topic, w.partition)).collect();
    assert_eq!(written, vec![("orders-a", 0), ("orders-a", 1)]);
}

#[test]
fn a_commit_refused_as_a_whole_still_names_denied_topics_first() {
    let mut h = Harness::new();
    h.form_group(1);
    h.client.access = reader(&["orders-*"]);
    // A simple commit on a group with members: UNKNOWN_MEMBER_ID, but the denied topic says
    // it is denied (nothing about the group's state reaches a topic it may not read).
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("orders-a", &[(0, 1, None)]),
            commit_topic("billing-a", &[(0, 1, None)]),
        ],
    );
    let unknown = code(ErrorCode::UnknownMemberId);
    assert_eq!(r.error_code, unknown);
    assert_eq!(
        codes(&r),
        vec![
            ("orders-a".to_owned(), vec![unknown]),
            ("billing-a".to_owned(), vec![DENIED]),
        ]
    );
    assert!(writes.is_empty());
}

#[test]
fn a_commit_refused_before_any_group_still_names_denied_topics_first() {
    // The supervisor refuses a group-creating commit over a quota or a server limit with
    // refusal_for: the denied topic still says it is denied.
    let request = Request::OffsetCommit(muster_protocol::OffsetCommitRequest {
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![
            commit_topic("orders-a", &[(0, 1, None)]),
            commit_topic("billing-a", &[(0, 1, None), (1, 1, None)]),
        ],
    });
    let access = reader(&["orders-*"]);
    let Response::OffsetCommit(r) = refusal_for(&request, ErrorCode::QuotaExceeded, &access) else {
        panic!("an OffsetCommit answer");
    };
    let quota = code(ErrorCode::QuotaExceeded);
    assert_eq!(
        codes(&r),
        vec![
            ("orders-a".to_owned(), vec![quota]),
            ("billing-a".to_owned(), vec![DENIED, DENIED]),
        ]
    );
}

#[test]
fn open_access_and_wildcard_read_commit_everything() {
    for access in [Access::open(), reader(&["*"])] {
        let mut h = Harness::new();
        h.client.access = access;
        let (r, writes) = h.commit(
            "",
            None,
            -1,
            vec![
                commit_topic("orders-a", &[(0, 1, None)]),
                commit_topic("billing-a", &[(0, 1, None)]),
            ],
        );
        assert!(codes(&r).iter().all(|(_, c)| c == &vec![0]), "{r:?}");
        assert_eq!(writes.len(), 2);
    }
}

#[test]
fn fetch_by_name_refuses_denied_topics_per_partition() {
    let h = committed();
    let access = reader(&["orders-*"]);
    let r = fetch(
        &h,
        Some(vec![tp("orders-a", &[0, 1]), tp("billing-a", &[0, 0, 7])]),
        &access,
    );
    assert_eq!(r.error_code, 0);
    let orders = &r.topics[0];
    assert_eq!(orders.topic, "orders-a");
    assert_eq!(
        orders
            .partitions
            .iter()
            .map(|p| p.offset)
            .collect::<Vec<_>>(),
        vec![10, 11]
    );
    let billing = &r.topics[1];
    assert_eq!(billing.topic, "billing-a");
    // A partition named twice is still answered once; no offset or metadata leaks.
    assert_eq!(billing.partitions.len(), 2);
    for p in &billing.partitions {
        assert_eq!(
            (p.error_code, p.offset, p.metadata.as_deref()),
            (DENIED, -1, None)
        );
    }
}

#[test]
fn fetch_of_everything_leaves_denied_topics_out() {
    let h = committed();
    let r = fetch(&h, None, &reader(&["orders-*"]));
    assert_eq!(r.error_code, 0);
    let names: Vec<&str> = r.topics.iter().map(|t| t.topic.as_str()).collect();
    assert_eq!(names, vec!["orders-a", "orders-b"]);
    let nothing = fetch(&h, None, &reader(&[]));
    assert!(nothing.topics.is_empty());
    let all = fetch(&h, None, &Access::open());
    assert_eq!(all.topics.len(), 3);
}

#[test]
fn an_absent_group_is_not_created_by_a_commit_it_may_not_write() {
    let cfg = config();
    let access = reader(&["orders-*"]);
    let commit = |topics: &[&str]| {
        Request::OffsetCommit(OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: topics
                .iter()
                .map(|t| commit_topic(t, &[(0, 1, None)]))
                .collect(),
        })
    };
    match absent_group(&commit(&["billing-a", "billing-b"]), &cfg, &access) {
        AbsentGroup::Answer(Response::OffsetCommit(r)) => {
            assert_eq!(r.error_code, 0);
            assert!(codes(&r).iter().all(|(_, c)| c == &vec![DENIED]), "{r:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        absent_group(&commit(&["billing-a", "orders-a"]), &cfg, &access),
        AbsentGroup::Create
    );
    // A commit to a generation of a group that does not exist: the denied topic says so.
    let mut stale = commit(&["billing-a", "orders-a"]);
    if let Request::OffsetCommit(r) = &mut stale {
        r.generation_id = 3;
        r.member_id = "m".into();
    }
    match absent_group(&stale, &cfg, &access) {
        AbsentGroup::Answer(Response::OffsetCommit(r)) => {
            let illegal = code(ErrorCode::IllegalGeneration);
            assert_eq!(
                codes(&r),
                vec![
                    ("billing-a".to_owned(), vec![DENIED]),
                    ("orders-a".to_owned(), vec![illegal]),
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    let fetch = Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![tp("billing-a", &[0]), tp("orders-a", &[0])]),
    });
    match absent_group(&fetch, &cfg, &access) {
        AbsentGroup::Answer(Response::OffsetFetch(r)) => {
            let got: Vec<i16> = r
                .topics
                .iter()
                .map(|t| t.partitions[0].error_code)
                .collect();
            assert_eq!(got, vec![DENIED, 0]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn denials_are_counted_per_named_topic() {
    let access = reader(&["orders-*"]);
    let commit = Request::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![
            commit_topic("billing-a", &[(0, 1, None), (1, 1, None)]),
            commit_topic("orders-a", &[(0, 1, None)]),
            commit_topic("billing-b", &[(0, 1, None)]),
        ],
    });
    assert_eq!(unreadable_topics(&commit, &access), 2);
    assert_eq!(unreadable_topics(&commit, &Access::open()), 0);
    let all = Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    });
    assert_eq!(unreadable_topics(&all, &access), 0);
}
