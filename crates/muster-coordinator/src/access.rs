//! Who may do what: the authorization model of protocol §5 "Authorization" (docs/security.md).
//! A [`Principal`] is an authenticated identity with the ACL grants that apply to it; an
//! [`Access`] is what a connection carries: a principal, or `open` when the server runs without
//! an auth file (everything allowed). The server builds principals from its auth file; the
//! session, the supervisor and the engine ask [`Access::allows`].
//!
//! The grants themselves (resource types, operations, patterns, implied operations) are
//! `muster-auth`'s, shared with the auth file and the CLI; `admin` on the cluster allows
//! everything.

use std::fmt;
use std::sync::Arc;

pub use muster_auth::{Grant, Operation, Pattern, ResourceType};

use crate::quota::Quota;
use crate::types::PrincipalName;

/// An authenticated identity: its name, the grants that apply to it (its own ACLs and those
/// for `"*"`), and its quota (shared by every version of the principal across reloads, so its
/// usage counts survive a reload).
pub struct Principal {
    name: Arc<str>,
    grants: Box<[Grant]>,
    admin: bool,
    quota: Arc<Quota>,
}

impl Principal {
    pub fn new(name: Arc<str>, grants: Vec<Grant>, quota: Arc<Quota>) -> Self {
        let admin = grants.iter().any(Grant::is_cluster_admin);
        Principal {
            name,
            grants: grants.into_boxed_slice(),
            admin,
            quota,
        }
    }

    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    pub fn allows(&self, resource: ResourceType, name: &str, op: Operation) -> bool {
        self.admin || self.grants.iter().any(|g| g.allows(resource, name, op))
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal")
            .field("name", &self.name)
            .field("grants", &self.grants.len())
            .field("admin", &self.admin)
            .finish()
    }
}

/// What one connection may do: `open` without an auth file, else its principal's grants.
/// Cloning is one reference count (or nothing, when open).
#[derive(Debug, Clone, Default)]
pub struct Access(Option<Arc<Principal>>);

impl Access {
    /// No auth file: everything allowed, no quota.
    pub const fn open() -> Self {
        Access(None)
    }

    pub fn principal(principal: Arc<Principal>) -> Self {
        Access(Some(principal))
    }

    /// The principal, or `None` when open.
    pub fn as_principal(&self) -> Option<&Arc<Principal>> {
        self.0.as_ref()
    }

    /// For logs and metrics: the principal's name, or `-` when open.
    pub fn name(&self) -> &str {
        self.0.as_deref().map_or("-", |p| &p.name)
    }

    pub fn is_open(&self) -> bool {
        self.0.is_none()
    }

    pub fn allows(&self, resource: ResourceType, name: &str, op: Operation) -> bool {
        match &self.0 {
            None => true,
            Some(principal) => principal.allows(resource, name, op),
        }
    }

    /// The name its `max_members` and `max_groups` units are charged to: the principal's,
    /// or `None` when open (no quota applies).
    pub fn quota_principal(&self) -> Option<&PrincipalName> {
        self.quota().map(|q| q.name())
    }

    /// The quota to charge (every principal has one, unlimited unless the auth file sets
    /// limits, so its counts are right when a reload sets them); none when open.
    pub fn quota(&self) -> Option<&Arc<Quota>> {
        self.0.as_ref().map(|p| &p.quota)
    }
}

impl PartialEq for Access {
    /// The same principal object (or both open): enough for tests comparing client infos.
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Access {}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(grants: Vec<Grant>) -> Access {
        Access::principal(Arc::new(Principal::new(
            Arc::from("p"),
            grants,
            Arc::new(Quota::unlimited(Arc::from("p"))),
        )))
    }

    #[test]
    fn patterns_match_literal_prefix_and_any() {
        assert!(Pattern::parse("*").matches("anything"));
        assert!(Pattern::parse("*").matches(""));
        let prefix = Pattern::parse("orders-*");
        assert!(prefix.matches("orders-eu"));
        assert!(prefix.matches("orders-"));
        assert!(!prefix.matches("orders"));
        assert!(!prefix.matches("billing-orders-x"));
        let literal = Pattern::parse("orders");
        assert!(literal.matches("orders"));
        assert!(!literal.matches("orders-eu"));
        assert_eq!(Pattern::parse("orders-*").to_string(), "orders-*");
    }

    #[test]
    fn open_access_allows_everything() {
        let open = Access::open();
        assert!(open.allows(ResourceType::Cluster, "", Operation::Admin));
        assert!(open.allows(ResourceType::Group, "g", Operation::Delete));
        assert!(open.quota().is_none());
    }

    #[test]
    fn a_principal_gets_only_what_it_is_granted() {
        let access = principal(vec![Grant::new(
            ResourceType::Group,
            Pattern::parse("orders-*"),
            &[Operation::Read],
        )]);
        assert!(access.allows(ResourceType::Group, "orders-1", Operation::Read));
        assert!(!access.allows(ResourceType::Group, "billing-1", Operation::Read));
        assert!(!access.allows(ResourceType::Group, "orders-1", Operation::Delete));
        // A group ACL says nothing about a topic of the same name.
        assert!(!access.allows(ResourceType::Topic, "orders-1", Operation::Read));
        assert!(!access.allows(ResourceType::Cluster, "", Operation::Admin));
    }

    #[test]
    fn implied_operations_follow_kafka() {
        let group_read = Grant::new(ResourceType::Group, Pattern::Any, &[Operation::Read]);
        let group_delete = Grant::new(ResourceType::Group, Pattern::Any, &[Operation::Delete]);
        let topic_create = Grant::new(ResourceType::Topic, Pattern::Any, &[Operation::Create]);
        let topic_read = Grant::new(ResourceType::Topic, Pattern::Any, &[Operation::Read]);
        let group_describe = Grant::new(ResourceType::Group, Pattern::Any, &[Operation::Describe]);
        for (grant, resource) in [
            (group_read, ResourceType::Group),
            (group_delete, ResourceType::Group),
            (topic_create, ResourceType::Topic),
            (topic_read, ResourceType::Topic),
        ] {
            let access = principal(vec![grant]);
            assert!(access.allows(resource, "x", Operation::Describe));
        }
        // Describe implies nothing.
        let access = principal(vec![group_describe]);
        assert!(!access.allows(ResourceType::Group, "x", Operation::Read));
        assert!(!access.allows(ResourceType::Group, "x", Operation::Delete));
    }

    #[test]
    fn cluster_admin_allows_every_operation_on_every_resource() {
        let access = principal(vec![Grant::new(
            ResourceType::Cluster,
            Pattern::Any,
            &[Operation::Admin],
        )]);
        for resource in [
            ResourceType::Group,
            ResourceType::Topic,
            ResourceType::Cluster,
        ] {
            for &op in &[
                Operation::Read,
                Operation::Describe,
                Operation::Delete,
                Operation::Create,
                Operation::Admin,
            ] {
                assert!(access.allows(resource, "billing-1", op), "{resource} {op}");
            }
        }
    }

    #[test]
    fn no_grants_allow_nothing() {
        let access = principal(Vec::new());
        assert!(!access.allows(ResourceType::Group, "g", Operation::Describe));
        assert_eq!(access.name(), "p");
    }
}
