//! Authorization of the admin requests the supervisor answers (protocol §5 "Authorization"),
//! per group or topic named, as in Kafka:
//!
//! - DescribeGroups: `describe` on each group, else that entry is GROUP_AUTHORIZATION_FAILED,
//!   state `Dead`, generation -1, no members — checked before the id is even validated, so an
//!   answer never tells a denied group apart from any other name;
//! - ListGroups: only the groups the principal may `describe` are listed;
//! - DeleteGroups: `delete` on each group, else GROUP_AUTHORIZATION_FAILED for that group;
//! - CreateTopics: `create` on each topic (also to raise its partition count), else
//!   TOPIC_AUTHORIZATION_FAILED for that topic, before its name or count is validated;
//! - DescribeTopics: only the topics the principal may `describe`, whether named or not.
//!
//! `admin` on the cluster allows all of it (that is [`Access::allows`]'s). A group or topic
//! refused by name counts one `muster_authorization_denials_total`; one left out of a listing
//! of everything does not (nothing was asked for by name).

use muster_protocol::{ErrorCode, TopicInfo, TopicResult};

use crate::access::{Access, Operation, ResourceType};
use crate::metrics::authorization_denials;

pub(super) fn may_describe_group(access: &Access, group_id: &str) -> bool {
    access.allows(ResourceType::Group, group_id, Operation::Describe)
}

/// DescribeGroups' check for one group; counts a denial.
pub(super) fn describe_group_denied(access: &Access, group_id: &str) -> bool {
    let denied = !may_describe_group(access, group_id);
    if denied {
        authorization_denials(ResourceType::Group.name(), 1);
    }
    denied
}

/// DeleteGroups' check for one group; counts a denial.
pub(super) fn delete_group_denied(access: &Access, group_id: &str) -> bool {
    let denied = !access.allows(ResourceType::Group, group_id, Operation::Delete);
    if denied {
        authorization_denials(ResourceType::Group.name(), 1);
    }
    denied
}

/// CreateTopics split by the `create` check: the topics that may be planned, and for each
/// requested topic (in order) whether it was denied. Counts the denials.
/// Whether `access` may create at least one of `topics` (open access: yes, if any is named).
pub(super) fn may_create_any(access: &Access, topics: &[TopicInfo]) -> bool {
    topics
        .iter()
        .any(|t| access.allows(ResourceType::Topic, &t.topic, Operation::Create))
}

pub(super) fn creatable_topics(
    access: &Access,
    topics: Vec<TopicInfo>,
) -> (Vec<TopicInfo>, Vec<bool>) {
    if access.is_open() {
        let denied = vec![false; topics.len()];
        return (topics, denied);
    }
    let denied: Vec<bool> = topics
        .iter()
        .map(|t| !access.allows(ResourceType::Topic, &t.topic, Operation::Create))
        .collect();
    authorization_denials(
        ResourceType::Topic.name(),
        denied.iter().filter(|&&d| d).count(),
    );
    let allowed = topics
        .into_iter()
        .zip(&denied)
        .filter(|(_, &d)| !d)
        .map(|(t, _)| t)
        .collect();
    (allowed, denied)
}

/// The answer to every requested topic, in request order: TOPIC_AUTHORIZATION_FAILED for a
/// denied one, the plan's result (one per allowed topic, in order) for the others.
pub(super) fn create_results(
    requested: &[String],
    denied: &[bool],
    planned: Vec<TopicResult>,
) -> Vec<TopicResult> {
    let mut planned = planned.into_iter();
    requested
        .iter()
        .zip(denied)
        .filter_map(|(topic, &denied)| {
            if denied {
                Some(TopicResult {
                    topic: topic.clone(),
                    error_code: ErrorCode::TopicAuthorizationFailed.code(),
                })
            } else {
                planned.next()
            }
        })
        .collect()
}

