//! The supervisor: the registry of group actors (created on demand, spread round-robin over
//! the arbiters it was given), the topic catalog, the admin requests that span groups, and the
//! one timer that wakes groups whose deadlines passed.
//!
//! It is on the path of a group's *first* request from a connection only; sessions cache the
//! group's inbox (a [`GroupLink`] sharing the registry's `Addr`) after that, so heartbeats
//! never pass through here. Group actors reach it through `Recipient`s (`SupervisorLink`), so
//! `group.rs` does not depend on this module.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::future::join_all;
use muster_protocol::{
    validate_group_id, CreateTopicsResponse, DeleteGroupsResponse, DescribeGroupsResponse,
    DescribeTopicsResponse, DescribedGroup, ErrorCode, GroupResult, ListGroupsResponse,
    ListedGroup, Request, Response,
};
use tracing::{debug, error, info};

use super::admin_access::{self, may_describe_group};
use super::admin_limits::{self, distinct, state_bit};
use super::group::{GroupActor, GroupEnv, SupervisorLink};
use super::insight;
use super::messages::{
    AbortHeld, AdminCall, ArmTimer, Delete, Describe, Forget, GroupLink, Route, Shutdown,
    StatusChanged, Tick, TopicsChanged,
};
use super::registry::{Entry, Registry};
use super::reply::ReplyTo;
use super::timers::DeadlineQueue;
use crate::access::{Access, ResourceType};
use crate::catalog::TopicCatalog;
use crate::clock::Clock;
use crate::config::{GroupConfig, MAX_ENCODABLE_GROUP_SIZE, MAX_LISTED_GROUPS};
use crate::engine::{absent_group, unreadable_topics, AbsentGroup, Group, GroupState, Millis};
use crate::logsafe::{logsafe, logsafe_list};
use crate::quota::{QuotaKind, QuotaSlot, Quotas};
use crate::storage::{GroupRecord, Mutation, OffsetWrite, Store, StoredState};

mod shards;

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
    initial: Option<StoredState>,
    due: Vec<u64>,
    /// Groups per state and members in all groups, for the gauges.
    per_state: HashMap<GroupState, usize>,
    members_total: u64,
    /// A catalog change is being made durable: later CreateTopics wait in `topics_waiting`.
    topics_busy: bool,
    topics_waiting: VecDeque<(AdminCall, Vec<muster_protocol::TopicInfo>)>,
}

/// CreateTopics requests that may wait behind a catalog change being written; past this the
/// request is answered COORDINATOR_NOT_AVAILABLE (a disk that slow has bigger problems).
const MAX_TOPIC_CHANGES_WAITING: usize = 1024;

