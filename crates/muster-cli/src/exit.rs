//! Outcomes and exit codes. Every failure of a command is a [`Failure`]: the [`Status`] that
//! becomes the process's exit code, and the one line printed on stderr. How the client's
//! errors map onto statuses is decided here and nowhere else ([`Failure::client`]).
//!
//! | code | [`Status`] | when |
//! |---:|---|---|
//! | 0 | `Success` | the command did what it was asked |
//! | 1 | `Refused` | the server answered with an error code (e.g. `NON_EMPTY_GROUP`, also when resetting the offsets of a group that has members; `UNKNOWN_MEMBER_ID` when setting offsets of a group that has members, `INVALID_PARTITIONS`), or `auth check` refused the file |
//! | 2 | `Usage` | the command line is wrong (clap's own exit code) |
//! | 3 | `NotFound` | the group does not exist (`GROUP_ID_NOT_FOUND`, or described as `Dead` with no members) |
//! | 4 | `Unreachable` | no answer from the server: connection refused, broken, or timed out, or the TLS handshake failed |
//! | 5 | `Internal` | an answer the CLI cannot interpret, or output that cannot be written |

use std::fmt::Write as _;
use std::process::ExitCode;

use muster_client::{ClientError, ErrorCode};

/// What a run of `muster` came to; its number is the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Success = 0,
    Refused = 1,
    Usage = 2,
    NotFound = 3,
    Unreachable = 4,
    Internal = 5,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Success,
        Status::Refused,
        Status::Usage,
        Status::NotFound,
        Status::Unreachable,
        Status::Internal,
    ];

    /// The exit code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// One or two words for `muster -h`.
    pub const fn label(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Refused => "refused",
            Status::Usage => "usage",
            Status::NotFound => "not found",
            Status::Unreachable => "unreachable",
            Status::Internal => "internal",
        }
    }

    /// One line for `muster --help`.
    pub const fn meaning(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Refused => {
                "refused by the server: it answered an error code (e.g. NON_EMPTY_GROUP, \
                 UNKNOWN_MEMBER_ID for offsets set on a group with members, INVALID_PARTITIONS); \
                 or an auth file that `auth check` refuses"
            }
            Status::Usage => "usage error: the command line is wrong",
            Status::NotFound => {
                "not found: no such group (describe, delete, simulate, offsets get, history, \
                 reset, restore)"
            }
            Status::Unreachable => {
                "server unreachable: connection refused or broken, or no answer in --timeout-ms"
            }
            Status::Internal => {
                "internal error: an answer the CLI cannot interpret, or output it cannot write"
            }
        }
    }
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> Self {
        ExitCode::from(status.code())
    }
}

/// The one-line reminder of the exit codes under `muster -h`.
pub fn short_help() -> String {
    let codes: Vec<String> = Status::ALL
        .iter()
        .map(|s| format!("{} {}", s.code(), s.label()))
        .collect();
    format!("Exit codes: {} (details: --help)", codes.join(", "))
}

/// The exit-code section of `muster --help`, built from [`Status::ALL`].
pub fn help() -> String {
    let mut out = String::from("Exit codes:\n");
    for status in Status::ALL {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "  {}  {}", status.code(), status.meaning());
    }
    out.push_str(
        "\nErrors are one line on stderr: what failed, and the server's error name and code.",
    );
    out
}

/// A command that did not succeed: how it ends (`status`) and what to tell the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: Status,
    /// One line, without the `muster: ` prefix.
    pub message: String,
}

impl Failure {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Failure::new(Status::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Failure::new(Status::Internal, message)
    }

