//! # muster
//!
//! The operator CLI of Muster, in the spirit of `kafka-consumer-groups.sh` and `rpk group`:
//!
//! ```text
//! muster groups list [--state STATE]...      groups with their state and member count
//! muster groups describe GROUP               state, generation, assignor, leader, members;
//!                                            a consumer-protocol group: epochs, assignor, and
//!                                            per member its current and target assignment
//! muster groups simulate GROUP [--remove M]... [--add N] [--partitions TOPIC=COUNT]...
//!                                            dry-run rebalance: kept, lost, gained per member
//! muster groups history GROUP [--limit N]    the group's last rebalances, newest first
//! muster groups why GROUP                    what the group waits for now
//! muster groups delete GROUP                 delete an Empty group and its offsets
//! muster groups coordinator GROUP            the node that coordinates the group
//! muster offsets get GROUP                   committed offsets
//! muster offsets set GROUP --topic T --partition P --offset O [--metadata M]
//!                                            set an offset of an Empty group
//! muster offsets history GROUP [--topic T] [--partition P] [--limit N]
//!                                            commits, resets, restores per partition, newest first
//! muster offsets reset GROUP (--to-time TIME | --to-earliest-recorded | --shift-by N
//!                             | --to-offset N) [--topic T[:P,P...]]... (--dry-run | --execute)
//!                                            reset an Empty group's offsets; prints the undo
//! muster offsets restore GROUP [--execute]   list (or restore) offsets in the expiry quarantine
//! muster topics create TOPIC --partitions N  create a topic, or raise its partition count
//! muster topics list                         the topic catalog
//! muster cluster describe                    the cluster's nodes and the shards each owns
//! muster auth hash-token [--generate]        the auth file's token_sha256 line (no server)
//! muster auth check FILE                     validate an auth file (no server)
//! ```
//!
//! Global options: `--server HOST:PORT[,HOST:PORT...]` (env `MUSTER_SERVER`, default
//! `127.0.0.1:7450`; several nodes of a cluster, comma-separated or repeated: the first that
//! answers is used, group requests go to each group's coordinator, `groups list` asks every
//! node),
//! `--json`, `--timeout-ms MS` (default 5000, for connecting and for each answer), `--token`
//! (env `MUSTER_TOKEN`), `--tls-ca FILE`, `--tls-client-cert FILE`, `--tls-client-key FILE`,
//! `--tls-server-name NAME` (env `MUSTER_TLS_CA`, ...; TLS is on with `--tls-ca`).
//!
//! Output is an aligned table by default, or one JSON document with `--json` (field names
//! documented on the report types in [`commands`] and in the crate's README). A failure prints
//! one line on stderr: what failed, and the server's error name and code, e.g.
//! `muster: cannot delete group "g": NON_EMPTY_GROUP (68): the group still has members`.
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---:|---|
//! | 0 | success |
//! | 1 | refused by the server: it answered an error code (`NON_EMPTY_GROUP`, also for `offsets reset` on a group with members, which the message names; `UNKNOWN_MEMBER_ID` or `REBALANCE_IN_PROGRESS` for `offsets set` on a group with members; `INVALID_PARTITIONS`; ...), or `auth check` refused the file |
//! | 2 | usage error (clap) |
//! | 3 | not found: the group does not exist (`groups describe`, `groups delete`, `groups simulate`, `offsets get`, `offsets history`, `offsets reset`, `offsets restore`) |
//! | 4 | server unreachable: connection refused or broken, or no answer within `--timeout-ms` |
//! | 5 | internal error: an answer the CLI cannot interpret, or output it cannot write |
//!
//! The codes are [`exit::Status`]; `muster --help` prints the same list.
//!
//! # Modules
//!
//! - [`cli`]: the command line (clap derive);
//! - [`commands`]: connecting, and one module per noun turning answers into reports;
//! - [`render`]: tables and JSON;
//! - [`exit`]: failures and exit codes.

mod cli;
mod commands;
mod exit;
mod render;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;
use crate::exit::{Failure, Status};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let status = match run(&cli) {
        Ok(()) => Status::Success,
        Err(failure) => {
            // Nothing useful to do if stderr is gone.
            let _ = writeln!(std::io::stderr().lock(), "muster: {}", failure.message);
            failure.status
        }
    };
    status.into()
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(commands::run(cli))
}