/// Registry slots whose groups hear of a catalog change per supervisor turn, so that telling
/// 100 000 groups does not hold up routing and timers for its whole length.
const TOPICS_CHANGED_PER_TURN: usize = 1024;

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
            initial: Some(options.initial),
            due: Vec::new(),
            per_state: HashMap::new(),
            members_total: 0,
            topics_busy: false,
            topics_waiting: VecDeque::new(),
        }
    }

    /// Moves one group between the gauges' buckets (`None`: not counted).
    fn count(&mut self, from: Option<(GroupState, u32)>, to: Option<(GroupState, u32)>) {
        if let Some((state, members)) = from {
            let n = self.per_state.entry(state).or_default();
            *n = n.saturating_sub(1);
            crate::metrics::groups_in_state(state, *n);
            self.members_total = self.members_total.saturating_sub(u64::from(members));
        }
        if let Some((state, members)) = to {
            let n = self.per_state.entry(state).or_default();
            *n += 1;
            crate::metrics::groups_in_state(state, *n);
            self.members_total += u64::from(members);
        }
        crate::metrics::members(self.members_total);
    }

    fn env(&self, ctx: &mut Context<Self>) -> Arc<GroupEnv> {
        match &self.env {
            Some(env) => Arc::clone(env),
            None => Arc::new(GroupEnv {
                store: Arc::clone(&self.store),
                config: Arc::clone(&self.config),
                catalog: Arc::clone(&self.catalog),
                clock: self.clock,
                quotas: self.quotas.clone(),
                placement: Arc::clone(&self.placement),
                supervisor: SupervisorLink {
                    arm_timer: ctx.address().recipient(),
                    status_changed: ctx.address().recipient(),
                    forget: ctx.address().recipient(),
                },
            }),
        }
    }

    /// Starts the actor for `group` on the next arbiter; its registry entry holds `quota`
    /// (its creator's unit of `max_groups`).
    fn spawn_group(
        &mut self,
        group: Group<ReplyTo>,
        quota: Option<QuotaSlot>,
        ctx: &mut Context<Self>,
    ) -> (Arc<str>, Arc<Addr<GroupActor>>) {
        let env = self.env(ctx);
        let group_id = Arc::clone(group.shared_group_id());
        let state = group.state();
        let members = group.member_count() as u32;
        let key = self.groups.next_key();
        let make = move |_: &mut Context<GroupActor>| GroupActor::new(key, group, env);
        let addr = Arc::new(if self.arbiters.is_empty() {
            GroupActor::create(make)
        } else {
            let arbiter = &self.arbiters[self.next_arbiter % self.arbiters.len()];
            self.next_arbiter = self.next_arbiter.wrapping_add(1);
            GroupActor::start_in_arbiter(arbiter, make)
        });
        let inserted = self.groups.insert(Entry {
            group_id: Arc::clone(&group_id),
            addr: Arc::clone(&addr),
            state,
            members,
            quota,
        });
        debug_assert_eq!(inserted, key);
        self.count(None, Some((state, members)));
        (group_id, addr)
    }

    fn load(&mut self, initial: StoredState, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let mut offsets: HashMap<String, Vec<OffsetWrite>> = initial.offsets.into_iter().collect();
        let mut journals: HashMap<String, _> = initial.journals.into_iter().collect();
        let groups = initial.groups.len();
        for record in initial.groups {
            let group_offsets = offsets.remove(&record.group_id).unwrap_or_default();
            let journal = journals.remove(&record.group_id).unwrap_or_default();
            let mut group = Group::restore(
                record,
                group_offsets,
                Arc::clone(&self.config),
                &self.quotas,
                now,
            );
            group.restore_journal(journal);
            // What exists is counted, even past a limit lowered since (never refused).
            let quota = group
                .created_by()
                .map(|p| self.quotas.get(p).take(QuotaKind::Groups));
            self.spawn_group(group, quota, ctx);
        }
        // Groups that only ever had simple commits have offsets but no metadata.
        for (group_id, group_offsets) in offsets {
            let record = GroupRecord {
                group_id,
                state: GroupState::Empty,
                generation: 0,
                assignor: None,
                leader: None,
                members: Vec::new(),
                state_since_ms: now,
                created_by: None,
            };
            let group = Group::restore(
                record,
                group_offsets,
                Arc::clone(&self.config),
                &self.quotas,
                now,
            );
            self.spawn_group(group, None, ctx);
        }
        if !self.groups.is_empty() {
            info!(
                groups = self.groups.len(),
                with_metadata = groups,
                "groups loaded"
            );
        }
    }

    fn reschedule(&mut self, ctx: &mut Context<Self>) {
        let Some(at) = self.timers.earliest() else {
            if let Some((_, handle)) = self.wake.take() {
                ctx.cancel_future(handle);
            }
            return;
        };
        if self
            .wake
            .as_ref()
            .is_some_and(|(scheduled, _)| *scheduled <= at)
        {
            return;
        }
        if let Some((_, handle)) = self.wake.take() {
            ctx.cancel_future(handle);
        }
        let delay = self
            .clock
            .instant_at(at)
            .saturating_duration_since(Instant::now());
        let handle = ctx.run_later(delay, |act, ctx| {
            act.wake = None;
            act.fire(ctx);
        });
        self.wake = Some((at, handle));
    }

    fn fire(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let mut due = std::mem::take(&mut self.due);
        self.timers.pop_due(now, &mut due);
        for key in due.drain(..) {
            if let Some(entry) = self.groups.get(key) {
                entry.addr.do_send(Tick);
            }
        }
        self.due = due;
        self.reschedule(ctx);
    }

    fn forget(&mut self, key: u64) {
        if let Some(entry) = self.groups.remove(key) {
            self.count(Some((entry.state, entry.members)), None);
            self.timers.disarm(key);
        }
    }

    /// DescribeGroups: one description per *distinct* requested id, in the order first named
    /// (protocol §6.15): a repeated id would cost a full description each time. A group the
    /// principal may not describe is answered as dead with GROUP_AUTHORIZATION_FAILED before
    /// anything else is looked at (`admin_access.rs`).
    fn describe_groups(&self, group_ids: Vec<String>, access: &Access) -> ResponseFuture<Response> {
        let group_ids: Vec<(String, bool)> = distinct(group_ids)
            .into_iter()
            .map(|id| {
                let denied = admin_access::describe_group_denied(access, &id);
                (id, denied)
            })
            .collect();
        // Every member described costs a description in memory and on the wire: one answer
        // describes at most as many members as one group may hold (protocol §6.18). Denied
        // groups are not described, so their sizes do not count (nor show through this).
        let members: usize = group_ids
            .iter()
            .filter(|(_, denied)| !denied)
            .filter_map(|(id, _)| self.groups.find(id))
            .map(|(_, e)| e.members as usize)
            .sum();
        if members > MAX_ENCODABLE_GROUP_SIZE {
            let response = Response::error(
                ErrorCode::RequestLimitExceeded,
                format!(
                    "the groups named have {members} members; one DescribeGroups answer \
                     describes at most {MAX_ENCODABLE_GROUP_SIZE}: ask for fewer groups"
                ),
            );
            return Box::pin(async move { response });
        }
        let lookups: Vec<_> = group_ids
            .into_iter()
            .map(|(group_id, denied)| {
                let addr = self.groups.find(&group_id).map(|(_, e)| e.addr.clone());
                let refusal = if denied {
                    Some(ErrorCode::GroupAuthorizationFailed)
                } else {
                    self.refusal(&group_id)
                };
                async move {
                    if let Some(code) = refusal {
                        return dead_group(group_id, code);
                    }
                    match addr {
                        Some(addr) => match addr.send(Describe).await {
                            Ok(described) => described,
                            Err(_) => dead_group(group_id, ErrorCode::None),
                        },
                        None => dead_group(group_id, ErrorCode::None),
                    }
                }
            })
            .collect();
        Box::pin(async move {
            Response::DescribeGroups(DescribeGroupsResponse {
                groups: join_all(lookups).await,
            })
        })
    }

    /// ListGroups: the groups the principal may describe (`admin_access.rs`).
    fn list_groups(&self, states: &[String], access: &Access) -> Response {
        // The filter is a set of the five states (one bit each): O(groups + filter), however
        // many (or repeated) states the request names. Unknown names match nothing.
        let wanted = states
            .iter()
            .filter_map(|s| GroupState::parse(s.trim()))
            .fold(0u8, |mask, s| mask | state_bit(s));
        let filtered = !states.is_empty();
        let mut groups: Vec<ListedGroup> = self
            .groups
            .values()
            .filter(|e| e.state != GroupState::Dead)
            .filter(|e| !filtered || wanted & state_bit(e.state) != 0)
            .filter(|e| may_describe_group(access, &e.group_id))
            .map(|e| ListedGroup {
                group_id: e.group_id.to_string(),
                state: e.state.as_str().to_owned(),
                members: e.members,
            })
            .collect();
        if groups.len() > MAX_LISTED_GROUPS {
            // The answer would not encode (nor decode in a client): say so, instead of an
            // UNKNOWN_SERVER_ERROR from the encoder (protocol §6.18).
            return Response::error(
                ErrorCode::RequestLimitExceeded,
                format!(
                    "{} groups match; one ListGroups answer lists at most {MAX_LISTED_GROUPS}: \
                     filter by state",
                    groups.len()
                ),
            );
        }
        groups.sort_unstable_by(|a, b| a.group_id.cmp(&b.group_id));
        Response::ListGroups(ListGroupsResponse {
            error_code: ErrorCode::None.code(),
            groups,
        })
    }

    /// DeleteGroups: one result per distinct requested id, in the order first named; a group
    /// the principal may not delete is GROUP_AUTHORIZATION_FAILED, whatever else is true of it.
    fn delete_groups(
        &mut self,
        group_ids: Vec<String>,
        access: &Access,
    ) -> ResponseActFuture<Self, Response> {
        let deletions: Vec<_> = distinct(group_ids)
            .into_iter()
            .map(|group_id| {
                let denied = admin_access::delete_group_denied(access, &group_id);
                let target = self
                    .groups
                    .find(&group_id)
                    .filter(|_| !denied)
                    .map(|(k, e)| (k, e.addr.clone()));
                let refusal = if denied {
                    Some(ErrorCode::GroupAuthorizationFailed)
                } else {
                    self.refusal(&group_id)
                };
                async move {
                    if let Some(code) = refusal {
                        return (group_id, None, code);
                    }
                    match target {
                        None => (group_id, None, ErrorCode::GroupIdNotFound),
                        Some((key, addr)) => {
                            let code = addr
                                .send(Delete)
                                .await
                                .unwrap_or(ErrorCode::GroupIdNotFound);
                            (group_id, Some(key), code)
                        }
                    }
                }
            })
            .collect();
        Box::pin(
            join_all(deletions)
                .into_actor(self)
                .map(|outcomes, act, _| {
                    let results = outcomes
                        .into_iter()
                        .map(|(group_id, key, code)| {
                            if let (Some(key), ErrorCode::None) = (key, code) {
                                act.forget(key);
                            }
                            GroupResult {
                                group_id,
                                error_code: code.code(),
                            }
                        })
                        .collect();
                    Response::DeleteGroups(DeleteGroupsResponse { results })
                }),
        )
    }

    /// Why a group id cannot be served here, if it cannot.
    fn refusal(&self, group_id: &str) -> Option<ErrorCode> {
        if let Err(code) = validate_group_id(group_id) {
            Some(code)
        } else {
            self.placement.refusal(group_id)
        }
    }

    /// CreateTopics: the catalog changes, and the answer leaves, only once the change is
    /// durable. The supervisor keeps routing and firing timers meanwhile (the write is awaited
    /// in a spawned future, not with `ctx.wait`); catalog changes are serialised, so a request
    /// never plans against counts that a change in flight is about to replace (two concurrent
    /// requests for one topic: the second is planned after the first is installed).
    fn create_topics(
        &mut self,
        call: AdminCall,
        topics: Vec<muster_protocol::TopicInfo>,
        ctx: &mut Context<Self>,
    ) {
        if !admin_access::may_create_any(&call.access, &topics) {
            // Nothing here it may create (or nothing named): answered at once, never queued
            // behind a change in flight, so a principal without `create` cannot fill the
            // queue, and its denial comes before any other answer (protocol §5 "Authorization").
            let requested: Vec<String> = topics.iter().map(|t| t.topic.clone()).collect();
            let (_, denied) = admin_access::creatable_topics(&call.access, topics);
            call.reply
                .send(Response::CreateTopics(CreateTopicsResponse {
                    results: admin_access::create_results(&requested, &denied, Vec::new()),
                }));
            return;
        }
        if self.topics_busy {
            if self.topics_waiting.len() >= MAX_TOPIC_CHANGES_WAITING {
                call.reply.send(Response::error(
                    ErrorCode::CoordinatorNotAvailable,
                    "too many topic changes waiting for storage",
                ));
            } else {
                self.topics_waiting.push_back((call, topics));
            }
            return;
        }
        // Authorized when planned (not when queued): a reload meanwhile is then in force.
        let requested: Vec<String> = topics.iter().map(|t| t.topic.clone()).collect();
        let (topics, denied) = admin_access::creatable_topics(&call.access, topics);
        let limits = &self.config.limits;
        let plan = self
            .catalog
            .plan(&topics, limits.max_topics, limits.max_partitions_per_topic);
        let reply = call.reply;
        let response = Response::CreateTopics(CreateTopicsResponse {
            results: admin_access::create_results(&requested, &denied, plan.results),
        });
        if plan.changes.is_empty() {
            reply.send(response);
            return;
        }
        let changes = plan.changes;
        let durable = self
            .store
            .apply(changes.iter().cloned().map(Mutation::PutTopic).collect());
        self.topics_busy = true;
        ctx.spawn(durable.into_actor(self).map(move |result, act, ctx| {
            match result {
                Ok(()) => {
                    act.catalog.install(&changes);
                    let names: Arc<[String]> = changes.iter().map(|t| t.topic.clone()).collect();
                    info!(topics = %logsafe_list(&names), "topic catalog changed");
                    act.tell_topics_changed(names, 0, ctx);
                    reply.send(response);
                }
                Err(e) => {
                    error!(error = %e, "topic change not durable");
                    reply.send(Response::error(
                        ErrorCode::CoordinatorNotAvailable,
                        format!("topic change not durable: {e}"),
                    ));
                }
            }
            act.topics_busy = false;
            while !act.topics_busy {
                let Some((call, topics)) = act.topics_waiting.pop_front() else {
                    break;
                };
                act.create_topics(call, topics, ctx);
            }
        }));
    }
}

