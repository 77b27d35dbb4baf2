//! The command line, as clap derive types: the global options ([`Global`]) and one subcommand
//! tree per noun (`groups`, `offsets`, `topics`, `cluster`, `auth`). Parsing only: nothing
//! here talks to a server.
//! A wrong command line exits with code 2 (clap's own).

use clap::{Args, Parser, Subcommand, ValueEnum};
use muster_client::args::ConnectArgs;
use muster_client::GroupState;

use crate::exit;

const ABOUT: &str = "Operate a Muster consumer-group coordinator: groups, offsets, topics, cluster";

const LONG_ABOUT: &str = "\
Operate a Muster consumer-group coordinator: list, describe and delete consumer groups, read \
and set their committed offsets, manage the topic catalog, and see which node coordinates a \
group and what the cluster looks like.

Output is an aligned table by default; --json prints one JSON document on stdout instead, with \
stable field names (see the README of muster-cli). Failures print one line on stderr and end \
with a distinct exit code (below).";

/// `muster`: the operator CLI of Muster.
#[derive(Debug, Parser)]
#[command(
    name = "muster",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = exit::short_help(),
    after_long_help = exit::help(),
    propagate_version = true,
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes (before or after it).
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// The server to talk to, or several nodes of a cluster (comma-separated or the option
    /// repeated): the first that answers is used, and each group's requests go to the node
    /// that coordinates the group.
    #[arg(
        long,
        global = true,
        env = "MUSTER_SERVER",
        default_value = "127.0.0.1:7450",
        value_name = "HOST:PORT[,HOST:PORT...]",
        value_delimiter = ',',
        value_parser = parse_server
    )]
    pub server: Vec<String>,

    /// Print one JSON document on stdout instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// How long to wait for the connection and for each answer, in milliseconds.
    #[arg(
        long,
        global = true,
        default_value_t = 5000,
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub timeout_ms: u64,

    /// `--token` and `--tls-*`, as the bench and the worker example take them.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consumer groups: list, describe, delete.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// Committed offsets of a group: get, set, history, reset (and undo), restore.
    #[command(subcommand)]
    Offsets(OffsetsCommand),
    /// The topic catalog: create (or raise the partition count), list.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// The cluster the server belongs to: its nodes and the shards each owns.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// The auth file: hash a token for it, check it (no server needed).
    #[command(subcommand)]
    Auth(AuthCommand),
}

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// List groups with their state and member count.
    List {
        /// Only groups in this state (case-insensitive; repeat for several).
        #[arg(long = "state", value_name = "STATE", value_enum, ignore_case = true)]
        states: Vec<StateArg>,
    },
    /// Show a group's state, generation, assignor, leader and members; for a
    /// consumer-protocol group its group and assignment epochs, assignor, and per member its
    /// epoch, subscription, current and target assignment, and what it still has to give up
    /// or receive.
    Describe {
        /// The group id.
        group: String,
    },
    /// Delete a group that has no members, with its committed offsets.
    Delete {
        /// The group id.
        group: String,
    },
    /// Show which node coordinates a group, and its address (the group need not exist).
    Coordinator {
        /// The group id.
        group: String,
    },
    /// Show a group's last rebalances, newest first: why each started (and which member
    /// caused it), how long its barrier and sync took, who joined and left, how many
    /// partitions moved.
    History {
        /// The group id.
        group: String,
        /// At most this many rebalances (0: every one the server keeps).
        #[arg(long, default_value_t = 0)]
        limit: u32,
    },
    /// Show what a group waits for now: who has not rejoined or synced and when the
    /// rebalance gives up, partitions nobody owns, a rebalance storm.
    Why {
        /// The group id.
        group: String,
    },
    /// Dry-run rebalance: what the group's assignor would move if members left, members
    /// joined or topics grew, all at once; nothing changes in the group.
    ///
    /// Per member (staying, removed, or added as new-1, new-2, ...) the partitions it would
    /// keep, lose and gain, and how many partitions would stop (change owner or lose their
    /// owner). Works for consumer-protocol groups and for classic groups whose assignor is
    /// range or roundrobin (the server refuses the others, saying why).
    Simulate {
        /// The group id.
        group: String,
        /// A member that would leave (its member id; repeat for several).
        #[arg(long = "remove", value_name = "MEMBER_ID")]
        remove: Vec<String>,
        /// How many members would join, each subscribed to every topic the group subscribes
        /// to.
        #[arg(long, value_name = "N", default_value_t = 0)]
        add: u32,
        /// A topic's partition count as it would be (at least its count now; repeat for
        /// several topics).
        #[arg(
            long = "partitions",
            value_name = "TOPIC=COUNT",
            value_parser = crate::commands::simulate::parse_topic_count
        )]
        partitions: Vec<muster_client::TopicInfo>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Show the cluster's name and shard count, and each node with its address and shards
    /// (a single server: itself, owning shard 0).
    Describe,
}

