//! The ACL model (protocol §5 "Authorization", docs/security.md): resource types, operations,
//! name patterns, and [`Grant`], one ACL as it applies to a principal. Implied operations are
//! folded into a grant when it is made.

use std::fmt;

/// What an ACL protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceType {
    Group,
    Topic,
    Cluster,
}

impl ResourceType {
    /// The auth file's and the metrics' name.
    pub fn name(self) -> &'static str {
        match self {
            ResourceType::Group => "group",
            ResourceType::Topic => "topic",
            ResourceType::Cluster => "cluster",
        }
    }

    /// Parses the auth file's name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "group" => Some(ResourceType::Group),
            "topic" => Some(ResourceType::Topic),
            "cluster" => Some(ResourceType::Cluster),
            _ => None,
        }
    }

    /// The operations an ACL on this resource type may name.
    pub fn operations(self) -> &'static [Operation] {
        match self {
            ResourceType::Group => &[Operation::Read, Operation::Describe, Operation::Delete],
            ResourceType::Topic => &[Operation::Read, Operation::Describe, Operation::Create],
            ResourceType::Cluster => &[Operation::Admin],
        }
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An operation on a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Read,
    Describe,
    Delete,
    Create,
    Admin,
}

impl Operation {
    pub const ALL: [Operation; 5] = [
        Operation::Read,
        Operation::Describe,
        Operation::Delete,
        Operation::Create,
        Operation::Admin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Describe => "describe",
            Operation::Delete => "delete",
            Operation::Create => "create",
            Operation::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "read" => Some(Operation::Read),
            "describe" => Some(Operation::Describe),
            "delete" => Some(Operation::Delete),
            "create" => Some(Operation::Create),
            "admin" => Some(Operation::Admin),
            _ => None,
        }
    }

    pub(crate) fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which resource names a grant covers: the auth file's `pattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `"*"`: every name.
    Any,
    /// `"orders-*"`: names starting with `orders-`.
    Prefix(Box<str>),
    /// `"orders"`: that name only.
    Literal(Box<str>),
}

impl Pattern {
    /// The auth file's form: `*` alone matches all, a trailing `*` makes a prefix, anything
    /// else is literal. An empty pattern is refused by the file's validation, not here.
    pub fn parse(pattern: &str) -> Self {
        match pattern.strip_suffix('*') {
            Some("") => Pattern::Any,
            Some(prefix) => Pattern::Prefix(prefix.into()),
            None => Pattern::Literal(pattern.into()),
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Prefix(prefix) => name.starts_with(&**prefix),
            Pattern::Literal(literal) => **literal == *name,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Any => f.write_str("*"),
            Pattern::Prefix(prefix) => write!(f, "{prefix}*"),
            Pattern::Literal(literal) => f.write_str(literal),
        }
    }
}

/// One ACL as it applies to a principal: operations (with the ones they imply) on the
/// resources of one type whose names match a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    resource: ResourceType,
    pattern: Pattern,
    operations: u8,
}

impl Grant {
    /// A grant of `operations` (each valid for `resource`: the auth file checks that) and the
    /// operations they imply.
    pub fn new(resource: ResourceType, pattern: Pattern, operations: &[Operation]) -> Self {
        // Implied operations, as in Kafka: `read` and `delete` on a group imply `describe`,
        // `read` and `create` on a topic imply `describe`. Folded in here so a check is one
        // bit test.
        let mut bits = 0;
        for &op in operations {
            bits |= op.bit();
            let implies_describe = matches!(
                (resource, op),
                (ResourceType::Group, Operation::Read | Operation::Delete)
                    | (ResourceType::Topic, Operation::Read | Operation::Create)
            );
            if implies_describe {
                bits |= Operation::Describe.bit();
            }
        }
        Grant {
            resource,
            pattern,
            operations: bits,
        }
    }

    /// `admin` on the cluster: allows every operation on every resource.
    pub fn is_cluster_admin(&self) -> bool {
        self.resource == ResourceType::Cluster && self.operations & Operation::Admin.bit() != 0
    }

    /// Whether this grant alone allows `op` on the named resource.
    pub fn allows(&self, resource: ResourceType, name: &str, op: Operation) -> bool {
        self.resource == resource && self.operations & op.bit() != 0 && self.pattern.matches(name)
    }
}

impl Grant {
    pub fn resource(&self) -> ResourceType {
        self.resource
    }

    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// The operations granted, implied ones included, in [`Operation::ALL`] order.
    pub fn operations(&self) -> impl Iterator<Item = Operation> + '_ {
        Operation::ALL
            .iter()
            .copied()
            .filter(|op| self.operations & op.bit() != 0)
    }
}