impl Supervisor {
    /// Tells every group from registry slot `from` on that `names` changed, a slice per turn.
    /// (A group created meanwhile reads the new catalog itself.)
    fn tell_topics_changed(&mut self, names: Arc<[String]>, from: usize, ctx: &mut Context<Self>) {
        let slots = &self.groups.slots;
        let end = from
            .saturating_add(TOPICS_CHANGED_PER_TURN)
            .min(slots.len());
        for entry in slots[from.min(end)..end]
            .iter()
            .filter_map(|s| s.entry.as_ref())
        {
            entry.addr.do_send(TopicsChanged(Arc::clone(&names)));
        }
        if end < slots.len() {
            ctx.run_later(Duration::ZERO, move |act, ctx| {
                act.tell_topics_changed(names, end, ctx)
            });
        }
    }
}

fn dead_group(group_id: String, code: ErrorCode) -> DescribedGroup {
    DescribedGroup {
        error_code: code.code(),
        group_id,
        state: GroupState::Dead.as_str().to_owned(),
        generation_id: -1,
        assignor: None,
        leader_id: String::new(),
        members: Vec::new(),
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(usize::MAX >> 1);
        self.env = Some(self.env(ctx));
        if let Some(initial) = self.initial.take() {
            self.load(initial, ctx);
        }
    }
}