/// DescribeTopics: the described topics the principal may `describe`. The names it asked for
/// and may not describe each count a denial.
pub(super) fn describable_topics(
    access: &Access,
    named: Option<&[String]>,
    described: Vec<TopicInfo>,
) -> Vec<TopicInfo> {
    if access.is_open() {
        return described;
    }
    let may = |topic: &str| access.allows(ResourceType::Topic, topic, Operation::Describe);
    let denied_names = named.map_or(0, |names| names.iter().filter(|n| !may(n)).count());
    authorization_denials(ResourceType::Topic.name(), denied_names);
    described.into_iter().filter(|t| may(&t.topic)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::access::{Grant, Pattern, Principal};
    use crate::quota::Quota;

    fn access(grants: Vec<Grant>) -> Access {
        Access::principal(Arc::new(Principal::new(
            Arc::from("p"),
            grants,
            Arc::new(Quota::unlimited(Arc::from("p"))),
        )))
    }

    fn topic(name: &str, partitions: i32) -> TopicInfo {
        TopicInfo {
            topic: name.to_owned(),
            partitions,
        }
    }

    #[test]
    fn a_create_with_nothing_creatable_is_recognised_before_queueing() {
        let maker = access(vec![Grant::new(
            ResourceType::Topic,
            Pattern::parse("made-*"),
            &[Operation::Create],
        )]);
        assert!(may_create_any(&maker, &[topic("x", 1), topic("made-1", 1)]));
        assert!(!may_create_any(&maker, &[topic("x", 1), topic("y", 1)]));
        assert!(!may_create_any(&maker, &[]));
        assert!(may_create_any(&Access::open(), &[topic("x", 1)]));
        // Denied everything: every topic answered 29, in order, with no plan.
        let requested = vec!["x".to_owned(), "y".to_owned()];
        let (_, denied) = creatable_topics(&maker, vec![topic("x", 1), topic("y", 1)]);
        let results = create_results(&requested, &denied, Vec::new());
        assert_eq!(
            results.iter().map(|r| r.error_code).collect::<Vec<_>>(),
            vec![ErrorCode::TopicAuthorizationFailed.code(); 2]
        );
    }

    #[test]
    fn create_results_keep_request_order() {
        let a = access(vec![Grant::new(
            ResourceType::Topic,
            Pattern::parse("orders-*"),
            &[Operation::Create],
        )]);
        let requested = vec![
            topic("billing", 1),
            topic("orders-1", 2),
            topic("x", 1),
            topic("orders-2", 0),
        ];
        let names: Vec<String> = requested.iter().map(|t| t.topic.clone()).collect();
        let (allowed, denied) = creatable_topics(&a, requested);
        assert_eq!(allowed, vec![topic("orders-1", 2), topic("orders-2", 0)]);
        assert_eq!(denied, vec![true, false, true, false]);
        let planned = vec![
            TopicResult {
                topic: "orders-1".into(),
                error_code: 0,
            },
            TopicResult {
                topic: "orders-2".into(),
                error_code: ErrorCode::InvalidPartitions.code(),
            },
        ];
        let results = create_results(&names, &denied, planned);
        let codes: Vec<(&str, i16)> = results
            .iter()
            .map(|r| (r.topic.as_str(), r.error_code))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("billing", ErrorCode::TopicAuthorizationFailed.code()),
                ("orders-1", 0),
                ("x", ErrorCode::TopicAuthorizationFailed.code()),
                ("orders-2", ErrorCode::InvalidPartitions.code()),
            ]
        );
    }

    #[test]
    fn open_access_creates_and_describes_everything() {
        let (allowed, denied) = creatable_topics(&Access::open(), vec![topic("t", 1)]);
        assert_eq!(allowed.len(), 1);
        assert_eq!(denied, vec![false]);
        let all = describable_topics(&Access::open(), None, vec![topic("a", 1), topic("b", 1)]);
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn describable_topics_follow_describe_and_implied_grants() {
        let a = access(vec![
            Grant::new(
                ResourceType::Topic,
                Pattern::parse("orders-*"),
                &[Operation::Read],
            ),
            Grant::new(
                ResourceType::Topic,
                Pattern::parse("made"),
                &[Operation::Create],
            ),
        ]);
        let described = vec![
            topic("billing-1", 1),
            topic("made", 1),
            topic("orders-1", 3),
        ];
        let seen = describable_topics(&a, None, described);
        assert_eq!(seen, vec![topic("made", 1), topic("orders-1", 3)]);
    }

    #[test]
    fn group_checks_follow_grants() {
        let a = access(vec![Grant::new(
            ResourceType::Group,
            Pattern::parse("orders-*"),
            &[Operation::Delete],
        )]);
        assert!(
            !describe_group_denied(&a, "orders-1"),
            "delete implies describe"
        );
        assert!(describe_group_denied(&a, "billing-1"));
        assert!(!delete_group_denied(&a, "orders-1"));
        assert!(delete_group_denied(&a, "billing-1"));
        assert!(!describe_group_denied(&Access::open(), "billing-1"));
    }
}
