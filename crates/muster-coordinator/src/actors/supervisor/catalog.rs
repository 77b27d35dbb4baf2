//! The topic catalog's writes and reads (protocol §6.16): CreateTopics, made durable before
//! it is installed and answered, one change at a time; DescribeTopics; and telling every group
//! that topics changed, a slice of the registry per turn. (Cluster mode installs changes made
//! on other nodes through `shards.rs`, which tells the groups the same way.)

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use muster_protocol::{
    CreateTopicsResponse, DescribeTopicsResponse, ErrorCode, Response, TopicInfo,
};
use tracing::{error, info};

use super::Supervisor;
use crate::access::Access;
use crate::actors::admin_access;
use crate::actors::messages::{AdminCall, TopicsChanged};
use crate::logsafe::logsafe_list;
use crate::storage::Mutation;

/// CreateTopics requests that may wait behind a catalog change being written; past this the
/// request is answered COORDINATOR_NOT_AVAILABLE (a disk that slow has bigger problems).
const MAX_TOPIC_CHANGES_WAITING: usize = 1024;

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