impl Handler<Route> for Supervisor {
    type Result = Option<(Arc<str>, GroupLink)>;

    fn handle(&mut self, route: Route, ctx: &mut Self::Context) -> Self::Result {
        let Route { group_id, call } = route;
        if let Some(code) = self.refusal(&group_id) {
            let answer = crate::engine::refusal_for(&call.request, code, &call.client.access);
            call.reply.send(answer);
            return None;
        }
        if let Some((_, entry)) = self.groups.find(&group_id) {
            entry.addr.do_send(call);
            let link: GroupLink = entry.addr.clone();
            return Some((Arc::clone(&entry.group_id), link));
        }
        match absent_group(&call.request, &self.config, &call.client.access) {
            AbsentGroup::Answer(response) => {
                crate::metrics::authorization_denials(
                    ResourceType::Topic.name(),
                    unreadable_topics(&call.request, &call.client.access),
                );
                call.reply.send(response);
                None
            }
            AbsentGroup::Create if self.groups.len() >= self.config.limits.max_groups => {
                // The server holds as many groups as it may (protocol §6.18).
                let answer = crate::engine::refusal_for(
                    &call.request,
                    ErrorCode::ResourceLimitReached,
                    &call.client.access,
                );
                call.reply.send(answer);
                None
            }
            AbsentGroup::Create => {
                // A JoinGroup that creates its group needs a member unit too: refused now if
                // the principal has none left, before a group is charged to it that would
                // only stand Empty until removed.
                let no_member_left = matches!(call.request, Request::JoinGroup(_))
                    && call
                        .client
                        .access
                        .quota()
                        .is_some_and(|q| q.at_limit(QuotaKind::Members));
                if no_member_left {
                    let answer = crate::engine::refusal_for(
                        &call.request,
                        ErrorCode::QuotaExceeded,
                        &call.client.access,
                    );
                    call.reply.send(answer);
                    return None;
                }
                // The creator's `max_groups` (protocol §5 "Quotas"), after the server's own limit.
                let quota = match call
                    .client
                    .access
                    .quota()
                    .map(|q| q.try_take(QuotaKind::Groups))
                {
                    None => None,
                    Some(Ok(slot)) => Some(slot),
                    Some(Err(over)) => {
                        debug!(group_id = %logsafe(&group_id), error = %over, "group not created");
                        let answer = crate::engine::refusal_for(
                            &call.request,
                            ErrorCode::QuotaExceeded,
                            &call.client.access,
                        );
                        call.reply.send(answer);
                        return None;
                    }
                };
                debug!(group_id = %logsafe(&group_id), "group created");
                let mut group = Group::new(group_id, Arc::clone(&self.config), self.clock.now());
                group.set_created_by(quota.as_ref().map(|q| Arc::clone(q.principal())));
                let (group_id, addr) = self.spawn_group(group, quota, ctx);
                addr.do_send(call);
                Some((group_id, addr as GroupLink))
            }
        }
    }
}

