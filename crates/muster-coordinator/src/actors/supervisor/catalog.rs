//! The topic catalog's writes and reads (protocol §6.16): CreateTopics, made durable before
//! it is installed and answered, one change at a time, each written only if the topic is still
//! as planned against (in cluster mode another node may have changed it: the change is then
//! planned again, never lost); DescribeTopics; and telling every group that topics changed, a
//! slice of the registry per turn. (Cluster mode installs changes made on other nodes through
//! `shards.rs`, which tells the groups the same way.)

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use muster_protocol::{
    CreateTopicsResponse, DescribeTopicsResponse, ErrorCode, Response, TopicInfo,
};
use tracing::{debug, error, info, warn};

use super::Supervisor;
use crate::access::Access;
use crate::actors::admin_access;
use crate::actors::messages::{AdminCall, TopicsChanged};
use crate::logsafe::logsafe_list;
use crate::storage::TopicChange;
use crate::types::TopicLookup;

/// CreateTopics requests that may wait behind a catalog change being written; past this the
/// request is answered COORDINATOR_NOT_AVAILABLE (a disk that slow has bigger problems).
const MAX_TOPIC_CHANGES_WAITING: usize = 1024;

/// Conflicting plans of one CreateTopics before it is answered COORDINATOR_NOT_AVAILABLE:
/// each conflict means another node's change landed, so the catalog converges long before.
const MAX_TOPIC_ATTEMPTS: u32 = 32;

/// A CreateTopics being planned and written.
struct TopicRequest {
    call: AdminCall,
    /// Every topic named, in order (the answer has one result each).
    requested: Vec<String>,
    /// Those the principal may create.
    topics: Vec<TopicInfo>,
    /// Whether each named topic is denied (answered TOPIC_AUTHORIZATION_FAILED).
    denied: Vec<bool>,
}

/// Registry slots whose groups hear of a catalog change per supervisor turn, so that telling
/// 100 000 groups does not hold up routing and timers for its whole length.
const TOPICS_CHANGED_PER_TURN: usize = 1024;

