//! The supervisor: the registry of groups (their actors created on demand, spread round-robin
//! over the arbiters it was given; idle groups parked as data with none), the topic catalog, the admin requests that span groups, and the
//! one timer that wakes groups whose deadlines passed.
//!
//! It is on the path of a group's *first* request from a connection only; sessions cache the
//! group's inbox (a [`GroupLink`] sharing the registry's `Addr`) after that, so heartbeats
//! never pass through here. Group actors reach it through `Recipient`s (`SupervisorLink`), so
//! `group.rs` does not depend on this module.
//!
//! This file is the wiring: the struct, what it starts with, and the environment every group
//! actor is given. Each job is a file of its own, with its `impl Supervisor` and the handlers
//! of its messages:
//!
//! - `routing.rs`: a group's first request to its actor, the registry's removals, shutdown;
//! - `creation.rs`: where group actors come from (created by a request, within the server's
//!   `max_groups` and the creator's quotas, charged across the cluster when the store keeps
//!   them; loaded from the store) and which arbiter runs them;
//! - `admin.rs`: the admin requests (describe, list, delete; a group's history and diagnosis);
//! - `catalog.rs`: topic catalog writes and telling groups about catalog changes;
//! - `wake.rs`: the one wake-up timer over the groups' deadlines;
//! - `parking.rs`: groups kept as data with no actor, and starting actors for them again;
//! - `gauges.rs`: groups per state and members in all groups;
//! - `shards.rs`: cluster mode's shard takeovers and hand-overs.
//!
//! [`GroupLink`]: super::messages::GroupLink

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use actix::prelude::*;

use super::group::{GroupEnv, Reader, SupervisorLink};
use super::ledger::Ledger;
use super::messages::AdminCall;
use super::registry::Registry;
use super::timers::DeadlineQueue;
use crate::catalog::TopicCatalog;
use crate::clock::Clock;
use crate::config::GroupConfig;
use crate::engine::{GroupState, Millis};
use crate::quota::Quotas;
use crate::storage::{ParkedSummary, Store, StoredState};

mod admin;
mod catalog;
mod consumer;
mod creation;
mod gauges;
mod parking;
mod routing;
mod shards;
#[cfg(test)]
mod shared_tests;
mod wake;

pub use super::placement::{Placement, SingleNode};

/// Everything the supervisor starts with.
pub struct SupervisorOptions {
    pub config: GroupConfig,
    pub store: Arc<dyn Store>,
    /// Where group actors run; empty = the supervisor's own arbiter.
    pub arbiters: Vec<ArbiterHandle>,
    pub placement: Arc<dyn Placement>,
    /// State loaded from the store at startup.
    pub initial: StoredState,
    /// Groups loaded with nothing but data, to register parked as index entries
    /// ([`Store::load_parking`]; empty unless parking is on and the store reads one group
    /// back cheaply).
    pub parked: Vec<ParkedSummary>,
    pub clock: Clock,
    /// Every principal's quota (the server's auth shares the table, so reloads keep counts):
    /// groups created and loaded are charged here.
    pub quotas: Quotas,
}

pub struct Supervisor {
    config: Arc<GroupConfig>,
    store: Arc<dyn Store>,
    catalog: Arc<TopicCatalog>,
    clock: Clock,
    quotas: Quotas,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: usize,
    placement: Arc<dyn Placement>,
    env: Option<Arc<GroupEnv>>,
    /// Read by the dashboard's overview too (`overview.rs`).
    pub(super) groups: Registry,
    timers: DeadlineQueue,
    wake: Option<(Millis, SpawnHandle)>,
    initial: Option<(StoredState, Vec<ParkedSummary>)>,
    due: Vec<u64>,
    /// Groups per state and members in all groups, for the gauges.
    per_state: HashMap<GroupState, usize>,
    members_total: u64,
    /// Groups in the registry parked (no actor), for the gauge.
    parked: usize,
    /// A catalog change is being made durable: later CreateTopics wait in `topics_waiting`.
    topics_busy: bool,
    topics_waiting: VecDeque<(AdminCall, Vec<muster_protocol::TopicInfo>)>,
    /// Groups whose creator's quota unit is being charged cluster-wide (`creation.rs`), with
    /// the requests for them that arrived meanwhile.
    creating: HashMap<Arc<str>, Vec<super::messages::GroupCall>>,
}

impl Supervisor {
    pub fn new(options: SupervisorOptions) -> Self {
        let catalog = Arc::new(TopicCatalog::new(options.initial.topics.iter().cloned()));
        Self {
            config: Arc::new(options.config),
            store: options.store,
            catalog,
            clock: options.clock,
            quotas: options.quotas,
            arbiters: options.arbiters,
            next_arbiter: 0,
            placement: options.placement,
            env: None,
            groups: Registry::default(),
            timers: DeadlineQueue::default(),
            wake: None,
            initial: Some((options.initial, options.parked)),
            due: Vec::new(),
            per_state: HashMap::new(),
            members_total: 0,
            parked: 0,
            topics_busy: false,
            topics_waiting: VecDeque::new(),
            creating: HashMap::new(),
        }
    }

    /// The clock's time now (for answers made from parked groups).
    pub(super) fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Reads parked groups back from the store, now.
    pub(super) fn reader(&self) -> Reader<'_> {
        Reader {
            store: &*self.store,
            config: &self.config,
            now: self.clock.now(),
        }
    }

    /// What every group actor is started with: the shared settings and stores, and this
    /// supervisor as the `Recipient`s a group reaches it through.
    fn env(&self, ctx: &mut Context<Self>) -> Arc<GroupEnv> {
        match &self.env {
            Some(env) => Arc::clone(env),
            None => Arc::new(GroupEnv {
                store: Arc::clone(&self.store),
                config: Arc::clone(&self.config),
                catalog: Arc::clone(&self.catalog),
                clock: self.clock,
                ledger: Ledger::new(
                    self.quotas.clone(),
                    self.config.limits.max_pending_member_ids,
                ),
                placement: Arc::clone(&self.placement),
                supervisor: SupervisorLink {
                    arm_timer: ctx.address().recipient(),
                    status_changed: ctx.address().recipient(),
                    forget: ctx.address().recipient(),
                    park: ctx.address().recipient(),
                    reroute: ctx.address().recipient(),
                },
            }),
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Never full: a session's Route (`send`) must not wait behind other sessions'
        // messages. What comes in is bounded by the senders instead: each connection's
        // requests in flight, and admin requests by the server's `max_admin_requests_in_flight`
        // (checked before they are sent).
        ctx.set_mailbox_capacity(usize::MAX >> 1);
        self.env = Some(self.env(ctx));
        if let Some((initial, parked)) = self.initial.take() {
            self.load(initial, ctx);
            self.load_parked(parked, ctx);
        }
    }
}