    /// The server answered `code` to `what` (e.g. `cannot delete group "g"`). The line reads
    /// `{what}: {NAME} ({code}): {explanation}`; without an `explanation` the code's usual
    /// meaning is used. `GROUP_ID_NOT_FOUND` is [`Status::NotFound`]; every other code is
    /// [`Status::Refused`].
    pub fn server(what: &str, code: i16, explanation: Option<&str>) -> Self {
        let known = ErrorCode::from_code(code);
        let status = match known {
            Some(ErrorCode::GroupIdNotFound) => Status::NotFound,
            _ => Status::Refused,
        };
        let name = match known {
            Some(known) => known.to_string(),
            None => format!("unknown error code {code}"),
        };
        let explanation = explanation
            .or_else(|| known.map(explain))
            .unwrap_or("the server sent an error code this version of muster does not know");
        Failure::new(status, format!("{what}: {name}: {explanation}"))
    }

    /// Maps a client error met while doing `what`, talking to the server at `server`:
    /// an error code → [`Failure::server`]; no answer → [`Status::Unreachable`]; anything
    /// else → [`Status::Internal`].
    pub fn client(what: &str, server: &str, err: &ClientError) -> Self {
        match err {
            ClientError::Protocol { code, .. } => Failure::server(what, *code, None),
            ClientError::Timeout { after, .. } => Failure::new(
                Status::Unreachable,
                format!(
                    "{what}: no answer from server {server} within {} ms",
                    after.as_millis()
                ),
            ),
            ClientError::Io(io) => Failure::new(
                Status::Unreachable,
                format!("{what}: server {server} unreachable: {io}"),
            ),
            ClientError::Tls(tls) => Failure::new(
                Status::Unreachable,
                format!("{what}: server {server}: {tls}"),
            ),
            ClientError::Disconnected => Failure::new(
                Status::Unreachable,
                format!("{what}: server {server} closed the connection"),
            ),
            other => Failure::internal(format!("{what}: {other}")),
        }
    }
}

/// What an error code means, said for an operator: the protocol crate's description, except
/// where the operator's fix is a `muster` option.
pub fn explain(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::AuthenticationFailed => "the token (--token / MUSTER_TOKEN) or the client certificate (--tls-client-cert) was refused",
        other => other.description(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn exit_codes_are_pinned() {
        let codes: Vec<u8> = Status::ALL.iter().map(|s| s.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5]);
        let (help, short) = (help(), short_help());
        for status in Status::ALL {
            assert!(help.contains(&format!("  {}  ", status.code())), "{help}");
            assert!(short.contains(&format!("{} {}", status.code(), status.label())));
        }
    }

    #[test]
    fn server_codes_name_themselves() {
        let failure = Failure::server(r#"cannot delete group "g""#, 68, None);
        assert_eq!(failure.status, Status::Refused);
        assert_eq!(
            failure.message,
            r#"cannot delete group "g": NON_EMPTY_GROUP (68): the group still has members"#
        );
        assert_eq!(Failure::server("x", 69, None).status, Status::NotFound);
        let unknown = Failure::server("x", 999, None);
        assert_eq!(unknown.status, Status::Refused);
        assert!(
            unknown.message.contains("unknown error code 999"),
            "{unknown:?}"
        );
        assert!(Failure::server("x", 37, Some("why"))
            .message
            .ends_with("INVALID_PARTITIONS (37): why"));
    }

    #[test]
    fn client_errors_map_to_statuses() {
        let server = "127.0.0.1:1";
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            Failure::client("x", server, &ClientError::from(refused)).status,
            Status::Unreachable
        );
        let timeout = ClientError::Timeout {
            request: "Hello",
            after: Duration::from_millis(200),
        };
        let failure = Failure::client("x", server, &timeout);
        assert_eq!(failure.status, Status::Unreachable);
        assert!(failure.message.contains("within 200 ms"), "{failure:?}");
        assert_eq!(
            Failure::client("x", server, &ClientError::Disconnected).status,
            Status::Unreachable
        );
        assert_eq!(
            Failure::client("x", server, &ClientError::Unexpected("Hello")).status,
            Status::Internal
        );
        assert_eq!(
            Failure::client("x", server, &ClientError::protocol(25, "OffsetCommit g")).status,
            Status::Refused
        );
    }
}
