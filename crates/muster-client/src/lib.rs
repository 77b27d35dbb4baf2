//! # muster-client
//!
//! The Rust client of Muster, a consumer-group coordinator
//! that speaks Kafka's classic group protocol (JoinGroup / SyncGroup / Heartbeat) and Kafka 4's
//! consumer protocol (ConsumerGroupHeartbeat, KIP-848) over a small TCP protocol. It gives an application what a Kafka consumer's group machinery gives it:
//! a share of a topic's partitions, kept balanced as members come and go.
//!
//! - [`Connection`]: one TCP connection, `Hello` included, carrying many requests at once
//!   (answers are matched by correlation id and may arrive out of order), with per-request
//!   timeouts and reconnection with exponential [`Backoff`].
//! - [`MemberConfig`] → [`GroupMember`] + [`Events`]: group membership. The member joins,
//!   runs the group's assignor when it is the leader, heartbeats, rejoins when the group
//!   rebalances, and tells the application what it owns through [`Event`]s (`Assigned`,
//!   `Revoked`, `Lost`, `Error`). Offsets are committed through the same handle, fenced by the
//!   member's generation, and by ownership: a commit of a partition the member does not own is
//!   refused ([`ClientError::PartitionsNotOwned`]: stop processing those partitions). Each
//!   owned partition has an *ownership epoch*, a fencing token for what the application
//!   writes elsewhere ([`GroupMember::ownership_epoch`], carried by `Assigned`; see below).
//!   With [`GroupProtocol::Consumer`]
//!   ([`MemberConfig::group_protocol`]) the member speaks the consumer protocol instead: the
//!   server assigns ([`MemberConfig::server_assignor`]: `uniform` or `range`), each member
//!   gives up and takes partitions at its own pace without a group-wide rebalance, and the
//!   same events and handle apply (the generation is then the member epoch).
//! - [`assignor`]: the [`Assignor`] trait and the built-in `range`, `roundrobin`, `sticky` and
//!   `cooperative-sticky` strategies (range and round-robin give exactly Kafka's assignments).
//! - [`Admin`]: topics, groups, offsets (with their history, a point-in-time reset that a
//!   second reset undoes, and the restore of expired offsets from the server's quarantine),
//!   and the cluster (which node coordinates a group: [`Node`]; the nodes and their shards:
//!   [`Cluster`]).
//!
//! With the `clap` feature, [`args::ConnectArgs`] is the `--token` and `--tls-*` options of a
//! program that connects (the `muster` CLI, `muster-bench` and the worker example share it).
//!
//! Errors are [`ClientError`]s; those the server sent keep their wire code
//! ([`ClientError::error_code`], and [`ErrorCodeExt`] to classify a code).
//!
//! # Example
//!
//! ```no_run
//! use muster_client::{Admin, Connection, ConnectionConfig, Event, MemberConfig, TopicPartition};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), muster_client::ClientError> {
//! let conn = Connection::connect(ConnectionConfig::new("127.0.0.1:7450").client_id("worker")).await?;
//! Admin::new(conn.clone()).ensure_topic("orders", 6).await?;
//!
//! let (member, mut events) = MemberConfig::new("billing", ["orders"])
//!     .session_timeout(Duration::from_secs(10))
//!     .assignor_names(["cooperative-sticky"])?
//!     .start(conn)?;
//!
//! while let Some(event) = events.recv().await {
//!     match event {
//!         Event::Assigned(partitions) => println!("now also own {:?}", partitions.partitions()),
//!         Event::Revoked(partitions) => {
//!             // Finish the work on these partitions and commit; dropping `partitions` lets
//!             // the rebalance go on.
//!             let done = partitions.iter().map(|tp| (tp.clone(), 42_i64));
//!             member.commit_offsets(done).await?;
//!         }
//!         Event::Lost(partitions) => println!("lost {:?}", partitions.partitions()),
//!         Event::Error(fatal) => return Err(fatal),
//!         _ => {}
//!     }
//!     # break;
//! }
//! member.close().await?; // revokes, and leaves the group
//! # let _ = TopicPartition::new("orders", 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Ownership epochs: fencing what the application writes
//!
//! A partition's ownership epoch rises every time the partition gets another owner and is
//! never reused in the group. The member asks for the epochs of what it owns after every
//! assignment, before it emits `Assigned`. An application that writes its results somewhere
//! (a database, a file, another system) stores the epoch beside them and refuses a write that
//! carries an older one: a member that lost a partition without noticing (a long GC pause, a
//! partitioned network) cannot overwrite what the partition's new owner wrote. A complete sink
//! is in `docs/offsets.md` (and `tests/fencing_sink.rs` runs it).
//!
//! ```no_run
//! # use muster_client::{Event, GroupMember, Events};
//! # async fn run(member: GroupMember, mut events: Events) {
//! while let Some(event) = events.recv().await {
//!     if let Event::Assigned(added) = event {
//!         for tp in added.iter() {
//!             // `None` only if the member could not ask (then see fetch_ownership_epochs).
//!             let epoch = added.ownership_epoch(tp);
//!             println!("{tp}: owned with epoch {epoch:?}");
//!         }
//!     }
//! }
//! # }
//! ```
//!
//! The same member on the consumer protocol (the server computes the assignment; the events
//! are handled as above):
//!
//! ```no_run
//! # use muster_client::{Connection, ConnectionConfig, GroupProtocol, MemberConfig};
//! # async fn run() -> Result<(), muster_client::ClientError> {
//! # let conn = Connection::connect(ConnectionConfig::new("127.0.0.1:7450")).await?;
//! let (member, mut events) = MemberConfig::new("billing", ["orders"])
//!     .group_protocol(GroupProtocol::Consumer)
//!     .server_assignor("uniform")
//!     .start(conn)?;
//! # drop((member, events));
//! # Ok(())
//! # }
//! ```
//!
//! # Modules
//!
//! - [`connection`]: sockets, framing, dispatch, reconnect;
//! - [`member`]: the membership state machines (classic and consumer protocol) and their
//!   events;
//! - [`assignor`]: assignment strategies;
//! - [`admin`]: administrative requests; [`cluster`]: what they say about the cluster;
//! - [`error`], [`backoff`], [`partition`]: the vocabulary shared by the above.

pub mod admin;
#[cfg(feature = "clap")]
pub mod args;
pub mod assignor;
pub mod backoff;
pub mod client;
pub mod cluster;
pub mod connection;
pub mod error;
pub mod member;
mod offsets;
pub mod partition;
pub mod tls;

pub use admin::{Admin, GroupState};
pub use assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, RangeAssignor,
    RebalanceProtocol, RoundRobinAssignor, StickyAssignor,
};
pub use backoff::Backoff;
pub use client::{Client, ClientConfig};
pub use cluster::{Cluster, Node, NodeShards};
pub use connection::{Connection, ConnectionConfig, SILENT_SOCKET};
pub use error::{ClientError, ErrorCodeExt};
pub use member::{
    Event, Events, GroupMember, GroupProtocol, MemberConfig, MemberState, Partitions, Phase,
};
pub use partition::{OffsetAndMetadata, TopicPartition};
pub use tls::{TlsConfig, TlsError};

/// The wire types and error codes, re-exported from `muster-protocol`.
pub use muster_protocol as protocol;
pub use muster_protocol::{ErrorCode, ResetTo, TopicInfo, TopicPartitions};
