//! Muster's coordinator: the pure group engine ([`engine`]), the actors that host it
//! ([`actors`]), and the storage seam ([`storage`]).
//!
//! Request path: a connection's session actor (in `muster-server`) hands a group-scoped request
//! to the [`actors::Supervisor`], which routes it to the group's [`actors::GroupActor`]
//! (creating it on demand, spread over arbiters); the session caches the group's inbox
//! ([`actors::GroupLink`]) for later requests. The group actor feeds the request and the
//! current time to its [`engine::Group`] and carries out what comes back: replies (through the
//! connection's [`actors::ReplySink`]), persistence, timers.
//!
//! Dependencies run one way: [`types`] (time, group states) is shared by all; [`storage`] owns
//! the durable records and knows nothing of the engine; the [`engine`] builds and reads those
//! records; the actors use both.

pub mod access;
pub mod actors;
pub mod catalog;
pub mod clock;
pub mod config;
pub mod engine;
pub mod logsafe;
pub mod metrics;
pub mod quota;
pub mod storage;
pub mod types;

pub use config::{ConsumerConfig, GroupConfig, Limits, OffsetsConfig};
pub use engine::consumer::ASSIGNORS;
pub use logsafe::{logsafe, logsafe_list};
