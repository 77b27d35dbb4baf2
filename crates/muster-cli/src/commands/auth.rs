//! `muster auth hash-token | check`: the operator's side of the auth file (docs/security.md).
//! Neither talks to a server: `hash-token` turns a token (read from stdin, or made from 32
//! random bytes of the OS with `--generate`) into the `token_sha256` line the file wants;
//! `check` validates a file exactly as `musterd` does at start and on SIGHUP
//! ([`AuthFile::load`]) and summarises what it grants.

use std::io::{IsTerminal, Read};
use std::path::Path;

use muster_auth::{AclPrincipal, AclSpec, AuthFile, PrincipalSpec, TokenHash};
use serde::Serialize;

use crate::exit::{Failure, Status};
use crate::render::{self, Report};

/// Random bytes in a generated token: 256 bits, as much as the hash that stores it.
const GENERATED_TOKEN_BYTES: usize = 32;

/// Where `hash-token` gets the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// Read stdin whole; one trailing newline (what `echo` and editors add) is not part of it.
    Stdin,
    /// Given on the command line (lands in the shell history; the CLI warns).
    Argument(String),
    /// Made here from the OS's random source.
    Generate,
}

/// `auth hash-token`: `{"token_sha256"}`, plus `"token"` when it was generated.
#[derive(Debug, Serialize)]
pub struct HashedToken {
    /// Only when `--generate` made it: the secret to give the client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    pub token_sha256: String,
}

impl HashedToken {
    /// The exact TOML line for the principal's entry in the auth file.
    pub fn toml_line(&self) -> String {
        format!("token_sha256 = \"{}\"", self.token_sha256)
    }
}

impl Report for HashedToken {
    /// The token (if generated) on the first line, so `| head -n 1` takes it; the line to
    /// paste last.
    fn human(&self) -> String {
        match &self.token {
            Some(token) => format!("{token}\n{}", self.toml_line()),
            None => self.toml_line(),
        }
    }

    fn note(&self) -> Option<String> {
        self.token.as_ref().map(|_| {
            "line 1 is the new token: give it to the client (--token or MUSTER_TOKEN) and keep \
             it secret, it is stored nowhere; line 2 goes into the principal's [[principals]] \
             entry of the auth file"
                .to_owned()
        })
    }
}

/// `auth hash-token`.
pub fn hash_token(source: TokenSource) -> Result<HashedToken, Failure> {
    let (token, generated) = match source {
        TokenSource::Generate => (generate()?, true),
        TokenSource::Argument(token) => {
            eprintln!(
                "muster: warning: a token given as an argument lands in the shell history and \
                 is visible to other users in the process list; prefer `muster auth hash-token \
                 < FILE` or typing it on stdin"
            );
            (token, false)
        }
        TokenSource::Stdin => (read_stdin()?, false),
    };
    if token.is_empty() {
        return Err(Failure::new(Status::Usage, "the token is empty"));
    }
    Ok(HashedToken {
        token_sha256: TokenHash::of(&token).to_hex(),
        token: generated.then_some(token),
    })
}

/// A new token: [`GENERATED_TOKEN_BYTES`] bytes from the OS, in hex (safe in shells, TOML,
/// environment variables and HTTP headers without quoting).
fn generate() -> Result<String, Failure> {
    let mut bytes = [0u8; GENERATED_TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| Failure::internal(format!("cannot read random bytes from the OS: {e}")))?;
    Ok(hex::encode(bytes))
}

fn read_stdin() -> Result<String, Failure> {
    let mut stdin = std::io::stdin().lock();
    if stdin.is_terminal() {
        eprintln!("muster: type the token, then Enter and Ctrl-D");
    }
    let mut token = String::new();
    stdin.read_to_string(&mut token).map_err(|e| {
        Failure::new(
            Status::Usage,
            format!("cannot read the token from stdin: {e}"),
        )
    })?;
    Ok(strip_one_newline(&token).to_owned())
}

/// Drops one trailing `\n` or `\r\n`: `echo token | muster auth hash-token` must hash `token`.
/// Other whitespace is kept, since it would be part of the token a client sends.
fn strip_one_newline(text: &str) -> &str {
    text.strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(text)
}

/// `auth check`: `{"path", "principals": [{"name", "authentication", "max_groups",
/// "max_members", "max_requests_per_s", "max_connections", "acls": [{"resource", "pattern", "operations"}]}],
/// "acls_for_everyone": [...]}`. Operations include the implied ones.
#[derive(Debug, Serialize)]
pub struct CheckedFile {
    pub path: String,
    pub principals: Vec<PrincipalSummary>,
    /// ACLs with `principal = "*"`: they apply to every principal above as well.
    pub acls_for_everyone: Vec<AclSummary>,
}

#[derive(Debug, Serialize)]
pub struct PrincipalSummary {
    pub name: String,
    /// `"token"` or `"certificate"` (no token: only a client certificate naming it).
    pub authentication: &'static str,
    pub max_groups: Option<u32>,
    pub max_members: Option<u32>,
    pub max_requests_per_s: Option<u32>,
    pub max_connections: Option<u32>,
    /// Its own ACLs, in file order.
    pub acls: Vec<AclSummary>,
}

