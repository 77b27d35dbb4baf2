//! The auth file (`--auth-file`, docs/security.md): principals with their token hashes and
//! quotas, and ACLs. [`AuthFile::parse`] reads and validates it whole; any problem is an
//! [`AuthFileError`] naming the line and the reason, so a reload that fails leaves the rules in
//! force untouched and tells the operator what to fix.
//!
//! ```toml
//! [[principals]]
//! name = "orders-service"
//! token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! max_groups = 100            # optional quotas, absent = unlimited
//! max_members = 1000
//! max_requests_per_s = 5000
//! max_connections = 50        # client connections open at once, over all of its clients
//!
//! [[acls]]
//! principal = "orders-service"   # a principal's name, or "*" for every authenticated principal
//! resource = "group"             # "group", "topic" or "cluster"
//! pattern = "orders-*"           # a literal name; a trailing "*" makes it a prefix; "*" alone matches all
//! operations = ["read", "describe"]
//! ```

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::acl::{Grant, Operation, Pattern, ResourceType};
use crate::token::{find_token, TokenHash};

/// The longest principal name (it appears in logs, metrics and the store).
pub const MAX_PRINCIPAL_NAME_BYTES: usize = 255;

/// A validated auth file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthFile {
    pub principals: Vec<PrincipalSpec>,
    pub acls: Vec<AclSpec>,
}

/// One `[[principals]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalSpec {
    pub name: String,
    /// `None`: the principal authenticates by client certificate only (mTLS).
    pub token: Option<TokenHash>,
    pub max_groups: Option<u32>,
    pub max_members: Option<u32>,
    pub max_requests_per_s: Option<u32>,
    /// Client connections the principal may have open at once (after Hello).
    pub max_connections: Option<u32>,
}

/// Whom an ACL applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclPrincipal {
    /// `"*"`: every authenticated principal.
    Everyone,
    Named(String),
}

impl AclPrincipal {
    pub fn applies_to(&self, principal: &str) -> bool {
        match self {
            AclPrincipal::Everyone => true,
            AclPrincipal::Named(name) => name == principal,
        }
    }
}

/// One `[[acls]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclSpec {
    pub principal: AclPrincipal,
    pub grant: Grant,
}

/// Why an auth file was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A problem at a place in the file (1-based line and column).
    #[error("line {line}, column {column}: {reason}")]
    At {
        line: usize,
        column: usize,
        reason: String,
    },
    /// A problem with no place (an empty or unplaceable document).
    #[error("{0}")]
    Whole(String),
}

impl AuthFileError {
    /// The 1-based line of the problem, if it has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            AuthFileError::At { line, .. } => Some(*line),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    principals: Vec<Spanned<RawPrincipal>>,
    #[serde(default)]
    acls: Vec<Spanned<RawAcl>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrincipal {
    name: Spanned<String>,
    token_sha256: Option<Spanned<String>>,
    max_groups: Option<Spanned<i64>>,
    max_members: Option<Spanned<i64>>,
    max_requests_per_s: Option<Spanned<i64>>,
    max_connections: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAcl {
    principal: Spanned<String>,
    resource: Spanned<String>,
    pattern: Spanned<String>,
    operations: Spanned<Vec<Spanned<String>>>,
}

/// Turns byte spans into line/column errors.
struct Locator<'a>(&'a str);

impl Locator<'_> {
    fn error(&self, span: Range<usize>, reason: impl fmt::Display) -> AuthFileError {
        let before = &self.0[..span.start.min(self.0.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        AuthFileError::At {
            line,
            column,
            reason: reason.to_string(),
        }
    }
}

impl AuthFile {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<AuthFile, AuthFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthFileError::Io {
            path: path.display().to_string(),
            source,
        })?;
        AuthFile::parse(&text)
    }

    /// Parses and validates an auth file's text.
    pub fn parse(text: &str) -> Result<AuthFile, AuthFileError> {
        let at = Locator(text);
        let raw: RawFile = toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => at.error(span, e.message()),
            None => AuthFileError::Whole(e.message().to_owned()),
        })?;
        let mut file = AuthFile::default();
        let mut names: HashMap<String, ()> = HashMap::new();
        for entry in raw.principals {
            let principal = principal(&at, entry.into_inner())?;
            if names.insert(principal.name.clone(), ()).is_some() {
                return Err(AuthFileError::Whole(format!(
                    "principal {:?} is declared twice",
                    principal.name
                )));
            }
            file.principals.push(principal);
        }
        // Two principals with one token would make the token's principal a coin toss.
        for (i, a) in file.principals.iter().enumerate() {
            for b in &file.principals[i + 1..] {
                if let (Some(x), Some(y)) = (a.token, b.token) {
                    if x == y {
                        return Err(AuthFileError::Whole(format!(
                            "principals {:?} and {:?} have the same token_sha256",
                            a.name, b.name
                        )));
                    }
                }
            }
        }
        for entry in raw.acls {
            file.acls.push(acl(&at, entry.into_inner(), &names)?);
        }
        Ok(file)
    }

    /// The principal whose token this is (compared in constant time with every token).
    pub fn principal_for_token(&self, token: &str) -> Option<&PrincipalSpec> {
        let with_tokens: Vec<(&PrincipalSpec, &TokenHash)> = self
            .principals
            .iter()
            .filter_map(|p| p.token.as_ref().map(|t| (p, t)))
            .collect();
        find_token(token, with_tokens.iter().map(|(_, t)| *t)).map(|i| with_tokens[i].0)
    }

    pub fn principal(&self, name: &str) -> Option<&PrincipalSpec> {
        self.principals.iter().find(|p| p.name == name)
    }

    /// The grants that apply to a principal: its own ACLs and those for `"*"`, in file order.
    pub fn grants_for(&self, principal: &str) -> Vec<Grant> {
        self.acls
            .iter()
            .filter(|acl| acl.principal.applies_to(principal))
            .map(|acl| acl.grant.clone())
            .collect()
    }
}