#[derive(Debug, Subcommand)]
pub enum OffsetsCommand {
    /// Show a group's committed offsets.
    Get {
        /// The group id.
        group: String,
    },
    /// Set one committed offset of a group that has no members (state Empty).
    ///
    /// The server refuses it while the group has members; stop the group's consumers first.
    /// A group that does not exist yet is created, Empty, holding this offset.
    Set {
        /// The group id.
        group: String,
        /// The topic.
        #[arg(long)]
        topic: String,
        /// The partition number.
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        partition: i32,
        /// The offset to store (the next record the group will consume).
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
        offset: i64,
        /// Metadata stored with the offset.
        #[arg(long)]
        metadata: Option<String>,
    },
    /// Show a group's offset history: per partition, its last commits, resets and restores,
    /// newest first, with who wrote each (member, client, host, generation) and when.
    History {
        /// The group id.
        group: String,
        /// Only this topic.
        #[arg(long)]
        topic: Option<String>,
        /// Only this partition (of --topic, or of every topic).
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        partition: Option<i32>,
        /// At most this many entries per partition (0: every one the server keeps).
        #[arg(long, default_value_t = 0)]
        limit: u32,
    },
    /// Reset the committed offsets of a group that has no members (state Empty): to a point
    /// in time, to the oldest recorded, by a shift, or to an offset.
    ///
    /// Prints, per partition, its offset now and after the reset. --dry-run changes nothing;
    /// --execute resets every partition at once (or none, if one cannot be), and prints the
    /// time the reset was recorded at and the command that undoes it (a reset to just before
    /// it). The server refuses while the group has members, naming them.
    Reset {
        /// The group id.
        group: String,
        #[command(flatten)]
        to: ResetTarget,
        /// Which partitions: a topic, or some of its partitions (repeat for several; default:
        /// every partition the group has an offset or a history for).
        #[arg(
            long = "topic",
            value_name = "TOPIC[:P,P...]",
            value_parser = parse_topic_partitions
        )]
        topics: Vec<muster_client::TopicPartitions>,
        #[command(flatten)]
        mode: ResetMode,
    },
    /// List a group's offsets held in the expiry quarantine (offsets past retention, kept
    /// restorable for a while before they are dropped), or restore them with --execute.
    Restore {
        /// The group id.
        group: String,
        /// Bring them back, committed anew (without it: only list them).
        #[arg(long)]
        execute: bool,
    },
}

/// Where `offsets reset` puts the offsets: exactly one of these.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct ResetTarget {
    /// The offset each partition had at this time (RFC 3339, e.g. 2026-12-01T14:00:00Z): its
    /// newest history entry at or before it.
    #[arg(long, value_name = "TIME", value_parser = crate::render::parse_time_ms)]
    pub to_time: Option<u64>,
    /// The oldest offset the history holds.
    #[arg(long)]
    pub to_earliest_recorded: bool,
    /// The committed offset plus N (N may be negative; the result is at least 0).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// This offset.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub to_offset: Option<i64>,
}

impl ResetTarget {
    /// The wire form (clap makes sure exactly one is given).
    pub fn to(&self) -> muster_client::ResetTo {
        use muster_client::ResetTo;
        match (self.to_time, self.shift_by, self.to_offset) {
            (Some(at_ms), _, _) => ResetTo::Time { at_ms },
            (_, Some(delta), _) => ResetTo::ShiftBy { delta },
            (_, _, Some(offset)) => ResetTo::Offset { offset },
            _ => ResetTo::EarliestRecorded,
        }
    }
}

/// `offsets reset`: exactly one of --dry-run and --execute.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct ResetMode {
    /// Show what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Reset the offsets.
    #[arg(long)]
    pub execute: bool,
}

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Create a topic, or raise an existing topic's partition count (never lowers it).
    Create {
        /// The topic name: 1 to 249 characters of [A-Za-z0-9._-].
        topic: String,
        /// The partition count.
        #[arg(long, allow_negative_numbers = true)]
        partitions: i32,
    },
    /// List the topics of the catalog with their partition counts.
    List,
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Print the `token_sha256 = "..."` line of a token, to paste into the auth file.
    ///
    /// The token is read from stdin (one trailing newline is not part of it):
    /// `muster auth hash-token < token.txt`. With --generate, a new token is made from 32
    /// random bytes of the OS and printed first, then its line.
    HashToken {
        /// The token. Prefer stdin: an argument lands in the shell history.
        #[arg(conflicts_with_all = ["token_stdin", "generate"])]
        token: Option<String>,
        /// Read the token from stdin (the default without TOKEN or --generate).
        #[arg(long, conflicts_with = "generate")]
        token_stdin: bool,
        /// Make a new random token and print it with its line.
        #[arg(long)]
        generate: bool,
    },
    /// Validate an auth file as musterd would, and summarise its principals and ACLs.
    ///
    /// An invalid file prints the line and the reason and exits 1.
    Check {
        /// The auth file (TOML).
        file: std::path::PathBuf,
    },
}