#[derive(Debug, Serialize)]
pub struct AclSummary {
    pub resource: &'static str,
    pub pattern: String,
    pub operations: Vec<&'static str>,
}

impl From<&AclSpec> for AclSummary {
    fn from(acl: &AclSpec) -> Self {
        AclSummary {
            resource: acl.grant.resource().name(),
            pattern: acl.grant.pattern().to_string(),
            operations: acl.grant.operations().map(|op| op.name()).collect(),
        }
    }
}

impl PrincipalSummary {
    fn new(spec: &PrincipalSpec, file: &AuthFile) -> Self {
        PrincipalSummary {
            name: spec.name.clone(),
            authentication: if spec.token.is_some() {
                "token"
            } else {
                "certificate"
            },
            max_groups: spec.max_groups,
            max_members: spec.max_members,
            max_requests_per_s: spec.max_requests_per_s,
            max_connections: spec.max_connections,
            acls: file
                .acls
                .iter()
                .filter(|acl| acl.principal == AclPrincipal::Named(spec.name.clone()))
                .map(AclSummary::from)
                .collect(),
        }
    }
}

fn limit(value: Option<u32>) -> String {
    value.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

impl Report for CheckedFile {
    fn human(&self) -> String {
        let acl_count = self.acls_for_everyone.len()
            + self.principals.iter().map(|p| p.acls.len()).sum::<usize>();
        let mut out = format!(
            "{}: valid, {} principals, {acl_count} ACLs",
            self.path,
            self.principals.len()
        );
        if !self.principals.is_empty() {
            out.push_str("\n\n");
            out.push_str(&render::table(
                &[
                    "PRINCIPAL",
                    "AUTHENTICATION",
                    "MAX_GROUPS",
                    "MAX_MEMBERS",
                    "MAX_REQUESTS_PER_S",
                    "MAX_CONNECTIONS",
                ],
                self.principals.iter().map(|p| {
                    [
                        p.name.clone(),
                        p.authentication.to_owned(),
                        limit(p.max_groups),
                        limit(p.max_members),
                        limit(p.max_requests_per_s),
                        limit(p.max_connections),
                    ]
                }),
            ));
        }
        let everyone = self.acls_for_everyone.iter().map(|acl| ("*", acl));
        let own = self
            .principals
            .iter()
            .flat_map(|p| p.acls.iter().map(move |acl| (p.name.as_str(), acl)));
        let rows: Vec<[String; 4]> = own
            .chain(everyone)
            .map(|(who, acl)| {
                [
                    who.to_owned(),
                    acl.resource.to_owned(),
                    acl.pattern.clone(),
                    acl.operations.join(", "),
                ]
            })
            .collect();
        if !rows.is_empty() {
            out.push_str("\n\n");
            out.push_str(&render::table(
                &[
                    "PRINCIPAL",
                    "RESOURCE",
                    "PATTERN",
                    "OPERATIONS (implied included)",
                ],
                rows,
            ));
        }
        out
    }

    fn note(&self) -> Option<String> {
        if !self.acls_for_everyone.is_empty() {
            return None;
        }
        let idle: Vec<&str> = self
            .principals
            .iter()
            .filter(|p| p.acls.is_empty())
            .map(|p| p.name.as_str())
            .collect();
        (!idle.is_empty()).then(|| {
            format!(
                "no ACL grants anything to {}: they can connect but every request is denied",
                idle.join(", ")
            )
        })
    }
}

/// `auth check FILE`. An invalid file is [`Status::Refused`], with the line and the reason.
pub fn check(path: &Path) -> Result<CheckedFile, Failure> {
    let file = AuthFile::load(path).map_err(|e| {
        let message = match e {
            // The Io error names the path itself.
            muster_auth::AuthFileError::Io { .. } => e.to_string(),
            _ => format!("auth file {}: {e}", path.display()),
        };
        Failure::new(Status::Refused, message)
    })?;
    Ok(CheckedFile {
        path: path.display().to_string(),
        principals: file
            .principals
            .iter()
            .map(|p| PrincipalSummary::new(p, &file))
            .collect(),
        acls_for_everyone: file
            .acls
            .iter()
            .filter(|acl| acl.principal == AclPrincipal::Everyone)
            .map(AclSummary::from)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_not_part_of_the_token() {
        assert_eq!(strip_one_newline("test\n"), "test");
        assert_eq!(strip_one_newline("test\r\n"), "test");
        assert_eq!(strip_one_newline("test\n\n"), "test\n");
        assert_eq!(strip_one_newline("test "), "test ");
        assert_eq!(strip_one_newline("test"), "test");
    }

    #[test]
    fn generated_tokens_are_64_hex_digits_and_differ() {
        let (a, b) = (generate().expect("random"), generate().expect("random"));
        assert_eq!(a.len(), 2 * GENERATED_TOKEN_BYTES);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn the_line_is_the_toml_the_file_wants() {
        let hashed = hash_token(TokenSource::Argument("test".into())).expect("hashes");
        assert_eq!(
            hashed.human(),
            "token_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\""
        );
        let file = AuthFile::parse(&format!(
            "[[principals]]\nname = \"a\"\n{}\n",
            hashed.toml_line()
        ))
        .expect("the line parses");
        assert_eq!(
            file.principal_for_token("test").map(|p| p.name.as_str()),
            Some("a")
        );
    }
}