impl Handler<AdminCall> for Supervisor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, call: AdminCall, ctx: &mut Self::Context) -> Self::Result {
        let over = admin_limits::check(&call.request, &self.config.limits);
        if let Some(response) = over {
            call.reply.send(response);
            return Box::pin(actix::fut::ready(()));
        }
        match call.request {
            Request::DescribeGroups(r) => {
                let reply = call.reply;
                Box::pin(
                    self.describe_groups(r.group_ids, &call.access)
                        .into_actor(self)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            Request::ListGroups(ref r) => {
                let response = self.list_groups(&r.states, &call.access);
                call.reply.send(response);
                Box::pin(actix::fut::ready(()))
            }
            Request::DeleteGroups(r) => {
                let reply = call.reply;
                Box::pin(
                    self.delete_groups(r.group_ids, &call.access)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            Request::CreateTopics(ref r) => {
                let topics = r.topics.clone();
                self.create_topics(call, topics, ctx);
                Box::pin(actix::fut::ready(()))
            }
            Request::DescribeTopics(ref r) => {
                let described = self.catalog.describe(r.topics.as_deref());
                let topics =
                    admin_access::describable_topics(&call.access, r.topics.as_deref(), described);
                call.reply
                    .send(Response::DescribeTopics(DescribeTopicsResponse {
                        error_code: ErrorCode::None.code(),
                        topics,
                    }));
                Box::pin(actix::fut::ready(()))
            }
            Request::GroupHistory(_) | Request::GroupDiagnosis(_) => {
                let target = insight::target(&call.request, &call.access, |id| {
                    let addr = self.groups.find(id).map(|(_, e)| Arc::clone(&e.addr));
                    self.refusal(id)
                        .map_or(addr.ok_or(ErrorCode::GroupIdNotFound), Err)
                });
                let reply = call.reply;
                Box::pin(
                    insight::answer(call.request, target)
                        .into_actor(self)
                        .map(move |response, _, _| reply.send(response)),
                )
            }
            other => {
                call.reply.send(Response::error(
                    ErrorCode::InvalidRequest,
                    format!("{} is not an admin request", other.name()),
                ));
                Box::pin(actix::fut::ready(()))
            }
        }
    }
}

impl Handler<ArmTimer> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: ArmTimer, ctx: &mut Self::Context) {
        if self.groups.get(msg.key).is_some() && self.timers.arm(msg.key, msg.at) {
            self.reschedule(ctx);
        }
    }
}

impl Handler<Forget> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Forget, _: &mut Self::Context) {
        self.forget(msg.key);
    }
}

impl Handler<StatusChanged> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: StatusChanged, _: &mut Self::Context) {
        let Some(entry) = self.groups.get_mut(msg.key) else {
            return;
        };
        let before = (entry.state, entry.members);
        entry.state = msg.state;
        entry.members = msg.members;
        self.count(Some(before), Some((msg.state, msg.members)));
    }
}

impl Handler<Shutdown> for Supervisor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Shutdown, _: &mut Self::Context) -> Self::Result {
        let aborts: Vec<_> = self
            .groups
            .values()
            .map(|e| e.addr.send(AbortHeld))
            .collect();
        Box::pin(async move {
            join_all(aborts).await;
        })
    }
}