/// A group state that `groups list --state` filters on (a listed group is never `Dead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    #[value(name = "Empty")]
    Empty,
    #[value(name = "PreparingRebalance", alias = "preparing-rebalance")]
    PreparingRebalance,
    #[value(name = "CompletingRebalance", alias = "completing-rebalance")]
    CompletingRebalance,
    /// A consumer-protocol group whose target assignment is behind its group epoch.
    #[value(name = "Assigning")]
    Assigning,
    /// A consumer-protocol group with a member not yet at its target assignment.
    #[value(name = "Reconciling")]
    Reconciling,
    #[value(name = "Stable")]
    Stable,
}

impl From<StateArg> for GroupState {
    fn from(state: StateArg) -> Self {
        match state {
            StateArg::Empty => GroupState::Empty,
            StateArg::PreparingRebalance => GroupState::PreparingRebalance,
            StateArg::CompletingRebalance => GroupState::CompletingRebalance,
            StateArg::Assigning => GroupState::Assigning,
            StateArg::Reconciling => GroupState::Reconciling,
            StateArg::Stable => GroupState::Stable,
        }
    }
}

/// `TOPIC` or `TOPIC:P,P,...` (`offsets reset --topic`).
pub fn parse_topic_partitions(value: &str) -> Result<muster_client::TopicPartitions, String> {
    let (topic, list) = match value.split_once(':') {
        Some((topic, list)) => (topic, Some(list)),
        None => (value, None),
    };
    if topic.is_empty() {
        return Err(format!("{value:?} has no topic"));
    }
    let mut partitions = Vec::new();
    for p in list.into_iter().flat_map(|l| l.split(',')) {
        let partition = p
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or_else(|| format!("{p:?} in {value:?} is not a partition number"))?;
        partitions.push(partition);
    }
    if list.is_some() && partitions.is_empty() {
        return Err(format!("{value:?} lists no partition"));
    }
    Ok(muster_client::TopicPartitions {
        topic: topic.to_owned(),
        partitions,
    })
}

