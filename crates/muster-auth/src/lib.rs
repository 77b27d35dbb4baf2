//! Muster's access rules, shared by the server (which enforces them), the coordinator (which
//! asks them) and the CLI (`muster auth hash-token` and `muster auth check`):
//!
//! - [`acl`]: resource types, operations, name patterns and [`Grant`]s;
//! - [`file`]: the auth file's TOML format and its validation, every error with its line;
//! - [`token`]: token hashing and constant-time matching.
//!
//! It does no I/O beyond reading the file it is asked to, and knows nothing of connections.

pub mod acl;
pub mod file;
pub mod token;

pub use acl::{Grant, Operation, Pattern, ResourceType};
pub use file::{AclPrincipal, AclSpec, AuthFile, AuthFileError, PrincipalSpec};
pub use token::{find_token, TokenHash};
