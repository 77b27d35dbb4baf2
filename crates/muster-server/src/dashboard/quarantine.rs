//! `/api/quarantine`: the keys in etcd this cluster node could not decode, and the groups held
//! back for them (docs/cluster.md "Unreadable keys"). A principal sees the keys of the groups
//! it may `describe`; keys that name no group only with the cluster admin permission (as
//! DescribeGroups would show it the groups, and nothing else). A single node has none.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use muster_coordinator::access::{Access, Operation, ResourceType};
use serde::Serialize;

use super::http::json;
use crate::cluster::placement::ShardTable;
use crate::cluster::quarantine::QuarantinedKey;

/// Most keys listed; `more` counts the rest this principal may see.
const MAX_KEYS_SHOWN: usize = 1000;

#[derive(Serialize)]
struct QuarantineView {
    keys: Vec<QuarantinedKey>,
    more: usize,
}

/// The answer for `access`; `table` is `None` on a single node.
pub(super) fn answer(table: Option<&ShardTable>, access: &Access) -> Response<Full<Bytes>> {
    let visible = table
        .map(|t| t.quarantine().entries())
        .unwrap_or_default()
        .into_iter()
        .filter(|k| may_see(access, k));
    let mut keys: Vec<QuarantinedKey> = Vec::new();
    let mut more = 0;
    for key in visible {
        if keys.len() < MAX_KEYS_SHOWN {
            keys.push(key);
        } else {
            more += 1;
        }
    }
    json(StatusCode::OK, &QuarantineView { keys, more })
}

fn may_see(access: &Access, key: &QuarantinedKey) -> bool {
    match &key.group_id {
        Some(group_id) => access.allows(ResourceType::Group, group_id, Operation::Describe),
        None => access.allows(ResourceType::Cluster, "*", Operation::Admin),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use muster_coordinator::access::{Grant, Pattern, Principal};
    use muster_coordinator::quota::Quota;
    use muster_etcd::UnreadableKey;

    use super::*;

    fn principal(grants: Vec<Grant>) -> Access {
        Access::principal(Arc::new(Principal::new(
            Arc::from("p"),
            grants,
            Arc::new(Quota::unlimited(Arc::from("p"))),
        )))
    }

    #[test]
    fn a_principal_sees_the_keys_of_the_groups_it_may_describe() {
        let table = ShardTable::new(4);
        let bad = |key: &str, group: Option<&str>| UnreadableKey {
            key: key.as_bytes().to_vec(),
            group_id: group.map(str::to_owned),
            reason: "garbage".into(),
        };
        table.quarantine().set(
            2,
            &[
                bad("/c/group/2/mine", Some("mine")),
                bad("/c/group/2/theirs", Some("theirs")),
                bad("/c/group/2/%ZZ", None),
            ],
            Instant::now(),
        );
        let groups = |access: &Access| -> Vec<Option<String>> {
            table
                .quarantine()
                .entries()
                .into_iter()
                .filter(|k| may_see(access, k))
                .map(|k| k.group_id)
                .collect()
        };
        assert_eq!(groups(&Access::open()).len(), 3);
        let describe_mine = principal(vec![Grant::new(
            ResourceType::Group,
            Pattern::parse("mine"),
            &[Operation::Describe],
        )]);
        assert_eq!(groups(&describe_mine), vec![Some("mine".to_owned())]);
        let admin = principal(vec![Grant::new(
            ResourceType::Cluster,
            Pattern::Any,
            &[Operation::Admin],
        )]);
        assert_eq!(groups(&admin).len(), 3);
        assert_eq!(answer(None, &admin).status(), StatusCode::OK);
    }
}
