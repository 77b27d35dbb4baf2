//! The chaos harness of cluster mode (issue #24, docs/reliability.md "Chaos harness"): a
//! three-member etcd and several `musterd` nodes on this machine, worker processes in
//! consumer groups of both protocols, a seeded nemesis that kills, pauses and cuts them, and
//! a checker of what the workers wrote down.
//!
//! - [`clock`]: the one monotonic clock all processes stamp with;
//! - [`rng`]: the seeded random source (a run's schedule is reproducible from its seed);
//! - [`history`]: the workers' histories and the runner's record, as written and read back;
//! - [`checker`]: the rules a run must not break;
//! - [`proxy`]: the TCP proxies every link goes through, which the nemesis cuts and heals;
//! - [`procs`]: starting, killing, pausing and restarting etcd members, nodes and workers;
//! - [`nemesis`]: the fault schedule;
//! - [`worker`]: one worker process (a group member that commits rising offsets);
//! - [`run`]: a whole run, from start to checked result.

pub mod checker;
pub mod clock;
pub mod history;
pub mod nemesis;
pub mod procs;
pub mod proxy;
pub mod rng;
pub mod run;
pub mod worker;
