//! `muster-bench`: a load generator for `musterd`, and the numbers it is judged by.
//!
//! It drives a running server over TCP with many connections and its own small pipelined
//! client ([`client`] for members and admin requests, [`load`] for closed-loop load), not with
//! `muster-client`, so that what it measures is the server. Classic members are [`member`]s
//! driven in a [`cohort`]; consumer-protocol members are [`consumer`]s. Scenarios
//! ([`scenario`]):
//!
//! | command | measures |
//! |---|---|
//! | `rebalance` | last JoinGroup sent → last SyncGroup answered, for N members × G groups; and the settle time after a member leaves |
//! | `heartbeat` | sustained pipelined heartbeats/s and latency (`--compare-echo`: as a share of the echo baseline) |
//! | `echo` | the same load against a built-in echo server ([`echo`]): the machine's limit |
//! | `commit` | durable offset commits/s and latency (`--compare-history`: with offset history off and on, and history's memory and disk per partition) |
//! | `idle` | server RSS per idle member and per group |
//! | `parked` | server RSS per idle (Empty) group loaded with its actor and loaded parked, on the same data, alternating (`--spawn` only) |
//! | `expiry` | how late after its session timeout a dead member is removed |
//! | `security` | heartbeats/s against an open server, with a token, over TLS and over mTLS, in one run (`--spawn` only): what authentication and encryption cost |
//! | `join-one` | one member joins a formed group, then one leaves, classic and consumer protocol (KIP-848) side by side: the newcomer's wait, the partitions that stop, what the other members see |
//! | `one-join` | one member joins a formed classic group: last JoinGroup sent → last SyncGroup answered (`--compare`: redb store, memory store and the `etcd-watch` baseline alternating, with ratios) |
//! | `etcd-watch` | a bare etcd telling N watchers about one put ([`etcd_watch`]): the reference for a rebalance |
//! | `hostile` | what one hostile client ([`attack`]) does to the server's memory, its survival and other groups' heartbeat latency |
//!
//! `docs/benchmarks.md` has the method, the commands and the results.

pub mod attack;
pub mod client;
pub mod cohort;
pub mod consumer;
pub mod echo;
pub mod etcd_watch;
pub mod load;
pub mod member;
pub mod scenario;
pub mod stats;
pub mod target;
pub mod transport;