impl Supervisor {
    /// CreateTopics: the catalog changes, and the answer leaves, only once the change is
    /// durable. The supervisor keeps routing and firing timers meanwhile (the write is awaited
    /// in a spawned future, not with `ctx.wait`); catalog changes are serialised, so a request
    /// never plans against counts that a change in flight is about to replace (two concurrent
    /// requests for one topic: the second is planned after the first is installed).
    pub(super) fn create_topics(
        &mut self,
        call: AdminCall,
        topics: Vec<TopicInfo>,
        ctx: &mut Context<Self>,
    ) {
        if !admin_access::may_create_any(&call.access, &topics) {
            // Nothing here it may create (or nothing named): answered at once, never queued
            // behind a change in flight, so a principal without `create` cannot fill the
            // queue, and its denial comes before any other answer (protocol §6).
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
        let request = TopicRequest {
            call,
            requested,
            topics,
            denied,
        };
        self.topics_busy = self.write_topics(request, 1, ctx);
    }

    /// Plans `request` against the catalog and writes its changes, each conditional on the
    /// topic being as planned against (another node may change it meanwhile: cluster mode).
    /// A change that met another's is planned again against what the store holds now, as if
    /// made after it: the same count is NONE, a larger one grows the topic further, a smaller
    /// one is INVALID_PARTITIONS — so of two concurrent changes neither is lost. After
    /// [`MAX_TOPIC_ATTEMPTS`] conflicts in a row the request is answered
    /// COORDINATOR_NOT_AVAILABLE (retriable). Returns whether a write is in flight (else the
    /// request is answered already).
    fn write_topics(
        &mut self,
        request: TopicRequest,
        attempt: u32,
        ctx: &mut Context<Self>,
    ) -> bool {
        let limits = &self.config.limits;
        let plan = self.catalog.plan(
            &request.topics,
            limits.max_topics,
            limits.max_partitions_per_topic,
        );
        let response = Response::CreateTopics(CreateTopicsResponse {
            results: admin_access::create_results(
                &request.requested,
                &request.denied,
                plan.results,
            ),
        });
        if plan.changes.is_empty() {
            request.call.reply.send(response);
            return false;
        }
        // The catalog changes only here (and from other nodes' changes, installed between
        // supervisor turns): what the plan read is what the change is based on.
        let changes: Vec<TopicChange> = plan
            .changes
            .into_iter()
            .map(|topic| TopicChange {
                based_on: self.catalog.partitions(&topic.topic),
                topic,
            })
            .collect();
        let write = self.store.put_topics(changes);
        ctx.spawn(write.into_actor(self).map(move |result, act, ctx| {
            match result {
                Ok(outcome) => {
                    let mut seen = outcome.written;
                    seen.extend(outcome.found);
                    act.install_newer(seen, "topic catalog changed", ctx);
                    if !outcome.conflicted {
                        request.call.reply.send(response);
                    } else if attempt < MAX_TOPIC_ATTEMPTS {
                        debug!(
                            attempt,
                            "topic change met another node's; planning it again"
                        );
                        if act.write_topics(request, attempt + 1, ctx) {
                            return;
                        }
                    } else {
                        warn!(
                            attempts = attempt,
                            "topic changes kept meeting other nodes' changes"
                        );
                        request.call.reply.send(Response::error(
                            ErrorCode::CoordinatorNotAvailable,
                            format!(
                                "the topics kept being changed by other nodes while this one \
                                 wrote them ({attempt} attempts); retry the request"
                            ),
                        ));
                    }
                }
                Err(e) => {
                    error!(error = %e, "topic change not durable");
                    request.call.reply.send(Response::error(
                        ErrorCode::CoordinatorNotAvailable,
                        format!("topic change not durable: {e}"),
                    ));
                }
            }
            act.topics_done(ctx);
        }));
        true
    }

    /// The catalog change in flight is over: the waiting requests are planned, until one
    /// writes.
    fn topics_done(&mut self, ctx: &mut Context<Self>) {
        self.topics_busy = false;
        while !self.topics_busy {
            let Some((call, topics)) = self.topics_waiting.pop_front() else {
                break;
            };
            self.create_topics(call, topics, ctx);
        }
    }

    /// Installs the topics whose partition count is new or larger than the catalog's, and
    /// tells the groups. Partition counts only grow (CreateTopics never lowers one): a
    /// smaller count read from the store is an older write landing late, never installed.
    pub(super) fn install_newer(
        &mut self,
        topics: Vec<TopicInfo>,
        what: &'static str,
        ctx: &mut Context<Self>,
    ) {
        let changed: Vec<_> = topics
            .into_iter()
            .filter(|t| {
                self.catalog
                    .partitions(&t.topic)
                    .is_none_or(|p| p < t.partitions)
            })
            .collect();
        if changed.is_empty() {
            return;
        }
        self.catalog.install(&changed);
        let names: Arc<[String]> = changed.iter().map(|t| t.topic.clone()).collect();
        info!(topics = %logsafe_list(&names), "{what}");
        self.tell_topics_changed(names, 0, ctx);
    }

    /// DescribeTopics: the topics named (`None`: all) that the catalog holds and the
    /// principal may describe.
    pub(super) fn describe_topics(&self, names: Option<&[String]>, access: &Access) -> Response {
        let described = self.catalog.describe(names);
        let topics = admin_access::describable_topics(access, names, described);
        Response::DescribeTopics(DescribeTopicsResponse {
            error_code: ErrorCode::None.code(),
            topics,
        })
    }

    /// Tells every group from registry slot `from` on that `names` changed, a slice per turn.
    /// (A group created meanwhile reads the new catalog itself.)
    pub(super) fn tell_topics_changed(
        &mut self,
        names: Arc<[String]>,
        from: usize,
        ctx: &mut Context<Self>,
    ) {
        let slots = &self.groups.slots;
        let end = from
            .saturating_add(TOPICS_CHANGED_PER_TURN)
            .min(slots.len());
        // A parked group is not told: with no member it has nothing to do when topics
        // change (`Group::is_parkable`), and once woken it reads the catalog as it is then.
        for addr in slots[from.min(end)..end]
            .iter()
            .filter_map(|s| s.entry.as_ref())
            .filter_map(|e| e.home.live())
        {
            addr.do_send(TopicsChanged(Arc::clone(&names)));
        }
        if end < slots.len() {
            ctx.run_later(Duration::ZERO, move |act, ctx| {
                act.tell_topics_changed(names, end, ctx)
            });
        }
    }
}