/// `HOST:PORT`, with a numeric port (the host is resolved when connecting).
fn parse_server(value: &str) -> Result<String, String> {
    let value = value.trim();
    let (host, port) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("{value:?} is not HOST:PORT"))?;
    if host.is_empty() {
        return Err(format!("{value:?} has no host"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("{port:?} is not a port number"))?;
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn states_parse_case_insensitively() {
        let cli = Cli::try_parse_from([
            "muster", "groups", "list", "--state", "stable", "--state", "EMPTY",
        ])
        .expect("parses");
        let Command::Groups(GroupsCommand::List { states }) = cli.command else {
            panic!("groups list: {:?}", cli.command);
        };
        assert_eq!(states, [StateArg::Stable, StateArg::Empty]);
        let cli = Cli::try_parse_from(["muster", "groups", "list", "--state", "reconciling"])
            .expect("a consumer-protocol state parses");
        let Command::Groups(GroupsCommand::List { states }) = cli.command else {
            panic!("groups list: {:?}", cli.command);
        };
        assert_eq!(
            GroupState::from(states[0]),
            GroupState::Reconciling,
            "{states:?}"
        );
        assert!(Cli::try_parse_from(["muster", "groups", "list", "--state", "Dead"]).is_err());
    }

    #[test]
    fn simulate_takes_removals_additions_and_partition_counts() {
        let cli = Cli::try_parse_from([
            "muster",
            "groups",
            "simulate",
            "g",
            "--remove",
            "m1",
            "--remove",
            "m2",
            "--add",
            "2",
            "--partitions",
            "orders=12",
        ])
        .expect("parses");
        let Command::Groups(GroupsCommand::Simulate {
            group,
            remove,
            add,
            partitions,
        }) = cli.command
        else {
            panic!("groups simulate: {:?}", cli.command);
        };
        assert_eq!((group.as_str(), add), ("g", 2));
        assert_eq!(remove, ["m1", "m2"]);
        assert_eq!(partitions[0].topic, "orders");
        assert_eq!(partitions[0].partitions, 12);
        let bare = Cli::try_parse_from(["muster", "groups", "simulate", "g"]).expect("parses");
        let Command::Groups(GroupsCommand::Simulate { add: 0, .. }) = bare.command else {
            panic!("no changes: {:?}", bare.command);
        };
        assert!(
            Cli::try_parse_from(["muster", "groups", "simulate", "g", "--partitions", "x"])
                .is_err()
        );
    }

    #[test]
    fn global_options_go_anywhere() {
        let cli = Cli::try_parse_from([
            "muster",
            "topics",
            "list",
            "--json",
            "--server",
            "example:9",
            "--timeout-ms",
            "10",
        ])
        .expect("parses");
        assert!(cli.global.json);
        assert_eq!(cli.global.server, ["example:9"]);
        assert_eq!(cli.global.timeout_ms, 10);
    }

    #[test]
    fn hash_token_takes_one_source() {
        let cli = Cli::try_parse_from(["muster", "auth", "hash-token"]).expect("parses");
        let Command::Auth(AuthCommand::HashToken {
            token: None,
            token_stdin: false,
            generate: false,
        }) = cli.command
        else {
            panic!("auth hash-token: {:?}", cli.command);
        };
        assert!(Cli::try_parse_from(["muster", "auth", "hash-token", "x", "--generate"]).is_err());
        assert!(Cli::try_parse_from([
            "muster",
            "auth",
            "hash-token",
            "--token-stdin",
            "--generate"
        ])
        .is_err());
    }

    #[test]
    fn several_servers_by_commas_or_repetition() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["muster"];
            argv.extend_from_slice(args);
            argv.extend(["topics", "list"]);
            Cli::try_parse_from(argv).map(|cli| cli.global.server)
        };
        assert_eq!(parse(&[]).expect("default"), ["127.0.0.1:7450"]);
        assert_eq!(
            parse(&["--server", "a:1, b:2"]).expect("commas"),
            ["a:1", "b:2"]
        );
        assert_eq!(
            parse(&["--server", "a:1", "--server", "b:2,c:3"]).expect("repeated"),
            ["a:1", "b:2", "c:3"]
        );
        assert!(parse(&["--server", "a:1,nope"]).is_err());
    }

    #[test]
    fn offsets_reset_takes_one_target_and_one_mode() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["muster", "offsets", "reset", "g"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv)
        };
        let cli = parse(&[
            "--shift-by",
            "-5",
            "--topic",
            "orders:0,2",
            "--topic",
            "audit",
            "--dry-run",
        ])
        .expect("parses");
        let Command::Offsets(OffsetsCommand::Reset {
            group,
            to,
            topics,
            mode,
        }) = cli.command
        else {
            panic!("offsets reset: {:?}", cli.command);
        };
        assert_eq!(group, "g");
        assert_eq!(to.to(), muster_client::ResetTo::ShiftBy { delta: -5 });
        assert_eq!(
            (topics[0].topic.as_str(), &topics[0].partitions[..]),
            ("orders", &[0, 2][..])
        );
        assert!(topics[1].partitions.is_empty());
        assert!(mode.dry_run && !mode.execute);
        let at = parse(&["--to-time", "2026-12-01T14:00:00Z", "--execute"]).expect("parses");
        let Command::Offsets(OffsetsCommand::Reset { to, .. }) = at.command else {
            panic!("offsets reset: {:?}", at.command);
        };
        assert_eq!(
            to.to(),
            muster_client::ResetTo::Time {
                at_ms: 1_796_133_600_000
            }
        );
        // Exactly one target, exactly one mode.
        assert!(parse(&["--to-earliest-recorded"]).is_err());
        assert!(parse(&["--execute"]).is_err());
        assert!(parse(&["--to-offset", "3", "--dry-run", "--execute"]).is_err());
        assert!(parse(&["--to-offset", "3", "--to-earliest-recorded", "--execute"]).is_err());
        assert!(parse(&["--to-offset", "-3", "--execute"]).is_err());
        assert!(parse(&["--to-time", "yesterday", "--execute"]).is_err());
        assert!(parse(&["--to-offset", "3", "--topic", "orders:x", "--execute"]).is_err());
        assert!(parse(&["--to-offset", "3", "--topic", ":1", "--execute"]).is_err());
        assert!(parse(&["--to-offset", "3", "--topic", "orders:", "--execute"]).is_err());
    }

    #[test]
    fn server_addresses_need_a_port() {
        assert!(parse_server("127.0.0.1:7450").is_ok());
        assert!(parse_server("[::1]:7450").is_ok());
        assert!(parse_server("localhost").is_err());
        assert!(parse_server("localhost:http").is_err());
        assert!(parse_server(":7450").is_err());
    }
}
