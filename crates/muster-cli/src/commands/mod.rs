//! Running a parsed command: connect (to the first `--server` that answers, `Hello`
//! included), dispatch to the noun's module, print its [`Report`](crate::render::Report).
//! Each module turns the client's answers into a report, or into a [`Failure`] that says what
//! failed and why. The client routes each group's requests to the group's coordinator.

use std::time::Duration;

use muster_client::{Admin, Client, ClientConfig, ClientError, ConnectionConfig};

use crate::cli::{
    AuthCommand, Cli, ClusterCommand, Command, GroupsCommand, OffsetsCommand, TopicsCommand,
};
use crate::exit::{Failure, Status};
use crate::render::{emit, Format};

pub mod auth;
pub mod cluster;
pub mod consumer;
pub mod groups;
pub mod insight;
pub mod offset_history;
pub mod offset_reset;
pub mod offsets;
pub mod simulate;
pub mod topics;

/// The client id `muster` sends in `Hello`.
pub const CLIENT_ID: &str = "muster-cli";

/// What a command runs against.
pub struct Context {
    pub admin: Admin,
    /// `HOST:PORT[,HOST:PORT...]` as given, for error messages.
    pub server: String,
}

impl Context {
    /// Maps a client error met while doing `what`.
    pub fn fail(&self, what: &str, err: &ClientError) -> Failure {
        Failure::client(what, &self.server, err)
    }
}

/// Connects to the first server of the global options that answers.
pub async fn connect(cli: &Cli) -> Result<Context, Failure> {
    let servers = cli.global.server.clone();
    let server = servers.join(",");
    let timeout = Duration::from_millis(cli.global.timeout_ms);
    let first = servers.first().cloned().unwrap_or_default();
    let config = ConnectionConfig::new(first)
        .client_id(CLIENT_ID)
        .request_timeout(timeout)
        .connect_timeout(timeout);
    let config = cli
        .global
        .connect
        .apply(config)
        .map_err(|e| Failure::new(Status::Usage, format!("TLS: {e}")))?;
    let config = ClientConfig {
        bootstrap: servers,
        connection: config,
    };
    let client = Client::connect(config)
        .await
        .map_err(|e| Failure::client("cannot connect", &server, &e))?;
    Ok(Context {
        admin: Admin::new(client),
        server,
    })
}

/// Runs `cli`'s command and prints its report.
pub async fn run(cli: &Cli) -> Result<(), Failure> {
    let format = if cli.global.json {
        Format::Json
    } else {
        Format::Human
    };
    // `auth` works on local files and tokens: no connection.
    if let Command::Auth(command) = &cli.command {
        return run_auth(command, format);
    }
    let ctx = connect(cli).await?;
    match &cli.command {
        Command::Groups(GroupsCommand::List { states }) => {
            let states: Vec<_> = states.iter().map(|s| (*s).into()).collect();
            let (list, unreachable) = groups::list(&ctx, &states).await?;
            emit(&list, format)?;
            unreachable.map_or(Ok(()), Err)
        }
        Command::Groups(GroupsCommand::Describe { group }) => {
            emit(&groups::describe(&ctx, group).await?, format)
        }
        Command::Groups(GroupsCommand::Delete { group }) => {
            emit(&groups::delete(&ctx, group).await?, format)
        }
        Command::Groups(GroupsCommand::Coordinator { group }) => {
            emit(&cluster::coordinator(&ctx, group).await?, format)
        }
        Command::Groups(GroupsCommand::History { group, limit }) => {
            emit(&insight::history(&ctx, group, *limit).await?, format)
        }
        Command::Groups(GroupsCommand::Why { group }) => {
            emit(&insight::why(&ctx, group).await?, format)
        }
        Command::Groups(GroupsCommand::Simulate {
            group,
            remove,
            add,
            partitions,
        }) => emit(
            &simulate::simulate(&ctx, group, remove, *add, partitions).await?,
            format,
        ),
        Command::Cluster(ClusterCommand::Describe) => emit(&cluster::describe(&ctx).await?, format),
        Command::Offsets(OffsetsCommand::Get { group }) => {
            emit(&offsets::get(&ctx, group).await?, format)
        }
        Command::Offsets(OffsetsCommand::Set {
            group,
            topic,
            partition,
            offset,
            metadata,
        }) => {
            let entry = offsets::OffsetEntry {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
                metadata: metadata.clone(),
            };
            emit(&offsets::set(&ctx, group, entry).await?, format)
        }
        Command::Offsets(OffsetsCommand::History {
            group,
            topic,
            partition,
            limit,
        }) => emit(
            &offset_history::history(&ctx, group, topic.as_deref(), *partition, *limit).await?,
            format,
        ),
        Command::Offsets(OffsetsCommand::Reset {
            group,
            to,
            topics,
            mode,
        }) => emit(
            &offset_reset::reset(&ctx, group, to.to(), topics, mode.execute).await?,
            format,
        ),
        Command::Offsets(OffsetsCommand::Restore { group, execute }) => {
            emit(&offset_reset::restore(&ctx, group, *execute).await?, format)
        }
        Command::Topics(TopicsCommand::Create { topic, partitions }) => {
            emit(&topics::create(&ctx, topic, *partitions).await?, format)
        }
        Command::Topics(TopicsCommand::List) => emit(&topics::list(&ctx).await?, format),
        Command::Auth(command) => run_auth(command, format),
    }
}

/// `muster auth ...`, which needs no server.
fn run_auth(command: &AuthCommand, format: Format) -> Result<(), Failure> {
    match command {
        AuthCommand::HashToken {
            token, generate, ..
        } => {
            let source = match (token, generate) {
                (_, true) => auth::TokenSource::Generate,
                (Some(token), false) => auth::TokenSource::Argument(token.clone()),
                (None, false) => auth::TokenSource::Stdin,
            };
            emit(&auth::hash_token(source)?, format)
        }
        AuthCommand::Check { file } => emit(&auth::check(file)?, format),
    }
}