fn principal(at: &Locator<'_>, raw: RawPrincipal) -> Result<PrincipalSpec, AuthFileError> {
    let name_span = raw.name.span();
    let name = raw.name.into_inner();
    if let Some(reason) = bad_principal_name(&name) {
        return Err(at.error(name_span, reason));
    }
    let token = match raw.token_sha256 {
        None => None,
        Some(hex) => Some(TokenHash::from_hex(hex.get_ref().trim()).ok_or_else(|| {
            at.error(
                hex.span(),
                "token_sha256 must be 64 hex digits (the output of `muster auth hash-token`)",
            )
        })?),
    };
    let quota = |value: Option<Spanned<i64>>, key: &str, min: i64| match value {
        None => Ok(None),
        Some(v) => {
            let n = *v.get_ref();
            match u32::try_from(n) {
                Ok(n) if i64::from(n) >= min => Ok(Some(n)),
                _ => Err(at.error(
                    v.span(),
                    format!("{key} must be between {min} and {}, not {n}", u32::MAX),
                )),
            }
        }
    };
    Ok(PrincipalSpec {
        name,
        token,
        max_groups: quota(raw.max_groups, "max_groups", 0)?,
        max_members: quota(raw.max_members, "max_members", 0)?,
        // Zero would stop the principal's connections from being read at all.
        max_requests_per_s: quota(raw.max_requests_per_s, "max_requests_per_s", 1)?,
        // Zero would refuse every connection: leave the principal out of the file instead.
        max_connections: quota(raw.max_connections, "max_connections", 1)?,
    })
}

fn bad_principal_name(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("a principal's name must not be empty".into())
    } else if name == "*" {
        Some("\"*\" means every principal in an ACL; it cannot be a principal's name".into())
    } else if name.len() > MAX_PRINCIPAL_NAME_BYTES {
        Some(format!(
            "a principal's name is at most {MAX_PRINCIPAL_NAME_BYTES} bytes"
        ))
    } else if name.chars().any(char::is_control) {
        Some("a principal's name must not contain control characters".into())
    } else {
        None
    }
}

fn acl(
    at: &Locator<'_>,
    raw: RawAcl,
    principals: &HashMap<String, ()>,
) -> Result<AclSpec, AuthFileError> {
    let principal = match raw.principal.get_ref().as_str() {
        "*" => AclPrincipal::Everyone,
        name if principals.contains_key(name) => AclPrincipal::Named(name.to_owned()),
        name => {
            return Err(at.error(
                raw.principal.span(),
                format!("no principal named {name:?} is declared (use \"*\" for every principal)"),
            ))
        }
    };
    let resource = ResourceType::parse(raw.resource.get_ref()).ok_or_else(|| {
        at.error(
            raw.resource.span(),
            format!(
                "unknown resource {:?} (expected \"group\", \"topic\" or \"cluster\")",
                raw.resource.get_ref()
            ),
        )
    })?;
    let text = raw.pattern.get_ref();
    let pattern_error = if text.is_empty() {
        Some("a pattern must not be empty (\"*\" matches every name)".to_owned())
    } else if text.strip_suffix('*').unwrap_or(text).contains('*') {
        Some("\"*\" is only allowed at the end of a pattern (a prefix) or alone".to_owned())
    } else if resource == ResourceType::Cluster && text != "*" {
        Some("the cluster is one resource: its pattern is \"*\"".to_owned())
    } else {
        None
    };
    if let Some(reason) = pattern_error {
        return Err(at.error(raw.pattern.span(), reason));
    }
    let pattern = Pattern::parse(text);
    let valid = resource.operations();
    let mut operations = Vec::new();
    for op in raw.operations.get_ref() {
        match Operation::parse(op.get_ref()).filter(|o| valid.contains(o)) {
            Some(op) => operations.push(op),
            None => {
                let names: Vec<&str> = valid.iter().map(|o| o.name()).collect();
                return Err(at.error(
                    op.span(),
                    format!(
                        "{:?} is not an operation on a {resource} (expected {})",
                        op.get_ref(),
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    if operations.is_empty() {
        return Err(at.error(raw.operations.span(), "an ACL needs at least one operation"));
    }
    Ok(AclSpec {
        principal,
        grant: Grant::new(resource, pattern, &operations),
    })
}

#[cfg(test)]
mod tests;
