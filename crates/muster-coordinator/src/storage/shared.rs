//! Writes that depend on what other nodes sharing the store did (cluster mode): a topic
//! catalog change made only if the topic is still as the change was planned against
//! ([`TopicChange`], [`Store::put_topics`]), and the unit of a principal's cluster-wide
//! `max_groups` a new group is charged ([`Store::charge_group`]). A store that only one node
//! writes (memory, redb) has no one to conflict with: the trait's defaults write the catalog
//! unconditionally and keep no quota (the node's in-memory count is the whole truth).
//!
//! [`Store::put_topics`]: super::Store::put_topics
//! [`Store::charge_group`]: super::Store::charge_group

use std::future::Future;
use std::pin::Pin;

use muster_protocol::TopicInfo;

use super::StoreError;

/// One catalog change and the partition count it was planned against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicChange {
    /// The topic with its new partition count.
    pub topic: TopicInfo,
    /// The count the change was planned against; `None`: the topic did not exist.
    pub based_on: Option<i32>,
}

/// What a conditional catalog write did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicsWritten {
    /// The changes written.
    pub written: Vec<TopicInfo>,
    /// Another writer changed a topic first: the changes not in `written` were not made, and
    /// `found` holds what the store holds for them now (a topic not stored is left out). The
    /// caller plans them again against that.
    pub conflicted: bool,
    pub found: Vec<TopicInfo>,
}

/// A conditional catalog write on its way.
pub type TopicsWrite = Pin<Box<dyn Future<Output = Result<TopicsWritten, StoreError>> + Send>>;
